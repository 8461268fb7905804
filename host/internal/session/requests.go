package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"weft.dev/weft/agent"
	"weft.dev/weft/api"
	"weft.dev/weft/event"
	"weft.dev/weft/host/internal/idem"
	"weft.dev/weft/llm"
	"weft.dev/weft/policy"
	"weft.dev/weft/store"
	"weft.dev/weft/store/record"
)

// AskUser is the name of the tool the model asks the user a question
// with; its calls become input.requested and the answer is its result.
const AskUser = "ask_user"

// askUserSpec is ask_user as the model sees it.
var askUserSpec = llm.ToolSpec{
	Name: AskUser,
	Description: "Ask the user a question and wait for the answer. Use it when you need a decision or information " +
		"only the user has; offer choices when there are a few obvious answers.",
	InputSchema: json.RawMessage(`{"type":"object","properties":{"question":{"type":"string","description":"the question"},` +
		`"choices":{"type":"array","items":{"type":"string"},"description":"answers to pick from (optional)"}},` +
		`"required":["question"],"additionalProperties":false}`),
}

// approvalOptions are the decisions an approval accepts.
var approvalOptions = []string{event.DecisionAllowOnce, event.DecisionAllowSession, event.DecisionDeny}

// gate is the session's agent.Gate for one run: client tools go to the
// client; everything else through the run's policy (the host's layer,
// the session's, the run's, and the rules the session's approvals
// added), ask_user included, which goes to the user unless a deny rule
// refuses it. An allow bound to a mount runs the call with only that
// mount writable.
type gate struct {
	s      *Session
	a      *activeRun
	client map[string]bool
}

func (g *gate) Check(step int, c event.ToolCall) agent.Verdict {
	s := g.s
	if g.client[c.Name] {
		id := s.cfg.NewID("tcr")
		e, err := event.New("", event.ToolCallRequested, event.ToolCallRequestedData{RequestID: id, Step: step, ToolCall: c})
		if err != nil {
			return agent.Verdict{Refuse: "error: " + err.Error()}
		}
		return agent.Verdict{Request: &e, RequestID: id, Kind: event.RequestTool}
	}
	set, mounts := s.policyFor(g.a)
	call := policy.Call{Tool: c.Name, Arguments: json.RawMessage(c.Arguments), Mounts: mounts, Resolve: s.resolver(set, c.Name)}
	d := set.Decide(call)
	if d.Action == api.ActionDeny {
		msg := "error: denied by policy: " + d.Reason
		if d.Detail != "" {
			msg += " (" + d.Detail + ")"
		}
		return agent.Verdict{Refuse: msg}
	}
	if c.Name == AskUser {
		// Answering the question is the approval: only a deny applies.
		var in struct {
			Question string   `json:"question"`
			Choices  []string `json:"choices"`
		}
		if err := json.Unmarshal([]byte(c.Arguments), &in); err != nil || strings.TrimSpace(in.Question) == "" {
			return agent.Verdict{Refuse: `error: ask_user needs {"question": "…", "choices": [optional]}`}
		}
		id := s.cfg.NewID("inp")
		e, err := event.New("", event.InputRequested, event.InputRequestedData{RequestID: id, Step: step, ToolCall: c,
			Question: in.Question, Choices: in.Choices, Deadline: s.deadline(s.cfg.InputTimeout)})
		if err != nil {
			return agent.Verdict{Refuse: "error: " + err.Error()}
		}
		return agent.Verdict{Request: &e, RequestID: id, Kind: event.RequestInput}
	}
	if d.Action == api.ActionAsk {
		id := s.cfg.NewID("apr")
		def := d.Default
		if def == "" || def == api.ActionDeny {
			def = event.DecisionDeny
		} else {
			def = event.DecisionAllowOnce
		}
		data := event.ApprovalRequestedData{ApprovalID: id, Step: step, ToolCall: c,
			Rule: recordedRule(d), Options: approvalOptions, Deadline: s.deadline(d.Timeout), Default: def}
		if d.Final {
			// No session rule lifts a final ask: "always" would not hold.
			data.Options = []string{event.DecisionAllowOnce, event.DecisionDeny}
		} else {
			r := sessionRuleRecord(policy.SessionRuleFor(call))
			data.SessionRule = &r
		}
		if d.Detail != "" {
			data.Rule.Reason = strings.TrimSpace(data.Rule.Reason + " (" + d.Detail + ")")
		}
		e, err := event.New("", event.ApprovalRequested, data)
		if err != nil {
			return agent.Verdict{Refuse: "error: " + err.Error()}
		}
		return agent.Verdict{Request: &e, RequestID: id, Kind: event.RequestApproval}
	}
	return agent.Verdict{OnlyWritable: d.OnlyWritable}
}

// sessionRuleRecord is an "always for this session" rule as the log
// records it.
func sessionRuleRecord(r api.Rule) event.Rule {
	rec := event.Rule{Tool: r.Tool, Action: r.Action, Reason: r.Reason, Source: "session"}
	if m, err := json.Marshal(r.Match); err == nil && string(m) != "{}" {
		rec.Match = m
	}
	return rec
}

// recordedRule is the rule of a decision as the log records it.
func recordedRule(d policy.Decision) event.Rule {
	r := event.Rule{Action: d.Action, Reason: d.Reason, Source: "default", Tool: "*", Final: d.Final}
	if d.Rule != nil {
		r.Tool = d.Rule.Tool
		if m, err := json.Marshal(d.Rule.Match); err == nil && string(m) != "{}" {
			r.Match = m
		}
	}
	switch {
	case d.Preset != "":
		r.Source = "preset:" + d.Preset
	case d.Layer == policy.LayerConfig:
		r.Source = "config"
	case d.Layer == policy.LayerSession:
		r.Source = "session"
	case d.Layer == policy.LayerRun:
		r.Source = "run"
	}
	return r
}

// deadline is now + d, or nil for no deadline.
func (s *Session) deadline(d time.Duration) *time.Time {
	if d <= 0 {
		return nil
	}
	t := time.Now().Add(d).UTC()
	return &t
}

// policyFor returns the run's compiled policy with the rules the
// session's approvals added, and the session's mounts.
func (s *Session) policyFor(a *activeRun) (*policy.Set, []event.Mount) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if a.approvedB != a.policy || a.nApproved > len(s.approved) {
		a.approved, a.approvedB, a.nApproved = a.policy, a.policy, 0
	}
	set := a.approved
	for _, r := range s.approved[a.nApproved:] {
		if ns, err := set.WithSessionRule(r); err == nil {
			set = ns
		}
	}
	a.approved, a.nApproved = set, len(s.approved)
	var mounts []event.Mount
	if b, err := s.bindingLocked(); err == nil {
		mounts = b.Mounts()
	}
	return set, mounts
}

// compilePolicy layers the host's policy, the session's and the run's;
// when none of them names a preset, defaultPreset (if set) is the host
// layer's, under the host's own rules and every rule of the layers above.
func (s *Session) compilePolicy(run json.RawMessage, defaultPreset string) (*policy.Set, error) {
	layers := []api.Policy{s.cfg.Policy, {}, {}}
	if raw := s.j.Session().Policy; len(raw) > 0 {
		if err := json.Unmarshal(raw, &layers[1]); err != nil {
			return nil, fmt.Errorf("session policy: %w", err)
		}
	}
	if len(run) > 0 {
		if err := json.Unmarshal(run, &layers[2]); err != nil {
			return nil, fmt.Errorf("run policy: %w", err)
		}
	}
	if !slices.ContainsFunc(layers, func(p api.Policy) bool { return p.Preset != "" }) {
		layers[policy.LayerConfig].Preset = defaultPreset
	}
	return policy.Compile(layers...)
}

// clientTools returns the tools the run's client executes: the session's
// and the run's, and ask_user.
func (s *Session) clientTools(q queuedRun) ([]llm.ToolSpec, map[string]bool) {
	specs := []llm.ToolSpec{askUserSpec}
	names := map[string]bool{}
	for _, t := range append(slices.Clone(s.j.Session().Tools), q.tools...) {
		if names[t.Name] {
			continue
		}
		names[t.Name] = true
		specs = append(specs, llm.ToolSpec{Name: t.Name, Description: t.Description, InputSchema: t.InputSchema})
	}
	return specs, names
}

// request returns the record of request id of this session, open or not.
func (s *Session) request(ctx context.Context, id string) (record.Request, error) {
	for _, q := range s.j.OpenRequests() {
		if q.ID == id {
			return q, nil
		}
	}
	q, err := s.cfg.Store.Request(ctx, id)
	if errors.Is(err, store.ErrNotFound) || err == nil && q.SessionID != s.id {
		return record.Request{}, api.Errorf(api.KindNotFound, "request %s not found in session %s", id, s.id).With("requestId", id).With("sessionId", s.id)
	}
	if err != nil {
		return record.Request{}, s.writeErr(err)
	}
	return q, nil
}

// alreadyResolved is the error of an answer to a request that is closed.
func alreadyResolved(q record.Request) error {
	e := api.Errorf(api.KindAlreadyResolved, "request %s is already %s", q.ID, q.Status).
		With("requestId", q.ID).With("status", q.Status)
	if q.Decision != "" {
		e = e.With("decision", q.Decision)
	}
	if q.By != nil {
		who := q.By.Client
		if who == "" {
			who = q.By.Policy
		}
		if who == "" {
			who = q.By.Transport
		}
		e = e.With("resolvedBy", who)
		e.Message += fmt.Sprintf(" (by %s)", who)
	}
	return e
}

// Decide answers approval p.ApprovalID with p.Decision. The first answer
// wins: approval.resolved records it and who answered (with rc's receipt
// in the same transaction); an approval that is closed is
// api.ErrAlreadyResolved. allow_session also adds a session rule. Once
// the run has no open request, it resumes.
func (s *Session) Decide(ctx context.Context, p api.DecideParams, by event.By, rc *idem.Claim) (record.Request, error) {
	var out record.Request
	err := s.command(func() error {
		q, err := s.request(ctx, p.ApprovalID)
		if err != nil {
			return err
		}
		if q.Kind != event.RequestApproval {
			return api.Errorf(api.KindInvalidParams, "request %s is a %s, not an approval", q.ID, q.Kind).With("requestId", q.ID)
		}
		if q.Status != record.RequestOpen {
			return alreadyResolved(q)
		}
		if !slices.Contains(q.Options, p.Decision) {
			return api.Errorf(api.KindInvalidParams, "decision %q is not one of %s", p.Decision, strings.Join(q.Options, ", ")).
				With("field", "decision").With("options", q.Options)
		}
		e, err := event.New(q.RunID, event.ApprovalResolved, event.ApprovalResolvedData{ApprovalID: q.ID, Decision: p.Decision, Message: p.Message, By: by})
		if err != nil {
			return err
		}
		if _, err := s.append(ctx, rc, idem.Ref{ID: q.ID}, e); err != nil {
			return err
		}
		s.foldParked(q.RunID, e)
		if p.Decision == event.DecisionAllowSession {
			s.approved = append(s.approved, policy.SessionRuleFor(s.policyCall(q.ToolCall)))
		}
		s.deadlines.stop(q.ID)
		s.resumeIfAnswered(q.RunID)
		out, _ = s.request(ctx, q.ID)
		return nil
	})
	return out, err
}

// policyCall is call as the policy sees it, with the session's mounts.
func (s *Session) policyCall(c event.ToolCall) policy.Call {
	pc := policy.Call{Tool: c.Name, Arguments: json.RawMessage(c.Arguments)}
	if b, err := s.bindingLocked(); err == nil {
		pc.Mounts = b.Mounts()
	}
	return pc
}

// Answer answers the question p.RequestID (text, or the index of a
// choice): input.resolved and the ask_user call's result are committed
// together. Errors as for Decide.
func (s *Session) Answer(ctx context.Context, p api.AnswerParams, by event.By, rc *idem.Claim) (record.Request, error) {
	var out record.Request
	err := s.command(func() error {
		q, err := s.request(ctx, p.RequestID)
		if err != nil {
			return err
		}
		if q.Kind != event.RequestInput {
			return api.Errorf(api.KindInvalidParams, "request %s is a %s, not a question", q.ID, q.Kind).With("requestId", q.ID)
		}
		if q.Status != record.RequestOpen {
			return alreadyResolved(q)
		}
		text := p.Text
		if p.Choice != nil {
			if *p.Choice < 0 || *p.Choice >= len(q.Choices) {
				return api.Errorf(api.KindInvalidParams, "choice %d is not one of the question's %d choices", *p.Choice, len(q.Choices)).
					With("field", "choice").With("choices", q.Choices)
			}
			text = q.Choices[*p.Choice]
		}
		if strings.TrimSpace(text) == "" {
			return api.Errorf(api.KindInvalidParams, "the answer is empty: give text or a choice").With("field", "text")
		}
		if q.Budget != nil {
			if err := s.answerBudget(ctx, q, text, p.Choice, by, rc); err != nil {
				return err
			}
			out, _ = s.request(ctx, q.ID)
			return nil
		}
		r, err := event.New(q.RunID, event.InputResolved, event.InputResolvedData{RequestID: q.ID, Status: event.InputAnswered, Text: text, Choice: p.Choice, By: by})
		if err != nil {
			return err
		}
		c, err := event.New(q.RunID, event.ToolCallCompleted, event.ToolCallCompletedData{ID: q.ToolCall.ID, Name: q.ToolCall.Name, Output: text})
		if err != nil {
			return err
		}
		if _, err := s.append(ctx, rc, idem.Ref{ID: q.ID}, r, c); err != nil {
			return err
		}
		s.foldParked(q.RunID, r, c)
		s.deadlines.stop(q.ID)
		s.resumeIfAnswered(q.RunID)
		out, _ = s.request(ctx, q.ID)
		return nil
	})
	return out, err
}

// ToolResult records the result of a call of a tool the client executes
// (request requestID): the call's tool.call.completed closes the request.
// Errors as for Decide.
func (s *Session) ToolResult(ctx context.Context, requestID string, p api.ToolResultParams, by event.By, rc *idem.Claim) (record.Request, error) {
	var out record.Request
	err := s.command(func() error {
		q, err := s.request(ctx, requestID)
		if err != nil {
			return err
		}
		if q.Kind != event.RequestTool {
			return api.Errorf(api.KindInvalidParams, "request %s is a %s, not a client tool call", q.ID, q.Kind).With("requestId", q.ID)
		}
		if q.Status != record.RequestOpen {
			return alreadyResolved(q)
		}
		b := by
		e, err := event.New(q.RunID, event.ToolCallCompleted, event.ToolCallCompletedData{ID: q.ToolCall.ID, Name: q.ToolCall.Name,
			Output: p.Output, IsError: p.IsError, By: &b})
		if err != nil {
			return err
		}
		if _, err := s.append(ctx, rc, idem.Ref{ID: q.ID}, e); err != nil {
			return err
		}
		s.foldParked(q.RunID, e)
		s.resumeIfAnswered(q.RunID)
		out, _ = s.request(ctx, q.ID)
		return nil
	})
	return out, err
}

// foldParked applies answers just committed to the state the parked run
// runID resumes from. Called by commands.
func (s *Session) foldParked(runID string, evs ...event.Event) {
	a := s.active
	if a == nil || a.id != runID || !a.parked || a.resume == nil {
		return
	}
	for _, e := range evs {
		if err := a.resume.Apply(e); err != nil {
			// The log is the truth: resume from it.
			a.resume, a.history = nil, nil
			return
		}
	}
}

// ClientToolRequest returns the open request of the client tool call
// callID, if the session has one.
func (s *Session) ClientToolRequest(callID string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, q := range s.j.OpenRequests() {
		if q.Kind == event.RequestTool && q.ToolCall.ID == callID {
			return q.ID, true
		}
	}
	return "", false
}

// OpenRequests returns the session's open requests, oldest first.
func (s *Session) OpenRequests() []record.Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.j.OpenRequests()
}

// resumeIfAnswered resumes the parked active run runID once it has no
// open request. Called by commands.
func (s *Session) resumeIfAnswered(runID string) {
	a := s.active
	if a == nil || a.id != runID || !a.parked || s.handingOver {
		return
	}
	if r, ok := s.j.Run(runID); !ok || len(r.Requests) > 0 {
		return
	}
	s.launch(a, true)
}

// cancelParked ends the parked active run: its open requests are
// resolved as cancelled and their calls closed, its steers dropped, and
// run.cancelled written, in one batch with the receipts of rc and of the
// cancels that came while the run was going. Called with mu held.
func (s *Session) cancelParked(ctx context.Context, a *activeRun, reason string, rc *idem.Claim) error {
	return s.endParked(ctx, a, parkedEnd{reason: reason, ref: idem.Ref{ID: a.id}}, rc)
}

// parkedEnd is how endParked ends a parked run.
type parkedEnd struct {
	// pre are events committed first, in the same batch: the answer that
	// ends the run.
	pre []event.Event
	// answered is the request pre answers, left out of those closed.
	answered string
	// failure, if set, ends the run as failed with it; else it is
	// cancelled with reason.
	failure *event.Error
	reason  string
	// ref is what rc's receipt names.
	ref idem.Ref
}

// endParked ends the parked active run as end says: its other open
// requests are resolved as cancelled and their calls closed, its steers
// dropped, and its terminal event written, in one batch with the
// receipts of rc and of the cancels that came while the run was going.
// Called with mu held.
func (s *Session) endParked(ctx context.Context, a *activeRun, end parkedEnd, rc *idem.Claim) error {
	why := "the run was cancelled"
	if end.failure != nil {
		why = "the run ended"
	}
	var open []record.Request
	for _, q := range s.j.OpenRequests() {
		if q.RunID == a.id {
			s.deadlines.stop(q.ID)
			if q.ID != end.answered {
				open = append(open, q)
			}
		}
	}
	closing, err := agent.CloseRequests(a.id, open, why)
	if err != nil {
		return err
	}
	evs := append(append([]event.Event(nil), end.pre...), closing...)
	// Calls whose request was answered but that have not run (or been
	// refused) yet close too: no call is left open.
	closed := map[string]bool{}
	for _, q := range open {
		closed[q.ToolCall.ID] = true
	}
	log, err := s.readAll(ctx, 0, agent.ResumeTypes())
	if err != nil {
		return s.writeErr(err)
	}
	if _, rs, err := agent.ResumeState(log, a.id); err == nil {
		for _, p := range rs.Calls {
			if p.Result != nil || closed[p.Call.ID] {
				continue
			}
			e, err := event.New(a.id, event.ToolCallCompleted, event.ToolCallCompletedData{ID: p.Call.ID, Name: p.Call.Name,
				Output: "error: " + why + " before this call ran", IsError: true})
			if err != nil {
				return err
			}
			evs = append(evs, e)
		}
	}
	for _, st := range a.inbox.Close() {
		e, err := event.New(a.id, event.SteerDropped, event.SteerData{SteerID: st.ID, Input: st.Input, Reason: why + " before the steer was consumed"})
		if err != nil {
			return err
		}
		evs = append(evs, e)
	}
	r, _ := s.j.Run(a.id)
	e, err := event.New(a.id, event.RunCancelled, event.RunEndedData{Steps: r.Steps, Usage: r.Usage, Reason: end.reason})
	if end.failure != nil {
		e, err = event.New(a.id, event.RunFailed, event.RunEndedData{Steps: r.Steps, Usage: r.Usage, Error: end.failure})
	}
	if err != nil {
		return err
	}
	evs = append(evs, e)
	claims := a.receipts.take()
	ref := end.ref
	rcpts := rc.Receipts(s.id, ref)
	for _, c := range claims {
		rcpts = append(rcpts, c.Receipt(s.id, idem.Ref{ID: a.id}))
	}
	_, err = s.j.AppendReceipts(ctx, rcpts, evs...)
	if err != nil && len(claims) > 0 && errors.Is(err, store.ErrReceiptExists) {
		// Another writer stored the key of a cancel that came while the
		// run went on: those cancels are answered from the stored
		// receipts, and this one still ends the run.
		claims = nil
		_, err = s.j.AppendReceipts(ctx, rc.Receipts(s.id, ref), evs...)
	}
	if err != nil {
		a.receipts.putBack(claims)
		return s.writeErr(err)
	}
	rc.Stored()
	for _, c := range claims {
		c.Stored()
	}
	s.active = nil
	s.closeRetired()
	s.startNext()
	s.settle(a.id)
	return nil
}

// scheduleDeadlines starts a timer for each request of evs that has a
// deadline; at the deadline the request expires.
func (s *Session) scheduleDeadlines(evs []event.Event) {
	for _, e := range evs {
		var id string
		var deadline *time.Time
		switch e.Type {
		case event.ApprovalRequested:
			var d event.ApprovalRequestedData
			if e.Decode(&d) != nil {
				continue
			}
			id, deadline = d.ApprovalID, d.Deadline
		case event.InputRequested:
			var d event.InputRequestedData
			if e.Decode(&d) != nil {
				continue
			}
			id, deadline = d.RequestID, d.Deadline
		default:
			continue
		}
		if deadline != nil {
			s.deadlines.start(id, *deadline)
		}
	}
}

// expire ends request id at its deadline: an approval with its default
// decision (approval.expired), a question with no answer (its call gets
// an error result); then the run resumes if nothing else is open.
func (s *Session) expire(id string) {
	err := s.command(func() error {
		ctx := s.ctx
		q, err := s.request(ctx, id)
		if err != nil || q.Status != record.RequestOpen {
			return err
		}
		var evs []event.Event
		switch q.Kind {
		case event.RequestApproval:
			e, err := event.New(q.RunID, event.ApprovalExpired, event.ApprovalResolvedData{ApprovalID: q.ID, Decision: q.Default, By: event.By{Policy: "deadline"}})
			if err != nil {
				return err
			}
			evs = append(evs, e)
		case event.RequestInput:
			r, err := event.New(q.RunID, event.InputResolved, event.InputResolvedData{RequestID: q.ID, Status: event.InputExpired, By: event.By{Policy: "deadline"}})
			if err != nil {
				return err
			}
			c, err := event.New(q.RunID, event.ToolCallCompleted, event.ToolCallCompletedData{ID: q.ToolCall.ID, Name: q.ToolCall.Name,
				Output: "error: the user did not answer before the deadline", IsError: true})
			if err != nil {
				return err
			}
			evs = append(evs, r, c)
		default:
			return nil
		}
		if _, err := s.append(ctx, nil, idem.Ref{}, evs...); err != nil {
			return err
		}
		s.foldParked(q.RunID, evs...)
		s.resumeIfAnswered(q.RunID)
		return nil
	})
	if err != nil && !errors.Is(err, ErrClosed) {
		s.cfg.Logger.Warn("expire a request", "session", s.id, "request", id, "err", err)
	}
}

// restore brings back, on load, what the session had going: the rules
// its allow_session answers added, a run that waits for answers
// (parked, its unconsumed steers back in its inbox, its deadlines set;
// resumed at once if its answers are all in, as after a crash between
// the last answer and the resume), and the queued runs behind it (see
// restoreQueue).
func (s *Session) restore(ctx context.Context) error {
	resolved, err := s.cfg.Store.Requests(ctx, store.ListRequestsParams{SessionID: s.id, Statuses: []string{record.RequestResolved}, Limit: 1 << 30})
	if err != nil {
		return storageErr(s.id, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, q := range resolved {
		if q.Decision == event.DecisionAllowSession {
			s.approved = append(s.approved, policy.SessionRuleFor(s.policyCall(q.ToolCall)))
		}
	}
	if err := s.restoreParked(ctx); err != nil {
		return err
	}
	return s.restoreQueue(ctx)
}

// restoreParked restores the run that waits for answers, if any. Called
// with mu held.
func (s *Session) restoreParked(ctx context.Context) error {
	id := s.j.Session().ActiveRunID
	if r, ok := s.j.Run(id); !ok || r.Status != record.RunWaiting {
		return nil
	}
	q, err := s.parkedFromLog(ctx, id)
	if err != nil {
		return err
	}
	a := &activeRun{id: id, q: q, inbox: &agent.Steers{}, parked: true, finished: make(chan struct{})}
	close(a.finished)
	for _, st := range q.steers {
		a.inbox.Add(nil, st)
	}
	a.q.steers = nil
	s.active = a
	s.track(id)
	for _, q := range s.j.OpenRequests() {
		if q.RunID == id && q.Deadline != nil {
			s.deadlines.start(q.ID, *q.Deadline)
		}
	}
	s.resumeIfAnswered(id)
	return nil
}

// parkedFromLog reads the log of run id, which waits for answers: what
// it was admitted with, and the steers that wait for its next step.
func (s *Session) parkedFromLog(ctx context.Context, id string) (queuedRun, error) {
	evs, err := s.cfg.Store.Read(ctx, store.ReadParams{SessionID: s.id, RunID: id, Limit: 1 << 30,
		Types: []event.Type{event.RunQueued, event.SteerAccepted, event.SteerConsumed, event.SteerDropped}})
	if err != nil {
		return queuedRun{}, storageErr(s.id, err)
	}
	q, err := runFromLog(evs, id)
	if err != nil {
		return queuedRun{}, fmt.Errorf("session %s: %w", s.id, err)
	}
	return q, nil
}
