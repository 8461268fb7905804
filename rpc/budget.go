package rpc

import (
	"container/list"
	"context"
	"errors"
	"runtime"
	"sync"
	"time"

	"weft.dev/weft/api"
)

// Defaults of the stream budget ([Config.StreamBytes]).
const (
	DefaultStreamBytes = 4 << 20
	// DefaultStallGrace is [Config.StallGrace]'s default.
	DefaultStallGrace = time.Second
)

var (
	// errEvicted ends a stream that the budget dropped for a stalled write.
	errEvicted = errors.New("rpc: stream dropped: its client stopped reading while others waited for memory")
	// errStopped ends an acquire whose stream stopped.
	errStopped = errors.New("rpc: stream stopped")
)

// streamBudget bounds, in bytes and across a whole server, what its
// event streams hold to write to their clients: the replay pages SSE
// streams and WebSocket (and stdio) subscriptions read, the live batches
// SSE streams are writing, and the notification frames queued on
// WebSocket and stdio connections. Each stream (an SSE response, or a
// connection with its subscriptions) has a streamAccount.
//
// Room is taken before memory is allocated where that is possible (a
// replay page, a notification frame), and waited for in FIFO order;
// memory that already exists (a live batch, shared with the journal) is
// only counted. While anyone waits, the account whose write to its
// client has been blocked the longest, past grace, is evicted (its
// stream ends; the client resumes by cursor), so that readers that stop
// reading cannot hold the budget for the whole write timeout. One
// request larger than the whole budget is admitted when nothing else is
// held.
//
// Replay reads are also limited in number (reads, GOMAXPROCS/2 of them,
// 1 to 8): a page's size is only known once it is read, so at most that
// many pages exist beyond the budget at any time; and their store reads
// and encoding leave the store's readers and half the CPUs to other
// requests (with one read per CPU, session/list's p99 during issue 17's
// stall was 44-70 ms; with one per two CPUs, 13 ms).
type streamBudget struct {
	max   int64
	grace time.Duration
	reads chan struct{} // tokens of replay reads in flight

	mu       sync.Mutex
	used     int64
	evicting int64 // held by evicted accounts, soon released
	accounts map[*streamAccount]struct{}
	waiters  list.List // of *budgetWaiter, FIFO
}

// budgetWaiter is one acquire waiting for room.
type budgetWaiter struct {
	n     int64
	acct  *streamAccount
	ready chan struct{} // closed once admitted (n charged to acct) or failed
	err   error         // why it failed; set before ready is closed
}

func newStreamBudget(limit int64, grace time.Duration) *streamBudget {
	return &streamBudget{
		max: limit, grace: grace,
		reads:    make(chan struct{}, min(max(runtime.GOMAXPROCS(0)/2, 1), 8)),
		accounts: map[*streamAccount]struct{}{},
	}
}

// streamAccount is one stream's handle on a streamBudget: its fields are
// the budget's state, under the budget's mu, and its methods (safe for
// concurrent use) lock it. An account is not shared between budgets.
type streamAccount struct {
	b     *streamBudget
	evict func() // ends the stream; called at most once, outside b.mu

	held    int64
	writing time.Time // when the write in progress began; zero when none
	evicted bool
	closed  bool
}

// open returns a new account of b; evict ends its stream (it must not
// block). The account must be closed.
func (b *streamBudget) open(evict func()) *streamAccount {
	a := &streamAccount{b: b, evict: evict}
	b.mu.Lock()
	b.accounts[a] = struct{}{}
	b.mu.Unlock()
	return a
}

// fits reports whether n more bytes may be held; b.mu is held.
func (b *streamBudget) fits(n int64) bool {
	return b.used+n <= b.max || b.used == 0
}

// acquire waits until n bytes may be held by a, and counts them. It
// fails with ctx's error, with errEvicted once a has been evicted, or
// with errStopped once stop (which may be nil) is closed.
func (a *streamAccount) acquire(ctx context.Context, n int64, stop <-chan struct{}) error {
	b := a.b
	b.mu.Lock()
	if a.evicted || a.closed {
		b.mu.Unlock()
		return errEvicted
	}
	if b.waiters.Len() == 0 && b.fits(n) {
		b.used += n
		a.held += n
		b.mu.Unlock()
		return nil
	}
	w := &budgetWaiter{n: n, acct: a, ready: make(chan struct{})}
	elem := b.waiters.PushBack(w)
	b.mu.Unlock()
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		victim, next := b.relieve()
		if victim != nil {
			victim.evict()
			continue
		}
		var wake <-chan time.Time
		if next > 0 {
			if timer == nil {
				timer = time.NewTimer(next)
			} else {
				timer.Reset(next)
			}
			wake = timer.C
		}
		select {
		case <-w.ready:
			return w.err
		case <-wake:
		case <-ctx.Done():
			return a.abandon(w, elem, ctx.Err())
		case <-stop:
			return a.abandon(w, elem, errStopped)
		}
		b.mu.Lock()
		evicted := a.evicted
		b.mu.Unlock()
		if evicted {
			return a.abandon(w, elem, errEvicted)
		}
	}
}

// abandon takes w off the queue, or gives its room back if it was
// admitted meanwhile, and returns err.
func (a *streamAccount) abandon(w *budgetWaiter, elem *list.Element, err error) error {
	b := a.b
	b.mu.Lock()
	select {
	case <-w.ready:
		if w.err == nil {
			a.releaseLocked(w.n)
		}
	default:
		b.waiters.Remove(elem)
	}
	b.admitLocked()
	b.mu.Unlock()
	return err
}

// relieve looks at the head of the queue: if it cannot be admitted even
// once the evicted accounts have let go, it picks the account whose
// write has been blocked the longest, past grace, marks it evicted and
// returns it; with none past grace yet, it returns how long until the
// first will be (0: none is writing, wait for a release). An account
// whose own waiters are the only ones is not picked.
func (b *streamBudget) relieve() (victim *streamAccount, next time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	front := b.waiters.Front()
	if front == nil {
		return nil, 0
	}
	head := front.Value.(*budgetWaiter)
	if b.used-b.evicting+head.n <= b.max || b.used-b.evicting == 0 {
		return nil, 0 // the evicted accounts' memory will do
	}
	// A stream is not dropped for its own sake: when it alone waits, it
	// waits for its own writes (backpressure), as a slow reader should.
	only := head.acct
	for e := front.Next(); e != nil && only != nil; e = e.Next() {
		if e.Value.(*budgetWaiter).acct != only {
			only = nil
		}
	}
	now := time.Now()
	var oldest *streamAccount
	for a := range b.accounts {
		if a.evicted || a.held == 0 || a.writing.IsZero() || a == only {
			continue
		}
		if oldest == nil || a.writing.Before(oldest.writing) {
			oldest = a
		}
	}
	if oldest == nil {
		return nil, 0
	}
	if stalled := now.Sub(oldest.writing); stalled < b.grace {
		return nil, b.grace - stalled
	}
	oldest.evicted = true
	b.evicting += oldest.held
	b.failLocked(oldest, errEvicted)
	return oldest, 0
}

// failLocked ends the waits of a's waiters with err; b.mu is held.
func (b *streamBudget) failLocked(a *streamAccount, err error) {
	for e := b.waiters.Front(); e != nil; {
		next := e.Next()
		if w := e.Value.(*budgetWaiter); w.acct == a {
			b.waiters.Remove(e)
			w.err = err
			close(w.ready)
		}
		e = next
	}
}

// admitLocked admits waiters from the head of the queue while they fit;
// b.mu is held.
func (b *streamBudget) admitLocked() {
	for e := b.waiters.Front(); e != nil; e = b.waiters.Front() {
		w := e.Value.(*budgetWaiter)
		if !b.fits(w.n) {
			return
		}
		b.waiters.Remove(e)
		b.used += w.n
		w.acct.held += w.n
		close(w.ready)
	}
}

// charge counts n bytes that a holds already (memory shared with the
// journal), without waiting: the budget may go over its bound, and
// waiters then evict stalled accounts.
func (a *streamAccount) charge(n int64) {
	b := a.b
	b.mu.Lock()
	defer b.mu.Unlock()
	b.used += n
	a.held += n
	if a.evicted {
		b.evicting += n
	}
}

// release gives back n bytes a held.
func (a *streamAccount) release(n int64) {
	if n == 0 {
		return
	}
	b := a.b
	b.mu.Lock()
	defer b.mu.Unlock()
	a.releaseLocked(n)
	b.admitLocked()
}

func (a *streamAccount) releaseLocked(n int64) {
	b := a.b
	n = min(n, a.held)
	a.held -= n
	b.used -= n
	if a.evicted {
		b.evicting -= n
	}
}

// startWrite marks the start of a write to a's client: from grace on, a
// can be evicted while others wait. endWrite marks its end.
func (a *streamAccount) startWrite() {
	a.b.mu.Lock()
	a.writing = time.Now()
	a.b.mu.Unlock()
}

func (a *streamAccount) endWrite() {
	a.b.mu.Lock()
	a.writing = time.Time{}
	a.b.mu.Unlock()
}

// close releases what a holds and forgets it; its stream has ended.
func (a *streamAccount) close() {
	b := a.b
	b.mu.Lock()
	defer b.mu.Unlock()
	a.releaseLocked(a.held)
	a.closed = true
	delete(b.accounts, a)
	b.failLocked(a, errEvicted)
	b.admitLocked()
}

// replayGate is an api.PageGate over an account: a replay read
// takes one of the budget's read tokens, and its page is admitted into
// the budget before it is yielded (waiting, the token held, until it
// fits). held is what the pages it admitted hold until the consumer
// releases them.
type replayGate struct {
	acct *streamAccount
	held int64 // only the subscription's goroutine touches it
}

var _ api.PageGate = (*replayGate)(nil)

// StartRead waits for a read token.
func (g *replayGate) StartRead(ctx context.Context) error {
	select {
	case g.acct.b.reads <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// EndRead admits the page read into the budget and gives the token back.
func (g *replayGate) EndRead(ctx context.Context, cost int) error {
	defer func() { <-g.acct.b.reads }()
	if cost == 0 {
		return nil
	}
	if err := g.acct.acquire(ctx, int64(cost), nil); err != nil {
		return err
	}
	g.held += int64(cost)
	return nil
}

// release gives back the pages admitted so far: the consumer is done
// with them.
func (g *replayGate) release() {
	g.acct.release(g.held)
	g.held = 0
}

// releaseSome gives back n of the bytes the admitted pages hold (at most
// what they hold): the consumer is done with part of a page, such as one
// chunk of a process's output ([api.Chunk.Cost]).
func (g *replayGate) releaseSome(n int64) {
	n = min(n, g.held)
	g.acct.release(n)
	g.held -= n
}
