package session

import (
	"sync"
	"time"
)

// deadlines are the timers of a session's open requests (approvals and
// questions with a deadline): each calls expire with its request's ID
// when its deadline comes, once, unless it was stopped first. The zero
// value is not usable; make one with newDeadlines.
//
// Its methods are safe for concurrent use and may be called with the
// session's lock held: its own lock is a leaf, and expire runs in the
// timer's goroutine with no lock of deadlines held (it takes the
// session's lock).
type deadlines struct {
	expire func(id string)

	mu     sync.Mutex // leaf
	timers map[string]*time.Timer
	closed bool // stopAll was called: start does nothing
}

// newDeadlines returns an empty set of timers that call expire.
func newDeadlines(expire func(id string)) *deadlines {
	return &deadlines{expire: expire, timers: map[string]*time.Timer{}}
}

// start expires request id at t (at once if t has passed). A request that
// has a timer keeps it; after stopAll, start does nothing.
func (d *deadlines) start(id string, t time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.timers[id]; ok || d.closed {
		return
	}
	d.timers[id] = time.AfterFunc(time.Until(t), func() {
		d.mu.Lock()
		delete(d.timers, id)
		d.mu.Unlock()
		d.expire(id)
	})
}

// stop stops request id's timer, if any: the request was answered or
// closed. An expire already under way still runs.
func (d *deadlines) stop(id string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if t, ok := d.timers[id]; ok {
		t.Stop()
		delete(d.timers, id)
	}
}

// stopAll stops every timer and refuses new ones: the session closes.
func (d *deadlines) stopAll() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.closed = true
	for id, t := range d.timers {
		t.Stop()
		delete(d.timers, id)
	}
}

// len returns how many timers are pending.
func (d *deadlines) len() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.timers)
}
