package postgres_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"weft.dev/weft/store"
)

// TestPurgeAcrossHosts checks what two hosts on one database see: one
// retention pass at a time, and no purge of a session another host has
// leased (loaded) until its lease is released.
func TestPurgeAcrossHosts(t *testing.T) {
	ctx := context.Background()
	url := pg.Database(t)
	stA, stB := openURL(t, url), openURL(t, url)

	unlock, err := stA.LockRetention(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stB.LockRetention(ctx); !errors.Is(err, store.ErrLeaseHeld) {
		t.Fatalf("B takes the retention lock A holds: %v, want ErrLeaseHeld", err)
	}
	unlock()
	unlockB, err := stB.LockRetention(ctx)
	if err != nil {
		t.Fatalf("B takes the retention lock A released: %v", err)
	}
	unlockB()

	la, err := newLeases(t, stA, "host-a", time.Hour).Acquire(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	b := batch("s", 1, 2, "a")
	b.Epoch = la.Epoch()
	if err := stA.Append(ctx, b); err != nil {
		t.Fatal(err)
	}
	if err := stB.Purge(ctx, "s"); !errors.Is(err, store.ErrInUse) {
		t.Fatalf("B purges a session A has leased: %v, want ErrInUse", err)
	}
	if err := la.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := stB.Purge(ctx, "s"); err != nil {
		t.Fatalf("B purges once A released it: %v", err)
	}
	if _, err := stA.LastSeq(ctx, "s"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("A reads the purged session: %v, want ErrNotFound", err)
	}
	// A's stale owner cannot write the purged log back.
	b = batch("s", 3, 1, "a")
	b.Epoch = la.Epoch()
	if err := stA.Append(ctx, b); err == nil {
		t.Fatal("a stale owner appended to a purged session")
	}
}
