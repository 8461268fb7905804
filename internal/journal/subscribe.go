package journal

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"

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

// Subscribers returns the number of live subscriptions.
func (j *Journal) Subscribers() int { return j.feed.len() }

// Events returns the session's events after the cursor after: first those
// already in the log, then live ones as they are committed, with no gap and
// no duplicate. The single-use iterator ends with an error: ErrLagged when
// the consumer fell behind, ErrClosed when the journal closes, the write
// failure when the journal fails, ErrCursor for a cursor beyond the log, or
// ctx's error.
//
// The live events are shared with every other subscriber: the consumer
// must not modify them (Data in particular).
func (j *Journal) Events(ctx context.Context, after int64, opts SubscribeOptions) iter.Seq2[event.Event, error] {
	return follow(j, ctx, after, opts,
		func(e event.Event) (event.Event, error) { return e, nil },
		func(b *batch, i int) (event.Event, error) { return b.events[i], nil })
}

// EncodedEvents is [Journal.Events] with each event's JSON encoding, for
// consumers that write JSON. A live event is encoded once, by the first
// subscriber that takes it, and its encoding shared with the others;
// replayed events are encoded by their subscriber.
func (j *Journal) EncodedEvents(ctx context.Context, after int64, opts SubscribeOptions) iter.Seq2[event.Encoded, error] {
	return follow(j, ctx, after, opts,
		func(e event.Event) (event.Encoded, error) {
			b, err := json.Marshal(e)
			if err != nil {
				return event.Encoded{}, fmt.Errorf("encode session %s seq %d: %w", e.SessionID, e.Seq, err)
			}
			return event.Encoded{Event: e, JSON: b}, nil
		},
		func(b *batch, i int) (event.Encoded, error) {
			enc, err := b.encoded()
			if err != nil {
				return event.Encoded{}, fmt.Errorf("encode session %s seq %d..%d: %w", b.events[0].SessionID, b.events[0].Seq, b.events[len(b.events)-1].Seq, err)
			}
			return event.Encoded{Event: b.events[i], JSON: enc[i]}, nil
		})
}

// follow is the subscription both Events and EncodedEvents are: replayed
// turns an event read from the store into what is yielded, live the i-th
// event of a published batch.
func follow[T any](j *Journal, ctx context.Context, after int64, opts SubscribeOptions,
	replayed func(event.Event) (T, error), live func(b *batch, i int) (T, error)) iter.Seq2[T, error] {
	if opts.Buffer <= 0 {
		opts.Buffer = 4096
	}
	if opts.Bytes <= 0 {
		opts.Bytes = 4 << 20
	}
	return func(yield func(T, error) bool) {
		var zero T
		select {
		case <-j.quit:
			yield(zero, ErrClosed)
			return
		default:
		}
		if last := j.feed.lastSeq(); after < 0 || after > last {
			yield(zero, fmt.Errorf("%w: session %s: cursor %d, last seq %d", ErrCursor, j.sessionID, after, last))
			return
		}
		sub := &subscriber{maxCount: int64(opts.Buffer), maxBytes: int64(opts.Bytes)}
		live0, err := j.feed.subscribe(sub)
		if err != nil {
			yield(zero, err)
			return
		}
		defer j.feed.unsubscribe(sub)

		// Replay what was committed before we registered: seqs (after, live0].
		// Pages are bounded in bytes, so a reader that stalls here holds
		// at most one small page.
		cursor := after
		for cursor < live0 {
			page, err := j.cfg.Store.Read(ctx, store.ReadParams{SessionID: j.sessionID, After: cursor, Limit: 512, RunID: opts.RunID, MaxBytes: replayPageBytes})
			if err != nil {
				yield(zero, fmt.Errorf("replay session %s after %d: %w", j.sessionID, cursor, err))
				return
			}
			if len(page) == 0 {
				break
			}
			for _, e := range page {
				if e.Seq > live0 {
					break
				}
				v, err := replayed(e)
				if !yield(v, err) || err != nil {
					return
				}
			}
			cursor = page[len(page)-1].Seq
		}
		// Live tail: everything published after registration has seq > live0.
		var batches []*batch
		for {
			// The signal is loaded before the cursor is looked at, so a
			// batch linked after the look is followed by a close of this
			// signal or of a later one.
			signal := j.feed.signal.Load()
			closed, cerr := j.feed.closed()
			batches, err = sub.take(batches[:0])
			if err != nil {
				yield(zero, err)
				return
			}
			for _, b := range batches {
				for i := range b.events {
					if opts.RunID != "" && b.events[i].RunID != opts.RunID {
						continue
					}
					v, err := live(b, i)
					if !yield(v, err) || err != nil {
						return
					}
				}
			}
			if len(batches) > 0 {
				clear(batches) // hold no batch while waiting
				continue
			}
			if closed {
				// Everything published before the close has been read.
				yield(zero, cerr)
				return
			}
			select {
			case <-*signal:
			case <-j.feed.done:
			case <-ctx.Done():
				yield(zero, ctx.Err())
				return
			}
		}
	}
}
