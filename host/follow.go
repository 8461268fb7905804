package host

import (
	"context"
	"errors"
	"iter"
	"time"

	"weft.dev/weft/api"
	"weft.dev/weft/event"
	"weft.dev/weft/store"
)

// Notices tells a host when another host commits to a session's log
// (store/postgres.Notifier: LISTEN/NOTIFY carrying the session and the
// seq). Follow returns a channel that receives a value (at most one
// pending) after such a commit, or when a notice may have been lost, and
// stop, which ends the follow. It must be safe for concurrent use.
type Notices interface {
	Follow(sessionID string) (wake <-chan struct{}, stop func())
}

// followPoll is how often a subscription that follows another host's
// session reads the log without a notice: the fallback for a notice
// lost with its connection, which the notifier also signals.
const followPoll = 2 * time.Second

// followPageBytes bounds one page a following subscription reads.
const followPageBytes = 32 << 10

// follow is a subscription to session p.SessionID's events while another
// host owns it: the events are read from the store after the cursor,
// then again at each notice of a commit (or every followPoll), so that
// a subscriber on any host sees every event once, in order, whoever
// writes the log, the owner changing included. It ends only with an
// error: ctx's, the store's, or ErrClosed when the host closes. Pages
// are read through ctx's api.PageGate, if any.
func (h *Host) follow(ctx context.Context, p api.SubscribeParams) iter.Seq2[[]event.Event, error] {
	return func(yield func([]event.Event, error) bool) {
		wake, stop := h.cfg.Notices.Follow(p.SessionID)
		defer stop()
		gate := api.PageGateFrom(ctx)
		poll := time.NewTicker(followPoll)
		defer poll.Stop()
		after := p.After
		for {
			for {
				evs, err := h.readPage(ctx, gate, store.ReadParams{SessionID: p.SessionID, After: after, RunID: p.RunID, Limit: 512, MaxBytes: followPageBytes})
				if err != nil {
					yield(nil, err)
					return
				}
				if len(evs) == 0 {
					break
				}
				after = evs[len(evs)-1].Seq
				if !yield(evs, nil) {
					return
				}
			}
			select {
			case <-ctx.Done():
				yield(nil, ctx.Err())
				return
			case <-h.ctx.Done():
				yield(nil, ErrClosed)
				return
			case <-wake:
			case <-poll.C:
			}
		}
	}
}

// readPage reads one page of events through gate, if any.
func (h *Host) readPage(ctx context.Context, gate api.PageGate, rp store.ReadParams) ([]event.Event, error) {
	if gate != nil {
		if err := gate.StartRead(ctx); err != nil {
			return nil, err
		}
	}
	evs, err := h.cfg.Store.Read(ctx, rp)
	if gate != nil {
		cost := 0
		for _, e := range evs {
			cost += len(e.Data) + 128
		}
		if err != nil {
			cost = 0
		}
		if gerr := gate.EndRead(ctx, cost); gerr != nil && err == nil {
			return nil, gerr
		}
	}
	if err != nil {
		return nil, apiError(err)
	}
	return evs, nil
}

// followed reports whether a subscription that could not load its
// session because err should follow it instead: another host holds its
// lease, and the host has notices of other hosts' commits.
func (h *Host) followed(err error) bool {
	return h.cfg.Notices != nil && errors.Is(err, store.ErrLeaseHeld)
}

// flatten yields the events of seq one by one.
func flatten(seq iter.Seq2[[]event.Event, error]) iter.Seq2[event.Event, error] {
	return func(yield func(event.Event, error) bool) {
		for evs, err := range seq {
			if err != nil {
				yield(event.Event{}, err)
				return
			}
			for _, e := range evs {
				if !yield(e, nil) {
					return
				}
			}
		}
	}
}

// encoded yields the pages of seq as events without a shared encoding.
func encoded(seq iter.Seq2[[]event.Event, error]) iter.Seq2[[]event.Encoded, error] {
	return func(yield func([]event.Encoded, error) bool) {
		var buf []event.Encoded
		for evs, err := range seq {
			if err != nil {
				yield(nil, err)
				return
			}
			buf = buf[:0]
			for _, e := range evs {
				buf = append(buf, event.Encoded{Event: e})
			}
			if !yield(buf, nil) {
				return
			}
		}
	}
}
