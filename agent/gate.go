package agent

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"weft.dev/weft/event"
	"weft.dev/weft/llm"
	"weft.dev/weft/store/record"
	"weft.dev/weft/tool"
)

// Gate decides what becomes of each tool call of a step before it runs.
// The session owner implements it over the run's approval policy, the
// tools its client executes, and the ask_user tool. Check is called from
// the run's goroutine, once per call, before any call of the step runs.
type Gate interface {
	Check(step int, call event.ToolCall) Verdict
}

// Verdict is what a [Gate] says of one tool call. The zero Verdict lets
// the call run.
type Verdict struct {
	// Refuse, if set, is the error result the model reads instead: the
	// call does not run (a policy's deny).
	Refuse string
	// Request, if set, is the event that opens a request for the call
	// (approval.requested, input.requested, tool.call.requested; its run
	// ID is filled in): the call waits for the answer, and once the step's
	// other calls are done the run parks ([Outcome.Waiting]).
	Request *event.Event
	// RequestID and Kind name that request (event.RequestApproval,
	// RequestInput, RequestTool), for closing it if the run is cancelled
	// before it parks (see [EndLog]).
	RequestID, Kind string
	// OnlyWritable, if set, names the one mount the call may write: it
	// runs with a view of the run's binding in which the other mounts
	// are read-only ([env.Binding.OnlyWritable]), as a policy's allow
	// bound to that mount requires. A mount the binding lacks, or holds
	// read-only, refuses the call.
	OnlyWritable string
}

// Admission is why a tool call runs, for [Run.Guard].
type Admission int

const (
	// Allowed: the Gate let the call run (its zero Verdict).
	Allowed Admission = iota
	// Approved: the Gate asked, and a person approved the call.
	Approved
)

// String returns "allowed" or "approved".
func (a Admission) String() string {
	if a == Approved {
		return "approved"
	}
	return "allowed"
}

// errWaiting is callTools' answer when calls of the step wait for answers.
var errWaiting = errors.New("the run waits for answers")

// ErrHostStopped is the cancel cause (context.WithCancelCause) with which
// a host stops its runs when it shuts down: a run whose step opened
// requests then parks rather than ending, so that it still waits for its
// answers when the host is back.
var ErrHostStopped = errors.New("the host stopped")

// gatedCall is a call of the current step that opened a request.
type gatedCall struct {
	call      event.ToolCall
	requestID string
	kind      string
}

// Resume is the state a parked run continues from: its step count and
// usage, and its last step's tool calls in the model's order with what
// became of each. [ResumeState] derives it from the log.
type Resume struct {
	Steps int
	Usage event.TokenUsage
	Calls []Pending
	// Budget, if set, is the budget question the run waits on at a step
	// boundary (see [BudgetVerdict]); Calls is then empty.
	Budget string

	requests map[string]string // request ID -> call ID
	started  map[string]bool   // calls that have started
}

// Apply folds an event of the run that came after its waiting step's
// assistant message into r: a result, a call that started, a request, or
// an answer to one. Other events change nothing. The host applies the
// answers it commits to the state a run parked with, so that resuming in
// the same process reads nothing back from the log; [ResumeState] folds
// the log the same way after a restart.
func (r *Resume) Apply(e event.Event) error {
	find := func(callID string) *Pending {
		for i := range r.Calls {
			if r.Calls[i].Call.ID == callID {
				return &r.Calls[i]
			}
		}
		return nil
	}
	if r.requests == nil {
		r.requests, r.started = map[string]string{}, map[string]bool{}
	}
	switch e.Type {
	case event.ToolCallStarted:
		var d event.ToolCallStartedData
		if err := e.Decode(&d); err != nil {
			return err
		}
		r.started[d.ID] = true
		if p := find(d.ID); p != nil {
			p.Run = false
		}
	case event.ToolCallCompleted:
		var d event.ToolCallCompletedData
		if err := e.Decode(&d); err != nil {
			return err
		}
		if p := find(d.ID); p != nil {
			p.Result = &llm.Message{Role: llm.RoleTool, ToolCallID: d.ID, ToolName: d.Name, Content: d.Output, IsError: d.IsError}
			p.Run, p.Refuse = false, ""
		}
	case event.ApprovalRequested:
		var d event.ApprovalRequestedData
		if err := e.Decode(&d); err != nil {
			return err
		}
		r.requests[d.ApprovalID] = d.ToolCall.ID
	case event.ApprovalResolved, event.ApprovalExpired:
		var d event.ApprovalResolvedData
		if err := e.Decode(&d); err != nil {
			return err
		}
		p := find(r.requests[d.ApprovalID])
		if p == nil || p.Result != nil {
			return nil
		}
		switch d.Decision {
		case event.DecisionAllowOnce, event.DecisionAllowSession:
			p.Run = !r.started[p.Call.ID]
		default:
			p.Refuse = refusal(e.Type, d)
		}
	}
	return nil
}

// Pending is one call of the step a run parked in.
type Pending struct {
	Call event.ToolCall
	// Result is the call's result if it has one: it ran, was refused by
	// the policy, or a client answered it.
	Result *llm.Message
	// Run is set when an approval allowed the call and it has not
	// started: it runs now, once.
	Run bool
	// Refuse is the result of a call whose approval was denied, expired
	// or cancelled, or whose request was otherwise closed without a
	// result.
	Refuse string
}

// callTools asks the Gate about each call, then records in one batch the
// requests it opened, the calls it refused (with their error results)
// and the calls that run (started); runs those in parallel and records
// each result as it finishes. It returns the results in the model's
// order, or errWaiting once the runnable calls are done when any call
// waits for an answer. When ctx is cancelled the tools are cancelled with
// it and their closing results are still written, so that no call is left
// open.
func (l *loop) callTools(ctx context.Context, calls []event.ToolCall) ([]llm.Message, error) {
	var (
		batch   []event.Event
		runs    []int
		results = make([]llm.Message, len(calls))
		only    = make([]string, len(calls))
	)
	l.gated = nil
	for i, c := range calls {
		var v Verdict
		if l.run.Gate != nil {
			v = l.run.Gate.Check(l.steps, c)
		}
		switch {
		case v.Request != nil:
			e := *v.Request
			e.RunID = l.run.ID
			batch = append(batch, e)
			l.gated = append(l.gated, gatedCall{call: c, requestID: v.RequestID, kind: v.Kind})
		case v.Refuse != "":
			results[i] = llm.Message{Role: llm.RoleTool, ToolCallID: c.ID, ToolName: c.Name, Content: v.Refuse, IsError: true}
			e, err := event.New(l.run.ID, event.ToolCallCompleted, event.ToolCallCompletedData{ID: c.ID, Name: c.Name, Output: v.Refuse, IsError: true})
			if err != nil {
				return nil, err
			}
			batch = append(batch, e)
		default:
			e, err := event.New(l.run.ID, event.ToolCallStarted, event.ToolCallStartedData{Step: l.steps, ToolCall: c})
			if err != nil {
				return nil, err
			}
			batch = append(batch, e)
			runs = append(runs, i)
			only[i] = v.OnlyWritable
		}
	}
	if err := l.emitMany(ctx, batch); err != nil {
		// Nothing was opened, and the model's calls have no result:
		// the run's end gives them one.
		l.gated = nil
		l.unstarted = calls
		return nil, err
	}
	err := l.runCalls(ctx, calls, runs, only, results, Allowed)
	if len(l.gated) > 0 && err == nil && (ctx.Err() == nil || errors.Is(context.Cause(ctx), ErrHostStopped)) {
		// What the run resumes from, as the log will say it.
		rs := &Resume{Steps: l.steps, Usage: l.usage}
		for i, c := range calls {
			p := Pending{Call: c}
			if results[i].Role != "" {
				res := results[i]
				p.Result = &res
			}
			rs.Calls = append(rs.Calls, p)
		}
		for _, e := range batch {
			if err := rs.Apply(e); err != nil {
				return nil, err
			}
		}
		l.parked = rs
		return nil, errWaiting
	}
	return results, err
}

// runCalls runs calls[i] for each i of idx in parallel, writing each
// result as it finishes into results[i] and the log. only[i], when
// only is not nil and it is set, is the one mount call i may write (see
// [Verdict.OnlyWritable]). how is why they run.
func (l *loop) runCalls(ctx context.Context, calls []event.ToolCall, idx []int, only []string, results []llm.Message, how Admission) error {
	b := l.binding()
	errs := make([]error, len(calls))
	var wg sync.WaitGroup
	// Results are written even when ctx is cancelled: the calls must close.
	wctx := context.WithoutCancel(ctx)
	var checkpoint func(context.Context) []event.Event
	if l.run.Checkpoint != nil {
		run := make([]event.ToolCall, 0, len(idx))
		for _, i := range idx {
			run = append(run, calls[i])
		}
		checkpoint = l.run.Checkpoint(ctx, b, run)
	}
	for _, i := range idx {
		c := calls[i]
		cb := b
		var narrowErr error
		if only != nil && only[i] != "" {
			cb, narrowErr = b.OnlyWritable(only[i])
		}
		wg.Go(func() {
			t0 := time.Now()
			var res tool.Result
			switch {
			case narrowErr != nil:
				res = tool.Result{Output: fmt.Sprintf("error: the policy allows this call only with mount %q as the one writable mount: %v", only[i], narrowErr), IsError: true}
			case l.tools == nil:
				res = tool.Result{Output: "error: no tools are available", IsError: true}
			default:
				if l.run.Guard != nil {
					cb = cb.WithGuard(l.run.Guard(c, how))
				}
				pr := &progress{l: l, call: c}
				res = l.tools.Call(ctx, c.Name, &tool.Call{
					ID: c.ID, SessionID: l.run.SessionID, RunID: l.run.ID,
					Arguments: []byte(c.Arguments), Env: cb, Background: l.run.Background,
					Progress: pr,
				}, tool.CallOptions{Timeout: l.cfg.ToolTimeout, ResultBudget: l.cfg.ResultBudget})
				pr.close()
			}
			// The model reads the result as the log stored it (the log
			// masks secrets), so the step's next request and a later
			// run's transcript agree.
			output, err := l.emitResult(wctx, event.ToolCallCompletedData{
				ID: c.ID, Name: c.Name, Output: res.Output, IsError: res.IsError, Truncated: res.Truncated,
				DurationMs: time.Since(t0).Milliseconds(), Failure: res.Failure, Confinement: res.Confinement,
				Attachments: res.Attachments,
			})
			results[i] = llm.Message{Role: llm.RoleTool, ToolCallID: c.ID, ToolName: c.Name, Content: output, IsError: res.IsError,
				Attachments: Attachments(res.Attachments)}
			errs[i] = err
		})
	}
	wg.Wait()
	if checkpoint != nil {
		if evs := checkpoint(wctx); len(evs) > 0 {
			for i := range evs {
				evs[i].RunID = l.run.ID
			}
			if _, err := l.log.Append(wctx, evs...); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// emitResult appends a tool call's result and returns its output as the
// log stored it.
func (l *loop) emitResult(ctx context.Context, d event.ToolCallCompletedData) (string, error) {
	e, err := event.New(l.run.ID, event.ToolCallCompleted, d)
	if err != nil {
		return d.Output, err
	}
	stored, err := l.log.Append(ctx, e)
	if err != nil || len(stored) != 1 {
		return d.Output, err
	}
	var got event.ToolCallCompletedData
	if stored[0].Decode(&got) != nil {
		return d.Output, nil
	}
	return got.Output, nil
}

// settle finishes the step a run parked in: calls an approval allowed run
// now (once), refused ones get their error result, and every result comes
// back in the model's order.
func (l *loop) settle(ctx context.Context, pending []Pending) ([]llm.Message, error) {
	if len(pending) == 0 {
		return nil, nil // it waited at a step boundary (a budget)
	}
	calls := make([]event.ToolCall, len(pending))
	results := make([]llm.Message, len(pending))
	var batch []event.Event
	var runs []int
	for i, p := range pending {
		calls[i] = p.Call
		c := p.Call
		switch {
		case p.Result != nil:
			results[i] = *p.Result
		case p.Run:
			e, err := event.New(l.run.ID, event.ToolCallStarted, event.ToolCallStartedData{Step: l.steps, ToolCall: c})
			if err != nil {
				return nil, err
			}
			batch = append(batch, e)
			runs = append(runs, i)
		default:
			out := p.Refuse
			if out == "" {
				out = "error: the request for this call was closed without an answer"
			}
			results[i] = llm.Message{Role: llm.RoleTool, ToolCallID: c.ID, ToolName: c.Name, Content: out, IsError: true}
			e, err := event.New(l.run.ID, event.ToolCallCompleted, event.ToolCallCompletedData{ID: c.ID, Name: c.Name, Output: out, IsError: true})
			if err != nil {
				return nil, err
			}
			batch = append(batch, e)
		}
	}
	if err := l.emitMany(ctx, batch); err != nil {
		return nil, err
	}
	return results, l.runCalls(ctx, calls, runs, nil, results, Approved)
}

// gatedRequests returns the requests the current step opened, and
// forgets them.
func (l *loop) gatedRequests() []record.Request {
	reqs := make([]record.Request, len(l.gated))
	for i, g := range l.gated {
		reqs[i] = record.Request{ID: g.requestID, RunID: l.run.ID, Kind: g.kind, ToolCall: g.call}
	}
	l.gated = nil
	return reqs
}

// EndLog is an optional interface of a [Log] whose run's requests are
// answered by others while the run goes on: the session owner's, where a
// client may answer an approval while another call of the step still
// runs. When a run ends (cancelled, failed) before it parks, with
// requests of its last step opened, [Execute] writes its last events
// through AppendEnd rather than Append, so that what closes those
// requests is decided against the requests still open when the batch
// commits: an answer is never overwritten by a second closing.
type EndLog interface {
	Log
	// AppendEnd appends, in one batch, the events [CloseGated] returns
	// for gated (run runID's requests, its last step's) and reason, with
	// open saying which of them are still open, followed by last; it
	// returns the batch as stored. The decision and the commit must be
	// atomic with respect to the answers: no answer may commit between
	// them.
	AppendEnd(ctx context.Context, runID string, gated []record.Request, reason string, last ...event.Event) ([]event.Event, error)
}

// CloseGated returns the events that close the gated calls of a step
// whose run ends before it settles them (reason says why: "the run was
// cancelled"), so that every call of the step has exactly one result
// and every request one resolution. A request open says is still open
// is closed as [CloseRequests] closes it. An approval already answered
// (or expired) leaves its call without a result: the call never ran, and
// gets an error result. A question or a client tool call already
// answered has its result, and gets nothing more. A nil open means all
// are open.
func CloseGated(runID string, gated []record.Request, open func(requestID string) bool, reason string) ([]event.Event, error) {
	var still []record.Request
	var evs []event.Event
	for _, q := range gated {
		if open == nil || open(q.ID) {
			still = append(still, q)
			continue
		}
		if q.Kind != event.RequestApproval {
			continue
		}
		e, err := event.New(runID, event.ToolCallCompleted, event.ToolCallCompletedData{ID: q.ToolCall.ID, Name: q.ToolCall.Name,
			Output: "error: " + reason + " before this call ran", IsError: true})
		if err != nil {
			return nil, err
		}
		evs = append(evs, e)
	}
	closing, err := CloseRequests(runID, still, reason)
	if err != nil {
		return nil, err
	}
	return append(closing, evs...), nil
}

// CloseRequests returns the events that close a run's open requests when
// the run ends without their answers (cancelled, failed): each request is
// resolved as cancelled (policy "cancel") and its tool call gets an error
// result, so that no call is left open.
func CloseRequests(runID string, open []record.Request, reason string) ([]event.Event, error) {
	by := event.By{Policy: "cancel"}
	out := "error: " + reason + " before this call was answered"
	var evs []event.Event
	add := func(t event.Type, v any) error {
		e, err := event.New(runID, t, v)
		evs = append(evs, e)
		return err
	}
	for _, q := range open {
		var err error
		switch q.Kind {
		case event.RequestApproval:
			err = add(event.ApprovalResolved, event.ApprovalResolvedData{ApprovalID: q.ID, Decision: event.DecisionCancelled, By: by})
		case event.RequestInput:
			err = add(event.InputResolved, event.InputResolvedData{RequestID: q.ID, Status: event.InputCancelled, By: by})
			if err == nil && q.ToolCall.ID == "" {
				continue // a budget question gates no call
			}
		case event.RequestTool:
			b := by
			err = add(event.ToolCallCompleted, event.ToolCallCompletedData{ID: q.ToolCall.ID, Name: q.ToolCall.Name, Output: out, IsError: true, By: &b})
			if err != nil {
				return nil, err
			}
			continue // its result closes it
		default:
			return nil, fmt.Errorf("request %s of unknown kind %q", q.ID, q.Kind)
		}
		if err != nil {
			return nil, err
		}
		if err := add(event.ToolCallCompleted, event.ToolCallCompletedData{ID: q.ToolCall.ID, Name: q.ToolCall.Name, Output: out, IsError: true}); err != nil {
			return nil, err
		}
	}
	return evs, nil
}

// ResumeTypes returns the event types [ResumeState] reads: the
// transcript's, and a run's steps, usage, tool calls and requests.
func ResumeTypes() []event.Type {
	return append(TranscriptTypes(), event.StepStarted, event.ToolCallStarted,
		event.ApprovalRequested, event.ApprovalResolved, event.ApprovalExpired,
		event.InputRequested, event.InputResolved, event.ToolCallRequested, event.RunSuspended)
}

// ResumeState derives, from a session's events (at least the
// [ResumeTypes]), what a parked run resumes from: the conversation up to
// and including the assistant message of its last step, and that step's
// calls with what became of each. An approved call that has started (a
// crash came between) is not run again: recovery has closed it. A run a
// draining host handed over (run.suspended after its last step) resumes
// at a step boundary: the conversation up to the suspension, no calls.
func ResumeState(events []event.Event, runID string) ([]llm.Message, *Resume, error) {
	last, asked, suspended := -1, -1, -1
	var step event.MessageCompletedData
	rs := &Resume{}
	for i, e := range events {
		if e.RunID != runID {
			continue
		}
		switch e.Type {
		case event.InputRequested:
			var d event.InputRequestedData
			if err := e.Decode(&d); err != nil {
				return nil, nil, err
			}
			if d.Budget != nil {
				asked, rs.Budget = i, d.RequestID
			}
		case event.MessageCompleted:
			if err := e.Decode(&step); err != nil {
				return nil, nil, err
			}
			last = i
		case event.RunSuspended:
			suspended = i
		case event.StepStarted:
			var d event.StepData
			if err := e.Decode(&d); err != nil {
				return nil, nil, err
			}
			rs.Steps = max(rs.Steps, d.Step)
		case event.Usage:
			var d event.UsageData
			if err := e.Decode(&d); err != nil {
				return nil, nil, err
			}
			rs.Usage.Add(d.Usage)
		case event.ContextCompacted:
			var d event.ContextCompactedData
			if err := e.Decode(&d); err != nil {
				return nil, nil, err
			}
			rs.Usage.Add(d.Usage)
		}
	}
	if suspended > last && suspended > asked {
		// A draining host handed the run over at a step boundary: its
		// steps so far are whole (a step whose model call it cut has no
		// message), and it goes on with the next.
		rs.Budget = ""
		history, err := Transcript(events[:suspended+1])
		return history, rs, err
	}
	if asked > last {
		// The run waits at a step boundary, on a budget question: its
		// last step is whole.
		history, err := Transcript(events[:asked+1])
		return history, rs, err
	}
	rs.Budget = ""
	if last < 0 || len(step.ToolCalls) == 0 {
		return nil, nil, fmt.Errorf("run %s has no step that waits for tool calls", runID)
	}
	history, err := Transcript(events[:last+1])
	if err != nil {
		return nil, nil, err
	}
	// The transcript closed the step's calls with placeholders: drop them.
	history = history[:len(history)-len(step.ToolCalls)]
	for _, c := range step.ToolCalls {
		rs.Calls = append(rs.Calls, Pending{Call: c})
	}
	for _, e := range events[last+1:] {
		if e.RunID != runID {
			continue
		}
		if err := rs.Apply(e); err != nil {
			return nil, nil, err
		}
	}
	return history, rs, nil
}

// refusal is what the model reads of an approval that did not allow its
// call.
func refusal(t event.Type, d event.ApprovalResolvedData) string {
	var s string
	switch {
	case t == event.ApprovalExpired:
		s = "error: denied: no one approved this call before its deadline"
	case d.Decision == event.DecisionCancelled:
		s = "error: the run was cancelled before this call was approved"
	default:
		s = "error: denied by the user"
	}
	if d.Message != "" {
		s += ": " + d.Message
	}
	return s
}
