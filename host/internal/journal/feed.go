package journal

import (
	"encoding/json"
	"sync"
	"sync/atomic"
	"time"

	"weft.dev/weft/event"
)

// batch is one committed batch as its subscribers share it: the events,
// read-only, and their JSON encoding, made once by the first subscriber
// that asks for it.
type batch struct {
	events []event.Event

	once sync.Once
	json []json.RawMessage
	err  error // the encoding failure, if any
}

// encoded returns the JSON encoding of every event of the batch
// (event.Event.AppendJSON: the data as committed, not validated and
// escaped again), made on the first call; concurrent callers wait for it.
func (b *batch) encoded() ([]json.RawMessage, error) {
	b.once.Do(func() {
		b.json = make([]json.RawMessage, len(b.events))
		for i, e := range b.events {
			if b.json[i], b.err = e.AppendJSON(nil); b.err != nil {
				return
			}
		}
	})
	return b.json, b.err
}

// node is one link of a feed's list. Everything but next is set before the
// node is linked and never changes; next is set once, by the writer, when
// it links the following batch.
type node struct {
	b *batch
	// count and bytes are the events and their cost (eventCost) published
	// up to and including this node, so that the distance between two
	// nodes is a subtraction.
	count, bytes int64
	next         atomic.Pointer[node]
}

// feed is a journal's committed batches as its subscribers see them: an
// append-only list of immutable nodes that the writer extends in O(1) per
// commit, whatever the number of subscribers, and that each subscriber
// walks with a cursor of its own, taking everything there is at each wake.
//
// Nodes that no cursor can reach any more are garbage: the list is
// trimmed by the collector once every subscriber has passed them. A
// subscriber that stops reading would keep its part of the list alive, so
// the writer looks at every cursor whenever half the smallest subscriber
// bound has been published since it last looked, and drops (ErrLagged) the
// subscribers whose backlog is over their bound: a stalled reader keeps at
// most about one and a half times its bound alive.
//
// Subscribers are woken by closing a channel, which wakes every waiting
// subscriber at once. Each wake costs every waiting subscriber a trip
// through the scheduler, so wakes are spaced by the subscribers: each
// brings its own spacing (what a wake costs it), and wakes come at most
// one per the sum of them (and at least one per maxWakeInterval while
// batches wait); the batches committed in between are delivered
// together at the next wake. One subscriber is woken at every commit; a
// thousand share one wake every 10 ms rather than one per commit. The
// writer's work per commit is constant.
type feed struct {
	// signal is the channel the next wake closes; closing the feed
	// closes it too.
	signal atomic.Pointer[chan struct{}]
	// done is closed when the feed closes; err says why.
	done chan struct{}

	mu       sync.Mutex
	tail     *node
	last     int64 // seq of the last published event
	subs     map[*subscriber]struct{}
	spacing  time.Duration // the sum of the subscribers' spacings
	err      error
	lastWake time.Time
	owed     bool // a wake is owed for batches published since lastWake
	// scanned is the tail's count and bytes when the cursors were last
	// looked at; minCount and minBytes the smallest subscriber bounds
	// since then.
	scannedCount, scannedBytes int64
	minCount, minBytes         int64
}

// maxWakeInterval caps the spacing of wakes, and so what it adds to
// delivery latency.
const maxWakeInterval = 10 * time.Millisecond

func newFeed(last int64) *feed {
	f := &feed{
		done: make(chan struct{}),
		tail: &node{b: &batch{}},
		last: last,
		subs: make(map[*subscriber]struct{}),
	}
	ch := make(chan struct{})
	f.signal.Store(&ch)
	return f
}

// publish links a committed batch at the end of the list. It wakes the
// subscribers at once if the last wake is old enough; otherwise it
// returns how long until the wake that is now owed, which the writer
// makes with wakeOwed.
func (f *feed) publish(events []event.Event, now time.Time) (wakeIn time.Duration) {
	cost := 0
	for _, e := range events {
		cost += eventCost(e)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return 0
	}
	n := &node{b: &batch{events: events}, count: f.tail.count + int64(len(events)), bytes: f.tail.bytes + int64(cost)}
	f.tail.next.Store(n)
	f.tail = n
	f.last = events[len(events)-1].Seq
	if len(f.subs) > 0 {
		f.owed = true
		if n.count-f.scannedCount >= max(f.minCount/2, 1) || n.bytes-f.scannedBytes >= max(f.minBytes/2, 1) {
			if f.scanLocked() {
				// A dropped subscriber may be waiting for this wake.
				f.wakeLocked(now)
				return 0
			}
		}
	}
	if !f.owed {
		return 0
	}
	interval := min(f.spacing, maxWakeInterval)
	if wait := interval - now.Sub(f.lastWake); wait > 0 {
		return wait
	}
	f.wakeLocked(now)
	return 0
}

// wakeOwed makes the wake that publish deferred, if it is still owed.
func (f *feed) wakeOwed(now time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.owed && f.err == nil {
		f.wakeLocked(now)
	}
}

// wakeLocked closes the current signal, waking every waiting subscriber.
// f.mu is held, so that wakes are ordered with the links they announce.
func (f *feed) wakeLocked(now time.Time) {
	ch := make(chan struct{})
	old := f.signal.Swap(&ch)
	close(*old)
	f.lastWake, f.owed = now, false
}

// scanLocked drops the subscribers whose backlog is over their bounds,
// recomputes the smallest bounds, and reports whether it dropped any;
// f.mu is held.
func (f *feed) scanLocked() (dropped bool) {
	f.minCount, f.minBytes = 1<<62, 1<<62
	for s := range f.subs {
		if s.dropIfOver(f.tail) {
			delete(f.subs, s)
			f.spacing -= s.spacing
			dropped = true
			continue
		}
		f.minCount, f.minBytes = min(f.minCount, s.maxCount), min(f.minBytes, s.maxBytes)
	}
	f.scannedCount, f.scannedBytes = f.tail.count, f.tail.bytes
	return dropped
}

// subscribe registers s with its cursor at the end of the list and
// returns the seq of the last event published before it: the live tail
// starts after it. It fails with the feed's error once the feed is
// closed.
func (f *feed) subscribe(s *subscriber) (last int64, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return 0, f.err
	}
	s.pos = f.tail
	f.subs[s] = struct{}{}
	f.spacing += s.spacing
	if len(f.subs) == 1 {
		f.scannedCount, f.scannedBytes = f.tail.count, f.tail.bytes
		f.minCount, f.minBytes = s.maxCount, s.maxBytes
	} else {
		f.minCount, f.minBytes = min(f.minCount, s.maxCount), min(f.minBytes, s.maxBytes)
	}
	return f.last, nil
}

// unsubscribe forgets s.
func (f *feed) unsubscribe(s *subscriber) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.subs[s]; ok {
		delete(f.subs, s)
		f.spacing -= s.spacing
	}
}

// len returns the number of subscribers.
func (f *feed) len() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.subs)
}

// close ends the feed with err: nothing more is published, and every
// subscriber ends with err once it has read what was published before.
// Only the first call has an effect.
func (f *feed) close(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return
	}
	f.err = err
	clear(f.subs)
	f.spacing = 0
	close(f.done)
	f.wakeLocked(time.Now())
}

// closed reports whether the feed is closed, and why.
func (f *feed) closed() (bool, error) {
	select {
	case <-f.done:
		return true, f.err // written before done was closed
	default:
		return false, nil
	}
}

// subscriber is one subscription's cursor into a feed. Its goroutine moves
// the cursor; the writer may drop it when its backlog is over its bounds.
type subscriber struct {
	maxCount, maxBytes int64
	// spacing is what the subscriber adds to the spacing of the feed's
	// wakes (not negative); it does not change.
	spacing time.Duration

	mu  sync.Mutex
	pos *node // the last node taken; nil once dropped
	err error // ErrLagged once dropped
}

// over reports whether the batches after from up to to are more than s
// may hold unread: more events than maxCount, or more bytes than maxBytes
// in more than one batch (a single batch larger than the byte bound is
// delivered).
func (s *subscriber) over(from, to *node) bool {
	return to.count-from.count > s.maxCount ||
		to.bytes-from.bytes > s.maxBytes && from.next.Load() != to
}

// dropIfOver drops s if its backlog up to tail is over its bounds, and
// reports whether it did. Dropping releases the cursor, and with it
// whatever part of the list only s kept alive.
func (s *subscriber) dropIfOver(tail *node) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pos == nil || !s.over(s.pos, tail) {
		return false
	}
	s.pos, s.err = nil, ErrLagged
	return true
}

// take moves the cursor past every batch published after it, appending
// them to dst, or fails with ErrLagged (and drops s) if they are more
// than s may hold unread.
func (s *subscriber) take(dst []*batch) ([]*batch, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return dst, s.err
	}
	start, end := len(dst), s.pos
	for n := end.next.Load(); n != nil; n = n.next.Load() {
		dst, end = append(dst, n.b), n
	}
	if s.over(s.pos, end) {
		clear(dst[start:])
		s.pos, s.err = nil, ErrLagged
		return dst[:start], s.err
	}
	s.pos = end
	return dst, nil
}
