package rpc

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// evictions counts the evictions of the accounts it made.
type evictions struct {
	mu  sync.Mutex
	got []string
}

func (ev *evictions) open(b *streamBudget, name string) *streamAccount {
	return b.open(func() {
		ev.mu.Lock()
		ev.got = append(ev.got, name)
		ev.mu.Unlock()
	})
}

func (ev *evictions) list() []string {
	ev.mu.Lock()
	defer ev.mu.Unlock()
	return append([]string(nil), ev.got...)
}

// Room is granted in the order it was asked for: a small request does
// not overtake a large one queued before it.
func TestBudgetFIFO(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newStreamBudget(100, time.Second)
		var ev evictions
		a, w1, w2 := ev.open(b, "a"), ev.open(b, "w1"), ev.open(b, "w2")
		if err := a.acquire(t.Context(), 90, nil); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		wg.Go(func() { w1.acquire(t.Context(), 50, nil) })
		synctest.Wait()
		wg.Go(func() { w2.acquire(t.Context(), 5, nil) }) // would fit, but w1 is first
		synctest.Wait()
		if w1.held != 0 || w2.held != 0 {
			t.Fatalf("admitted %d and %d while the first waiter did not fit", w1.held, w2.held)
		}
		a.release(40) // room for w1, then not for w2
		synctest.Wait()
		if w1.held != 50 || w2.held != 0 {
			t.Fatalf("held %d and %d; want the first waiter admitted, alone", w1.held, w2.held)
		}
		a.release(50)
		wg.Wait()
		if b.used != 55 || w2.held != 5 {
			t.Fatalf("used %d, second waiter %d", b.used, w2.held)
		}
	})
}

// A request larger than the whole budget is admitted alone, once
// nothing else is held.
func TestBudgetOversizeAlone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newStreamBudget(100, time.Second)
		var ev evictions
		a, big := ev.open(b, "a"), ev.open(b, "big")
		a.acquire(t.Context(), 10, nil)
		done := make(chan error, 1)
		go func() { done <- big.acquire(t.Context(), 500, nil) }()
		synctest.Wait()
		select {
		case <-done:
			t.Fatal("an oversize request was admitted beside another")
		default:
		}
		a.close()
		if err := <-done; err != nil || b.used != 500 {
			t.Fatalf("%v, used %d", err, b.used)
		}
	})
}

// While someone waits, the account whose write has been blocked the
// longest is evicted once it has been blocked for the grace period, and
// only as many are evicted as the waiter needs; without a waiter, or
// before grace, nobody is.
func TestBudgetEvictsStalledWriterForWaiter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newStreamBudget(100, 2*time.Second)
		var ev evictions
		old, young, idle := ev.open(b, "old"), ev.open(b, "young"), ev.open(b, "idle")
		old.acquire(t.Context(), 40, nil)
		old.startWrite()
		time.Sleep(time.Second)
		young.acquire(t.Context(), 40, nil)
		young.startWrite()
		idle.acquire(t.Context(), 20, nil) // holds, but is not writing
		time.Sleep(5 * time.Second)
		if got := ev.list(); len(got) != 0 {
			t.Fatalf("evicted %v with nobody waiting", got)
		}
		w := ev.open(b, "w")
		done := make(chan error, 1)
		start := time.Now()
		go func() { done <- w.acquire(t.Context(), 30, nil) }()
		synctest.Wait()
		if got := ev.list(); len(got) != 1 || got[0] != "old" {
			t.Fatalf("evicted %v; want the longest stalled writer, old, alone", got)
		}
		old.close() // its stream ends
		if err := <-done; err != nil || time.Since(start) != 0 {
			t.Fatalf("%v after %v", err, time.Since(start))
		}
		if got := ev.list(); len(got) != 1 {
			t.Fatalf("evicted %v; one was enough", got)
		}
	})
}

// A waiter waits out the grace period of a writer that just stalled
// before evicting it.
func TestBudgetEvictsOnlyAfterGrace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newStreamBudget(100, 2*time.Second)
		var ev evictions
		h, w := ev.open(b, "h"), ev.open(b, "w")
		h.acquire(t.Context(), 100, nil)
		h.startWrite()
		var evictedAt atomic.Int64
		start := time.Now()
		h.evict = func() {
			evictedAt.Store(int64(time.Since(start)))
			go h.close()
		}
		time.Sleep(500 * time.Millisecond)
		if err := w.acquire(t.Context(), 10, nil); err != nil {
			t.Fatal(err)
		}
		if got := time.Duration(evictedAt.Load()); got != 2*time.Second {
			t.Fatalf("evicted %v after the write began; want the grace period, 2s", got)
		}
	})
}

// A waiter gives up on its ctx, on its stop channel, and when its own
// account is evicted; its place in the queue is freed for the next.
func TestBudgetWaiterGivesUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newStreamBudget(100, time.Hour)
		var ev evictions
		h := ev.open(b, "h")
		h.acquire(t.Context(), 100, nil)
		ctx, cancel := context.WithCancel(t.Context())
		stop := make(chan struct{})
		errs := make(chan error, 2)
		go func() { errs <- ev.open(b, "c").acquire(ctx, 50, nil) }()
		go func() { errs <- ev.open(b, "s").acquire(t.Context(), 50, stop) }()
		synctest.Wait()
		cancel()
		close(stop)
		for range 2 {
			if err := <-errs; !errors.Is(err, context.Canceled) && !errors.Is(err, errStopped) {
				t.Fatal(err)
			}
		}
		if b.waiters.Len() != 0 {
			t.Fatalf("%d waiters left in the queue", b.waiters.Len())
		}
		h.close()
		if b.used != 0 || len(b.accounts) != 2 {
			t.Fatalf("used %d, %d accounts", b.used, len(b.accounts))
		}
	})
}

// At most cap(reads) replay reads are between StartRead and EndRead at
// once, and a page that does not fit waits in EndRead, its token held.
func TestReplayGateLimitsReads(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newStreamBudget(100, time.Hour)
		var ev evictions
		full := ev.open(b, "full")
		full.acquire(t.Context(), 100, nil)
		var reading, most atomic.Int32
		var wg sync.WaitGroup
		for i := range 10 {
			g := &replayGate{acct: ev.open(b, "r")}
			wg.Go(func() {
				if err := g.StartRead(t.Context()); err != nil {
					t.Error(err)
					return
				}
				n := reading.Add(1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				reading.Add(-1)
				if err := g.EndRead(t.Context(), 10+i); err != nil {
					t.Error(err)
				}
				g.release()
			})
		}
		synctest.Wait()
		if n := len(b.reads); n != cap(b.reads) {
			t.Fatalf("%d read tokens taken while the budget is full; want all %d", n, cap(b.reads))
		}
		full.close()
		wg.Wait()
		if m := most.Load(); m > int32(cap(b.reads)) {
			t.Fatalf("%d reads at once; the limit is %d", m, cap(b.reads))
		}
		if b.used != 0 || len(b.reads) != 0 {
			t.Fatalf("used %d, %d tokens taken after every page was released", b.used, len(b.reads))
		}
	})
}

// A stream that waits for room behind its own stalled write is not
// dropped for its own sake (it waits, as a slow reader should); it is
// once another stream waits.
func TestBudgetNoSelfEviction(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newStreamBudget(100, time.Second)
		var ev evictions
		slow := ev.open(b, "slow")
		slow.acquire(t.Context(), 100, nil)
		slow.startWrite()
		done := make(chan error, 1)
		go func() { done <- slow.acquire(t.Context(), 10, nil) }()
		time.Sleep(time.Minute)
		if got := ev.list(); len(got) != 0 {
			t.Fatalf("evicted %v for its own waiter", got)
		}
		other := ev.open(b, "other")
		go other.acquire(t.Context(), 10, nil)
		synctest.Wait()
		if got := ev.list(); len(got) != 1 || got[0] != "slow" {
			t.Fatalf("evicted %v; want slow, now that another stream waits", got)
		}
		slow.close()
		if err := <-done; !errors.Is(err, errEvicted) {
			t.Fatalf("the evicted stream's own wait ended with %v", err)
		}
		synctest.Wait()
		other.close()
		if b.used != 0 || b.waiters.Len() != 0 {
			t.Fatalf("used %d, %d waiters after every stream closed", b.used, b.waiters.Len())
		}
	})
}
