package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	tea "charm.land/bubbletea/v2"

	"weft.dev/weft/api"
	"weft.dev/weft/event"
)

// sessionLoaded shows a session read from the host and follows it.
func (t *tui) sessionLoaded(msg sessionMsg) tea.Cmd {
	if msg.err != nil {
		t.notice("weft: "+msg.err.Error(), true)
		return nil
	}
	s := msg.s
	if s.ID != t.sessionID {
		t.tr = transcript{}
		t.run, t.requests, t.ask, t.sent, t.tokens, t.runModel = nil, nil, nil, nil, 0, ""
		t.cost = 0
		t.history, t.hpos, t.prompts = nil, 0, nil
		t.rewinds = nil
	}
	t.sessionID, t.title, t.replayTo, t.open = s.ID, s.Title, s.LastSeq, msg.open
	if msg.announce {
		t.info(fmt.Sprintf("session %s: %s", s.ID, clip(s.Title, 60)))
	}
	if msg.note != "" {
		t.info(msg.note)
	}
	t.follow(msg.after)
	return nil
}

// event shows one event of the session.
func (t *tui) event(e event.Event) tea.Cmd {
	var cmd tea.Cmd
	e = unwrapSubagent(e) // a subagent's request is asked here too
	replay := e.Seq <= t.replayTo
	switch e.Type {
	case event.SessionRewound:
		t.sawRewind(e, replay)
	case event.SessionForked:
		// The fork's own history starts here: a run of the source
		// that its log shows going went on in the source only.
		t.run = nil
	case event.SessionUpdated:
		var d event.SessionUpdatedData
		if e.Decode(&d) == nil && d.Title != nil {
			t.title = *d.Title
		}
	case event.RunStarted:
		var d event.RunStartedData
		_ = e.Decode(&d)
		t.run = &runState{id: e.RunID, started: e.Time, phase: "starting"}
		if d.Model != "" {
			t.runModel = d.Model
		}
		if !t.ticking {
			t.ticking = true
			cmd = tick()
		}
	case event.MessageUser:
		var d event.MessageUserData
		_ = e.Decode(&d)
		text := event.Text(d.Content)
		t.tr.add(&item{kind: itemUser, runID: e.RunID, text: text + imagesNote(d.Content)})
		t.runsSeen[e.RunID] = true
		t.prompts = append(t.prompts, text)
		for _, in := range t.sent {
			if in.runID == e.RunID {
				t.dropSent(in)
				break
			}
		}
		if replay {
			t.remember(text)
		}
	case event.StepStarted:
		var d event.StepData
		_ = e.Decode(&d)
		if t.run != nil {
			t.run.step, t.run.phase = d.Step, "waiting for the model"
		}
	case event.MessageDelta, event.ReasoningDelta:
		if t.run != nil && t.run.cancelling && t.run.id == e.RunID {
			break // no stray text after Ctrl-C
		}
		var d event.DeltaData
		_ = e.Decode(&d)
		k, phase := itemText, "writing"
		if e.Type == event.ReasoningDelta {
			k, phase = itemReasoning, "thinking"
		}
		t.tr.appendText(k, e.RunID, d.Step, d.Text)
		if t.run != nil {
			t.run.phase = phase
		}
	case event.Usage:
		var d event.UsageData
		_ = e.Decode(&d)
		n := d.Usage.InputTokens + d.Usage.OutputTokens
		t.tokens += n
		t.cost += d.Usage.CostUSD
		if t.run != nil {
			t.run.tokens += n
			t.run.cost += d.Usage.CostUSD
		}
	case event.ToolCallStarted:
		var d event.ToolCallStartedData
		_ = e.Decode(&d)
		if t.run != nil {
			t.run.phase = "running " + d.Name
		}
		if t.tr.findQuestion(d.ID) != nil {
			break // ask_user: its question shows it
		}
		it := t.callItem(e.RunID, d.ToolCall)
		it.running = true
		it.changed()
	case event.ToolCallCompleted:
		var d event.ToolCallCompletedData
		_ = e.Decode(&d)
		if t.tr.findQuestion(d.ID) != nil {
			break // its question shows the answer
		}
		it := t.tr.findCall(d.ID)
		if it == nil {
			it = t.callItem(e.RunID, event.ToolCall{ID: d.ID, Name: d.Name})
		}
		it.running, it.done, it.isError, it.durationMs, it.truncated = false, true, d.IsError, d.DurationMs, d.Truncated
		t.tr.setOutput(it, d.Output)
	case event.ApprovalRequested, event.InputRequested:
		p := requestOf(e)
		if p.kind == event.RequestApproval {
			it := t.callItem(e.RunID, p.call)
			it.requestID, it.approval = p.id, "waiting"
			it.changed()
			if t.run != nil {
				t.run.phase = "waiting for approval of " + p.call.Name
			}
		} else {
			q := &item{kind: itemQuestion, runID: e.RunID, requestID: p.id, call: p.call, text: p.question, choices: p.choices, approval: "waiting"}
			if it := t.tr.findCall(p.call.ID); it != nil && p.call.ID != "" {
				// The ask_user call shown so far becomes its question.
				it.kind, it.requestID, it.text, it.choices, it.approval = q.kind, q.requestID, q.text, q.choices, q.approval
				it.changed()
			} else {
				t.tr.add(q)
			}
			if t.run != nil {
				t.run.phase = "waiting for an answer"
			}
		}
		if !replay || t.open[p.id] {
			t.queueRequest(p)
		}
	case event.ApprovalResolved, event.ApprovalExpired, event.InputResolved:
		t.resolved(e)
	case event.ToolCallRequested:
		if t.run != nil {
			var d event.ToolCallRequestedData
			_ = e.Decode(&d)
			t.run.phase = "waiting for the client's " + d.ToolCall.Name
		}
	case event.RunResumed:
		if t.run != nil {
			t.run.phase = "resuming"
		}
	case event.RunSuspended:
		var d event.RunSuspendedData
		_ = e.Decode(&d)
		if t.run != nil {
			t.run.phase = "handed over to the next host"
		}
		if d.CutStep > 0 {
			t.notice(fmt.Sprintf("weft: %s: the run is handed over; step %d's text is discarded and asked for again", d.Reason, d.CutStep), false)
		}
	case event.ModelRetry:
		var d event.ModelRetryData
		_ = e.Decode(&d)
		t.notice(fmt.Sprintf("weft: model request failed (%s); retry %d in %d ms", d.Error, d.Attempt, d.DelayMs), true)
	case event.ContextCompacted:
		var d event.ContextCompactedData
		_ = e.Decode(&d)
		// The summary request costs the session too.
		t.tokens += d.Usage.InputTokens + d.Usage.OutputTokens
		t.cost += d.Usage.CostUSD
		t.info(fmt.Sprintf("context compacted (%s): about %d tokens → %d; the model goes on from a summary", d.Reason, d.TokensBefore, d.TokensAfter))
	case event.SteerConsumed:
		var d event.SteerData
		_ = e.Decode(&d)
		t.tr.add(&item{kind: itemSteer, runID: e.RunID, text: event.Text(d.Input)})
		t.steersSeen[d.SteerID] = true
		for _, in := range t.sent {
			if in.steerID == d.SteerID {
				t.dropSent(in)
				break
			}
		}
	case event.SteerDropped:
		var d event.SteerData
		_ = e.Decode(&d)
		t.steersSeen[d.SteerID] = true
		for _, in := range t.sent {
			if in.steerID == d.SteerID {
				t.dropSent(in)
				if !replay {
					t.notice("weft: the run ended before the model read your steer; it is back in the prompt", true)
					t.in.SetValue(strings.TrimSpace(in.text + "\n" + t.in.Value()))
				}
				break
			}
		}
	case event.RunCompleted, event.RunFailed, event.RunCancelled, event.RunInterrupted:
		cmd = t.runEnded(e)
	}
	return cmd
}

// callItem is the item of call c, made if it is new.
func (t *tui) callItem(runID string, c event.ToolCall) *item {
	if it := t.tr.findCall(c.ID); it != nil {
		if it.call.Arguments == "" {
			it.call = c
		}
		return it
	}
	return t.tr.add(&item{kind: itemCall, runID: runID, call: c})
}

// queueRequest queues a request to ask, asking it if none is asked.
func (t *tui) queueRequest(p *pending) {
	for _, q := range t.requests {
		if q.id == p.id {
			return
		}
	}
	t.requests = append(t.requests, p)
	t.nextAsk()
}

// nextAsk asks the first request queued, if none is asked.
func (t *tui) nextAsk() {
	if t.ask != nil || len(t.requests) == 0 {
		if t.ask != nil {
			t.ask.waiting = len(t.requests) - 1
		}
		return
	}
	t.ask = newAsker(t.requests[0])
	t.ask.waiting = len(t.requests) - 1
	if !t.typedAt.IsZero() && time.Since(t.typedAt) < typingWindow {
		t.ask.holdKeys()
	}
	t.in.Blur()
}

// dropRequest forgets request id; if it was asked, the next is.
func (t *tui) dropRequest(id string) {
	for i, q := range t.requests {
		if q.id == id {
			t.requests = append(t.requests[:i], t.requests[i+1:]...)
			break
		}
	}
	if t.ask != nil && t.ask.p.id == id {
		t.ask = nil
	}
	t.nextAsk()
	if t.ask == nil {
		t.in.Focus()
	}
}

// answer sends the answer to request p.
func (t *tui) answer(p *pending, ans answer) tea.Cmd {
	t.answered[p.id] = ans.words(p)
	t.dropRequest(p.id)
	if it := t.tr.findRequest(p.id); it != nil {
		it.approval = "answering: " + ans.words(p)
		it.changed()
	}
	sid := t.sessionID
	fail := func(err error) tea.Msg { return answeredMsg{p: p, ans: ans, err: err} }
	return t.call(func(ctx context.Context, h api.Host) tea.Msg {
		var err error
		if p.kind == event.RequestApproval {
			_, err = h.DecideApproval(ctx, api.DecideParams{ApprovalID: p.id, SessionID: sid, Decision: ans.decision, Message: ans.message})
		} else {
			_, err = h.AnswerInput(ctx, api.AnswerParams{RequestID: p.id, SessionID: sid, Choice: ans.choice, Text: ans.text})
		}
		return answeredMsg{p: p, ans: ans, err: err}
	}, fail)
}

// answeredReply handles the host's reply to an answer.
func (t *tui) answeredReply(msg answeredMsg) tea.Cmd {
	p := msg.p
	it := t.tr.findRequest(p.id)
	var ae *api.Error
	switch {
	case msg.err == nil:
		return nil
	case errors.As(msg.err, &ae) && ae.Kind == api.KindAlreadyResolved:
		by, _ := ae.Data["resolvedBy"].(string)
		if by == "" {
			by = "another client"
		}
		what, _ := ae.Data["decision"].(string)
		if what == "" {
			what, _ = ae.Data["status"].(string)
		}
		delete(t.answered, p.id)
		if it != nil {
			it.approval = fmt.Sprintf("already answered by %s: %s", by, what)
			it.changed()
		}
	default:
		// Not answered: ask again.
		delete(t.answered, p.id)
		t.notice("weft: "+msg.err.Error(), true)
		if it != nil {
			it.approval = "waiting"
			it.changed()
		}
		t.requests = append([]*pending{p}, t.requests...)
		t.nextAsk()
	}
	return nil
}

// resolved records the end of a request under its call: answered here,
// elsewhere, or expired.
func (t *tui) resolved(e event.Event) {
	var id, what string
	var by event.By
	switch e.Type {
	case event.ApprovalResolved, event.ApprovalExpired:
		var d event.ApprovalResolvedData
		_ = e.Decode(&d)
		id, what, by = d.ApprovalID, decisionWords(d.Decision), d.By
		if d.Message != "" {
			what += ": " + fmt.Sprintf("%q", clip(d.Message, 80))
		}
		if e.Type == event.ApprovalExpired {
			what = "expired: " + decisionWords(d.Decision)
		}
	default:
		var d event.InputResolvedData
		_ = e.Decode(&d)
		id, what, by = d.RequestID, d.Status, d.By
		if d.Status == event.InputAnswered {
			what = fmt.Sprintf("answered %q", clip(d.Text, 60))
		}
	}
	wasAsked := t.ask != nil && t.ask.p.id == id
	t.dropRequest(id)
	it := t.tr.findRequest(id)
	if it == nil {
		return
	}
	switch {
	case t.answered[id] != "":
		it.approval = t.answered[id]
	case by.Policy == "cancel":
		it.approval = "cancelled with the run"
	case wasAsked:
		it.approval = fmt.Sprintf("already answered by %s: %s", who(by), what)
	default:
		it.approval = fmt.Sprintf("%s (by %s)", what, who(by))
	}
	it.changed()
}

// runEnded closes the active run.
func (t *tui) runEnded(e event.Event) tea.Cmd {
	var d event.RunEndedData
	_ = e.Decode(&d)
	words := strings.TrimPrefix(string(e.Type), "run.")
	s := fmt.Sprintf("· %s · %d step(s) · %s tokens", words, d.Steps, compactCount(d.Usage.InputTokens+d.Usage.OutputTokens))
	if d.Usage.CostUSD > 0 {
		s += " · " + usd(d.Usage.CostUSD)
	}
	if t.run != nil && t.run.id == e.RunID && !t.run.started.IsZero() {
		s += " · " + e.Time.Sub(t.run.started).Truncate(100*time.Millisecond).String()
	}
	t.tr.add(&item{kind: itemRunEnd, runID: e.RunID, text: s})
	if d.Error != nil && e.Type == event.RunFailed {
		t.notice(fmt.Sprintf("weft: run %s failed: %s: %s", e.RunID, d.Error.Kind, d.Error.Message), true)
	}
	if e.Type == event.RunInterrupted {
		t.notice(fmt.Sprintf("weft: run %s interrupted (the host stopped under it)", e.RunID), true)
	}
	if t.run != nil && t.run.id == e.RunID {
		t.run = nil
	}
	// Its requests are closed with it.
	var keep []*pending
	for _, q := range t.requests {
		if q.runID != e.RunID {
			keep = append(keep, q)
		}
	}
	t.requests = keep
	if t.ask != nil && t.ask.p.runID == e.RunID {
		t.ask = nil
		t.in.Focus()
	}
	t.nextAsk()
	if t.opt.runID != "" && e.RunID == t.opt.runID {
		t.ended = e.Type
		t.quitting = true
		return tea.Quit
	}
	return nil
}
