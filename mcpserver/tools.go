package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"weft.dev/weft/api"
	"weft.dev/weft/event"
	"weft.dev/weft/store/record"
)

// enum returns a schema edit that restricts property prop to values.
func enum(prop string, values ...string) func(*jsonschema.Schema) {
	return func(s *jsonschema.Schema) {
		p := s.Properties[prop]
		for _, v := range values {
			p.Enum = append(p.Enum, v)
		}
	}
}

// falsePtr is a new pointer to false, for the annotations' optional
// hints.
func falsePtr() *bool { return new(bool) }

func (s *server) register(ms *mcp.Server) {
	addTool(s, ms, &mcp.Tool{
		Name:        "start_run",
		Description: "Start a run of weft's agent on a prompt, in a session or a new one. It answers at once with the runId and sessionId: a durable handle to await_run now or after a restart.",
		Annotations: &mcp.ToolAnnotations{Title: "Start a run", DestructiveHint: falsePtr(), OpenWorldHint: falsePtr()},
	}, func(s *jsonschema.Schema) {
		enum("busy", api.BusyReject, api.BusyQueue, api.BusyInterrupt, api.BusySteer)(s)
		enum("approval", api.PresetReadOnly, api.PresetAskWrites, api.PresetAskAll, api.PresetNeverAsk)(s)
	}, s.startRun)
	addTool(s, ms, &mcp.Tool{
		Name:        "await_run",
		Description: "Wait until a run ends, or asks for an answer (an approval or a question), or the timeout passes; then answer with its status, final answer, usage and open requests. Call it again while done is false.",
		Annotations: &mcp.ToolAnnotations{Title: "Await a run", ReadOnlyHint: true, IdempotentHint: true},
	}, nil, s.awaitRun)
	addTool(s, ms, &mcp.Tool{
		Name:        "get_run",
		Description: "A run's status now, with its final answer once completed, its usage and its open requests.",
		Annotations: &mcp.ToolAnnotations{Title: "Get a run", ReadOnlyHint: true, IdempotentHint: true},
	}, nil, s.getRun)
	addTool(s, ms, &mcp.Tool{
		Name:        "read_events",
		Description: "A page of a session's event log after a cursor (messages, tool calls and results, approvals, usage, run ends), optionally one run's or some types'. Pass nextCursor as after to read on.",
		Annotations: &mcp.ToolAnnotations{Title: "Read events", ReadOnlyHint: true, IdempotentHint: true},
	}, nil, s.readEvents)
	addTool(s, ms, &mcp.Tool{
		Name:        "steer",
		Description: "Tell an active run something: the agent reads it at its next step.",
		Annotations: &mcp.ToolAnnotations{Title: "Steer a run", DestructiveHint: falsePtr(), OpenWorldHint: falsePtr()},
	}, nil, s.steer)
	addTool(s, ms, &mcp.Tool{
		Name:        "cancel_run",
		Description: "Cancel a run (queued, running or waiting); a run that has ended is answered as it is.",
		Annotations: &mcp.ToolAnnotations{Title: "Cancel a run", IdempotentHint: true, OpenWorldHint: falsePtr()},
	}, nil, s.cancelRun)
	addTool(s, ms, &mcp.Tool{
		Name:        "list_sessions",
		Description: "The host's sessions, a page at a time.",
		Annotations: &mcp.ToolAnnotations{Title: "List sessions", ReadOnlyHint: true, IdempotentHint: true},
	}, nil, s.listSessions)
	addTool(s, ms, &mcp.Tool{
		Name:        "create_session",
		Description: "Create a session with a model and the directories it works in, without starting a run.",
		Annotations: &mcp.ToolAnnotations{Title: "Create a session", DestructiveHint: falsePtr(), OpenWorldHint: falsePtr()},
	}, nil, s.createSession)
	addTool(s, ms, &mcp.Tool{
		Name:        "list_approvals",
		Description: "The approvals of tool calls and the questions of the agent that wait for an answer, oldest first.",
		Annotations: &mcp.ToolAnnotations{Title: "List approvals", ReadOnlyHint: true, IdempotentHint: true},
	}, nil, s.listApprovals)
	addTool(s, ms, &mcp.Tool{
		Name:        "answer_approval",
		Description: "Answer an approval: allow_once, allow_session (always, for the rest of the session) or deny with a message for the agent. The first answer wins.",
		Annotations: &mcp.ToolAnnotations{Title: "Answer an approval", OpenWorldHint: falsePtr()},
	}, enum("decision", event.DecisionAllowOnce, event.DecisionAllowSession, decisionAlways, event.DecisionDeny), s.answerApproval)
	addTool(s, ms, &mcp.Tool{
		Name:        "answer_question",
		Description: "Answer a question the agent asked, with a text or the index of one of its choices.",
		Annotations: &mcp.ToolAnnotations{Title: "Answer a question", DestructiveHint: falsePtr(), OpenWorldHint: falsePtr()},
	}, nil, s.answerQuestion)
}

func (s *server) startRun(ctx context.Context, _ *mcp.CallToolRequest, in StartRunInput) (*RunOutput, error) {
	if strings.TrimSpace(in.Prompt) == "" {
		return nil, api.InvalidParam("prompt", "the prompt is empty")
	}
	out := &RunOutput{}
	sid := in.SessionID
	if sid == "" {
		mounts, err := s.mounts(in.Mounts)
		if err != nil {
			return nil, err
		}
		title := in.Title
		if title == "" {
			title = titleOf(in.Prompt)
		}
		sp := api.CreateSessionParams{Title: title, Model: in.Model, Mounts: mounts}
		if in.IdempotencyKey != "" {
			sp.IdempotencyKey = in.IdempotencyKey + ".session"
		}
		ses, err := s.h.CreateSession(ctx, sp)
		if err != nil {
			return nil, err
		}
		sid, out.SessionCreated = ses.ID, !ses.Replayed
	} else if len(in.Mounts) > 0 || in.Title != "" {
		return nil, api.InvalidParam("mounts", "mounts and title are a new session's: omit them with sessionId")
	}
	p := api.StartRunParams{
		SessionID: sid, Input: api.Input(event.TextParts(in.Prompt)), Busy: in.Busy, MaxSteps: in.MaxSteps,
		DefaultPreset: s.opts.DefaultPreset, IdempotencyKey: in.IdempotencyKey,
	}
	if in.SessionID != "" {
		p.Model = in.Model
	}
	if in.Approval != "" {
		p.Policy = &api.Policy{Preset: in.Approval}
	}
	r, err := s.h.StartRun(ctx, p)
	if err != nil {
		if out.SessionCreated {
			// Leave no empty session behind a refused run.
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			s.h.DeleteSession(dctx, api.SessionIDParams{SessionID: sid})
			cancel()
		}
		return nil, err
	}
	runOut(out, r.Run)
	out.Replayed = r.Replayed
	if r.Steer != nil {
		out.Steer = steerOut(r.Steer)
	}
	return out, nil
}

// titleOf is a session's title from its first prompt: its first line, at
// most 60 bytes (on a rune boundary).
func titleOf(prompt string) string {
	t, _, _ := strings.Cut(strings.TrimSpace(prompt), "\n")
	if len(t) > 60 {
		n := 60
		for n > 0 && !utf8.RuneStart(t[n]) {
			n--
		}
		t = t[:n] + "…"
	}
	return t
}

// slugRe is compiled on first use, not at start: most commands never need it.
var slugRe = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`[^a-z0-9_-]+`) })

// mounts builds a new session's mount table from args: the first mount
// is the default (and the shells' if it is writable); none means
// Options.Dir as "work", or the host's default when Dir is empty.
func (s *server) mounts(args []MountArg) ([]event.Mount, error) {
	if len(args) == 0 {
		if s.opts.Dir == "" {
			return nil, nil
		}
		args = []MountArg{{Path: s.opts.Dir, ID: "work"}}
	}
	out := make([]event.Mount, 0, len(args))
	seen := map[string]bool{}
	for i, a := range args {
		field := fmt.Sprintf("mounts[%d].path", i)
		path := a.Path
		switch {
		case path == "":
			return nil, api.InvalidParam(field, "the directory is required")
		case !filepath.IsAbs(path) && s.opts.Dir == "":
			return nil, api.InvalidParam(field, "%q is relative: give an absolute path", path)
		case !filepath.IsAbs(path):
			path = filepath.Join(s.opts.Dir, path)
		}
		path = filepath.Clean(path)
		id := a.ID
		if id == "" {
			id = strings.Trim(slugRe().ReplaceAllString(strings.ToLower(filepath.Base(path)), "-"), "-")
			if id == "" {
				id = "mount"
			}
			for base, n := id, 2; seen[id]; n++ {
				id = fmt.Sprintf("%s-%d", base, n)
			}
		}
		if seen[id] {
			return nil, api.InvalidParam(fmt.Sprintf("mounts[%d].id", i), "mount id %q is taken", id)
		}
		seen[id] = true
		m := event.Mount{ID: id, Kind: event.KindLocal, Path: path, Mode: event.ModeReadWrite}
		if a.ReadOnly {
			m.Mode = event.ModeReadOnly
		}
		if i == 0 {
			m.Default, m.DefaultForShell = true, !a.ReadOnly
		}
		out = append(out, m)
	}
	return out, nil
}

// runOut fills o from run r.
func runOut(o *RunOutput, r record.Run) {
	o.RunID, o.SessionID, o.Status = r.ID, r.SessionID, r.Status
	o.Done = record.IsTerminal(r.Status)
	o.Error, o.Steps, o.Usage, o.LastSeq = r.Error, r.Steps, r.Usage, r.LastSeq
}

func steerOut(r *api.SteerReceipt) *SteerOutput {
	return &SteerOutput{SteerID: r.SteerID, RunID: r.RunID, Status: r.Status, EventCursor: r.EventCursor, Replayed: r.Replayed}
}

// describe is the full answer about run r: its final answer once
// completed, its open requests while waiting.
func (s *server) describe(ctx context.Context, r record.Run) (*RunOutput, error) {
	out := &RunOutput{}
	runOut(out, r)
	switch r.Status {
	case record.RunCompleted:
		a, err := s.answer(ctx, r)
		if err != nil {
			return nil, err
		}
		out.Answer = a
	case record.RunWaiting:
		open, err := s.unanswered(ctx, r)
		if err != nil || len(open) == 0 {
			return out, err
		}
		reqs, err := s.openRequests(ctx, r.SessionID, r.ID)
		if err != nil {
			return nil, err
		}
		for _, q := range reqs {
			if open[q.ID] {
				out.PendingRequests = append(out.PendingRequests, q)
			}
		}
	}
	return out, nil
}

// unanswered returns the requests of waiting run r that its log shows no
// answer to. A run stays waiting from its last answer until its loop
// resumes it (run.resumed), so its status alone does not say whether it
// still asks. The requests are those after the step's start or the last
// resume, read back from the end of the run's events.
func (s *server) unanswered(ctx context.Context, r record.Run) (map[string]bool, error) {
	low := max(r.FirstSeq-1, 0)
	for span := int64(answerWindow); ; span *= 4 {
		after := max(r.LastSeq-span, low)
		var events []event.Event
		for cur := after; cur < r.LastSeq; {
			page, err := s.h.ReadEvents(ctx, api.ReadEventsParams{SessionID: r.SessionID, RunID: r.ID, After: cur, Limit: int(min(r.LastSeq-cur, 1000))})
			if err != nil {
				return nil, err
			}
			events = append(events, page.Events...)
			if !page.HasMore || page.NextCursor <= cur {
				break
			}
			cur = page.NextCursor
		}
		start := -1
		for i, e := range events {
			if e.Type == event.StepStarted || e.Type == event.RunResumed {
				start = i
			}
		}
		if start < 0 && after > low {
			continue // the step began before the window
		}
		return openIn(events[start+1:]), nil
	}
}

// openIn returns the requests that events open and do not answer.
func openIn(events []event.Event) map[string]bool {
	open := map[string]bool{}
	calls := map[string]string{} // a client tool call's ID → its request
	for _, e := range events {
		switch e.Type {
		case event.ApprovalRequested:
			var d event.ApprovalRequestedData
			if e.Decode(&d) == nil {
				open[d.ApprovalID] = true
			}
		case event.InputRequested:
			var d event.InputRequestedData
			if e.Decode(&d) == nil {
				open[d.RequestID] = true
			}
		case event.ToolCallRequested:
			var d event.ToolCallRequestedData
			if e.Decode(&d) == nil {
				open[d.RequestID] = true
				calls[d.ToolCall.ID] = d.RequestID
			}
		case event.ApprovalResolved, event.ApprovalExpired:
			var d event.ApprovalResolvedData
			if e.Decode(&d) == nil {
				delete(open, d.ApprovalID)
			}
		case event.InputResolved:
			var d event.InputResolvedData
			if e.Decode(&d) == nil {
				delete(open, d.RequestID)
			}
		case event.ToolCallCompleted:
			var d event.ToolCallCompletedData
			if e.Decode(&d) == nil {
				delete(open, calls[d.ID])
			}
		}
	}
	return open
}

// answerWindow is how many of a run's last events answer reads at a
// time, looking back for its last message.
const answerWindow = 32

// answer is the text of run r's last assistant message, read back from
// the end of its events.
func (s *server) answer(ctx context.Context, r record.Run) (string, error) {
	low := max(r.FirstSeq-1, 0)
	hi := r.LastSeq
	for span := int64(answerWindow); hi > low; span *= 4 {
		after := max(hi-span, low)
		text, found := "", false
		for cur := after; cur < hi; {
			page, err := s.h.ReadEvents(ctx, api.ReadEventsParams{SessionID: r.SessionID, RunID: r.ID, After: cur, Limit: int(min(hi-cur, 1000))})
			if err != nil {
				return "", err
			}
			for _, e := range page.Events {
				if e.Seq > hi {
					break
				}
				if e.Type == event.MessageCompleted {
					var d event.MessageCompletedData
					if err := e.Decode(&d); err == nil && d.Text != "" {
						text, found = d.Text, true
					}
				}
			}
			if !page.HasMore || page.NextCursor <= cur {
				break
			}
			cur = page.NextCursor
		}
		if found {
			return text, nil
		}
		hi = after
	}
	return "", nil
}

// openRequests are run runID's open requests.
func (s *server) openRequests(ctx context.Context, sessionID, runID string) ([]Request, error) {
	l, err := s.h.ListRequests(ctx, api.ListRequestsParams{SessionID: sessionID})
	if err != nil {
		return nil, err
	}
	var out []Request
	for _, r := range l.Requests {
		if runID == "" || r.RunID == runID {
			out = append(out, requestOut(r))
		}
	}
	return out, nil
}

func requestOut(r record.Request) Request {
	return Request{
		ID: r.ID, Kind: r.Kind, SessionID: r.SessionID, RunID: r.RunID, Status: r.Status,
		Tool: r.ToolCall.Name, Arguments: r.ToolCall.Arguments, Options: r.Options,
		Question: r.Question, Choices: r.Choices, Deadline: r.Deadline, Decision: r.Decision, Message: r.Message,
	}
}

func (s *server) getRun(ctx context.Context, _ *mcp.CallToolRequest, in RunIDInput) (*RunOutput, error) {
	r, err := s.h.GetRun(ctx, api.RunIDParams{RunID: in.RunID})
	if err != nil {
		return nil, err
	}
	return s.describe(ctx, r.Run)
}

// asks reports whether t opens a request that a waiting run asks about.
func asks(t event.Type) bool {
	return t == event.ApprovalRequested || t == event.InputRequested || t == event.ToolCallRequested
}

func (s *server) awaitRun(ctx context.Context, req *mcp.CallToolRequest, in AwaitRunInput) (*RunOutput, error) {
	if in.TimeoutSeconds < 0 {
		return nil, api.InvalidParam("timeoutSeconds", "the timeout is negative")
	}
	timeout := min(30*time.Second, s.opts.MaxAwait)
	if in.TimeoutSeconds > 0 {
		timeout = s.opts.MaxAwait
		if in.TimeoutSeconds < s.opts.MaxAwait.Seconds() {
			timeout = time.Duration(in.TimeoutSeconds * float64(time.Second))
		}
	}
	r, err := s.h.GetRun(ctx, api.RunIDParams{RunID: in.RunID})
	if err != nil {
		return nil, err
	}
	if record.IsTerminal(r.Status) {
		return s.describe(ctx, r.Run)
	}
	if r.Status == record.RunWaiting && !in.UntilDone {
		// It asks, unless its answers are in and it is about to resume.
		out, err := s.describe(ctx, r.Run)
		if err != nil || len(out.PendingRequests) > 0 {
			return out, err
		}
	}
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if s.opts.Done != nil {
		go func() {
			select {
			case <-s.opts.Done:
				cancel()
			case <-wctx.Done():
			}
		}()
	}
	prog := newProgress(req)
	after := r.LastSeq
	timedOut := true
follow:
	for wctx.Err() == nil {
		events, err := s.h.Subscribe(wctx, api.SubscribeParams{SessionID: r.SessionID, RunID: r.ID, After: after})
		if err != nil {
			if wctx.Err() != nil {
				break
			}
			return nil, err
		}
		for e, err := range events {
			if err != nil {
				if errors.Is(err, api.ErrLagged) {
					continue follow // resume after the last event seen
				}
				if wctx.Err() != nil {
					break follow
				}
				return nil, err
			}
			after = e.Seq
			prog.note(wctx, e)
			if event.IsTerminalRun(e.Type) || (asks(e.Type) && !in.UntilDone) {
				timedOut = false
				break follow
			}
		}
		if wctx.Err() == nil {
			// The stream ended without the run's end: the host is going
			// away. Say where the run stands.
			timedOut = false
			break
		}
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	r, err = s.h.GetRun(ctx, api.RunIDParams{RunID: in.RunID})
	if err != nil {
		return nil, err
	}
	out, err := s.describe(ctx, r.Run)
	if err != nil {
		return nil, err
	}
	out.TimedOut = timedOut && !out.Done && !(len(out.PendingRequests) > 0 && !in.UntilDone)
	return out, nil
}

// progress sends the MCP progress notifications of an await_run whose
// caller asked for them: one a step and one a tool call.
type progress struct {
	req   *mcp.CallToolRequest
	token any
	n     float64
}

func newProgress(req *mcp.CallToolRequest) *progress {
	p := &progress{req: req}
	if req != nil && req.Params != nil && req.Session != nil {
		p.token = req.Params.GetProgressToken()
	}
	return p
}

// note tells the caller of e, if e is a step or a tool call.
func (p *progress) note(ctx context.Context, e event.Event) {
	if p.token == nil {
		return
	}
	var msg string
	switch e.Type {
	case event.StepStarted:
		var d event.StepData
		e.Decode(&d)
		msg = fmt.Sprintf("step %d", d.Step)
	case event.ToolCallStarted:
		var d event.ToolCallStartedData
		e.Decode(&d)
		msg = "tool " + d.Name
	case event.ApprovalRequested:
		msg = "waiting for an approval"
	default:
		return
	}
	p.n++
	p.req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: p.token, Progress: p.n, Message: msg})
}

// matchType reports whether event type t is one of types (empty: all);
// a pattern ending in * matches a prefix.
func matchType(types []string, t event.Type) bool {
	if len(types) == 0 {
		return true
	}
	for _, p := range types {
		if pre, ok := strings.CutSuffix(p, "*"); ok && strings.HasPrefix(string(t), pre) || p == string(t) {
			return true
		}
	}
	return false
}

// maxFilteredPages bounds the pages read_events reads to fill a page
// with events of the types asked for; maxPageBytes bounds the data of the
// events it answers with (at least one event is answered).
const (
	maxFilteredPages = 8
	maxPageBytes     = 1 << 20
)

func (s *server) readEvents(ctx context.Context, _ *mcp.CallToolRequest, in ReadEventsInput) (*ReadEventsOutput, error) {
	limit := in.Limit
	switch {
	case limit < 0:
		return nil, api.InvalidParam("limit", "the limit is negative")
	case limit == 0:
		limit = 50
	case limit > 1000:
		limit = 1000
	}
	if in.After < 0 {
		return nil, api.InvalidParam("after", "the cursor is negative")
	}
	out := &ReadEventsOutput{Events: []Event{}, NextCursor: in.After}
	size := 0
	for range maxFilteredPages {
		page, err := s.h.ReadEvents(ctx, api.ReadEventsParams{SessionID: in.SessionID, After: out.NextCursor, Limit: limit - len(out.Events), RunID: in.RunID})
		if err != nil {
			return nil, err
		}
		for i, e := range page.Events {
			if !matchType(in.Types, e.Type) {
				continue
			}
			if size += len(e.Data); size > maxPageBytes && len(out.Events) > 0 {
				// Full: the page ends before e, after the events skipped
				// before it.
				out.NextCursor, out.HasMore = page.Events[i-1].Seq, true
				if i == 0 {
					out.NextCursor = out.Events[len(out.Events)-1].Seq
				}
				return out, nil
			}
			ev := Event{Seq: e.Seq, Type: string(e.Type), RunID: e.RunID, Time: e.Time}
			if len(e.Data) > 0 {
				ev.Data = e.Data
			}
			out.Events = append(out.Events, ev)
		}
		out.NextCursor = max(page.NextCursor, out.NextCursor)
		out.HasMore = page.HasMore
		if !page.HasMore || len(out.Events) >= limit || len(page.Events) == 0 {
			break
		}
	}
	return out, nil
}

func (s *server) steer(ctx context.Context, _ *mcp.CallToolRequest, in SteerInput) (*SteerOutput, error) {
	if strings.TrimSpace(in.Text) == "" {
		return nil, api.InvalidParam("text", "the text is empty")
	}
	r, err := s.h.SteerRun(ctx, api.SteerParams{RunID: in.RunID, Input: api.Input(event.TextParts(in.Text)), IdempotencyKey: in.IdempotencyKey})
	if err != nil {
		return nil, err
	}
	return steerOut(r), nil
}

func (s *server) cancelRun(ctx context.Context, _ *mcp.CallToolRequest, in CancelRunInput) (*RunOutput, error) {
	r, err := s.h.CancelRun(ctx, api.CancelParams{RunID: in.RunID, Reason: in.Reason})
	if err != nil {
		return nil, err
	}
	out := &RunOutput{}
	runOut(out, r.Run)
	return out, nil
}

func sessionOut(r record.Session) Session {
	o := Session{
		ID: r.ID, Title: r.Title, Model: r.Model, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt,
		LastSeq: r.LastSeq, ActiveRunID: r.ActiveRunID, Metadata: r.Metadata,
	}
	for _, m := range r.Binding.Mounts {
		o.Mounts = append(o.Mounts, SessionMount{ID: m.ID, Path: m.Path, Mode: m.Mode, Default: m.Default})
	}
	return o
}

func (s *server) listSessions(ctx context.Context, _ *mcp.CallToolRequest, in ListSessionsInput) (*ListSessionsOutput, error) {
	limit := in.Limit
	if limit == 0 {
		limit = 20
	}
	l, err := s.h.ListSessions(ctx, api.ListSessionsParams{Cursor: in.Cursor, Limit: limit})
	if err != nil {
		return nil, err
	}
	out := &ListSessionsOutput{Sessions: make([]Session, 0, len(l.Sessions)), NextCursor: l.NextCursor}
	for _, r := range l.Sessions {
		out.Sessions = append(out.Sessions, sessionOut(r))
	}
	return out, nil
}

func (s *server) createSession(ctx context.Context, _ *mcp.CallToolRequest, in CreateSessionInput) (*Session, error) {
	mounts, err := s.mounts(in.Mounts)
	if err != nil {
		return nil, err
	}
	r, err := s.h.CreateSession(ctx, api.CreateSessionParams{Title: in.Title, Model: in.Model, Mounts: mounts, IdempotencyKey: in.IdempotencyKey})
	if err != nil {
		return nil, err
	}
	o := sessionOut(r.Session)
	return &o, nil
}

func (s *server) listApprovals(ctx context.Context, _ *mcp.CallToolRequest, in ListApprovalsInput) (*ListApprovalsOutput, error) {
	reqs, err := s.openRequests(ctx, in.SessionID, in.RunID)
	if err != nil {
		return nil, err
	}
	if reqs == nil {
		reqs = []Request{}
	}
	return &ListApprovalsOutput{Requests: reqs}, nil
}

// decisionAlways is answer_approval's word for allow_session.
const decisionAlways = "always"

func (s *server) answerApproval(ctx context.Context, _ *mcp.CallToolRequest, in AnswerApprovalInput) (*RequestOutput, error) {
	if in.Decision == decisionAlways {
		in.Decision = event.DecisionAllowSession
	}
	r, err := s.h.DecideApproval(ctx, api.DecideParams{ApprovalID: in.ApprovalID, Decision: in.Decision, Message: in.Message, IdempotencyKey: in.IdempotencyKey})
	if err != nil {
		return nil, err
	}
	return &RequestOutput{Request: requestOut(r.Request), Replayed: r.Replayed}, nil
}

func (s *server) answerQuestion(ctx context.Context, _ *mcp.CallToolRequest, in AnswerQuestionInput) (*RequestOutput, error) {
	r, err := s.h.AnswerInput(ctx, api.AnswerParams{RequestID: in.RequestID, Text: in.Text, Choice: in.Choice, IdempotencyKey: in.IdempotencyKey})
	if err != nil {
		return nil, err
	}
	return &RequestOutput{Request: requestOut(r.Request), Replayed: r.Replayed}, nil
}
