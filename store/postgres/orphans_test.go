package postgres_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"weft.dev/weft/store"
	"weft.dev/weft/store/record"
)

// TestOrphanedSessions: OrphanedSessions lists the sessions that have a
// running process and no live lease, and no other: not a session whose
// lease a live holder has, not one whose processes have ended, not a
// deleted one; a session joins the list once its holder's lease expires
// and leaves it once another holder takes the lease. The limit bounds
// the list.
func TestOrphanedSessions(t *testing.T) {
	ctx := context.Background()
	url := pg.Database(t)
	st := openURL(t, url)
	dead := newLeases(t, st, "host-dead", 300*time.Millisecond)
	live := newLeases(t, st, "host-live", time.Hour)
	other := newLeases(t, openURL(t, url), "host-other", time.Hour)

	// start writes session id with one process of the given status under
	// a lease of ls, and returns the lease.
	start := func(id, status string, ls interface {
		Acquire(context.Context, string) (store.Lease, error)
	}) store.Lease {
		t.Helper()
		l, err := ls.Acquire(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		b := batch(id, 1, 1, "w")
		b.Session, b.Epoch = &record.Session{ID: id, CreatedAt: t0}, l.Epoch()
		if err := st.Append(ctx, b); err != nil {
			t.Fatal(err)
		}
		rec := record.Process{ID: "proc_" + id, SessionID: id, Kind: record.ProcessShell, Status: status,
			Disposition: record.OwnerBound, StartedAt: t0, LastSeq: 1, Epoch: l.Epoch()}
		if err := st.AppendProcess(ctx, store.ProcessBatch{ProcessID: rec.ID, Record: &rec, Epoch: l.Epoch(),
			Events: []record.ProcessEvent{{Seq: 1, ProcessID: rec.ID, Type: "process.started", Time: t0}}}); err != nil {
			t.Fatal(err)
		}
		return l
	}
	orphans := func(limit int) []string {
		t.Helper()
		ids, err := st.OrphanedSessions(ctx, limit)
		if err != nil {
			t.Fatal(err)
		}
		slices.Sort(ids)
		return ids
	}

	start("held", record.ProcessRunning, live)
	start("ended", record.ProcessCompleted, dead)
	start("a", record.ProcessRunning, dead)
	start("b", record.ProcessRunning, dead)
	gone := start("gone", record.ProcessRunning, dead)
	del := batch("gone", 2, 1, "w")
	del.Session, del.Epoch = &record.Session{ID: "gone", CreatedAt: t0, Deleted: true}, gone.Epoch()
	if err := st.Append(ctx, del); err != nil {
		t.Fatal(err)
	}
	if got := orphans(0); len(got) != 0 {
		t.Fatalf("orphans while every lease is live: %v; want none", got)
	}
	dead.Close() // stops renewing: the leases expire after 300 ms
	time.Sleep(500 * time.Millisecond)
	if got := orphans(0); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("orphans after the dead host's leases expired: %v; want [a b]", got)
	}
	if got := orphans(1); len(got) != 1 {
		t.Fatalf("orphans with limit 1: %v; want one", got)
	}
	if _, err := other.Acquire(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if got := orphans(0); !slices.Equal(got, []string{"b"}) {
		t.Fatalf("orphans after another host took a: %v; want [b]", got)
	}
}
