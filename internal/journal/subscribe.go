package journal

import (
	"context"
	"errors"
	"fmt"
	"iter"

	"weft.dev/weft/event"
	"weft.dev/weft/store"
)

// Subscription errors.
var (
	// ErrLagged ends a subscription whose buffer overflowed because its
	// consumer fell behind; the consumer resumes from its cursor.
	ErrLagged = errors.New("subscriber lagged behind: resume from the last cursor")
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
}

type subscriber struct {
	ch  chan event.Event
	err error // set before ch is closed
}

// publish hands committed events to every subscriber without blocking; a
// subscriber whose buffer is full is dropped with ErrLagged. Called with
// j.mu held.
func (j *Journal) publish(batch []event.Event) {
	for s := range j.subs {
		for _, e := range batch {
			select {
			case s.ch <- e:
				continue
			default:
			}
			s.err = ErrLagged
			close(s.ch)
			delete(j.subs, s)
			break
		}
	}
}

func (j *Journal) closeSubs(err error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	for s := range j.subs {
		s.err = err
		close(s.ch)
		delete(j.subs, s)
	}
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
		sub := &subscriber{ch: make(chan event.Event, opts.Buffer)}
		j.subs[sub] = struct{}{}
		live := j.last
		j.mu.Unlock()
		defer func() {
			j.mu.Lock()
			delete(j.subs, sub)
			j.mu.Unlock()
		}()

		// Replay what was committed before we registered: seqs (after, live].
		cursor := after
		for cursor < live {
			page, err := j.cfg.Store.Read(ctx, store.ReadParams{SessionID: j.sessionID, After: cursor, Limit: 512, RunID: opts.RunID})
			if err != nil {
				yield(event.Event{}, fmt.Errorf("replay session %s after %d: %w", j.sessionID, cursor, err))
				return
			}
			for _, e := range page {
				if e.Seq > live {
					break
				}
				if !yield(e, nil) {
					return
				}
			}
			if len(page) < 512 {
				break
			}
			cursor = page[len(page)-1].Seq
		}
		// Live tail: everything published after registration has seq > live.
		for {
			select {
			case e, ok := <-sub.ch:
				if !ok {
					j.mu.Lock()
					err := sub.err
					j.mu.Unlock()
					yield(event.Event{}, err)
					return
				}
				if opts.RunID != "" && e.RunID != opts.RunID {
					continue
				}
				if !yield(e, nil) {
					return
				}
			case <-ctx.Done():
				yield(event.Event{}, ctx.Err())
				return
			}
		}
	}
}
