package host_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"weft.dev/weft/api"
	"weft.dev/weft/event"
	"weft.dev/weft/host"
	"weft.dev/weft/internal/pgtest"
	"weft.dev/weft/llm/scripted"
	"weft.dev/weft/store"
	"weft.dev/weft/store/postgres"
	"weft.dev/weft/store/record"
)

// pg is the test binary's PostgreSQL cluster, started by the first test
// that needs it and closed by TestMain.
var pg pgtest.Shared

// logBuffer is a slog handler's writer that the test reads.
type logBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// pgHost is a host on a PostgreSQL store with database leases held as
// holder.
type pgHost struct {
	h      *host.Host
	st     *postgres.Store
	leases *postgres.Leases
	log    *logBuffer
}

func newPGHost(t *testing.T, url, holder string, ttl time.Duration) *pgHost {
	t.Helper()
	st, err := postgres.Open(context.Background(), postgres.Config{URL: url, Migrate: true})
	if err != nil {
		t.Fatal(err)
	}
	logs := &logBuffer{}
	logger := slog.New(slog.NewTextHandler(logs, nil))
	ls, err := postgres.NewLeases(st, postgres.LeaseConfig{Holder: holder, TTL: ttl, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	h, err := host.New(context.Background(), host.Config{
		Store: st, Leases: ls, DefaultModel: "scripted:fast", CoalesceWindow: 2 * time.Millisecond,
		StorageRetry: 20 * time.Millisecond, Logger: logger,
		ResolveModel: func(name string) (*host.Model, error) {
			key := strings.TrimPrefix(name, "scripted:")
			src, ok := scripts[key]
			if !ok {
				return nil, fmt.Errorf("unknown model %q", name)
			}
			p, err := scripted.Parse(key+".json", []byte(src))
			return &host.Model{Name: name, Provider: p, Model: key}, err
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		h.Close()
		ls.Close()
		st.Close()
	})
	return &pgHost{h: h, st: st, leases: ls, log: logs}
}

// eventually polls f every 20 ms until it holds, for at most d.
func eventually(t *testing.T, d time.Duration, what string, f func() bool) {
	t.Helper()
	for end := time.Now().Add(d); !f(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("after %v: %s", d, what)
		}
	}
}

func heldBy(t *testing.T, err error, holder string) {
	t.Helper()
	var ae *api.Error
	if !errors.Is(err, store.ErrLeaseHeld) || !errors.As(err, &ae) || ae.Kind != api.KindRunConflict || !strings.Contains(err.Error(), holder) {
		t.Fatalf("error %v; want a run conflict: held by %s", err, holder)
	}
}

// TestLeaseTakeOverFencesOldOwner: two hosts on one database. Host A
// owns a session; B's requests for it are refused, naming A. A's lease
// expires while A streams a run and does not notice (A is paused: its
// TTL is an hour, so it renews too late to see); B takes the session
// over with the next epoch and reconciles A's run (run.interrupted). A's
// next append is refused (ErrFenced): A drops the session, logs it, and
// its next request for the session is refused naming B. No event of A's
// follows B's take-over in the log.
func TestLeaseTakeOverFencesOldOwner(t *testing.T) {
	ctx := context.Background()
	url := pg.Database(t)
	a := newPGHost(t, url, "host-a", time.Hour)
	b := newPGHost(t, url, "host-b", 2*time.Second)

	sid := session(t, a.h, "scripted:fast")
	wait(t, a.h, start(t, a.h, api.StartRunParams{SessionID: sid, Input: input("one")}).ID)
	_, err := b.h.StartRun(ctx, api.StartRunParams{SessionID: sid, Input: input("two")})
	heldBy(t, err, "host-a")

	long := start(t, a.h, api.StartRunParams{SessionID: sid, Input: input("long"), Model: "scripted:long"})
	waitFor(t, a.h, sid, long.ID, ofType(event.MessageDelta))
	if err := pg.Cluster(t).Exec(ctx, dbName(url), `UPDATE leases SET expires_at = now() WHERE session_id = $1`, sid); err != nil {
		t.Fatal(err)
	}
	// B's first command for the session loads it: the take-over.
	next := start(t, b.h, api.StartRunParams{SessionID: sid, Input: input("three")})
	if got := wait(t, b.h, next.ID); got.Status != record.RunCompleted {
		t.Fatalf("B's run: %s", got.Status)
	}
	r, err := b.h.GetRun(ctx, api.RunIDParams{RunID: long.ID})
	if err != nil || r.Status != record.RunInterrupted {
		t.Fatalf("A's run after B took over: %+v, %v; want interrupted", r, err)
	}
	eventually(t, 10*time.Second, "A still has the session loaded", func() bool { return !host.Loaded(a.h, sid) })
	if !strings.Contains(a.log.String(), "session lease lost") || !strings.Contains(a.log.String(), "lease epoch 1, but the lease is at epoch 2") {
		t.Errorf("A's log does not say it lost the lease:\n%s", a.log.String())
	}
	_, err = a.h.StartRun(ctx, api.StartRunParams{SessionID: sid, Input: input("four")})
	heldBy(t, err, "host-b")

	evs, err := b.st.Read(ctx, store.ReadParams{SessionID: sid, Limit: 100000})
	if err != nil {
		t.Fatal(err)
	}
	interrupted := int64(0)
	for i, e := range evs {
		if e.Seq != int64(i+1) {
			t.Fatalf("event %d has seq %d", i, e.Seq)
		}
		if e.RunID == long.ID && e.Type == event.RunInterrupted {
			interrupted = e.Seq
		}
		if interrupted > 0 && e.RunID == long.ID && e.Seq > interrupted {
			t.Fatalf("A's run wrote %s at seq %d, after B interrupted it at %d", e.Type, e.Seq, interrupted)
		}
	}
	if interrupted == 0 {
		t.Fatal("no run.interrupted for A's run")
	}
	leases, err := b.st.ListLeases(ctx, postgres.ListLeasesParams{})
	if err != nil || len(leases) != 1 || leases[0].Holder != "host-b" || leases[0].Epoch != 2 {
		t.Fatalf("leases: %+v, %v", leases, err)
	}
}

// dbName is the database name of a pgtest URL.
func dbName(url string) string {
	name, _, _ := strings.Cut(url[strings.LastIndex(url, "/")+1:], "?")
	return name
}

// TestLeaseSurvivesDatabaseRestart: PostgreSQL stops and restarts under
// a running host. A restart shorter than the lease's TTL costs nothing:
// the renewals retry, the session stays loaded and takes runs again. A
// longer outage loses the lease: the host drops the session by itself,
// and loads it again (a new epoch) at the first request once the server
// is back.
func TestLeaseSurvivesDatabaseRestart(t *testing.T) {
	ctx := context.Background()
	c, err := pgtest.New(ctx)
	if errors.Is(err, pgtest.ErrNoServer) {
		pgtest.Skip(t, err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	db, err := c.CreateDatabase(ctx)
	if err != nil {
		t.Fatal(err)
	}
	const ttl = 6 * time.Second
	a := newPGHost(t, c.URL(db), "host-a", ttl)
	sid := session(t, a.h, "scripted:fast")
	wait(t, a.h, start(t, a.h, api.StartRunParams{SessionID: sid, Input: input("one")}).ID)
	run := func(text string) {
		t.Helper()
		var r *api.RunResult
		eventually(t, 20*time.Second, "no run started after the restart", func() bool {
			r, err = a.h.StartRun(ctx, api.StartRunParams{SessionID: sid, Input: input(text)})
			return err == nil
		})
		if got := wait(t, a.h, r.ID); got.Status != record.RunCompleted {
			t.Fatalf("run after the restart: %s", got.Status)
		}
	}

	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(ttl) // past the deadline of the lease, had it not been renewed
	if !host.Loaded(a.h, sid) {
		t.Fatalf("a restart within the TTL dropped the session:\n%s", a.log.String())
	}
	run("two")

	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	eventually(t, 2*ttl, "the host kept a session whose lease expired", func() bool { return !host.Loaded(a.h, sid) })
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	run("three")
	leases, err := a.st.ListLeases(ctx, postgres.ListLeasesParams{})
	if err != nil || len(leases) != 1 || leases[0].Epoch != 2 {
		t.Fatalf("leases: %+v, %v; want the session's, at epoch 2", leases, err)
	}
}
