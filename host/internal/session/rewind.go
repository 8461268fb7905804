package session

import (
	"context"
	"encoding/json"

	"weft.dev/weft/api"
	"weft.dev/weft/event"
	"weft.dev/weft/host/internal/idem"
)

// Rewind appends session.rewound (d) with rc's receipt, after restore
// (which puts the mounts' files back, and may refuse) has run, all under
// the session's lock: while a run is active or queued it is refused
// (RunConflict) and nothing is restored, and no run starts until it is
// done. restore returns the result the receipt keeps. It returns the
// seq of the event.
func (s *Session) Rewind(ctx context.Context, d event.SessionRewoundData, restore func(ctx context.Context) (json.RawMessage, error), rc *idem.Claim) (int64, error) {
	var seq int64
	err := s.command(func() error {
		if id := s.activeID(); id != "" || len(s.queue) > 0 {
			return api.Errorf(api.KindRunConflict, "session %s has an active run %s: cancel it or wait for it before a rewind", s.id, id).
				With("sessionId", s.id).With("activeRunId", id)
		}
		ref := idem.Ref{ID: s.id}
		if restore != nil {
			res, err := restore(ctx)
			if err != nil {
				return err
			}
			ref.Result = res
		}
		e, err := event.New("", event.SessionRewound, d)
		if err != nil {
			return err
		}
		out, err := s.append(ctx, rc, ref, e)
		if err != nil {
			return err
		}
		seq = out[0].Seq
		return nil
	})
	return seq, err
}
