package host

import (
	"context"
	"errors"
	"slices"

	"weft.dev/weft/api"
	"weft.dev/weft/event"
	"weft.dev/weft/host/internal/idem"
	"weft.dev/weft/host/internal/session"
	"weft.dev/weft/store"
	"weft.dev/weft/store/record"
)

// by is who sends the request in ctx, for the records of who answered.
func by(ctx context.Context) event.By {
	c := api.ClientFrom(ctx)
	return event.By{Client: c.Name, Transport: c.Transport}
}

// requestSession finds the session of request id (checking that it is
// want's, or one of its subagents' sessions, when set).
func (h *Host) requestSession(ctx context.Context, id, want string) (string, error) {
	if id == "" {
		return "", invalid("requestId", "the request's ID is required")
	}
	q, err := h.cfg.Store.Request(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return "", api.Errorf(api.KindNotFound, "request %s not found", id).With("requestId", id)
	}
	if err != nil {
		return "", apiError(err)
	}
	if want != "" && q.SessionID != want && !h.isDescendant(ctx, q.SessionID, want) {
		// Do not tell another session's requests apart from unknown ones.
		return "", api.Errorf(api.KindNotFound, "request %s not found in session %s", id, want).With("requestId", id).With("sessionId", want)
	}
	return q.SessionID, nil
}

func replayRequest[P any](h *Host) replayer[P, api.RequestResult] {
	return func(ctx context.Context, _ P, ref idem.Ref) (*api.RequestResult, error) {
		q, err := h.cfg.Store.Request(ctx, ref.ID)
		if err != nil {
			return nil, apiError(err)
		}
		return &api.RequestResult{Request: q, Replayed: true}, nil
	}
}

// DecideApproval answers an approval: allow_once runs the call, allow_session
// also allows such calls for the rest of the session, deny answers the
// model with the message. The first answer wins; a later one is
// api.ErrAlreadyResolved naming who answered ([api.ApprovalDecide]).
func (h *Host) DecideApproval(ctx context.Context, p api.DecideParams) (*api.RequestResult, error) {
	return mutate(ctx, h, api.ApprovalDecide, p, h.decide, replayRequest[api.DecideParams](h))
}

func (h *Host) decide(ctx context.Context, p api.DecideParams, rc *idem.Claim) (*api.RequestResult, idem.Ref, error) {
	sid, err := h.requestSession(ctx, p.ApprovalID, p.SessionID)
	if err != nil {
		return nil, idem.Ref{}, err
	}
	var q record.Request
	err = h.with(ctx, sid, func(s *session.Session) (err error) {
		q, err = s.Decide(ctx, p, by(ctx), rc)
		return err
	})
	if err != nil {
		return nil, idem.Ref{}, err
	}
	return &api.RequestResult{Request: q}, idem.Ref{ID: q.ID}, nil
}

// AnswerInput answers a question the model asked (ask_user)
// ([api.InputAnswer]).
func (h *Host) AnswerInput(ctx context.Context, p api.AnswerParams) (*api.RequestResult, error) {
	return mutate(ctx, h, api.InputAnswer, p, h.answer, replayRequest[api.AnswerParams](h))
}

func (h *Host) answer(ctx context.Context, p api.AnswerParams, rc *idem.Claim) (*api.RequestResult, idem.Ref, error) {
	sid, err := h.requestSession(ctx, p.RequestID, p.SessionID)
	if err != nil {
		return nil, idem.Ref{}, err
	}
	var q record.Request
	err = h.with(ctx, sid, func(s *session.Session) (err error) {
		q, err = s.Answer(ctx, p, by(ctx), rc)
		return err
	})
	if err != nil {
		return nil, idem.Ref{}, err
	}
	return &api.RequestResult{Request: q}, idem.Ref{ID: q.ID}, nil
}

// ToolResult records the result of a call of a tool the client executes
// ([api.ToolResult]).
func (h *Host) ToolResult(ctx context.Context, p api.ToolResultParams) (*api.RequestResult, error) {
	return mutate(ctx, h, api.ToolResult, p, h.toolResult, replayRequest[api.ToolResultParams](h))
}

func (h *Host) toolResult(ctx context.Context, p api.ToolResultParams, rc *idem.Claim) (*api.RequestResult, idem.Ref, error) {
	id := p.RequestID
	var sid string
	if id != "" {
		var err error
		if sid, err = h.requestSession(ctx, id, p.SessionID); err != nil {
			return nil, idem.Ref{}, err
		}
	} else {
		var err error
		if id, sid, err = h.clientToolRequest(ctx, p.CallID, p.SessionID); err != nil {
			return nil, idem.Ref{}, err
		}
	}
	var q record.Request
	err := h.with(ctx, sid, func(s *session.Session) (err error) {
		q, err = s.ToolResult(ctx, id, p, by(ctx), rc)
		return err
	})
	if err != nil {
		return nil, idem.Ref{}, err
	}
	return &api.RequestResult{Request: q}, idem.Ref{ID: q.ID}, nil
}

// clientToolRequest finds the open request of client tool call callID:
// in session sessionID, or in any session when exactly one has it.
func (h *Host) clientToolRequest(ctx context.Context, callID, sessionID string) (id, sid string, err error) {
	p := store.ListRequestsParams{SessionID: sessionID, Statuses: []string{record.RequestOpen}, Limit: 1 << 20}
	open, err := h.cfg.Store.Requests(ctx, p)
	if err != nil {
		return "", "", apiError(err)
	}
	for _, q := range open {
		if q.Kind != event.RequestTool || q.ToolCall.ID != callID {
			continue
		}
		if id != "" {
			return "", "", invalid("sessionId", "call %s is open in several sessions: pass sessionId or requestId", callID)
		}
		id, sid = q.ID, q.SessionID
	}
	if id == "" {
		return "", "", api.Errorf(api.KindNotFound, "no open call %s of a client tool", callID).With("callId", callID)
	}
	return id, sid, nil
}

// GetRequest returns a request ([api.RequestGet]).
func (h *Host) GetRequest(ctx context.Context, p api.RequestIDParams) (*api.RequestResult, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if _, err := h.requestSession(ctx, p.RequestID, ""); err != nil {
		return nil, err
	}
	q, err := h.cfg.Store.Request(ctx, p.RequestID)
	if err != nil {
		return nil, apiError(err)
	}
	return &api.RequestResult{Request: q}, nil
}

// ListRequests lists requests (by default the open ones), oldest first
// ([api.RequestList]).
func (h *Host) ListRequests(ctx context.Context, p api.ListRequestsParams) (*api.ListRequestsResult, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if p.Limit == 0 || p.Limit > 1000 {
		p.Limit = min(max(p.Limit, 100), 1000)
	}
	lp := store.ListRequestsParams{SessionID: p.SessionID, Limit: 1 << 20}
	switch p.Status {
	case "":
		lp.Statuses = []string{record.RequestOpen}
	case "all":
	default:
		lp.Statuses = []string{p.Status}
	}
	qs, err := h.cfg.Store.Requests(ctx, lp)
	if err != nil {
		return nil, apiError(err)
	}
	if p.SessionID != "" {
		// A subagent's requests reach its parent's clients: they are
		// listed with the parent's, under the child's session ID.
		kids, err := h.descendants(ctx, p.SessionID)
		if err != nil {
			return nil, err
		}
		for _, kid := range kids {
			lp.SessionID = kid
			more, err := h.cfg.Store.Requests(ctx, lp)
			if err != nil {
				return nil, apiError(err)
			}
			qs = append(qs, more...)
		}
		if len(kids) > 0 {
			slices.SortStableFunc(qs, func(a, b record.Request) int { return a.CreatedAt.Compare(b.CreatedAt) })
		}
	}
	res := &api.ListRequestsResult{Requests: []record.Request{}}
	for _, q := range qs {
		if p.Kind != "" && q.Kind != p.Kind {
			continue
		}
		if len(res.Requests) == p.Limit {
			break
		}
		res.Requests = append(res.Requests, q)
	}
	return res, nil
}

// ListApprovals lists approvals (by default the open ones), oldest first
// ([api.ApprovalList]): ListRequests of kind approval, which p.Kind may
// only repeat.
func (h *Host) ListApprovals(ctx context.Context, p api.ListRequestsParams) (*api.ListRequestsResult, error) {
	if p.Kind != "" && p.Kind != event.RequestApproval {
		return nil, invalid("kind", "approval/list lists approvals: leave kind out, or use request/list")
	}
	p.Kind = event.RequestApproval
	return h.ListRequests(ctx, p)
}
