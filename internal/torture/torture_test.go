// The crash-torture test (issue "Harden the host", §3).
//
// TestTorture builds the weft binary (CGO_ENABLED=0), runs `weft serve` on
// one SQLite store, and repeats: start the host, check it, put it under load
// for a random 50–500 ms, SIGKILL it, check the store. About one kill in ten
// instead lands while the process starts (at a random point of up to 1.5
// times the previous start's time to healthy), mostly while it recovers
// what the previous kill left open. The load, per session (four at a time,
// each retired after 2–10 kills and replaced by a new one):
//
//   - a runner that starts runs with idempotency keys and busy=queue, some
//     streaming text word by word (message and reasoning deltas), some in
//     one burst, some calling write_file and a sandboxed shell (`echo`,
//     `sleep 0.1`) in parallel;
//     now and then it sends the same run/start twice at once, steers,
//     cancels (after a random delay, or 0–60 ms after the run's first
//     step.started is visible, to land on a step's boundary), or waits for
//     a run; every run/start or run/steer whose reply a kill swallowed is
//     sent again, unchanged, after the restart;
//   - an SSE follower (GET /v1/sessions/{id}/events) from a random cursor,
//     which sometimes drops its connection and resumes with Last-Event-ID,
//     recording every event's `data:` bytes;
//   - a WebSocket subscriber (events/subscribe) from another cursor.
//
// After each kill the test opens the store file itself (no host runs) and
// checks, per session:
//
//   - the log is contiguous: seqs 1..last, no gap, no duplicate;
//   - the log only grew: every event read at the previous check is still
//     there, byte for byte;
//   - every event a follower received (SSE or WebSocket) is stored at the
//     same seq, and json.Marshal of the stored event is byte-identical to
//     what the follower got (the SSE `data:` line, or the WebSocket event
//     re-encoded);
//   - the stream each follower received was itself contiguous, with the
//     SSE `id:` equal to the event's seq;
//   - durable before acknowledged: every run/start that got a reply has its
//     run.queued in the log (the key is in the run's input), every accepted
//     steer its steer.accepted, and every run that run/wait or run/cancel
//     reported terminal its terminal event of that status;
//   - idempotency: one key never made two runs (or two steers); every reply
//     for a key names the key's run in the log and at most one is not a
//     replay; a send (or a retry after a restart) while the log held the
//     key's run is a replay, and one while it did not makes the run (one
//     reply of the round is not a replay, unless an attempt of it went
//     unanswered); a lost steer's retry is a replay exactly when its
//     steer.accepted is in the log (otherwise the run is over: run_conflict);
//   - the host did not die by itself before the kill.
//
// After each restart it checks, through the restarted host and once no run
// is active (polling run/list with a deadline):
//
//   - the host serves the same log, byte for byte, plus what recovery
//     appended;
//   - every run is terminal, its terminal event is its last and only one,
//     its status in run/list matches that event, and run/list and the log
//     name the same runs; the session has no active run and lastSeq is the
//     log's last seq;
//   - no run that had not started (a queued run at the kill) is
//     interrupted: it ran after the restart; and runs started in the
//     order they were queued;
//   - every tool.call.started has exactly one tool.call.completed with its
//     id, later in the same run, and every steer.accepted exactly one
//     steer.consumed or steer.dropped.
//
// At the end the host is restarted once more, checked, one more run per
// session must complete, and the host must stop cleanly on SIGINT.
//
// Any violation fails the test with the kill, session, seq and what is
// wrong, and the test stops after that kill (with -torture.keepgoing it
// goes on, reporting each distinct violation once, and fails at the end);
// the store and the host's log are kept for inspection. The random choices come from one seed, printed
// first, and -torture.seed replays them (the kill points still depend on
// timing).
//
// Several hosts on PostgreSQL (issue 23). With -torture.store=postgres (a
// throwaway server of internal/pgtest) or a postgres:// URL, and
// -torture.hosts=N, N hosts serve one database, each with a state
// directory of its own, one shared token and a lease TTL of 2 s. Each
// kill picks a host at random and SIGKILLs it after 50–500 ms of load;
// the load goes on against the others for a pause of up to 3 s (often
// past the TTL, so that a surviving host takes the dead one's sessions
// over meanwhile), then the host is restarted at the same address (about
// one restart in ten is killed again while it starts) and the load runs
// on all of them a little longer. Every runner and follower picks a host
// at random, and when its host goes (or answers a retryable error: the
// session's owner, to which it forwarded the command, is gone) it moves
// to another and sends again what got no reply, so commands are
// forwarded to the owner and retried across hosts; the load also starts
// background shells that outlive their run. After each kill the store is
// checked while the other hosts run, and, once no run is active, through
// a host picked for each session; on top of the checks above:
//
//   - no run starts twice: one run.started per run (its terminal event is
//     its last, so nothing follows it);
//   - the replies are checked against the log once every run is over (a
//     command a client gave up on cannot commit later), and a request sent
//     again within the load that lost its reply is not held to the log of
//     the last check;
//   - a WebSocket subscriber held through the whole load on a host other
//     than the one killed received every event of its session after its
//     cursor, once, in order, byte-identical to the log, and its
//     subscription did not end;
//   - no process of the session is left running within the TTL + 5 s of
//     the session going idle: those of a dead host are reconciled by the
//     host that takes the session over, and a violation names the
//     process's host and epoch.
//
// On a failure with a throwaway server, its data is dumped to store.sql
// beside the hosts' log. Run it:
//
//	go test -run TestTorture ./internal/torture/                 # 8 kills (3 with -short)
//	go test -run TestTorturePostgres ./internal/torture/         # 4 kills of 3 hosts on PostgreSQL (2 with -short)
//	scripts/torture 1000                                         # 1,000 kills, by hand
//	scripts/torture --store postgres --hosts 3 200               # 200 kills of 3 hosts on PostgreSQL
//	go test -run TestTorture -timeout 0 ./internal/torture/ -args -torture.kills=N -torture.seed=S

package torture

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"weft.dev/weft/internal/pgtest"
)

var (
	killsFlag = flag.Int("torture.kills", 0, "how many times to SIGKILL weft serve (0: 8, or 3 with -short)")
	storeFlag = flag.String("torture.store", "sqlite", "the store: sqlite (a file), postgres (a throwaway server of internal/pgtest) or a postgres:// URL (its database is migrated, and should be empty)")
	hostsFlag = flag.Int("torture.hosts", 1, "how many `weft serve` share the store (more than 1 only with PostgreSQL); each kill picks one")
	seedFlag  = flag.Uint64("torture.seed", 0, "seed of the random choices (0: from the clock)")
	goingFlag = flag.Bool("torture.keepgoing", false, "go on after a kill that found violations (the test still fails), to count them over all the kills")
)

// weftBin is the weft binary, built once by TestMain.
var weftBin string

func TestMain(m *testing.M) {
	flag.Parse()
	dir, err := os.MkdirTemp("", "weft-torture-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	weftBin = filepath.Join(dir, "weft")
	// The real thing: one static binary, as users build it.
	build := exec.Command("go", "build", "-o", weftBin, "weft.dev/weft/cmd/weft")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build weft: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	}
	os.Exit(code)
}

func TestTorture(t *testing.T) {
	kills := *killsFlag
	if kills <= 0 {
		kills = 8
		if testing.Short() {
			kills = 3
		}
	}
	torture(t, *storeFlag, *hostsFlag, kills)
}

// TestTorturePostgres is the torture of three hosts on one throwaway
// PostgreSQL server: 4 kills (2 with -short), each of a host picked at
// random. scripts/torture --store postgres --hosts 3 runs more.
func TestTorturePostgres(t *testing.T) {
	kills := 4
	if testing.Short() {
		kills = 2
	}
	torture(t, "postgres", 3, kills)
}

// torture runs kills kills of hosts `weft serve` on the store named as
// -torture.store does.
func torture(t *testing.T, storeSpec string, hosts, kills int) {
	seed := *seedFlag
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("torture: seed %d, %d kills of %d host(s) on %s (replay the choices with -torture.seed=%d)", seed, kills, hosts, storeName(storeSpec), seed)
	r := newRig(t, seed, storeSpec, hosts)
	begin := time.Now()
	for k := 1; k <= kills && !r.stopped(); k++ {
		r.kill = k
		r.iteration()
		if r.report(); r.stopped() {
			break
		}
		if k%100 == 0 && k < kills {
			t.Logf("torture: %d kills, %s", k, r.stats.summary(time.Since(begin)))
		}
	}
	if !r.stopped() {
		r.finish()
		r.report()
	}
	t.Logf("torture: %s, seed %d", r.stats.summary(time.Since(begin)), seed)
	r.close()
}

// rig is the torture's state: the directory with the store and the host's
// log, the sessions under load, what was done to them, and the tallies.
// Only the test's goroutine uses it; the load's goroutines each own their
// part of a session (see load).
type rig struct {
	t     *testing.T
	seed  uint64
	rng   *rand.Rand
	dir   string // HOME of the host (of each host: dir/hN): the store, the state, the scripts
	store string // the SQLite file, or the PostgreSQL URL
	pg    *pgtest.Cluster
	envs  [][]string // each host's environment
	logf  *os.File   // the hosts' stderr, all of them
	token string
	model models
	kill  int // the current kill, from 1

	// srvs are the hosts, the last started in each slot; addrs their
	// addresses, the same for every start of a slot (an operator
	// restarts a host where it was).
	srvs  []*server
	addrs []string

	sessions []*sess
	created  int // sessions created so far

	stats stats
	bad   []violation
	seen  map[string]bool // violations found, without their kill: each is reported once
	shown int             // violations already reported
}

// models are the scripted models the load uses, as model names.
type models struct {
	slow, burst, tools, final string
	bg                        string // on PostgreSQL only: starts a background shell
}

// leaseTTL is the session leases' TTL of hosts on PostgreSQL: short, so
// that a killed host's sessions are taken over within the load.
const leaseTTL = 2 * time.Second

// storeName is how the summary names the store of -torture.store spec.
func storeName(spec string) string {
	switch spec {
	case "sqlite", "postgres":
		return spec
	}
	return "postgres (a URL)"
}

func newRig(t *testing.T, seed uint64, storeSpec string, hosts int) *rig {
	t.Helper()
	pg := storeSpec != "sqlite"
	switch {
	case hosts < 1:
		t.Fatalf("-torture.hosts %d: at least one", hosts)
	case hosts > 1 && !pg:
		t.Fatalf("-torture.hosts %d on SQLite: one host serves a SQLite store; use -torture.store=postgres", hosts)
	case pg && storeSpec != "postgres" && !strings.HasPrefix(storeSpec, "postgres://") && !strings.HasPrefix(storeSpec, "postgresql://"):
		t.Fatalf("-torture.store %q: sqlite, postgres or a postgres:// URL", storeSpec)
	}
	dir, err := os.MkdirTemp("", "weft-torture")
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{t: t, seed: seed, rng: rand.New(rand.NewPCG(seed, 0)), dir: dir, store: filepath.Join(dir, "weft.db"), seen: map[string]bool{},
		srvs: make([]*server, hosts), addrs: make([]string, hosts)}
	if r.logf, err = os.Create(filepath.Join(dir, "serve.log")); err != nil {
		t.Fatal(err)
	}
	if !pg {
		r.envs = [][]string{{
			"PATH=" + os.Getenv("PATH"),
			"HOME=" + dir,
			"XDG_CONFIG_HOME=" + filepath.Join(dir, "config"),
			"XDG_STATE_HOME=" + filepath.Join(dir, "state"),
			"WEFT_STORE=" + r.store,
		}}
	} else {
		r.store = storeSpec
		if storeSpec == "postgres" {
			r.pg, err = pgtest.New(context.Background())
			if errors.Is(err, pgtest.ErrNoServer) {
				os.RemoveAll(dir)
				pgtest.Skip(t, err)
			}
			if err != nil {
				os.RemoveAll(dir)
				t.Fatal(err)
			}
			db, err := r.pg.CreateDatabase(context.Background())
			if err != nil {
				r.pg.Close()
				os.RemoveAll(dir)
				t.Fatal(err)
			}
			r.store = r.pg.URL(db)
		}
		// The hosts share the store and the token, nothing else: each
		// has a home and state directory of its own, as on machines of
		// their own.
		var tok [16]byte
		crand.Read(tok[:])
		r.token = hex.EncodeToString(tok[:])
		for i := range hosts {
			home := filepath.Join(dir, fmt.Sprintf("h%d", i))
			r.envs = append(r.envs, []string{
				"PATH=" + os.Getenv("PATH"),
				"HOME=" + home,
				"XDG_CONFIG_HOME=" + filepath.Join(dir, "config"),
				"XDG_STATE_HOME=" + filepath.Join(home, "state"),
				"WEFT_STORE=" + r.store,
				"WEFT_TOKEN=" + r.token,
				"WEFT_LEASE_TTL=" + leaseTTL.String(),
			})
		}
		migrate := exec.Command(weftBin, "migrate")
		migrate.Dir, migrate.Env = dir, r.envs[0]
		if out, err := migrate.CombinedOutput(); err != nil {
			r.close()
			t.Fatalf("weft migrate: %v\n%s", err, out)
		}
	}
	r.model = models{
		slow:  r.script("slow.json", slowScript),
		burst: r.script("burst.json", burstScript),
		tools: r.script("tools.json", toolsScript),
		final: r.script("final.json", `{"loop":true,"steps":[{"text":"still here: {{input}}"}]}`),
	}
	if pg {
		r.model.bg = r.script("bg.json", bgScript)
	}
	return r
}

// script writes a scripted model's file and returns the model's name.
func (r *rig) script(name, body string) string {
	p := filepath.Join(r.dir, name)
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		r.t.Fatal(err)
	}
	return "scripted:" + p
}

var (
	// slowScript streams reasoning and text word by word, 2 ms apart: a
	// few hundred deltas, coalesced into an event every 50 ms.
	slowScript = fmt.Sprintf(`{"loop":true,"steps":[{"reasoning":%q,"text":%q,"delayMs":2}]}`,
		words("think", 40), words("word", 160)+" <&> \"quoted\" é ✓ {{input}}")
	// burstScript streams 16 KiB-sized deltas with no delay.
	burstScript = fmt.Sprintf(`{"loop":true,"steps":[{"text":%q}]}`, words("burst", 6000))
	// toolsScript writes a file and runs a shell in parallel, then answers.
	toolsScript = fmt.Sprintf(`{"loop":true,"steps":[
		{"text":%q,"delayMs":1,"toolCalls":[
			{"name":"write_file","arguments":{"path":"out/{{turn}}.txt","content":"{{input}}\n"}},
			{"name":"shell","arguments":{"command":"echo turn {{turn}}; sleep 0.1"}}]},
		{"text":%q,"delayMs":1}]}`, words("tool", 30), words("done", 30))
	// bgScript starts a background shell that outlives the run by a
	// few hundred ms (its row belongs to the host that runs it), then
	// answers.
	bgScript = fmt.Sprintf(`{"loop":true,"steps":[
		{"text":%q,"delayMs":1,"toolCalls":[
			{"name":"shell","arguments":{"command":"echo bg {{turn}}; sleep 0.4; echo bye","background":true}}]},
		{"text":%q,"delayMs":1}]}`, words("bg", 10), words("started", 10))
)

// words returns n numbered words.
func words(w string, n int) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%s%d", w, i)
	}
	return b.String()
}

// violation is one broken invariant.
type violation struct {
	kill    int
	session string
	seq     int64 // 0 when no single event is at fault
	what    string
}

func (v violation) String() string {
	s := fmt.Sprintf("kill %d: session %s", v.kill, v.session)
	if v.seq > 0 {
		s += fmt.Sprintf(" seq %d", v.seq)
	}
	return s + ": " + v.what
}

// violate records a violation in session s (nil for none) at seq.
func (r *rig) violate(s *sess, seq int64, format string, args ...any) {
	id := "-"
	if s != nil {
		id = s.id
	}
	r.add(violation{kill: r.kill, session: id, seq: seq, what: fmt.Sprintf(format, args...)})
}

// add records v unless it was found before: a dangling tool call, say, is
// found again after every restart.
func (r *rig) add(v violation) {
	k := fmt.Sprintf("%s %d %s", v.session, v.seq, v.what)
	if !r.seen[k] {
		r.seen[k] = true
		r.bad = append(r.bad, v)
	}
}

func (r *rig) failed() bool { return len(r.bad) > 0 || r.t.Failed() }

// stopped reports whether the torture stops: at the first kill that found
// a violation, unless -torture.keepgoing.
func (r *rig) stopped() bool { return len(r.bad) > 0 && !*goingFlag }

// report fails the test with the violations found since the last report.
func (r *rig) report() {
	r.stats.violations = len(r.bad)
	for ; r.shown < len(r.bad); r.shown++ {
		if r.shown == 50 {
			r.t.Errorf("… and %d more violations", len(r.bad)-50)
			r.shown = len(r.bad)
			break
		}
		r.t.Error(r.bad[r.shown])
	}
}

// close removes the directory, unless the test failed: then the store and
// the hosts' log stay for inspection.
func (r *rig) close() {
	for _, s := range r.srvs {
		if s != nil {
			s.kill()
		}
	}
	r.logf.Close()
	if r.failed() {
		r.t.Logf("store, scripts and the hosts' log (serve.log) kept in %s; seed %d", r.dir, r.seed)
		if r.pg != nil {
			r.dumpStore()
		}
	} else {
		os.RemoveAll(r.dir)
	}
	if r.pg != nil {
		r.pg.Close()
	}
}

// dumpStore writes the throwaway PostgreSQL database, which goes with the
// test, to store.sql (pg_dump --data-only) in the rig's directory.
func (r *rig) dumpStore() {
	bin, err := pgtest.FindBin()
	if err == nil {
		var out []byte
		out, err = exec.Command(filepath.Join(bin, "pg_dump"), "--data-only", "--dbname", r.store).Output()
		if err == nil {
			err = os.WriteFile(filepath.Join(r.dir, "store.sql"), out, 0o644)
		}
	}
	if err != nil {
		r.t.Logf("dump the throwaway database: %v", err)
		return
	}
	r.t.Logf("the throwaway PostgreSQL database goes with the test; its data is in store.sql")
}

// multi reports whether several hosts share the store.
func (r *rig) multi() bool { return len(r.srvs) > 1 }

// stats are the tallies the summary line reports.
type stats struct {
	kills, startupKills int
	sessions            int
	runs                map[string]int // by terminal status, over retired and final sessions
	toolCalls           int
	logEvents           int // events checked in logs, over all checks
	sse, ws             int // follower events checked against the store
	starts, retries     int // run/start sent, and sent again after a restart
	duplicates          int // run/start sent twice at once
	steers, cancels     int
	retryable           int             // retryable errors (with several hosts), taken as lost replies
	held                int             // events checked of the subscribers held on surviving hosts
	startup             []time.Duration // from exec to a healthy /healthz, per start
	violations          int
}

func (s *stats) summary(d time.Duration) string {
	total := 0
	var by []string
	for _, st := range []string{"completed", "cancelled", "interrupted", "failed"} {
		total += s.runs[st]
		by = append(by, fmt.Sprintf("%s %d", st, s.runs[st]))
	}
	startup := slices.Clone(s.startup)
	slices.Sort(startup)
	var median, worst time.Duration
	if n := len(startup); n > 0 {
		median, worst = startup[n/2], startup[n-1]
	}
	return fmt.Sprintf("%d kills (%d during startup), %d sessions, %d runs (%s), %d tool calls, "+
		"%d run/start (%d sent again after a restart, %d sent twice at once), %d steers, %d cancels, "+
		"%d log events checked, %d follower events checked (SSE %d, WebSocket %d, held on surviving hosts %d), %d retryable errors, "+
		"restart to healthy median %s max %s, %d violations, %s",
		s.kills, s.startupKills, s.sessions, total, strings.Join(by, ", "), s.toolCalls,
		s.starts, s.retries, s.duplicates, s.steers, s.cancels,
		s.logEvents, s.sse+s.ws, s.sse, s.ws-s.held, s.held, s.retryable,
		median.Round(time.Millisecond), worst.Round(time.Millisecond), s.violations, d.Round(time.Second))
}
