package sim

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"weft.dev/weft/event"
	"weft.dev/weft/host"
	"weft.dev/weft/store"
	"weft.dev/weft/store/memory"
	"weft.dev/weft/store/sqlite"
	"weft.dev/weft/tool"
)

// storeKind is the store a seed runs on.
type storeKind string

const (
	onMemory storeKind = "memory"
	onSQLite storeKind = "sqlite"
)

// Host settings of the simulation.
const (
	maxSteps     = 8                      // a run's steps unless it says otherwise
	storageRetry = 100 * time.Millisecond // the first wait of a session's storage recovery
	idleUnload   = 5 * time.Minute
	coalesce     = 3 * time.Millisecond
)

// world is one simulation: a seeded driver applies one step at a time to
// a host over a fault-injecting store, a scripted model and in-memory
// tools, waits until the bubble is quiescent, and checks the invariants.
// Only the driver's goroutine touches its fields (the model, the tools
// and the store lock their own).
type world struct {
	t       *testing.T
	seed    int64
	kind    storeKind
	verbose bool
	rng     *rand.Rand
	start   time.Time // fake time at the start

	disk  store.Store // what survives a crash
	fs    *faultStore
	m     *model
	tools *tools
	reg   *tool.Registry
	ids   atomic.Int64 // the engine's IDs (host.Config.NewID)

	h *host.Host
	// gen is the current host's generation; cancel ends the contexts of
	// the commands and subscriptions made against it (a client's
	// connections die with the process).
	gen    int
	cancel context.CancelFunc
	ctx    context.Context

	step  int
	trace []string

	sessions []*simSession
	cmds     []*command
	subs     []*subscriber
	client   client // what the client asked and was told

	survivors []survivor // runs queued when a host stopped
	created   bool       // a create was sent since the sessions were last listed

	nextToken, nextCall, nextKey int
	nextRace, racing             int // racing: the race the commands sent now belong to
	ranSeen                      int // tools.order already checked

	stats stats
}

// stats are counted for the summary.
type stats struct {
	steps, commands, acked, crashes, restarts, faults, events, runs, toolRuns int
}

func (s *stats) add(o stats) {
	s.steps += o.steps
	s.commands += o.commands
	s.acked += o.acked
	s.crashes += o.crashes
	s.restarts += o.restarts
	s.faults += o.faults
	s.events += o.events
	s.runs += o.runs
	s.toolRuns += o.toolRuns
}

// result is what one seed's run leaves: its counts and the hash of its
// trace and logs, for the reproducibility test.
type result struct {
	stats stats
	hash  string
	trace []string
	logs  [][][]byte // each session's events, encoded
}

// simSession is a session of the simulation: slot k, model "sim:k".
type simSession struct {
	k   int
	id  string // "" until it is known
	key string // its create's idempotency key, if any
	// title is what its create asked for.
	title string
	log   *logState
}

// simulate runs one seed for steps steps and the drain, inside a bubble.
// verbose logs the trace as it goes, the engine's diagnostics, and the
// logs when the seed fails.
func simulate(t *testing.T, seed int64, steps int, kind storeKind, verbose bool) result {
	var res result
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, seed, kind, verbose)
		for w.step = 1; w.step <= steps; w.step++ {
			w.runStep()
		}
		w.drain()
		res = w.result()
	})
	return res
}

func newWorld(t *testing.T, seed int64, kind storeKind, verbose bool) *world {
	w := &world{t: t, seed: seed, kind: kind, verbose: verbose, rng: rand.New(rand.NewPCG(uint64(seed), 0x5eed)), start: time.Now(),
		m: newModel(), tools: newTools(), client: newClient()}
	var err error
	if w.reg, err = w.tools.registry(); err != nil {
		t.Fatal(err)
	}
	switch kind {
	case onSQLite:
		st, err := sqlite.Open(context.Background(), sqlite.Config{Path: filepath.Join(t.TempDir(), "sim.db")})
		if err != nil {
			t.Fatal(err)
		}
		w.disk = st
	default:
		w.disk = memory.New()
	}
	w.fs = newFaultStore(w.disk)
	t.Cleanup(w.close)
	w.tracef("seed %d on %s", seed, kind)
	w.openHost()
	return w
}

// close stops everything the world started: the subscriptions, the
// commands and the host, then the store. It runs in the bubble (a
// cleanup of the bubble's test), also after a failure.
func (w *world) close() {
	w.fs.crash(func(string) heldVerdict { return refuseHeld })
	if w.h != nil {
		w.h.Close()
		w.h = nil
	}
	if w.cancel != nil {
		w.cancel()
	}
	synctest.Wait()
	for _, s := range w.subs {
		<-s.done
	}
	for _, c := range w.cmds {
		<-c.done
	}
	w.disk.Close()
}

// newID is the host's NewID: a counter, so that a seed's IDs are the
// same every time.
func (w *world) newID(prefix string) string {
	return fmt.Sprintf("%s_%06d", prefix, w.ids.Add(1))
}

// openHost starts a host on the store, as after a (re)start: it recovers
// what the last one left. A host that cannot start (its store refuses
// the writes of recovery) is started again once the disk is freed, as an
// operator would.
func (w *world) openHost() {
	w.gen++
	w.ctx, w.cancel = context.WithCancel(context.Background())
	var logger *slog.Logger
	if w.verbose {
		// The engine's own diagnostics, beside the trace (not in it:
		// they come from many goroutines).
		logger = slog.New(slog.NewTextHandler(tlog{w.t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	for attempt := 0; ; attempt++ {
		h, err := host.New(context.Background(), host.Config{
			Store: w.fs, ResolveModel: w.m.resolve, Tools: w.reg, MaxSteps: maxSteps,
			ReceiptTTL: 365 * 24 * time.Hour, CoalesceWindow: coalesce, StorageRetry: storageRetry,
			IdleUnload: idleUnload, Policy: policy(), InputTimeout: askTimeout, NewID: w.newID, Logger: logger,
		})
		if err == nil {
			w.h = h
			return
		}
		w.tracef("host %d does not start: %v", w.gen, err)
		if attempt == 3 {
			w.fail("a host does not start on a store that takes writes: %v", err)
		}
		w.fs.mu.Lock()
		w.fs.full = false
		w.fs.mu.Unlock()
		w.tracef("the operator frees the disk")
	}
}

// restart closes the host and opens a new one on the same store: after a
// crash (the store is dead: nothing the old host still does commits), or
// gracefully.
func (w *world) restart(crashed bool) {
	w.fs.setPhase(phaseRestart)
	defer w.fs.setPhase(phaseChain)
	if crashed {
		w.stats.crashes++
		w.fs.crash(func(s string) heldVerdict {
			v := []heldVerdict{crashHeld, crashAfter}[w.rng.IntN(2)]
			w.tracef("  the held commit of %s %s", w.name(s), map[heldVerdict]string{crashHeld: "is lost", crashAfter: "commits"}[v])
			return v
		})
	} else {
		w.stats.restarts++
	}
	w.h.Close()
	w.h = nil
	w.cancel()
	synctest.Wait()
	w.collect()
	w.checkLogs(true)
	w.noteQueued()
	if n := len(w.m.streams()); n > 0 {
		w.fail("%d model calls outlive the host that made them", n)
	}
	if n := w.tools.executing(); n > 0 {
		w.fail("%d tool calls outlive the host that made them", n)
	}
	w.fs.revive()
	w.openHost()
	synctest.Wait()
	w.collect()
	w.tracef("host %d started", w.gen)
}

// runStep applies one step and checks the invariants.
func (w *world) runStep() {
	act := w.pick()
	act()
	w.settle()
	if w.fs.crashed() {
		w.tracef("the store crashed")
		w.restart(true)
	}
	w.stats.steps++
	w.check()
}

// settle waits until every goroutine of the bubble is blocked and applies
// the outcomes of the commands that returned.
func (w *world) settle() {
	synctest.Wait()
	w.fs.setPhase(phaseChain)
	w.collect()
}

// tracef adds a line to the trace: the step, the fake time since the
// start, and the text.
func (w *world) tracef(format string, args ...any) {
	line := fmt.Sprintf("%4d %9.3fs ", w.step, time.Since(w.start).Seconds()) + fmt.Sprintf(format, args...)
	w.trace = append(w.trace, line)
	if w.verbose {
		w.t.Log(line)
	}
}

// fail stops the seed with the violated invariant, the step, and the end
// of the trace.
func (w *world) fail(format string, args ...any) {
	w.t.Helper()
	if w.verbose {
		w.dumpLogs()
	}
	tail := w.trace[max(0, len(w.trace)-40):]
	w.t.Fatalf("seed %d, step %d: %s\n(reproduce: go test ./internal/sim -run 'TestSim$' -seed %d -steps %d -v)\nlast lines of the trace:\n%s",
		w.seed, w.step, fmt.Sprintf(format, args...), w.seed, *flagSteps, strings.Join(tail, "\n"))
}

// name is a session's name in the trace: s<k>.
func (w *world) name(id string) string {
	for _, s := range w.sessions {
		if s.id == id {
			return fmt.Sprintf("s%d", s.k)
		}
	}
	return id
}

// result hashes the trace and every session's log.
func (w *world) result() result {
	h := sha256.New()
	for _, l := range w.trace {
		fmt.Fprintln(h, l)
	}
	var logs [][][]byte
	for _, s := range w.sessions {
		if s.log == nil {
			logs = append(logs, nil)
			continue
		}
		logs = append(logs, s.log.raw)
		for _, raw := range s.log.raw {
			h.Write(raw)
		}
		w.stats.events += len(s.log.raw)
		w.stats.runs += len(s.log.runs)
	}
	_, w.stats.toolRuns = w.tools.since(0)
	return result{stats: w.stats, hash: hex.EncodeToString(h.Sum(nil)), trace: slices.Clone(w.trace), logs: logs}
}

// session returns slot k.
func (w *world) session(k int) *simSession {
	for len(w.sessions) <= k {
		w.sessions = append(w.sessions, &simSession{k: len(w.sessions)})
	}
	return w.sessions[k]
}

// known returns the sessions whose ID is known and that are not deleted.
func (w *world) known() []*simSession {
	var out []*simSession
	for _, s := range w.sessions {
		if s.id != "" && (s.log == nil || !s.log.deleted) {
			out = append(out, s)
		}
	}
	return out
}

// free reports whether the driver may touch session s: no append of it
// is held (a command that waits for it holds the session's lock, which a
// goroutine waiting for is not durably blocked), and none will be.
func (w *world) free(s *simSession) bool {
	return s.id == "" || !w.fs.holding(s.id)
}

// shortText is a few random words.
func (w *world) shortText() string {
	words := []string{"alpha", "beta", "gamma", "delta", "kappa", "sigma", "omega", "tau"}
	n := 1 + w.rng.IntN(3)
	out := make([]string, n)
	for i := range out {
		out[i] = words[w.rng.IntN(len(words))]
	}
	return strings.Join(out, " ")
}

// input is a run's or a steer's input: its token first.
func input(token string, text string) []event.Part {
	return event.TextParts(token + " " + text)
}

// tlog writes the engine's log to the test's.
type tlog struct{ t *testing.T }

func (l tlog) Write(p []byte) (int, error) {
	l.t.Logf("engine: %s", strings.TrimSpace(string(p)))
	return len(p), nil
}

// dumpLogs prints every session's log as the checks last read it (with
// -seed and -v, when a seed fails).
func (w *world) dumpLogs() {
	for _, s := range w.sessions {
		if s.log == nil {
			continue
		}
		w.t.Logf("log of s%d (%s):", s.k, s.id)
		for _, raw := range s.log.raw {
			w.t.Logf("  %s", raw)
		}
	}
}
