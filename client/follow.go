package client

import (
	"context"
	"errors"
	"iter"
	"time"

	"weft.dev/weft/api"
	"weft.dev/weft/event"
)

// Dialer makes a new connection; [Follow] calls it after every drop.
type Dialer func(ctx context.Context) (*Client, error)

// Follow yields a session's events after the cursor after, forever: when
// the connection drops, the host restarts or the subscription lags, it
// reconnects (with backoff, up to one second apart) and resumes after the
// last event it yielded, so the consumer sees every event exactly once. It
// ends with ctx's error, or with an error the host gives that retrying
// cannot fix (an unknown session, an invalid cursor).
func Follow(ctx context.Context, dial Dialer, sessionID string, after int64, runID string) iter.Seq2[event.Event, error] {
	return func(yield func(event.Event, error) bool) {
		cursor := after
		backoff := 50 * time.Millisecond
		for {
			c, err := dial(ctx)
			if err == nil {
				var seq iter.Seq2[event.Event, error]
				seq, err = c.Subscribe(ctx, api.SubscribeParams{SessionID: sessionID, After: cursor, RunID: runID})
				if err == nil {
					for e, serr := range seq {
						if serr != nil {
							err = serr
							break
						}
						backoff = 50 * time.Millisecond
						cursor = e.Seq
						if !yield(e, nil) {
							c.Close()
							return
						}
					}
				}
				c.Close()
			}
			if ctx.Err() != nil {
				yield(event.Event{}, ctx.Err())
				return
			}
			var re *api.Error
			if errors.As(err, &re) && (re.Kind == api.KindNotFound || re.Kind == api.KindCursorInvalid || re.Kind == api.KindUnauthorized || re.Kind == api.KindInvalidParams) {
				yield(event.Event{}, err)
				return
			}
			t := time.NewTimer(backoff)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				yield(event.Event{}, ctx.Err())
				return
			}
			backoff = min(backoff*2, time.Second)
		}
	}
}
