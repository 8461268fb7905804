package storetest

import (
	"context"
	"errors"
	"testing"

	"weft.dev/weft/event"
	"weft.dev/weft/store"
	"weft.dev/weft/store/record"
)

// purger returns s's [store.Purger]: every store of weft has one.
func purger(t *testing.T, s store.Store) store.Purger {
	t.Helper()
	p, ok := s.(store.Purger)
	if !ok {
		t.Fatalf("%T does not implement store.Purger", s)
	}
	return p
}

func notFound(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, store.ErrNotFound) {
		t.Errorf("%s after the purge: %v, want ErrNotFound", what, err)
	}
}

// testPurge purges a session with runs, a receipt, a snapshot and a
// process, and checks that nothing of it is left while its neighbour
// keeps everything.
func testPurge(t *testing.T, s store.Store) {
	ctx := context.Background()
	p := purger(t, s)
	fixture(t, s, "s1", "r1", "r2")
	neighbour := fixture(t, s, "s2", "x1", "x2")
	for _, id := range []string{"s1", "s2"} {
		rec, err := s.Session(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		o := &owner{id: id, proj: record.NewProjection(rec, nil), clock: t0.Add(3e9)}
		b := o.batch(t, ev(t, "", event.SessionUpdated, event.SessionUpdatedData{}))
		b.Receipts = []record.Receipt{{Key: "k-" + id, Method: "session/update", Fingerprint: "f", Result: []byte(`{}`), SessionID: id, CreatedAt: t0}}
		mustAppend(t, s, b)
		if id == "s2" {
			neighbour = append(neighbour, b.Events...)
		}
		if err := s.PutSnapshot(ctx, record.Snapshot{SessionID: id, Kind: record.SnapshotTranscript, Seq: 15, Data: []byte("t"), CreatedAt: t0}); err != nil {
			t.Fatal(err)
		}
		pr := newProc("p-"+id, id, "work", t0)
		started := pr.ev(t, "process.started", map[string]int{"pid": 1})
		out := pr.output(t, 4)
		pr.rec.Status = record.ProcessCompleted
		mustAppendProcess(t, s, pr.batch(started, out, pr.ev(t, "process.completed", map[string]int{"exitCode": 0})))
	}
	neighbour = utc(neighbour)

	if err := p.Purge(ctx, "s1"); err != nil {
		t.Fatalf("Purge(s1): %v", err)
	}
	_, err := s.Session(ctx, "s1")
	notFound(t, "Session", err)
	_, err = s.Read(ctx, store.ReadParams{SessionID: "s1"})
	notFound(t, "Read", err)
	_, err = s.LastSeq(ctx, "s1")
	notFound(t, "LastSeq", err)
	_, err = s.Run(ctx, "r1")
	notFound(t, "Run", err)
	_, err = s.Receipt(ctx, "k-s1", "session/update")
	notFound(t, "Receipt", err)
	_, err = s.Snapshot(ctx, "s1", record.SnapshotTranscript)
	notFound(t, "Snapshot", err)
	_, err = s.Process(ctx, "p-s1")
	notFound(t, "Process", err)
	_, err = s.ReadProcess(ctx, store.ReadProcessParams{ProcessID: "p-s1"})
	notFound(t, "ReadProcess", err)
	_, err = s.ProcessOutput(ctx, store.ProcessOutputParams{ProcessID: "p-s1"})
	notFound(t, "ProcessOutput", err)
	if runs, err := s.Runs(ctx, store.ListRunsParams{SessionID: "s1"}); err != nil || len(runs) != 0 {
		t.Errorf("Runs(s1) after the purge = %v, %v; want none", runIDs(runs), err)
	}
	if ps, err := s.Processes(ctx, store.ListProcessesParams{SessionID: "s1"}); err != nil || len(ps) != 0 {
		t.Errorf("Processes(s1) after the purge = %d, %v; want none", len(ps), err)
	}
	if qs, err := s.Requests(ctx, store.ListRequestsParams{SessionID: "s1"}); err != nil || len(qs) != 0 {
		t.Errorf("Requests(s1) after the purge = %d, %v; want none", len(qs), err)
	}
	if list, err := s.Sessions(ctx, store.ListSessionsParams{IncludeDeleted: true}); err != nil || len(list) != 1 || list[0].ID != "s2" {
		t.Errorf("Sessions after the purge = %v, %v; want [s2]", ids(list), err)
	}
	notFound(t, "a second Purge", p.Purge(ctx, "s1"))
	notFound(t, "Purge of an unknown session", p.Purge(ctx, "nope"))

	// The neighbour keeps everything.
	eventsEqual(t, readAll(t, s, "s2"), neighbour)
	if _, err := s.Receipt(ctx, "k-s2", "session/update"); err != nil {
		t.Errorf("neighbour's receipt: %v", err)
	}
	if _, err := s.Snapshot(ctx, "s2", record.SnapshotTranscript); err != nil {
		t.Errorf("neighbour's snapshot: %v", err)
	}
	if _, err := s.Process(ctx, "p-s2"); err != nil {
		t.Errorf("neighbour's process: %v", err)
	}
	if evs, err := s.ReadProcess(ctx, store.ReadProcessParams{ProcessID: "p-s2"}); err != nil || len(evs) != 3 {
		t.Errorf("neighbour's process log: %d events, %v; want 3", len(evs), err)
	}
	if runs, err := s.Runs(ctx, store.ListRunsParams{SessionID: "s2"}); err != nil || len(runs) != 2 {
		t.Errorf("neighbour's runs: %v, %v", runIDs(runs), err)
	}

	// An append that continues the purged log is refused; one that
	// starts a session again at seq 1 is a new session.
	o := &owner{id: "s1", proj: record.NewProjection(record.Session{ID: "s1", LastSeq: 16}, nil), clock: t0.Add(4e9)}
	rejected(t, s, o.batch(t, ev(t, "", event.SessionUpdated, event.SessionUpdatedData{})), store.ErrSeqConflict)
	fixture(t, s, "s1", "r1", "r2")
}

// testPurgeRefused checks that a session with a run that has not ended,
// or with a running process, is not purged, and that nothing of it is
// removed.
func testPurgeRefused(t *testing.T, s store.Store) {
	ctx := context.Background()
	p := purger(t, s)

	o := newOwner("busy", t0)
	mustAppend(t, s, o.create(t))
	mustAppend(t, s, o.batch(t, ev(t, "r1", event.RunQueued, event.RunQueuedData{Model: "m", Input: event.TextParts("one")})))
	want := readAll(t, s, "busy")
	if err := p.Purge(ctx, "busy"); !errors.Is(err, store.ErrInUse) {
		t.Fatalf("Purge of a session with a queued run: %v, want ErrInUse", err)
	}
	mustAppend(t, s, o.batch(t, ev(t, "r1", event.RunStarted, event.RunStartedData{Model: "m"})))
	if err := p.Purge(ctx, "busy"); !errors.Is(err, store.ErrInUse) {
		t.Fatalf("Purge of a session with a running run: %v, want ErrInUse", err)
	}
	want = append(want, readAll(t, s, "busy")[len(want):]...)
	eventsEqual(t, readAll(t, s, "busy"), want)
	if _, err := s.Run(ctx, "r1"); err != nil {
		t.Fatalf("the run of a refused purge: %v", err)
	}
	mustAppend(t, s, o.batch(t, ev(t, "r1", event.RunCompleted, event.RunEndedData{Steps: 1})))

	pr := newProc("p1", "busy", "work", t0)
	mustAppendProcess(t, s, pr.batch(pr.ev(t, "process.started", map[string]int{"pid": 1})))
	if err := p.Purge(ctx, "busy"); !errors.Is(err, store.ErrInUse) {
		t.Fatalf("Purge of a session with a running process: %v, want ErrInUse", err)
	}
	if _, err := s.Process(ctx, "p1"); err != nil {
		t.Fatalf("the process of a refused purge: %v", err)
	}
	pr.rec.Status = record.ProcessCancelled
	mustAppendProcess(t, s, pr.batch(pr.ev(t, "process.cancelled", map[string]string{"reason": "x"})))
	if err := p.Purge(ctx, "busy"); err != nil {
		t.Fatalf("Purge once the run and the process ended: %v", err)
	}
}

// testPurgeForkSource checks that the source of a fork outlives the
// fork: it is purged only once the fork is.
func testPurgeForkSource(t *testing.T, s store.Store) {
	ctx := context.Background()
	p := purger(t, s)
	src := fixture(t, s, "src", "r1", "r2")
	_, b := forkOwner(t, "f1", "src", 10)
	mustAppend(t, s, b)
	want := append(rewritten(src[:10], "f1"), utc(b.Events)...)
	_, b = forkOwner(t, "f2", "f1", 11) // a fork of the fork
	mustAppend(t, s, b)

	if err := p.Purge(ctx, "src"); !errors.Is(err, store.ErrForkSource) {
		t.Fatalf("Purge of a fork's source: %v, want ErrForkSource", err)
	}
	if err := p.Purge(ctx, "f1"); !errors.Is(err, store.ErrForkSource) {
		t.Fatalf("Purge of a fork that is a source: %v, want ErrForkSource", err)
	}
	eventsEqual(t, readAll(t, s, "src"), src)
	eventsEqual(t, readAll(t, s, "f1"), want)
	if err := p.Purge(ctx, "f2"); err != nil {
		t.Fatalf("Purge(f2): %v", err)
	}
	if err := p.Purge(ctx, "f1"); err != nil {
		t.Fatalf("Purge(f1) once its fork is purged: %v", err)
	}
	eventsEqual(t, readAll(t, s, "src"), src)
	if err := p.Purge(ctx, "src"); err != nil {
		t.Fatalf("Purge(src) once its forks are purged: %v", err)
	}
	// A fork of a purged session cannot be made.
	_, b = forkOwner(t, "f3", "src", 10)
	rejected(t, s, b, store.ErrInvalid)
}

// testRetentionLock checks that one retention lock is held at a time.
func testRetentionLock(t *testing.T, s store.Store) {
	ctx := context.Background()
	p := purger(t, s)
	unlock, err := p.LockRetention(ctx)
	if err != nil {
		t.Fatalf("LockRetention: %v", err)
	}
	if _, err := p.LockRetention(ctx); !errors.Is(err, store.ErrLeaseHeld) {
		t.Fatalf("a second LockRetention: %v, want ErrLeaseHeld", err)
	}
	unlock()
	unlock() // a second call does nothing
	unlock, err = p.LockRetention(ctx)
	if err != nil {
		t.Fatalf("LockRetention after unlock: %v", err)
	}
	unlock()
}
