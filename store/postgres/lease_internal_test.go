package postgres

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"weft.dev/weft/store"
)

// memTable is the leases table in memory, on the (fake) clock of a
// synctest bubble, with failures on demand: what the renewal logic of
// Leases is tested against without a database.
type memTable struct {
	mu   sync.Mutex
	rows map[string]memRow
	down bool // every call fails, as with the server stopped
	hang bool // renewals block until their context ends
}

type memRow struct {
	holder  string
	epoch   int64
	expires time.Time
}

var errDown = errors.New("connection refused")

func newMemTable() *memTable { return &memTable{rows: map[string]memRow{}} }

func (m *memTable) acquire(_ context.Context, id, holder string, ttl time.Duration) (int64, string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.down {
		return 0, "", errDown
	}
	now := time.Now()
	r, ok := m.rows[id]
	if ok && now.Before(r.expires) && r.holder != holder {
		return 0, r.holder, nil
	}
	r = memRow{holder: holder, epoch: r.epoch + 1, expires: now.Add(ttl)}
	m.rows[id] = r
	return r.epoch, "", nil
}

func (m *memTable) renew(ctx context.Context, holder string, ttl time.Duration, ids []string, epochs []int64) ([]string, error) {
	m.mu.Lock()
	if m.hang {
		m.mu.Unlock()
		<-ctx.Done()
		return nil, ctx.Err()
	}
	defer m.mu.Unlock()
	if m.down {
		return nil, errDown
	}
	var out []string
	for i, id := range ids {
		if r, ok := m.rows[id]; ok && r.holder == holder && r.epoch == epochs[i] {
			r.expires = time.Now().Add(ttl)
			m.rows[id] = r
			out = append(out, id)
		}
	}
	return out, nil
}

func (m *memTable) close() {}

func (m *memTable) release(_ context.Context, id string, epoch int64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.down {
		return errDown
	}
	if r, ok := m.rows[id]; ok && r.epoch == epoch && time.Now().Before(r.expires) {
		r.expires = time.Now()
		m.rows[id] = r
	}
	return nil
}

func (m *memTable) set(f func()) {
	m.mu.Lock()
	defer m.mu.Unlock()
	f()
}

func lostNow(l store.Lease) bool {
	select {
	case <-l.Lost():
		return true
	default:
		return false
	}
}

func mustLeases(t *testing.T, tab leaseTable, holder string) *Leases {
	t.Helper()
	l, err := newLeases(tab, LeaseConfig{Holder: holder, TTL: 9 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// TestLeaseRenewal: a held lease outlives its TTL while it is renewed;
// another holder is refused with the holder's name; once the holder
// stops renewing (Close) the lease expires, the other takes it over with
// the next epoch, and a renewal of the old one would find it moved.
func TestLeaseRenewal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		tab := newMemTable()
		a, b := mustLeases(t, tab, "a"), mustLeases(t, tab, "b")
		la, err := a.Acquire(ctx, "s")
		if err != nil || la.Epoch() != 1 {
			t.Fatalf("acquire: %v, epoch %v", err, la)
		}
		time.Sleep(60 * time.Second) // twenty renewals
		if lostNow(la) {
			t.Fatal("a renewed lease was lost")
		}
		_, err = b.Acquire(ctx, "s")
		var held *store.LeaseHeldError
		if !errors.As(err, &held) || held.Holder != "a" || !errors.Is(err, store.ErrLeaseHeld) {
			t.Fatalf("acquire of a held lease: %v; want held by a", err)
		}
		a.Close() // a stops renewing, as a paused or dead host
		if !lostNow(la) {
			t.Fatal("Close did not lose the leases still held")
		}
		time.Sleep(9 * time.Second)
		lb, err := b.Acquire(ctx, "s")
		if err != nil || lb.Epoch() != 2 {
			t.Fatalf("take-over after expiry: %v; want epoch 2", err)
		}
		if err := lb.Release(ctx); err != nil {
			t.Fatal(err)
		}
		lc, err := mustLeases(t, tab, "c").Acquire(ctx, "s")
		if err != nil || lc.Epoch() != 3 {
			t.Fatalf("acquire after a release: %v; want epoch 3 at once", err)
		}
	})
}

// TestLeaseMoved: a renewal that finds the row at another epoch closes
// Lost, at the next renewal (within TTL/3).
func TestLeaseMoved(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tab := newMemTable()
		l := mustLeases(t, tab, "a")
		ls, err := l.Acquire(context.Background(), "s")
		if err != nil {
			t.Fatal(err)
		}
		tab.set(func() { tab.rows["s"] = memRow{holder: "b", epoch: 2, expires: time.Now().Add(time.Hour)} })
		start := time.Now()
		<-ls.Lost()
		if d := time.Since(start); d > 3*time.Second {
			t.Fatalf("lost after %v; want within TTL/3", d)
		}
	})
}

// TestLeaseRenewalFailure: renewals that fail (the database is down) are
// retried, so the lease survives an outage shorter than its TTL; in a
// longer one, also when the renewals hang instead of failing, it is lost
// at its deadline, TTL after the start of its last renewal.
func TestLeaseRenewalFailure(t *testing.T) {
	for _, mode := range []string{"down", "hang"} {
		t.Run(mode, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				tab := newMemTable()
				l := mustLeases(t, tab, "a")
				ls, err := l.Acquire(context.Background(), "s")
				if err != nil {
					t.Fatal(err)
				}
				outage := func(on bool) {
					tab.set(func() {
						if mode == "down" {
							tab.down = on
						} else {
							tab.hang = on
						}
					})
				}
				if mode == "down" {
					time.Sleep(3*time.Second + time.Millisecond) // just renewed: deadline 12s
					outage(true)
					time.Sleep(7 * time.Second)
					outage(false)
					time.Sleep(1500 * time.Millisecond) // a retry renews it
					if lostNow(ls) {
						t.Fatal("lost in an outage shorter than the TTL")
					}
				}
				time.Sleep(5 * time.Second)
				began := time.Now()
				outage(true)
				<-ls.Lost()
				// The last renewal started at most TTL/3 before the outage.
				if d := time.Since(began); d < 6*time.Second || d > 9*time.Second {
					t.Fatalf("lost %v into the outage; want 6s-9s (TTL after the last renewal)", d)
				}
				outage(false)
				// The row expired in the table too; the holder takes it again.
				time.Sleep(time.Second)
				ls2, err := l.Acquire(context.Background(), "s")
				if err != nil || ls2.Epoch() != 2 {
					t.Fatalf("acquire again: %v", err)
				}
			})
		})
	}
}
