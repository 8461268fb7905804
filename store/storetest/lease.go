package storetest

import (
	"context"
	"errors"
	"testing"

	"weft.dev/weft/store"
	"weft.dev/weft/store/record"
)

// RunLeases checks the leases of a store that provides them
// ([store.LeaseProvider]), on stores made by newStore as for [Run]. Two
// hosts take the store's leases, sharing it ([store.HostLeaseParams]
// Shared, so that a store with a store-wide lock admits both): a session
// one host leases is refused to the other with a [store.LeaseHeldError],
// and once released it can be taken. When the leases are fenced
// ([store.HostLeases.Fenced]), every write of a host that lost the
// session's lease is refused whole with [store.ErrFenced], whatever it
// writes: an append ([store.Batch.Epoch]), a batch of one of the
// session's processes ([store.ProcessBatch.Epoch]) or a snapshot
// ([record.Snapshot.Epoch]); the new holder writes all three under its
// epoch, a process's batches included once it records its epoch in the
// process's record (as a reconciler does); and an unfenced writer (epoch
// zero) is refused while a live lease holds the session.
func RunLeases(t *testing.T, newStore func(t *testing.T) store.Store) {
	ctx := context.Background()
	s := newStore(t)
	p, ok := s.(store.LeaseProvider)
	if !ok {
		t.Fatalf("%T is not a store.LeaseProvider", s)
	}
	hosts := make([]store.HostLeases, 2)
	for i, name := range []string{"host-a", "host-b"} {
		hl, err := p.HostLeases(ctx, store.HostLeaseParams{Name: name, Shared: true})
		if err != nil {
			t.Fatalf("HostLeases %s: %v", name, err)
		}
		t.Cleanup(func() { hl.Close() })
		hosts[i] = hl
	}
	a, b := hosts[0], hosts[1]
	const id = "ses_fenced"
	la, err := a.Acquire(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Acquire(ctx, id); !errors.Is(err, store.ErrLeaseHeld) {
		t.Fatalf("B acquires A's lease: %v; want ErrLeaseHeld", err)
	}
	if a.Fenced() != (la.Epoch() > 0) {
		t.Fatalf("Fenced %v, but the lease's epoch is %d", a.Fenced(), la.Epoch())
	}

	o := newOwner(id, t0)
	cb := o.create(t)
	cb.Epoch = la.Epoch()
	mustAppend(t, s, cb)
	proc := newProc("proc_fenced", id, "", t0)
	proc.rec.Epoch = la.Epoch()
	pb := proc.batch(proc.ev(t, "process.started", map[string]any{}))
	pb.Epoch = la.Epoch()
	mustAppendProcess(t, s, pb)
	snap := record.Snapshot{SessionID: id, Kind: record.SnapshotTranscript, Seq: 1, Data: []byte("a"), CreatedAt: t0, Epoch: la.Epoch()}
	if err := s.PutSnapshot(ctx, snap); err != nil {
		t.Fatal(err)
	}
	if err := la.Release(ctx); err != nil {
		t.Fatal(err)
	}
	lb, err := b.Acquire(ctx, id)
	if err != nil {
		t.Fatalf("B acquires the released lease: %v", err)
	}
	defer lb.Release(ctx)
	if !a.Fenced() {
		return // kernel locks: no epochs to check
	}
	if lb.Epoch() <= la.Epoch() {
		t.Fatalf("B's epoch %d is not after A's %d", lb.Epoch(), la.Epoch())
	}

	// A, which lost the session, writes under its epoch: refused whole.
	stale := o.batch(t, ev(t, "", "message.user", map[string]any{"text": "stale"}))
	for _, epoch := range []int64{la.Epoch(), 0} {
		b := stale
		b.Epoch = epoch
		if err := s.Append(ctx, b); !errors.Is(err, store.ErrFenced) {
			t.Fatalf("append under epoch %d after B took the lease: %v; want ErrFenced", epoch, err)
		}
	}
	stalePB := proc.batch(proc.ev(t, "process.output", map[string]any{"text": "stale"}))
	for _, epoch := range []int64{la.Epoch(), 0} {
		b := stalePB
		b.Epoch = epoch
		if err := s.AppendProcess(ctx, b); !errors.Is(err, store.ErrFenced) {
			t.Fatalf("process batch under epoch %d after B took the lease: %v; want ErrFenced", epoch, err)
		}
	}
	for _, epoch := range []int64{la.Epoch(), 0} {
		sn := snap
		sn.Seq, sn.Data, sn.Epoch = 1, []byte("stale"), epoch
		if err := s.PutSnapshot(ctx, sn); !errors.Is(err, store.ErrFenced) {
			t.Fatalf("snapshot under epoch %d after B took the lease: %v; want ErrFenced", epoch, err)
		}
	}
	if last, err := s.LastSeq(ctx, id); err != nil || last != 1 {
		t.Fatalf("last seq %d (%v) after refused appends; want 1", last, err)
	}
	if got, err := s.Process(ctx, proc.rec.ID); err != nil || got.LastSeq != 1 || got.Epoch != la.Epoch() {
		t.Fatalf("process after refused batches: %+v (%v); want last seq 1, epoch %d", got, err, la.Epoch())
	}
	if got, err := s.Snapshot(ctx, id, record.SnapshotTranscript); err != nil || string(got.Data) != "a" {
		t.Fatalf("snapshot after refused puts: %q (%v); want A's", got.Data, err)
	}

	// B writes under its epoch, and takes the process over by recording
	// its epoch in the process's record.
	stale.Epoch = lb.Epoch()
	mustAppend(t, s, stale)
	stalePB.Epoch = lb.Epoch()
	stalePB.Record.Epoch, stalePB.Record.Host = lb.Epoch(), "host-b"
	mustAppendProcess(t, s, stalePB)
	if got, err := s.Process(ctx, proc.rec.ID); err != nil || got.Epoch != lb.Epoch() || got.Host != "host-b" {
		t.Fatalf("process after B's batch: %+v (%v); want epoch %d, host host-b", got, err, lb.Epoch())
	}
	snap.Seq, snap.Data, snap.Epoch = 2, []byte("b"), lb.Epoch()
	if err := s.PutSnapshot(ctx, snap); err != nil {
		t.Fatal(err)
	}
}
