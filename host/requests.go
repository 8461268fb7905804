package host

import (
	"context"
	"encoding/json"
	"errors"
	"regexp"
	"strconv"

	"weft.dev/weft/api"
	"weft.dev/weft/event"
	"weft.dev/weft/internal/idem"
	"weft.dev/weft/internal/session"
	"weft.dev/weft/policy"
	"weft.dev/weft/store"
	"weft.dev/weft/store/record"
)

// by is who sends the request in ctx, for the records of who answered.
func by(ctx context.Context) event.By {
	c := api.ClientFrom(ctx)
	return event.By{Client: c.Name, Transport: c.Transport}
}

// requestSession finds the session of request id (checking that it is
// want's, when set).
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
	if want != "" && q.SessionID != want {
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
// api.ErrAlreadyResolved naming who answered.
func (h *Host) DecideApproval(ctx context.Context, p api.DecideParams) (*api.RequestResult, error) {
	return h.m.decide(ctx, p)
}

func (h *Host) decide(ctx context.Context, p api.DecideParams, rc *idem.Claim) (*api.RequestResult, idem.Ref, error) {
	if err := checkSize("message", len(p.Message), api.MaxReasonBytes); err != nil {
		return nil, idem.Ref{}, err
	}
	switch p.Decision {
	case event.DecisionAllowOnce, event.DecisionAllowSession, event.DecisionDeny:
	default:
		return nil, idem.Ref{}, invalid("decision", "decision %q: want allow_once, allow_session or deny", p.Decision)
	}
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

// AnswerInput answers a question the model asked (ask_user).
func (h *Host) AnswerInput(ctx context.Context, p api.AnswerParams) (*api.RequestResult, error) {
	return h.m.answer(ctx, p)
}

func (h *Host) answer(ctx context.Context, p api.AnswerParams, rc *idem.Claim) (*api.RequestResult, idem.Ref, error) {
	if err := checkSize("text", len(p.Text), api.MaxInputBytes); err != nil {
		return nil, idem.Ref{}, err
	}
	if (p.Text == "") == (p.Choice == nil) {
		return nil, idem.Ref{}, invalid("text", "give the answer's text or a choice")
	}
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

// ToolResult records the result of a call of a tool the client executes.
func (h *Host) ToolResult(ctx context.Context, p api.ToolResultParams) (*api.RequestResult, error) {
	return h.m.toolResult(ctx, p)
}

func (h *Host) toolResult(ctx context.Context, p api.ToolResultParams, rc *idem.Claim) (*api.RequestResult, idem.Ref, error) {
	if err := checkSize("output", len(p.Output), api.MaxInputBytes); err != nil {
		return nil, idem.Ref{}, err
	}
	id := p.RequestID
	var sid string
	switch {
	case id != "":
		var err error
		if sid, err = h.requestSession(ctx, id, p.SessionID); err != nil {
			return nil, idem.Ref{}, err
		}
	case p.CallID != "":
		var err error
		if id, sid, err = h.clientToolRequest(ctx, p.CallID, p.SessionID); err != nil {
			return nil, idem.Ref{}, err
		}
	default:
		return nil, idem.Ref{}, invalid("requestId", "name the call: requestId, or callId (and sessionId)")
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

// GetRequest returns a request.
func (h *Host) GetRequest(ctx context.Context, p api.RequestIDParams) (*api.RequestResult, error) {
	if _, err := h.requestSession(ctx, p.RequestID, ""); err != nil {
		return nil, err
	}
	q, err := h.cfg.Store.Request(ctx, p.RequestID)
	if err != nil {
		return nil, apiError(err)
	}
	return &api.RequestResult{Request: q}, nil
}

// ListRequests lists requests (by default the open ones), oldest first.
func (h *Host) ListRequests(ctx context.Context, p api.ListRequestsParams) (*api.ListRequestsResult, error) {
	if p.Limit < 0 {
		return nil, invalid("limit", "limit must not be negative")
	}
	if p.Limit == 0 || p.Limit > 1000 {
		p.Limit = min(max(p.Limit, 100), 1000)
	}
	lp := store.ListRequestsParams{SessionID: p.SessionID, Limit: 1 << 20}
	switch p.Status {
	case "":
		lp.Statuses = []string{record.RequestOpen}
	case "all":
	case record.RequestOpen, record.RequestResolved, record.RequestExpired, record.RequestCancelled:
		lp.Statuses = []string{p.Status}
	default:
		return nil, invalid("status", "status %q: want open, resolved, expired, cancelled or all", p.Status)
	}
	switch p.Kind {
	case "", event.RequestApproval, event.RequestInput, event.RequestTool:
	default:
		return nil, invalid("kind", "kind %q: want approval, input or tool", p.Kind)
	}
	qs, err := h.cfg.Store.Requests(ctx, lp)
	if err != nil {
		return nil, apiError(err)
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

// toolNameRE is what providers accept as a tool name.
var toolNameRE = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// checkClientTools validates the tools a client declares.
func checkClientTools(field string, ts []api.ToolSpec) error {
	seen := map[string]bool{}
	for i, t := range ts {
		f := field + "[" + strconv.Itoa(i) + "]"
		if !toolNameRE.MatchString(t.Name) {
			return invalid(f+".name", "%s.name %q: 1 to 64 of a-z A-Z 0-9 _ -", f, t.Name)
		}
		if t.Name == session.AskUser || seen[t.Name] {
			return invalid(f+".name", "%s.name %q is taken", f, t.Name)
		}
		seen[t.Name] = true
		var schema map[string]any
		if len(t.InputSchema) == 0 || json.Unmarshal(t.InputSchema, &schema) != nil || schema["type"] != "object" {
			return invalid(f+".inputSchema", `%s.inputSchema: want a JSON Schema object ({"type":"object",…})`, f)
		}
		if err := checkSize(f+".description", len(t.Description), api.MaxMetadataBytes); err != nil {
			return err
		}
	}
	return nil
}

// checkPolicy validates a policy layer over the host's.
func (h *Host) checkPolicy(field string, p *api.Policy) (json.RawMessage, error) {
	if p == nil {
		return nil, nil
	}
	if _, err := policy.Compile(h.cfg.Policy, *p); err != nil {
		var ae *api.Error
		if errors.As(err, &ae) {
			if f, ok := ae.Data["field"].(string); ok {
				ae = ae.With("field", field+"."+f)
				ae.Message = field + "." + ae.Message
			}
			return nil, ae
		}
		return nil, invalid(field, "%s: %v", field, err)
	}
	return json.Marshal(p)
}
