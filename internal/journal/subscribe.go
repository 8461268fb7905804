package journal

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"sync"

	"weft.dev/weft/api"

	"weft.dev/weft/event"
	"weft.dev/weft/store"
)

// Subscription errors.
var (
	// ErrLagged ends a subscription whose buffer overflowed because its
	// consumer fell behind; the consumer resumes from its cursor.
	ErrLagged = api.ErrLagged
	// ErrCursor reports a cursor beyond the end of the log.
	ErrCursor = errors.New("cursor is beyond the end of the log")
)

// SubscribeOptions tunes [Journal.Events].
type SubscribeOptions struct {
	// RunID, if set, keeps only that run's events; seqs stay session seqs.
	RunID string
	// Buffer is how many live events may wait for the consumer before the
	// subscription ends with ErrLagged. Zero means 4096.
	Buffer int
	// Bytes is how many bytes of live events (their data plus a fixed
	// overhead each) may wait for the consumer before the subscription
	// ends with ErrLagged. Zero means 4 MiB. Queued batches are shared by
	// every subscriber, so this bounds what one slow reader keeps alive.
	Bytes int
}

// replayPageBytes bounds one page of a subscription's replay, the most a
// reader that stalls during the replay holds.
const replayPageBytes = 64 << 10

// eventCost is what an event counts against a subscriber's byte limit:
// its data and the envelope around it.
func eventCost(e event.Event) int { return len(e.Data) + 128 }

// subscriber is one subscription's bounded queue. The writer appends each
// committed batch (shared, read-only) and wakes the consumer; the consumer
// takes the whole queue at once. One wake per commit, not one channel send
// per event, keeps a thousand subscribers cheap.
type subscriber struct {
	mu      sync.Mutex
	batches [][]event.Event
	n       int // events queued
	bytes   int // their cost
	limit   int
	maxB    int
	closed  bool
	err     error         // why it closed
	wake    chan struct{} // capacity 1
}

// publish hands a committed batch to every subscriber without blocking; a
// subscriber whose queue would exceed its limit is dropped with ErrLagged.
// Called with j.mu held, so that registration and publication are ordered.
func (j *Journal) publish(batch []event.Event) {
	cost := 0
	for _, e := range batch {
		cost += eventCost(e)
	}
	for s := range j.subs {
		s.mu.Lock()
		if s.n+len(batch) > s.limit || s.n > 0 && s.bytes+cost > s.maxB {
			s.closed, s.err = true, ErrLagged
			s.batches, s.n, s.bytes = nil, 0, 0
			delete(j.subs, s)
		} else {
			s.batches = append(s.batches, batch)
			s.n += len(batch)
			s.bytes += cost
		}
		s.mu.Unlock()
		select {
		case s.wake <- struct{}{}:
		default:
		}
	}
}

// Subscribers returns the number of live subscriptions.
func (j *Journal) Subscribers() int {
	j.mu.Lock()
	defer j.mu.Unlock()
	return len(j.subs)
}

func (j *Journal) closeSubs(err error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	for s := range j.subs {
		s.mu.Lock()
		s.closed, s.err = true, err
		s.mu.Unlock()
		delete(j.subs, s)
		select {
		case s.wake <- struct{}{}:
		default:
		}
	}
}

// take removes the queued batches, and reports whether the subscription
// has closed (and why) once they are consumed.
func (s *subscriber) take() ([][]event.Event, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.batches
	s.batches, s.n, s.bytes = nil, 0, 0
	return b, s.closed, s.err
}

// Events returns the session's events after the cursor after: first those
// already in the log, then live ones as they are committed, with no gap and
// no duplicate. The single-use iterator ends with an error: ErrLagged when
// the consumer fell behind, ErrClosed when the journal closes, ErrCursor
// for a cursor beyond the log, or ctx's error.
func (j *Journal) Events(ctx context.Context, after int64, opts SubscribeOptions) iter.Seq2[event.Event, error] {
	if opts.Buffer <= 0 {
		opts.Buffer = 4096
	}
	if opts.Bytes <= 0 {
		opts.Bytes = 4 << 20
	}
	return func(yield func(event.Event, error) bool) {
		j.mu.Lock()
		if j.err != nil {
			j.mu.Unlock()
			yield(event.Event{}, j.err)
			return
		}
		select {
		case <-j.quit:
			j.mu.Unlock()
			yield(event.Event{}, ErrClosed)
			return
		default:
		}
		if after < 0 || after > j.last {
			last := j.last
			j.mu.Unlock()
			yield(event.Event{}, fmt.Errorf("%w: session %s: cursor %d, last seq %d", ErrCursor, j.sessionID, after, last))
			return
		}
		sub := &subscriber{limit: opts.Buffer, maxB: opts.Bytes, wake: make(chan struct{}, 1)}
		j.subs[sub] = struct{}{}
		live := j.last
		j.mu.Unlock()
		defer func() {
			j.mu.Lock()
			delete(j.subs, sub)
			j.mu.Unlock()
		}()

		// Replay what was committed before we registered: seqs (after, live].
		// Pages are bounded in bytes, so a reader that stalls here holds
		// at most one small page.
		cursor := after
		for cursor < live {
			page, err := j.cfg.Store.Read(ctx, store.ReadParams{SessionID: j.sessionID, After: cursor, Limit: 512, RunID: opts.RunID, MaxBytes: replayPageBytes})
			if err != nil {
				yield(event.Event{}, fmt.Errorf("replay session %s after %d: %w", j.sessionID, cursor, err))
				return
			}
			if len(page) == 0 {
				break
			}
			for _, e := range page {
				if e.Seq > live {
					break
				}
				if !yield(e, nil) {
					return
				}
			}
			cursor = page[len(page)-1].Seq
		}
		// Live tail: everything published after registration has seq > live.
		for {
			batches, closed, err := sub.take()
			for _, b := range batches {
				for _, e := range b {
					if opts.RunID != "" && e.RunID != opts.RunID {
						continue
					}
					if !yield(e, nil) {
						return
					}
				}
			}
			if len(batches) > 0 {
				continue
			}
			if closed {
				yield(event.Event{}, err)
				return
			}
			select {
			case <-sub.wake:
			case <-ctx.Done():
				yield(event.Event{}, ctx.Err())
				return
			}
		}
	}
}
