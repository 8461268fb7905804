package postgres_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"weft.dev/weft/store"
	"weft.dev/weft/store/postgres"
)

func newLeases(t *testing.T, st *postgres.Store, holder string, ttl time.Duration) *postgres.Leases {
	t.Helper()
	l, err := postgres.NewLeases(st, postgres.LeaseConfig{Holder: holder, TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// dbName is the database name of a pgtest URL.
func dbName(url string) string {
	name, _, _ := strings.Cut(url[strings.LastIndex(url, "/")+1:], "?")
	return name
}

// TestLeaseFencing: two hosts (two stores with their own pools) on one
// database. A leases a session and writes it; B is refused, naming A.
// A's lease expires without A noticing (A is paused: its TTL is an hour,
// so it does not renew in time to see) and B takes the session over with
// the next epoch while A keeps appending. From B's take-over on, every
// append of A is refused with ErrFenced, none of A's events follows
// B's take-over in the log, and an unfenced writer is refused while B
// holds the lease.
func TestLeaseFencing(t *testing.T) {
	ctx := context.Background()
	url := pg.Database(t)
	stA, stB := openURL(t, url), openURL(t, url)
	leasesA := newLeases(t, stA, "host-a", time.Hour)
	leasesB := newLeases(t, stB, "host-b", time.Second)

	la, err := leasesA.Acquire(ctx, "s")
	if err != nil || la.Epoch() != 1 {
		t.Fatalf("A acquires: %v", err)
	}
	b := batch("s", 1, 1, "a")
	b.Epoch = la.Epoch()
	if err := stA.Append(ctx, b); err != nil {
		t.Fatal(err)
	}
	_, err = leasesB.Acquire(ctx, "s")
	var held *store.LeaseHeldError
	if !errors.As(err, &held) || held.Holder != "host-a" {
		t.Fatalf("B acquires A's live lease: %v; want held by host-a", err)
	}

	// A appends as fast as it can until it is fenced.
	fenced := make(chan error, 1)
	go func() {
		for seq := int64(2); ; seq++ {
			b := batch("s", seq, 1, "a")
			b.Epoch = la.Epoch()
			if err := stA.Append(ctx, b); err != nil {
				fenced <- err
				return
			}
		}
	}()
	time.Sleep(50 * time.Millisecond)
	if err := pg.Cluster(t).Exec(ctx, dbName(url), `UPDATE leases SET expires_at = now() WHERE session_id = 's'`); err != nil {
		t.Fatal(err)
	}
	lb, err := leasesB.Acquire(ctx, "s")
	if err != nil || lb.Epoch() != 2 {
		t.Fatalf("B takes the expired lease over: %v; want epoch 2", err)
	}
	taken, err := stB.LastSeq(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-fenced:
		if !errors.Is(err, store.ErrFenced) || !strings.Contains(err.Error(), "epoch 2") {
			t.Fatalf("A's append after the take-over: %v; want ErrFenced naming epoch 2", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("A kept appending after B took its lease over")
	}
	for i := range 3 {
		b := batch("s", taken+1+int64(i), 1, "b")
		b.Epoch = lb.Epoch()
		if err := stB.Append(ctx, b); err != nil {
			t.Fatalf("B appends: %v", err)
		}
	}
	b = batch("s", taken+4, 1, "a")
	b.Epoch = la.Epoch()
	if err := stA.Append(ctx, b); !errors.Is(err, store.ErrFenced) {
		t.Fatalf("A appends again: %v; want ErrFenced", err)
	}
	b.Epoch = 0
	if err := stA.Append(ctx, b); !errors.Is(err, store.ErrFenced) {
		t.Fatalf("an unfenced append while B holds the lease: %v; want ErrFenced", err)
	}
	evs, err := stB.Read(ctx, store.ReadParams{SessionID: "s", Limit: 100000})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		if w := writerOf(t, e); (e.Seq > taken) != (w == "b") {
			t.Fatalf("seq %d is %s's; B took over after seq %d", e.Seq, w, taken)
		}
	}
	if int64(len(evs)) != taken+3 {
		t.Fatalf("%d events; want %d", len(evs), taken+3)
	}
	t.Logf("A wrote %d events before B took over", taken)

	// A's lease never renews again: it found its row moved.
	if err := la.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := newLeases(t, stA, "host-c", time.Second).Acquire(ctx, "s"); !errors.Is(err, store.ErrLeaseHeld) {
		t.Fatalf("A's release of a lease it lost released B's: %v", err)
	}
	ls, err := stA.ListLeases(ctx, postgres.ListLeasesParams{})
	if err != nil || len(ls) != 1 || ls[0].Holder != "host-b" || ls[0].Epoch != 2 || ls[0].SessionID != "s" {
		t.Fatalf("ListLeases: %+v, %v", ls, err)
	}
	if ls[0].ExpiresIn <= 0 || ls[0].ExpiresIn > time.Second || ls[0].Age < 0 {
		t.Fatalf("lease times: %+v", ls[0])
	}
}

// TestLeaseRenewed: with a short TTL, a holder's renewals keep its lease
// for many TTLs; after Close (no more renewals) it expires within the TTL
// and another holder takes it over; a released lease can be taken at
// once.
func TestLeaseRenewed(t *testing.T) {
	ctx := context.Background()
	st := open(t)
	const ttl = 300 * time.Millisecond
	a, err := postgres.NewLeases(st, postgres.LeaseConfig{Holder: "a", TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b := newLeases(t, st, "b", ttl)
	la, err := a.Acquire(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(6 * ttl)
	for time.Now().Before(deadline) {
		if _, err := b.Acquire(ctx, "s"); !errors.Is(err, store.ErrLeaseHeld) {
			t.Fatalf("acquire of a renewed lease: %v", err)
		}
		select {
		case <-la.Lost():
			t.Fatal("a renewed lease was lost")
		case <-time.After(ttl / 4):
		}
	}
	a.Close()
	closed := time.Now()
	var lb store.Lease
	for {
		if lb, err = b.Acquire(ctx, "s"); err == nil {
			break
		}
		if !errors.Is(err, store.ErrLeaseHeld) || time.Since(closed) > 2*ttl {
			t.Fatalf("take-over of an expired lease: %v after %v", err, time.Since(closed))
		}
		time.Sleep(10 * time.Millisecond)
	}
	if lb.Epoch() != 2 {
		t.Fatalf("epoch %d after a take-over; want 2", lb.Epoch())
	}
	t.Logf("taken over %v after the holder stopped renewing (TTL %v)", time.Since(closed), ttl)
	if err := lb.Release(ctx); err != nil {
		t.Fatal(err)
	}
	lc, err := newLeases(t, st, "c", ttl).Acquire(ctx, "s")
	if err != nil || lc.Epoch() != 3 {
		t.Fatalf("acquire of a released lease: %v", err)
	}
}
