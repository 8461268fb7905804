package host

import (
	"context"
	"encoding/json"
	"fmt"

	"weft.dev/weft/agent"
	"weft.dev/weft/api"
	"weft.dev/weft/event"
	"weft.dev/weft/host/internal/idem"
	"weft.dev/weft/host/internal/session"
	"weft.dev/weft/store"
)

// maxTranscriptBytes caps the text of the transcript session/get returns:
// the newest messages within it, with the number left out.
const maxTranscriptBytes = 4 << 20

// CompactSession compacts a session's conversation now
// ([api.SessionCompact]): its model (or the model's compactModel) writes
// a summary, committed as context.compacted; the next request starts
// from it. Refused with a run conflict while a run is active, parked or
// queued, or another compaction runs; an unknown session is not found;
// a session without a conversation is invalid params.
func (h *Host) CompactSession(ctx context.Context, p api.CompactParams) (*api.CompactResult, error) {
	return mutate(ctx, h, api.SessionCompact, p, h.compactSession, replayCompact)
}

func (h *Host) compactSession(ctx context.Context, p api.CompactParams, rc *idem.Claim) (*api.CompactResult, idem.Ref, error) {
	var res *api.CompactResult
	err := h.with(ctx, p.SessionID, func(s *session.Session) error {
		var err error
		res, err = s.Compact(ctx, p, rc)
		return err
	})
	if err != nil {
		return nil, idem.Ref{}, err
	}
	raw, _ := json.Marshal(res)
	return res, idem.Ref{ID: p.SessionID, Result: raw}, nil
}

// replayCompact answers a retry of session/compact with the compaction
// its receipt recorded (its seq was not known when the receipt was
// written: it is zero).
func replayCompact(_ context.Context, _ api.CompactParams, ref idem.Ref) (*api.CompactResult, error) {
	var res api.CompactResult
	if err := json.Unmarshal(ref.Result, &res); err != nil {
		return nil, fmt.Errorf("session/compact receipt: %w", err)
	}
	res.Replayed = true
	return &res, nil
}

// transcript reads session id's transcript events from the store and
// builds the view session/get asked for.
func (h *Host) transcript(ctx context.Context, id, view string) (*api.Transcript, error) {
	var evs = make([]event.Event, 0, 64)
	var after int64
	for {
		page, err := h.cfg.Store.Read(ctx, store.ReadParams{SessionID: id, After: after, Limit: 1000, Types: agent.TranscriptTypes()})
		if err != nil {
			return nil, apiError(err)
		}
		evs = append(evs, page...)
		if len(page) < 1000 {
			break
		}
		after = page[len(page)-1].Seq
	}
	return session.TranscriptView(evs, view, maxTranscriptBytes)
}
