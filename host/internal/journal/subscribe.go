package journal

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"sort"
	"time"

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
// reader that stalls during the replay holds (or one event, when an event
// is larger).
const replayPageBytes = 32 << 10

// A ReplayGate admits the page reads of subscriptions' replays, so that
// their consumers can bound what all of them hold together: a page is
// only known once read, and a host with hundreds of subscribers, each
// reading a page of large events, would otherwise hold hundreds of
// them. A subscription whose ctx carries a gate ([WithReplayGate]) calls
// StartRead before each page it reads from the store and, if that
// succeeded, EndRead after it with the page's cost (its events' data
// plus a fixed overhead each; 0 when the read failed), before the page is
// yielded. Either may wait; an error from either ends the subscription
// with that error. Both are called from the subscription's goroutine.
type ReplayGate interface {
	StartRead(ctx context.Context) error
	EndRead(ctx context.Context, cost int) error
}

type replayGateKey struct{}

// WithReplayGate returns ctx carrying g for the subscriptions made with
// it ([Journal.Events], [Journal.EncodedEvents]).
func WithReplayGate(ctx context.Context, g ReplayGate) context.Context {
	return context.WithValue(ctx, replayGateKey{}, g)
}

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
	return func(yield func(event.Event, error) bool) {
		for c, err := range j.follow(ctx, after, opts, j.cfg.WakeSpacing) {
			if err != nil {
				yield(event.Event{}, err)
				return
			}
			for _, e := range c.page {
				if !yield(e, nil) {
					return
				}
			}
			for _, b := range c.batches {
				for _, e := range b.events {
					if e.Seq <= c.after || (opts.RunID != "" && e.RunID != opts.RunID) {
						continue
					}
					if !yield(e, nil) {
						return
					}
				}
			}
		}
	}
}

// EncodedEvents is [Journal.Events] with each event's JSON encoding, for
// consumers that write JSON, in slices: each slice is what the
// subscriber took at once (a replay page, or every batch committed since
// it last looked), so that a consumer can write it in one go. A slice is
// valid until the next iteration. A live event is encoded once, by the
// first subscriber that takes it, and the encoding shared with the
// others; a replayed event comes without one (JSON nil), for its
// consumer to encode as it writes it ([event.Encoded.Bytes]): a reader
// that stalls in the replay then holds one page and one encoding, not a
// page's worth of each.
func (j *Journal) EncodedEvents(ctx context.Context, after int64, opts SubscribeOptions) iter.Seq2[[]event.Encoded, error] {
	return func(yield func([]event.Encoded, error) bool) {
		var out []event.Encoded
		for c, err := range j.follow(ctx, after, opts, j.cfg.EncodedWakeSpacing) {
			if err != nil {
				yield(nil, err)
				return
			}
			for _, e := range c.page {
				out = append(out, event.Encoded{Event: e})
			}
			for _, b := range c.batches {
				enc, err := b.encoded()
				if err != nil {
					yield(nil, fmt.Errorf("encode session %s seqs %d-%d: %w", j.sessionID, b.events[0].Seq, b.events[len(b.events)-1].Seq, err))
					return
				}
				for i, e := range b.events {
					if e.Seq > c.after && (opts.RunID == "" || e.RunID == opts.RunID) {
						out = append(out, event.Encoded{Event: e, JSON: enc[i]})
					}
				}
			}
			if len(out) > 0 && !yield(out, nil) {
				return
			}
			// Let go of the chunk at once: the next read may wait (for
			// the replay gate, or for live events) and must not hold
			// this one meanwhile.
			clear(out)
			out = out[:0]
		}
	}
}

// chunk is what a subscription reads at once: a page of the replay, or
// the batches committed since it last looked, unfiltered.
type chunk struct {
	page    []event.Event
	batches []*batch
	// after is the subscription's cursor: a batch published after the
	// subscription began may hold events at or below it (see follow).
	after int64
}

// follow is the subscription Events and EncodedEvents read: the replay
// after the cursor, page by page, then the live tail, a wake's worth at a
// time, with spacing its share of the spacing of the feed's wakes
// (negative: none). A chunk is valid until the next iteration.
func (j *Journal) follow(ctx context.Context, after int64, opts SubscribeOptions, spacing time.Duration) iter.Seq2[chunk, error] {
	if opts.Buffer <= 0 {
		opts.Buffer = 4096
	}
	if opts.Bytes <= 0 {
		opts.Bytes = 4 << 20
	}
	return func(yield func(chunk, error) bool) {
		select {
		case <-j.quit:
			yield(chunk{}, ErrClosed)
			return
		default:
		}
		if after < 0 {
			yield(chunk{}, fmt.Errorf("%w: session %s: cursor %d", ErrCursor, j.sessionID, after))
			return
		}
		sub := &subscriber{maxCount: int64(opts.Buffer), maxBytes: int64(opts.Bytes), spacing: max(spacing, 0)}
		live, err := j.feed.subscribe(sub)
		if err != nil {
			yield(chunk{}, err)
			return
		}
		defer j.feed.unsubscribe(sub)
		if after > live {
			// A batch the store holds may not be published yet (the
			// writer publishes after the store answers): a cursor the
			// store has reached is good, and the live tail skips up to it.
			if err := j.reached(ctx, after, live); err != nil {
				yield(chunk{}, err)
				return
			}
		}
		// Every waiting subscriber locks each channel of its select when a
		// wake comes: a ctx shared by many subscribers would be one more
		// contended channel, so its end closes a channel of this one.
		stopped := make(chan struct{})
		defer context.AfterFunc(ctx, func() { close(stopped) })()

		// Replay what was committed before we registered: seqs (after, live].
		// Pages are bounded in bytes, so a reader that stalls here holds
		// at most one small page.
		gate, _ := ctx.Value(replayGateKey{}).(ReplayGate)
		cursor := after
		for cursor < live {
			page, err := j.readPage(ctx, gate, store.ReadParams{SessionID: j.sessionID, After: cursor, Limit: 512, RunID: opts.RunID, MaxBytes: replayPageBytes})
			if err != nil {
				yield(chunk{}, fmt.Errorf("replay session %s after %d: %w", j.sessionID, cursor, err))
				return
			}
			if len(page) == 0 {
				break
			}
			cursor = page[len(page)-1].Seq
			if n := len(page); page[n-1].Seq > live {
				n = sort.Search(n, func(i int) bool { return page[i].Seq > live })
				page = page[:n]
			}
			if len(page) > 0 && !yield(chunk{page: page}, nil) {
				return
			}
		}
		// Live tail: everything published after registration has seq > live.
		var batches []*batch
		for {
			// The signal is loaded before the cursor is looked at, so a
			// batch linked after the look is followed by a close of this
			// signal or of a later one.
			signal := j.feed.signal.Load()
			closed, cerr := j.feed.closed()
			clear(batches) // hold no batch while waiting
			batches, err = sub.take(batches[:0])
			if err != nil {
				yield(chunk{}, err)
				return
			}
			if len(batches) > 0 {
				if !yield(chunk{batches: batches, after: after}, nil) {
					return
				}
				continue
			}
			if closed {
				// Everything published before the close has been read.
				yield(chunk{}, cerr)
				return
			}
			select {
			case <-*signal:
			case <-stopped:
				yield(chunk{}, ctx.Err())
				return
			}
		}
	}
}

// reached returns nil if the store holds the event at seq after, which
// the feed (at live) has not published yet, and ErrCursor if not.
func (j *Journal) reached(ctx context.Context, after, live int64) error {
	page, err := j.cfg.Store.Read(ctx, store.ReadParams{SessionID: j.sessionID, After: after - 1, Limit: 1})
	if err != nil {
		return fmt.Errorf("look up cursor %d of session %s: %w", after, j.sessionID, err)
	}
	if len(page) == 0 || page[0].Seq != after {
		return fmt.Errorf("%w: session %s: cursor %d, last seq %d", ErrCursor, j.sessionID, after, live)
	}
	return nil
}

// readPage reads one page of a replay through gate, if not nil.
func (j *Journal) readPage(ctx context.Context, gate ReplayGate, p store.ReadParams) ([]event.Event, error) {
	if gate == nil {
		return j.cfg.Store.Read(ctx, p)
	}
	if err := gate.StartRead(ctx); err != nil {
		return nil, err
	}
	page, err := j.cfg.Store.Read(ctx, p)
	cost := 0
	for _, e := range page {
		cost += eventCost(e)
	}
	if gerr := gate.EndRead(ctx, cost); gerr != nil && err == nil {
		return nil, gerr
	}
	return page, err
}
