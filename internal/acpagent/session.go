package acpagent

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	acp "github.com/coder/acp-go-sdk"

	"weft.dev/weft/api"
	"weft.dev/weft/event"
)

// session is one weft session a connection streams to its client: the
// goroutine that turns the session's log into session/update
// notifications ([session.stream]), and what prompts wait for.
type session struct {
	a      *agent
	h      api.Host
	follow FollowFunc
	id     string
	head   int64 // the log's end when the client attached: the replay ends there

	titled atomic.Bool // the session has a title (else the first prompt gives it one)

	ctx    context.Context // ends with stop or the connection
	cancel context.CancelFunc
	done   chan struct{} // closed when stream returns

	// st is owned by the stream goroutine.
	st streamState

	mu      sync.Mutex
	mode    string
	busy    string // api.BusyQueue or api.BusySteer
	seq     int64  // the last event whose updates were sent
	err     error  // why the stream ended, once it did
	notify  chan struct{}
	ended   []runEnd                      // the latest runs' ends, at most endedRuns
	prompts map[string]int                // run → prompts of this connection waiting for it
	echo    []string                      // prompt texts whose message.user the client shows itself
	asking  map[string]context.CancelFunc // open permission requests, by approval
	// questions are the open input requests (ask_user) whose question
	// the client was sent, in log order: a prompt answers the first.
	questions []question
}

// question is an open input request of a run.
type question struct {
	id, run string
}

// streamState is what the stream goroutine tracks of the log.
type streamState struct {
	// open are the tool calls started and not completed, to their run.
	open map[string]string
	// finish is each running run's latest finish reason.
	finish map[string]string
	// streamed marks, by run, the steps whose text (bit 1) and reasoning
	// (bit 2) came as deltas.
	streamed map[string]map[int]uint8
	// deferred are the approvals of the replay still open, asked once the
	// replay reached the head.
	deferred map[string]event.ApprovalRequestedData
	order    []string // deferred's keys in log order
}

// runEnd is a run's terminal event, as a prompt answers it.
type runEnd struct {
	runID  string
	typ    event.Type
	data   event.RunEndedData
	finish string
}

func newSession(a *agent, h api.Host, follow FollowFunc, id string, head int64, mode string) *session {
	ctx, cancel := context.WithCancel(a.ctx)
	return &session{
		a: a, h: h, follow: follow, id: id, head: head, ctx: ctx, cancel: cancel, done: make(chan struct{}),
		mode: mode, busy: a.cfg.Busy, notify: make(chan struct{}), prompts: map[string]int{}, asking: map[string]context.CancelFunc{},
		st: streamState{open: map[string]string{}, finish: map[string]string{}, streamed: map[string]map[int]uint8{}, deferred: map[string]event.ApprovalRequestedData{}},
	}
}

// stop ends the stream and waits for it.
func (s *session) stop() {
	s.cancel()
	<-s.done
}

// stream sends the session's log to the client, from its first event,
// as session/update notifications, until the session's ctx ends or the
// log cannot be read.
func (s *session) stream() {
	defer close(s.done)
	conn := s.a.client()
	for e, err := range s.follow(s.ctx, s.id, 0) {
		if err != nil {
			s.fail(err)
			return
		}
		for _, u := range s.updates(e) {
			if err := conn.SessionUpdate(s.ctx, acp.SessionNotification{SessionId: acp.SessionId(s.id), Update: u}); err != nil {
				s.fail(err)
				return
			}
		}
		s.advance(e)
	}
	s.fail(errors.New("the session's stream ended"))
}

// fail records why the stream ended and wakes the waiters.
func (s *session) fail(err error) {
	if s.ctx.Err() != nil {
		err = errors.New("the connection is closing")
	}
	s.mu.Lock()
	if s.err == nil {
		s.err = err
	}
	s.wake()
	s.mu.Unlock()
	if err != nil && s.ctx.Err() == nil {
		s.a.cfg.Logger.Warn("acp: session stream ended", "session", s.id, "err", err)
	}
}

// wake tells the waiters that something changed; s.mu is held.
func (s *session) wake() {
	close(s.notify)
	s.notify = make(chan struct{})
}

// advance records that e's updates were sent: a run's end for the
// prompts that wait for it, and, once the replay reached the head, the
// approvals it left open are asked.
func (s *session) advance(e event.Event) {
	st := &s.st
	var end *runEnd
	switch e.Type {
	case event.RunCompleted, event.RunFailed, event.RunCancelled, event.RunInterrupted:
		end = &runEnd{runID: e.RunID, typ: e.Type, finish: st.finish[e.RunID]}
		e.Decode(&end.data)
		delete(st.finish, e.RunID)
		delete(st.streamed, e.RunID)
	}
	var ask []event.ApprovalRequestedData
	if e.Seq >= s.head && len(st.order) > 0 {
		for _, id := range st.order {
			if d, ok := st.deferred[id]; ok {
				ask = append(ask, d)
			}
		}
		st.order, st.deferred = nil, map[string]event.ApprovalRequestedData{}
	}
	s.mu.Lock()
	s.seq = e.Seq
	if end != nil {
		if len(s.ended) == endedRuns {
			s.ended = slices.Delete(s.ended, 0, 1)
		}
		s.ended = append(s.ended, *end)
	}
	s.wake()
	s.mu.Unlock()
	for _, d := range ask {
		s.ask(d)
	}
}

// updates maps one event of the log onto the notifications the client
// is sent, and asks the approvals it opens.
func (s *session) updates(e event.Event) []acp.SessionUpdate {
	st := &s.st
	live := e.Seq > s.head
	switch e.Type {
	case event.MessageUser:
		var d event.MessageUserData
		if e.Decode(&d) != nil || (live && s.takeEcho(event.Text(d.Content))) {
			return nil
		}
		return userChunks(d.Content)
	case event.SteerAccepted:
		var d event.SteerData
		if e.Decode(&d) != nil || (live && s.takeEcho(event.Text(d.Input))) {
			return nil
		}
		return userChunks(d.Input)
	case event.SessionUpdated:
		var d event.SessionUpdatedData
		if e.Decode(&d) != nil || d.Title == nil {
			return nil
		}
		return []acp.SessionUpdate{{SessionInfoUpdate: &acp.SessionSessionInfoUpdate{Title: d.Title, UpdatedAt: acp.Ptr(e.Time.UTC().Format(time.RFC3339Nano))}}}
	case event.RunQueued:
		var d event.RunQueuedData
		if !live && e.Decode(&d) == nil {
			s.mu.Lock()
			if validMode(d.DefaultPreset) {
				s.mode = d.DefaultPreset
			}
			if d.Busy == api.BusyQueue || d.Busy == api.BusySteer {
				s.busy = d.Busy
			}
			s.mu.Unlock()
		}
	case event.MessageDelta, event.ReasoningDelta:
		var d event.DeltaData
		if e.Decode(&d) != nil || d.Text == "" {
			return nil
		}
		bit := uint8(1)
		if e.Type == event.ReasoningDelta {
			bit = 2
		}
		if st.streamed[e.RunID] == nil {
			st.streamed[e.RunID] = map[int]uint8{}
		}
		st.streamed[e.RunID][d.Step] |= bit
		if bit == 2 {
			return []acp.SessionUpdate{acp.UpdateAgentThoughtText(d.Text)}
		}
		return []acp.SessionUpdate{acp.UpdateAgentMessageText(d.Text)}
	case event.MessageCompleted:
		var d event.MessageCompletedData
		if e.Decode(&d) != nil {
			return nil
		}
		st.finish[e.RunID] = d.FinishReason
		// A provider that did not stream: the whole message.
		var ups []acp.SessionUpdate
		bits := st.streamed[e.RunID][d.Step]
		if d.Reasoning != "" && bits&2 == 0 {
			ups = append(ups, acp.UpdateAgentThoughtText(d.Reasoning))
		}
		if d.Text != "" && bits&1 == 0 {
			ups = append(ups, acp.UpdateAgentMessageText(d.Text))
		}
		return ups
	case event.ToolCallStarted:
		var d event.ToolCallStartedData
		if e.Decode(&d) != nil {
			return nil
		}
		st.open[d.ID] = e.RunID
		return []acp.SessionUpdate{toolCallStart(d.ToolCall)}
	case event.ToolCallCompleted:
		var d event.ToolCallCompletedData
		if e.Decode(&d) != nil {
			return nil
		}
		delete(st.open, d.ID)
		return []acp.SessionUpdate{toolCallDone(d)}
	case event.InputRequested:
		var d event.InputRequestedData
		if e.Decode(&d) != nil {
			return nil
		}
		s.mu.Lock()
		s.questions = append(s.questions, question{id: d.RequestID, run: e.RunID})
		s.mu.Unlock()
		var b strings.Builder
		b.WriteString("\n\n**" + d.Question + "**\n")
		for i, c := range d.Choices {
			fmt.Fprintf(&b, "%d. %s\n", i+1, c)
		}
		return []acp.SessionUpdate{acp.UpdateAgentMessageText(b.String())}
	case event.InputResolved:
		var d event.InputResolvedData
		if e.Decode(&d) != nil {
			return nil
		}
		s.forgetQuestion(d.RequestID)
		if d.Status != event.InputAnswered || d.Text == "" || (live && s.takeEcho(d.Text)) {
			return nil
		}
		return userChunks(event.TextParts(d.Text))
	case event.ApprovalRequested:
		var d event.ApprovalRequestedData
		if e.Decode(&d) != nil {
			return nil
		}
		if live {
			s.ask(d)
		} else {
			st.deferred[d.ApprovalID] = d
			st.order = append(st.order, d.ApprovalID)
		}
	case event.ApprovalResolved, event.ApprovalExpired:
		var d event.ApprovalResolvedData
		if e.Decode(&d) != nil {
			return nil
		}
		delete(st.deferred, d.ApprovalID)
		s.mu.Lock()
		if cancel := s.asking[d.ApprovalID]; cancel != nil {
			cancel()
		}
		s.mu.Unlock()
	case event.RunCompleted, event.RunFailed, event.RunCancelled, event.RunInterrupted:
		// No tool call of the run stays open in the client.
		var ups []acp.SessionUpdate
		for id, run := range st.open {
			if run == e.RunID {
				delete(st.open, id)
				ups = append(ups, acp.UpdateToolCall(acp.ToolCallId(id), acp.WithUpdateStatus(acp.ToolCallStatusFailed),
					acp.WithUpdateContent([]acp.ToolCallContent{acp.ToolContent(acp.TextBlock("the run ended (" + string(e.Type) + ") before this call finished"))})))
			}
		}
		if e.Type == event.RunFailed || e.Type == event.RunInterrupted {
			var d event.RunEndedData
			if e.Decode(&d) == nil {
				ups = append(ups, acp.UpdateAgentMessageText("\n\n[weft: "+runFailure(e.Type, d)+"]\n"))
			}
		}
		return ups
	}
	return nil
}

// ask sends a session/request_permission for approval d, unless one is
// open, and gives the client's answer to the host as the decision. A
// client that cancels the request, or a connection that ends, leaves
// the approval open: it is durable, and asked again at the next load.
func (s *session) ask(d event.ApprovalRequestedData) {
	ctx, cancel := context.WithCancel(s.ctx)
	s.mu.Lock()
	if _, ok := s.asking[d.ApprovalID]; ok {
		s.mu.Unlock()
		cancel()
		return
	}
	s.asking[d.ApprovalID] = cancel
	s.mu.Unlock()
	started := s.a.goSafe(func() {
		defer func() {
			s.mu.Lock()
			delete(s.asking, d.ApprovalID)
			s.mu.Unlock()
			cancel()
		}()
		resp, err := s.a.client().RequestPermission(ctx, permissionRequest(s.id, d))
		if err != nil || resp.Outcome.Selected == nil || ctx.Err() != nil {
			return
		}
		dctx, dcancel := context.WithTimeout(context.WithoutCancel(s.a.ctx), 30*time.Second)
		defer dcancel()
		_, err = s.h.DecideApproval(dctx, api.DecideParams{ApprovalID: d.ApprovalID, SessionID: s.id, Decision: string(resp.Outcome.Selected.OptionId)})
		if err != nil && !errors.Is(err, &api.Error{Kind: api.KindAlreadyResolved}) {
			s.a.cfg.Logger.Warn("acp: decide approval", "session", s.id, "approval", d.ApprovalID, "err", err)
		}
	})
	if !started {
		cancel()
	}
}

// waitSeq waits until the updates of the log up to seq were sent.
func (s *session) waitSeq(ctx context.Context, seq int64) error {
	for {
		s.mu.Lock()
		cur, err, ch := s.seq, s.err, s.notify
		s.mu.Unlock()
		if cur >= seq {
			return nil
		}
		if err != nil {
			return acp.NewInternalError(map[string]any{"error": err.Error()})
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// waitRun waits until run's terminal event and every update before it
// were sent, or until the run asks the user a question: the turn then
// ends (end_turn) with the question, and the next prompt answers it.
func (s *session) waitRun(run string) (runEnd, error) {
	for {
		s.mu.Lock()
		i := slices.IndexFunc(s.ended, func(e runEnd) bool { return e.runID == run })
		var end runEnd
		if i >= 0 {
			end = s.ended[i]
		} else if slices.ContainsFunc(s.questions, func(q question) bool { return q.run == run }) {
			i, end = 0, runEnd{runID: run, typ: event.InputRequested}
		}
		err, ch := s.err, s.notify
		s.mu.Unlock()
		if i >= 0 {
			return end, nil
		}
		if err != nil {
			return runEnd{}, acp.NewInternalError(map[string]any{"error": err.Error(), "runId": run})
		}
		<-ch
	}
}

// nextQuestion returns the first open question the client was sent,
// and forgets it: the caller answers it.
func (s *session) nextQuestion() (question, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.questions) == 0 {
		return question{}, false
	}
	q := s.questions[0]
	s.questions = s.questions[1:]
	return q, true
}

// forgetQuestion forgets question id, answered or closed.
func (s *session) forgetQuestion(id string) {
	s.mu.Lock()
	s.questions = slices.DeleteFunc(s.questions, func(q question) bool { return q.id == id })
	s.mu.Unlock()
}

// expectEcho notes a prompt's text, whose message.user (or steer) the
// stream does not send back: the client shows the prompt itself.
func (s *session) expectEcho(text string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.echo) == 64 {
		s.echo = slices.Delete(s.echo, 0, 1)
	}
	s.echo = append(s.echo, text)
}

// dropEcho forgets a prompt the host refused.
func (s *session) dropEcho(text string) { s.takeEcho(text) }

// takeEcho reports whether text is a prompt of this connection's, and
// forgets it.
func (s *session) takeEcho(text string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := slices.Index(s.echo, text)
	if i < 0 {
		return false
	}
	s.echo = slices.Delete(s.echo, i, i+1)
	return true
}

func (s *session) addPrompt(run string) {
	s.mu.Lock()
	s.prompts[run]++
	s.mu.Unlock()
}

func (s *session) removePrompt(run string) {
	s.mu.Lock()
	if s.prompts[run]--; s.prompts[run] <= 0 {
		delete(s.prompts, run)
	}
	s.mu.Unlock()
}

// promptRuns are the runs this connection's prompts wait for.
func (s *session) promptRuns() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	runs := make([]string, 0, len(s.prompts))
	for r := range s.prompts {
		runs = append(runs, r)
	}
	return runs
}

func (s *session) currentMode() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mode
}

func (s *session) setMode(m string) {
	s.mu.Lock()
	s.mode = m
	s.mu.Unlock()
}

func (s *session) currentBusy() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.busy
}

func (s *session) setBusy(b string) {
	s.mu.Lock()
	s.busy = b
	s.mu.Unlock()
}

// busyOption is the ID of the session's config option that sets its
// busy policy.
const busyOption = "busy"

// configOptions are the session's options for the client: what a prompt
// does while a run is active.
func (s *session) configOptions() []acp.SessionConfigOption {
	opt := func(v, name, desc string) acp.SessionConfigSelectOption {
		return acp.SessionConfigSelectOption{Value: acp.SessionConfigValueId(v), Name: name, Description: acp.Ptr(desc)}
	}
	ungrouped := acp.SessionConfigSelectOptionsUngrouped{
		opt(api.BusyQueue, "Queue", "A prompt sent while the agent works runs after the current turn."),
		opt(api.BusySteer, "Steer", "A prompt sent while the agent works joins the current turn at its next step."),
	}
	return []acp.SessionConfigOption{{Select: &acp.SessionConfigOptionSelect{
		Id: busyOption, Name: "While the agent works", Type: "select",
		Description:  acp.Ptr("What a prompt does while a turn of this session is running."),
		CurrentValue: acp.SessionConfigValueId(s.currentBusy()),
		Options:      acp.SessionConfigSelectOptions{Ungrouped: &ungrouped},
	}}}
}

// modeState is the session's modes for the client: weft's approval
// presets.
func (s *session) modeState() *acp.SessionModeState {
	return &acp.SessionModeState{AvailableModes: modes(), CurrentModeId: acp.SessionModeId(s.currentMode())}
}
