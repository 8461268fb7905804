package host_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"weft.dev/weft/api"
	"weft.dev/weft/event"
	"weft.dev/weft/host"
	"weft.dev/weft/llm/scripted"
	"weft.dev/weft/process"
	"weft.dev/weft/store"
	"weft.dev/weft/store/postgres"
	"weft.dev/weft/store/record"
)

// newEmbeddedHost starts a host as a program that embeds package host
// does: over a PostgreSQL store opened with lease TTL ttl, with no
// Config.Leases, so that the host takes the store's own.
func newEmbeddedHost(t *testing.T, url, name string, ttl time.Duration) (*host.Host, *postgres.Store, error) {
	t.Helper()
	st, err := postgres.Open(context.Background(), postgres.Config{URL: url, Migrate: true, LeaseTTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	h, err := host.New(context.Background(), host.Config{
		Store: st, Name: name, DefaultModel: "scripted:fast", CoalesceWindow: 2 * time.Millisecond,
		StorageRetry: 20 * time.Millisecond, Logger: slog.New(slog.DiscardHandler),
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
	if err == nil {
		t.Cleanup(func() { h.Close() })
	}
	return h, st, err
}

// TestEmbeddedHostsRecoverUnderLease: a host dies mid-run (its lease
// expires). Two programs that embed host.New on the same PostgreSQL
// store start at once, neither given leases: each takes the store's
// leases itself, so exactly one of them recovers the session (one
// run.interrupted, under the lease's next epoch) and the other leaves
// it to the holder, without an error.
func TestEmbeddedHostsRecoverUnderLease(t *testing.T) {
	ctx := context.Background()
	url := pg.Database(t)
	a := newPGHost(t, url, "host-a", time.Hour)
	sid := session(t, a.h, "scripted:fast")
	long := start(t, a.h, api.StartRunParams{SessionID: sid, Input: input("long"), Model: "scripted:long"})
	waitFor(t, a.h, sid, long.ID, ofType(event.MessageDelta))
	// A freezes: its lease expires (it does not notice: its TTL is an
	// hour); its next appends are fenced once another host takes over.
	if err := pg.Cluster(t).Exec(ctx, dbName(url), `UPDATE leases SET expires_at = now() WHERE session_id = $1`, sid); err != nil {
		t.Fatal(err)
	}

	var wg sync.WaitGroup
	var errs [2]error
	var stores [2]*postgres.Store
	for i := range 2 {
		wg.Go(func() { _, stores[i], errs[i] = newEmbeddedHost(t, url, fmt.Sprint("embedded-", i), 2*time.Second) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("host.New %d: %v", i, err)
		}
	}
	evs, err := stores[0].Read(ctx, store.ReadParams{SessionID: sid, Limit: 100000})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for i, e := range evs {
		if e.Seq != int64(i+1) {
			t.Fatalf("event %d has seq %d", i, e.Seq)
		}
		if e.RunID == long.ID && e.Type == event.RunInterrupted {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d run.interrupted for the dead host's run; want 1", n)
	}
	leases, err := stores[0].ListLeases(ctx, postgres.ListLeasesParams{})
	if err != nil || len(leases) != 1 || leases[0].Epoch != 2 || !strings.Contains(leases[0].Holder, "(embedded-") {
		t.Fatalf("leases: %+v, %v; want one embedded host's, epoch 2", leases, err)
	}
}

// newPGProcHost is a host with a process manager over a PostgreSQL store
// opened with lease TTL ttl, taking the store's leases as name, that
// unloads sessions idle for idle (zero: the default); logs go to the
// returned buffer.
func newPGProcHost(t *testing.T, url, name string, ttl, idle time.Duration) (*host.Host, *postgres.Store, *logBuffer) {
	t.Helper()
	st, err := postgres.Open(context.Background(), postgres.Config{URL: url, Migrate: true, LeaseTTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	logs := &logBuffer{}
	logger := slog.New(slog.NewTextHandler(logs, nil))
	m, err := process.New(process.Config{Store: st, KillGrace: 200 * time.Millisecond, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	h, err := host.New(context.Background(), host.Config{
		Store: st, Name: name, DefaultModel: "scripted:fast", CoalesceWindow: 2 * time.Millisecond, Processes: m,
		StorageRetry: 20 * time.Millisecond, Logger: logger, IdleUnload: idle,
		ResolveModel: func(name string) (*host.Model, error) {
			key := strings.TrimPrefix(name, "scripted:")
			p, err := scripted.Parse(key+".json", []byte(scripts[key]))
			return &host.Model{Name: name, Provider: p, Model: key}, err
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		h.Close()
		st.Close()
	})
	return h, st, logs
}

// TestTakeOverFencesProcessWrites: host A runs a background loop that
// prints every 20 ms; A freezes (its session's lease expires unnoticed)
// and host B takes the session over. B, holding the session's next
// lease, reconciles the loop (process.abandoned, its record now B's);
// A's next write for the loop is refused (ErrFenced), so A stops the
// loop and writes nothing more for it: no event of A's follows B's in
// the process's log, and A meets no sequence conflict.
func TestTakeOverFencesProcessWrites(t *testing.T) {
	ctx := context.Background()
	url := pg.Database(t)
	a, _, logA := newPGProcHost(t, url, "host-a", time.Hour, 0)
	b, stB, _ := newPGProcHost(t, url, "host-b", 2*time.Second, 0)
	sid := session(t, a, "scripted:fast")
	p, err := a.StartProcess(ctx, api.ProcessStartParams{SessionID: sid, Command: `while true; do echo tick; sleep 0.02; done`})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the loop printed nothing", func() bool {
		out, err := a.ProcessOutput(ctx, api.ProcessOutputParams{ID: p.ID})
		return err == nil && out.Next > 0
	})
	if err := pg.Cluster(t).Exec(ctx, dbName(url), `UPDATE leases SET expires_at = now() WHERE session_id = $1`, sid); err != nil {
		t.Fatal(err)
	}
	// B's first request for the session takes it over.
	wait(t, b, start(t, b, api.StartRunParams{SessionID: sid, Input: input("hi")}).ID)
	var rec record.Process
	eventually(t, 10*time.Second, "B did not reconcile A's process", func() bool {
		rec, err = stB.Process(ctx, p.ID)
		return err == nil && rec.Status == record.ProcessAbandoned
	})
	if rec.Epoch != 2 || !strings.Contains(rec.Host, "(host-b)") {
		t.Fatalf("record after B's take-over: host %q epoch %d; want host-b's, epoch 2", rec.Host, rec.Epoch)
	}
	eventually(t, 10*time.Second, "A did not stop writing for its process", func() bool {
		return strings.Contains(logA.String(), "another host owns its session now")
	})
	time.Sleep(200 * time.Millisecond) // A would write again by now
	evs, err := stB.ReadProcess(ctx, store.ReadProcessParams{ProcessID: p.ID, Limit: 100000})
	if err != nil {
		t.Fatal(err)
	}
	if last := evs[len(evs)-1]; last.Type != process.EventAbandoned {
		t.Fatalf("the process's last event is %s; want B's process.abandoned", last.Type)
	}
	if strings.Contains(logA.String(), "sequence conflict") {
		t.Fatalf("A met sequence conflicts:\n%s", logA.String())
	}
}

// TestSessionWithProcessKeepsItsLease: under fenced leases a session
// whose process runs on this host is not unloaded as idle, since
// unloading would release the lease its process's writes are fenced
// with (another host could take the session and reconcile a live
// process). Once the process ends, the idle session unloads and its
// lease is released.
func TestSessionWithProcessKeepsItsLease(t *testing.T) {
	ctx := context.Background()
	url := pg.Database(t)
	const idle = 50 * time.Millisecond
	h, st, _ := newPGProcHost(t, url, "host-a", 2*time.Second, idle)
	sid := session(t, h, "scripted:fast")
	p, err := h.StartProcess(ctx, api.ProcessStartParams{SessionID: sid, Command: "sleep 60"})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(10 * idle)
	if !host.Loaded(h, sid) {
		t.Fatal("the session was unloaded while its process runs")
	}
	if ls, err := st.ListLeases(ctx, postgres.ListLeasesParams{}); err != nil || len(ls) != 1 || ls[0].SessionID != sid {
		t.Fatalf("live leases %+v (%v); want the session's", ls, err)
	}
	if _, err := h.CancelProcess(ctx, api.ProcessCancelParams{ID: p.ID, SessionID: sid}); err != nil {
		t.Fatal(err)
	}
	// The process's end reaches the session's log, which may load the
	// session again for a moment: what must hold in the end is an
	// unloaded session and no live lease.
	var ls []postgres.LeaseInfo
	eventually(t, 10*time.Second, "the idle session kept its lease after its process ended", func() bool {
		ls, err = st.ListLeases(ctx, postgres.ListLeasesParams{})
		return err == nil && len(ls) == 0 && !host.Loaded(h, sid)
	})
}
