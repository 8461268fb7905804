package sim

import (
	"context"
	"fmt"
	"slices"
	"time"

	"weft.dev/weft/api"
	"weft.dev/weft/event"
	"weft.dev/weft/host"
	"weft.dev/weft/llm"
	"weft.dev/weft/tool"
)

// weighted is a possible step and its weight.
type weighted struct {
	w  float64
	do func()
}

// pick chooses the next step at random among those possible now. Every
// list it draws from is in a fixed order (the log's, or sorted), so that
// the seed alone decides.
func (w *world) pick() func() {
	var acts []weighted
	add := func(wt float64, f func()) {
		if wt > 0 {
			acts = append(acts, weighted{wt, f})
		}
	}
	var free []*simSession
	for _, s := range w.known() {
		if w.free(s) {
			free = append(free, s)
		}
	}
	held := w.fs.heldSessions()
	n := len(w.known())

	// Sessions.
	switch {
	case n < 2:
		add(6, w.doCreate)
	case n < 6:
		add(0.8, w.doCreate)
	}
	if len(free) > 0 {
		add(10, func() { w.doStart(pickOne(w, free)) })
		add(0.5, func() { w.doUpdate(pickOne(w, free)) })
		add(0.2, func() { w.doDelete(pickOne(w, free)) })
		add(2, func() { w.doRead(pickOne(w, free)) })
		if len(w.subs) < maxSubscribers {
			add(1.5, func() { w.doSubscribe(pickOne(w, free)) })
		}
	}
	if !w.keyedPending() {
		var retries []*keyedReq
		for _, kr := range w.client.keyed {
			if w.free(kr.session) {
				retries = append(retries, kr)
			}
		}
		if len(retries) > 0 {
			add(3, func() { pickOne(w, retries).resend(w.rng.IntN(3) == 0) })
		}
	}
	var ended []*subscriber
	for _, sub := range w.subs {
		if _, end, _ := sub.peek(); end && w.free(sub.session) && !sub.session.log.deleted {
			ended = append(ended, sub)
		}
	}
	if len(ended) > 0 {
		add(3, func() { w.follow(pickOne(w, ended)) })
	}

	// Runs and their requests, in the free sessions.
	var withRuns []*simSession
	var approvals, resolved, inputs, calls []*reqState
	reqSession := map[*reqState]*simSession{}
	for _, s := range free {
		if len(s.log.runOrder) > 0 {
			withRuns = append(withRuns, s)
		}
		for _, id := range s.log.reqOrder {
			q := s.log.reqs[id]
			reqSession[q] = s
			switch {
			case q.resolved > 0 || s.log.runs[q.run].terminal != "":
				resolved = append(resolved, q)
			case q.kind == event.RequestApproval:
				approvals = append(approvals, q)
			case q.kind == event.RequestInput:
				inputs = append(inputs, q)
			case q.kind == event.RequestTool:
				calls = append(calls, q)
			}
		}
	}
	if len(withRuns) > 0 {
		add(5, func() { w.doSteer(pickOne(w, withRuns)) })
		add(3, func() { w.doCancel(pickOne(w, withRuns)) })
		add(2, func() { w.doWait(pickOne(w, withRuns)) })
	}
	if len(approvals) > 0 {
		add(8, func() { q := pickOne(w, approvals); w.doDecide(reqSession[q], q) })
	}
	if len(inputs) > 0 {
		add(6, func() { q := pickOne(w, inputs); w.doAnswer(reqSession[q], q) })
	}
	if len(calls) > 0 {
		add(6, func() { q := pickOne(w, calls); w.doToolResult(reqSession[q], q) })
	}
	if len(resolved) > 0 {
		add(2, func() { q := pickOne(w, resolved); w.doAnswerAgain(reqSession[q], q) })
	}

	// The model and the tools.
	var streams []*stream
	for _, st := range w.m.streams() {
		if s := w.session(st.k); w.free(s) {
			streams = append(streams, st)
		}
	}
	if len(streams) > 0 {
		add(14, func() { w.doModel(pickOne(w, streams), false) })
	}
	var running []*toolCall
	for _, tc := range w.tools.pending() {
		if !w.fs.holding(tc.session) {
			running = append(running, tc)
		}
	}
	if len(running) > 0 {
		add(8, func() { w.doTool(pickOne(w, running)) })
	}

	// Time, faults and restarts.
	if len(held) == 0 {
		add(4, w.doAdvance)
		add(0.3, func() { w.tracef("restart the host"); w.restart(false) })
	} else {
		add(12, func() {
			s := pickOne(w, held)
			v := commitHeld
			if w.rng.IntN(5) == 0 {
				v = refuseHeld
			}
			w.tracef("release the held commit of %s: %s", w.name(s), map[heldVerdict]string{commitHeld: "it commits", refuseHeld: "it fails"}[v])
			w.fs.release(s, v)
		})
	}
	w.fs.mu.Lock()
	full, armed := w.fs.full, w.fs.crashIn > 0
	w.fs.mu.Unlock()
	if full {
		add(3, func() { w.setFull(false) })
	} else {
		add(0.4, func() { w.setFull(true) })
	}
	if !armed {
		add(0.6, w.doCrash)
	}
	if len(free) > 0 {
		add(1.5, func() { w.doFault(pickOne(w, free)) })
	}

	total := 0.0
	for _, a := range acts {
		total += a.w
	}
	x := w.rng.Float64() * total
	for _, a := range acts {
		if x -= a.w; x < 0 {
			return a.do
		}
	}
	return acts[len(acts)-1].do
}

// pickOne returns a random element of xs.
func pickOne[T any](w *world, xs []T) T { return xs[w.rng.IntN(len(xs))] }

// peek reports what take would, without taking the events.
func (sub *subscriber) peek() (int, bool, error) {
	sub.mu.Lock()
	defer sub.mu.Unlock()
	return len(sub.got), sub.ended, sub.err
}

func (w *world) doCreate() {
	s := w.session(len(w.sessions))
	s.title = fmt.Sprintf("t%d", s.k)
	s.key = w.key(0.5)
	if s.key != "" {
		w.client.keyed = append(w.client.keyed, &keyedReq{session: s, resend: func(conflict bool) {
			if !conflict {
				w.createSession(s, nil)
				return
			}
			// Other params under the same key: a slot of its own, in
			// case the first never committed and this one does.
			w.client.conflicted[s.key] = true
			c := w.session(len(w.sessions))
			c.title, c.key = fmt.Sprintf("t%d", c.k), s.key
			w.createSession(c, s)
		}})
	}
	w.createSession(s, nil)
}

// busyPolicies are the values of run/start's busy, "" the default.
var busyPolicies = []string{"", api.BusyReject, api.BusyQueue, api.BusyQueue, api.BusyQueue, api.BusyInterrupt, api.BusySteer, api.BusySteer}

func (w *world) doStart(s *simSession) {
	req := &sent{token: w.token("in"), key: w.key(0.4), session: s, busy: pickOne(w, busyPolicies)}
	p := api.StartRunParams{SessionID: s.id, Input: api.Input(input(req.token, w.shortText())), Busy: req.busy,
		IdempotencyKey: req.key}
	if w.rng.IntN(3) == 0 {
		p.MaxSteps = 1 + w.rng.IntN(5)
	}
	w.client.starts[req.token] = req
	if req.key != "" {
		w.client.keyed = append(w.client.keyed, &keyedReq{session: s, resend: func(conflict bool) {
			if !conflict {
				w.startRun(s, p, req)
				return
			}
			w.client.conflicted[req.key] = true
			c := &sent{token: w.token("in"), key: req.key, session: s, busy: req.busy}
			w.client.starts[c.token] = c
			q := p
			q.Input = api.Input(input(c.token, w.shortText()))
			w.startConflict(s, q, c, req)
		}})
	}
	w.startRun(s, p, req)
}

// startConflict sends run/start c with the key of the earlier request
// orig and other params: once orig is acknowledged, the host must refuse
// it (idempotency conflict); before, it may be a first request.
func (w *world) startConflict(s *simSession, p api.StartRunParams, c, orig *sent) {
	what := fmt.Sprintf("run/start %s %s busy=%s key=%s (conflicts with %s)", w.name(s.id), c.token, p.Busy, p.IdempotencyKey, orig.token)
	gen := w.gen
	issue(w, what, true, func(ctx context.Context, h *host.Host) (*api.RunResult, error) { return h.StartRun(ctx, p) },
		func(r *api.RunResult, err error) {
			if err != nil {
				w.tracef("← %s: %v", what, err)
				w.errOK(what, gen, err, api.KindRunConflict, api.KindNotFound, api.KindIdempotencyConflict)
				return
			}
			w.tracef("← %s: %s replayed=%v", what, r.ID, r.Replayed)
			if r.Replayed || orig.acked != "" {
				w.fail("%s was applied (replayed=%v), but key %s was acknowledged for %s with other params", what, r.Replayed, p.IdempotencyKey, orig.token)
			}
			id, steer := r.ID, false
			if r.Steer != nil {
				id, steer = r.Steer.SteerID, true
			}
			w.ack(what, c, id, steer)
		})
}

// activeRun returns the run of s that is running or waiting, if any.
func (s *simSession) activeRun() string {
	for _, id := range slices.Backward(s.log.runOrder) {
		if r := s.log.runs[id]; r.started && r.terminal == "" {
			return id
		}
	}
	return ""
}

// anyRun returns a run of s: mostly its active run, else any.
func (w *world) anyRun(s *simSession) string {
	if a := s.activeRun(); a != "" && w.rng.IntN(10) < 7 {
		return a
	}
	return pickOne(w, s.log.runOrder)
}

func (w *world) doSteer(s *simSession) {
	runID := w.anyRun(s)
	req := &sent{token: w.token("st"), key: w.key(0.3), session: s}
	p := api.SteerParams{RunID: runID, Input: api.Input(input(req.token, w.shortText())), IdempotencyKey: req.key}
	if w.rng.IntN(5) == 0 {
		p.ExpectedRunID = w.anyRun(s)
	}
	if req.key != "" {
		w.client.keyed = append(w.client.keyed, &keyedReq{session: s, resend: func(bool) { w.steer(s, p, req) }})
	}
	w.steer(s, p, req)
}

func (w *world) doCancel(s *simSession) {
	runID := w.anyRun(s)
	if w.rng.IntN(3) == 0 {
		// A queued run, if there is one.
		for _, id := range s.log.runOrder {
			if r := s.log.runs[id]; !r.started && r.terminal == "" {
				runID = id
				break
			}
		}
	}
	key := w.key(0.3)
	if key != "" {
		w.client.keyed = append(w.client.keyed, &keyedReq{session: s, resend: func(bool) { w.cancelRun(s, runID, key) }})
	}
	w.cancelRun(s, runID, key)
}

func (w *world) doWait(s *simSession) {
	w.wait(s, w.anyRun(s), pickOne(w, []int64{0, 1, 50, 1000, 30_000}))
}

// decisions are the answers a client gives an approval.
var decisions = []string{event.DecisionAllowOnce, event.DecisionAllowOnce, event.DecisionAllowOnce, event.DecisionAllowSession,
	event.DecisionDeny, event.DecisionDeny}

func (w *world) doDecide(s *simSession, q *reqState) {
	d := pickOne(w, decisions)
	if w.rng.IntN(6) == 0 {
		// A race: the same answer twice at once, with one key or none;
		// one wins, the other is already resolved (or a replay).
		key := ""
		if !w.keyedPending() && w.rng.IntN(2) == 0 {
			w.nextKey++
			key = fmt.Sprintf("k%d", w.nextKey)
		}
		w.tracef("race:")
		w.nextRace++
		w.racing = w.nextRace
		w.decide(s, q.id, d, key)
		w.decide(s, q.id, d, key)
		w.racing = 0
		return
	}
	key := w.key(0.3)
	if key != "" {
		w.client.keyed = append(w.client.keyed, &keyedReq{session: s, resend: func(conflict bool) {
			if !conflict {
				w.decide(s, q.id, d, key)
				return
			}
			w.client.conflicted[key] = true
			other := event.DecisionDeny
			if d == event.DecisionDeny {
				other = event.DecisionAllowOnce
			}
			w.decideConflict(s, q.id, other, key, d)
		}})
	}
	w.decide(s, q.id, d, key)
}

// decideConflict sends approval/decide with the key of an earlier
// decision (orig) and another decision.
func (w *world) decideConflict(s *simSession, id, decision, key, orig string) {
	p := api.DecideParams{ApprovalID: id, Decision: decision, IdempotencyKey: key}
	what := fmt.Sprintf("approval/decide %s %s key=%s (conflicts with %s)", id, decision, key, orig)
	gen := w.gen
	origAcked := w.client.answers[id] != nil && slices.Contains(w.client.answers[id].fresh, orig)
	issue(w, what, true, func(ctx context.Context, h *host.Host) (*api.RequestResult, error) { return h.DecideApproval(ctx, p) },
		func(r *api.RequestResult, err error) {
			if err != nil {
				w.tracef("← %s: %v", what, err)
				w.errOK(what, gen, err, api.KindAlreadyResolved, api.KindNotFound, api.KindIdempotencyConflict)
				return
			}
			w.tracef("← %s: %s %s replayed=%v", what, r.Status, r.Decision, r.Replayed)
			if r.Replayed || origAcked {
				w.fail("%s was applied (replayed=%v), but key %s was acknowledged for %s", what, r.Replayed, key, orig)
			}
			w.answeredWith(s, what, id, decision, r)
		})
}

func (w *world) doAnswer(s *simSession, q *reqState) {
	p := api.AnswerParams{IdempotencyKey: w.key(0.3)}
	if n := len(q.choices); n > 0 && w.rng.IntN(2) == 0 {
		c := w.rng.IntN(n)
		p.Choice = &c
	} else {
		p.Text = w.shortText()
	}
	if p.IdempotencyKey != "" {
		w.client.keyed = append(w.client.keyed, &keyedReq{session: s, resend: func(bool) { w.answer(s, q.id, p) }})
	}
	w.answer(s, q.id, p)
}

func (w *world) doToolResult(s *simSession, q *reqState) {
	out, key, byCall := "result "+w.shortText(), w.key(0.3), w.rng.IntN(2) == 0
	if key != "" {
		w.client.keyed = append(w.client.keyed, &keyedReq{session: s, resend: func(bool) { w.toolResult(s, q, byCall, out, key) }})
	}
	w.toolResult(s, q, byCall, out, key)
}

// doAnswerAgain answers a request that is closed: a double answer.
func (w *world) doAnswerAgain(s *simSession, q *reqState) {
	switch q.kind {
	case event.RequestApproval:
		w.decide(s, q.id, pickOne(w, decisions), "")
	case event.RequestInput:
		w.answer(s, q.id, api.AnswerParams{Text: "again"})
	case event.RequestTool:
		w.toolResult(s, q, false, "again", "")
	}
}

func (w *world) doUpdate(s *simSession) { w.update(s, w.shortText()) }

func (w *world) doDelete(s *simSession) { w.deleteSession(s) }

func (w *world) doRead(s *simSession) {
	last := int64(len(s.log.events))
	w.read(s, w.rng.Int64N(last+1), pickOne(w, []int{0, 1, 5, 1000}))
}

// maxSubscribers is how many subscribers a seed makes at most.
const maxSubscribers = 8

func (w *world) doSubscribe(s *simSession) {
	last := int64(len(s.log.events))
	from := pickOne(w, []int64{0, last, w.rng.Int64N(last + 1)})
	sub := &subscriber{n: len(w.subs) + 1, session: s, cursor: from, checked: from}
	w.subs = append(w.subs, sub)
	w.follow(sub)
}

// doModel hands the next chunks of a model call to it; in the drain
// (final), a new response ends the run's step without tool calls.
func (w *world) doModel(st *stream, final bool) {
	if !st.planned {
		st.plan, st.planned = w.plan(final), true
	}
	n := min(len(st.plan), 1+w.rng.IntN(3))
	if final {
		n = len(st.plan)
	}
	cs := st.plan[:n]
	st.plan = st.plan[n:]
	w.tracef("model s%d: %s", st.k, describe(cs))
	st.send(cs...)
}

// plan is a model response: sometimes an error before any output (which
// the loop retries), text and reasoning in fragments, sometimes tool
// calls, and sometimes a stream cut after output began.
func (w *world) plan(final bool) []chunk {
	r := w.rng
	after := func() time.Duration {
		return pickOne(w, []time.Duration{100 * time.Millisecond, 1300 * time.Millisecond, 5 * time.Second})
	}
	if !final {
		switch x := r.IntN(100); {
		case x < 4:
			return []chunk{{err: &llm.Error{Provider: "sim", Kind: llm.KindRateLimited, StatusCode: 429, Retryable: true, RetryAfter: after()}}}
		case x < 7:
			return []chunk{{err: &llm.Error{Provider: "sim", Kind: llm.KindServer, StatusCode: 500, Retryable: true, RetryAfter: after()}}}
		case x < 9:
			return []chunk{{err: &llm.Error{Provider: "sim", Kind: llm.KindStreamCut, Retryable: true, RetryAfter: after()}}}
		case x < 10:
			return []chunk{{err: &llm.Error{Provider: "sim", Kind: llm.KindAuth, StatusCode: 401}}}
		}
	}
	var out []chunk
	if r.IntN(4) == 0 {
		out = append(out, chunk{ev: llm.StreamEvent{Reasoning: w.shortText()}})
	}
	for range r.IntN(3) {
		out = append(out, chunk{ev: llm.StreamEvent{Text: w.shortText() + " "}})
	}
	if !final && len(out) > 0 && r.IntN(25) == 0 {
		// Cut after output began: quietly, or with the provider's error.
		if r.IntN(2) == 0 {
			return append(out, chunk{quiet: true})
		}
		return append(out, chunk{err: &llm.Error{Provider: "sim", Kind: llm.KindStreamCut, Retryable: true, RetryAfter: after()}})
	}
	if final || r.IntN(2) == 0 {
		if len(out) == 0 {
			out = append(out, chunk{ev: llm.StreamEvent{Text: "done"}})
		}
		return append(out, usage(10, 5), chunk{ev: llm.StreamEvent{Finish: &llm.Finish{Reason: llm.FinishStop}}})
	}
	for i, c := range w.stepCalls() {
		w.nextCall++
		out = append(out, toolCallChunks(i, fmt.Sprintf("call%d", w.nextCall), c, r.IntN(2) == 0)...)
	}
	return append(out, usage(12, 7), chunk{ev: llm.StreamEvent{Finish: &llm.Finish{Reason: llm.FinishToolCalls}}})
}

// stepCalls are the tool calls of one step: one to three of the menu.
// At most one of them ends at once when it runs (an unknown tool, bad
// arguments): two such calls would write their results concurrently. At
// most one has a deadline (ask_timed, ask_user): two deadlines at the
// same instant would expire concurrently.
func (w *world) stepCalls() []stepCall {
	menu := []struct {
		c       stepCall
		w       int
		instant bool
		timed   bool
	}{
		{stepCall{toolWork, callArgs(1)}, 5, false, false},
		{stepCall{toolAsk, callArgs(2)}, 4, false, false},
		{stepCall{toolAskTimed, callArgs(3)}, 1, false, true},
		{stepCall{toolDenied, callArgs(4)}, 1, false, false},
		{stepCall{"ask_user", `{"question":"which?","choices":["red","blue"]}`}, 2, false, true},
		{stepCall{"ask_user", `{"question":""}`}, 1, false, false},
		{stepCall{toolClient, callArgs(5)}, 2, false, false},
		{stepCall{toolUnknown, callArgs(6)}, 1, true, false},
		{stepCall{toolWork, `{"n":"not a number"}`}, 1, true, false},
	}
	total := 0
	for _, m := range menu {
		total += m.w
	}
	var out []stepCall
	instant, timed := false, false
	for range 1 + w.rng.IntN(3) {
		x := w.rng.IntN(total)
		for _, m := range menu {
			if x -= m.w; x >= 0 {
				continue
			}
			if m.instant && instant || m.timed && timed {
				break
			}
			instant, timed = instant || m.instant, timed || m.timed
			out = append(out, m.c)
			break
		}
	}
	if len(out) == 0 {
		out = append(out, menu[0].c)
	}
	return out
}

// describe summarises chunks for the trace.
func describe(cs []chunk) string {
	s := ""
	for _, c := range cs {
		switch {
		case c.quiet:
			s += " [ends without finishing]"
		case c.err != nil:
			s += fmt.Sprintf(" [error %v]", c.err)
		case c.ev.Text != "":
			s += fmt.Sprintf(" %q", c.ev.Text)
		case c.ev.Reasoning != "":
			s += fmt.Sprintf(" (thinks %q)", c.ev.Reasoning)
		case c.ev.ToolCall != nil:
			d := c.ev.ToolCall
			s += fmt.Sprintf(" call[%d]%s %s%s", d.Index, d.ID, d.Name, d.Arguments)
		case c.ev.Usage != nil:
			s += " usage"
		case c.ev.Finish != nil:
			s += " finish:" + c.ev.Finish.Reason
		}
	}
	return s
}

// doTool ends a running tool call: with a result, or with an error.
func (w *world) doTool(tc *toolCall) {
	res := tool.Result{Output: fmt.Sprintf("ok %d", tc.n)}
	if w.rng.IntN(6) == 0 {
		res = tool.Result{Output: "the tool failed", IsError: true}
	}
	w.tracef("tool %s of %s ends: %q", tc.id, tc.run, res.Output)
	tc.end <- res
}

// doAdvance moves fake time on; the timers due meanwhile fire, each
// instant's before the next.
func (w *world) doAdvance() {
	d := pickOne(w, []time.Duration{time.Millisecond, 7 * time.Millisecond, 40 * time.Millisecond, 300 * time.Millisecond,
		2 * time.Second, 2 * time.Second, 30 * time.Second, 100 * time.Second, 6 * time.Minute})
	w.tracef("advance %v", d)
	w.fs.setPhase(phaseClock)
	time.Sleep(d)
}

func (w *world) setFull(full bool) {
	w.fs.mu.Lock()
	w.fs.full = full
	w.fs.mu.Unlock()
	if full {
		w.stats.faults++
		w.tracef("fault: the disk is full")
	} else {
		w.tracef("the disk is freed")
	}
}

// doCrash arms a crash: now, or at one of the next appends.
func (w *world) doCrash() {
	w.stats.faults++
	k := w.rng.IntN(5)
	if k == 0 {
		w.tracef("fault: crash now")
		w.fs.crash(func(string) heldVerdict { return crashHeld })
		return
	}
	commits := w.rng.IntN(2) == 0
	w.tracef("fault: crash at the %d. append from now (it commits: %v)", k, commits)
	w.fs.mu.Lock()
	w.fs.crashIn, w.fs.crashCommits = k, commits
	w.fs.mu.Unlock()
}

// doFault sets a fault on one session's next append: refused, lost
// after its commit, or held until a later step.
func (w *world) doFault(s *simSession) {
	w.stats.faults++
	w.fs.mu.Lock()
	defer w.fs.mu.Unlock()
	switch w.rng.IntN(3) {
	case 0:
		w.fs.refuse[s.id]++
		w.tracef("fault: %s's next append is refused", w.name(s.id))
	case 1:
		w.fs.lose[s.id]++
		w.tracef("fault: %s's next append commits, but its writer hears an error", w.name(s.id))
	default:
		w.fs.hold[s.id] = true
		w.tracef("fault: %s's next append is slow (held until released)", w.name(s.id))
	}
}

// drain brings the simulation to rest: faults cleared, every request
// answered, every tool call ended, every model call finished; then
// every run must have ended and every subscriber caught up.
func (w *world) drain() {
	w.tracef("drain")
	w.fs.mu.Lock()
	w.fs.full, w.fs.crashIn = false, 0
	clear(w.fs.hold)
	clear(w.fs.refuse)
	clear(w.fs.lose)
	w.fs.mu.Unlock()
	tried := map[string]time.Time{} // requests answered, when
	for i := 0; ; i++ {
		w.step++
		if i == 500 {
			w.fail("the simulation does not come to rest: %s", w.unrest())
		}
		switch {
		case len(w.fs.heldSessions()) > 0:
			s := w.fs.heldSessions()[0]
			w.tracef("release the held commit of %s", w.name(s))
			w.fs.release(s, commitHeld)
		case len(w.m.streams()) > 0:
			w.doModel(w.m.streams()[0], true)
		case len(w.tools.pending()) > 0:
			w.doTool(w.tools.pending()[0])
		case w.answerOne(tried):
		case w.unrest() != "":
			// Commands in flight (a wait, a cancel that hangs) end by
			// their timeouts: larger steps of time then.
			d := time.Second
			if len(w.cmds) > 0 && len(w.m.streams()) == 0 && w.tools.executing() == 0 {
				d = time.Minute
			}
			w.fs.setPhase(phaseClock)
			w.tracef("advance %v", d)
			time.Sleep(d)
		default:
			// At rest: let the subscribers' last wakes fire, then check.
			w.fs.setPhase(phaseClock)
			time.Sleep(time.Second)
			w.settle()
			w.checkLogs(true)
			w.check()
			w.checkCaughtUp()
			return
		}
		w.settle()
		w.check()
	}
}

// answerOne answers the oldest open request, if there is one that was
// not answered in the last 10 s (tried says when each was): an answer
// the store refused is tried again once the session had time to recover.
func (w *world) answerOne(tried map[string]time.Time) bool {
	for _, s := range w.known() {
		for _, id := range s.log.reqOrder {
			q := s.log.reqs[id]
			if q.resolved > 0 || s.log.runs[q.run].terminal != "" {
				continue
			}
			if t, ok := tried[id]; ok && time.Since(t) < 10*time.Second {
				continue
			}
			tried[id] = time.Now()
			switch q.kind {
			case event.RequestApproval:
				w.decide(s, q.id, event.DecisionAllowOnce, "")
			case event.RequestInput:
				w.answer(s, q.id, api.AnswerParams{Text: "fine"})
			case event.RequestTool:
				w.toolResult(s, q, false, "done", "")
			}
			return true
		}
	}
	return false
}

// unrest says what keeps the simulation from being at rest, or "".
func (w *world) unrest() string {
	if len(w.cmds) > 0 {
		return fmt.Sprintf("%d commands in flight (%s first)", len(w.cmds), w.cmds[0].what)
	}
	for _, s := range w.known() {
		for _, id := range s.log.runOrder {
			if r := s.log.runs[id]; r.terminal == "" {
				return fmt.Sprintf("run %s of %s has not ended (%s)", id, w.name(s.id), s.log.status(id))
			}
		}
	}
	if w.fs.describe() != "" {
		return w.fs.describe()
	}
	return ""
}

// checkCaughtUp checks, at rest, that every subscription still open has
// received its session's whole log.
func (w *world) checkCaughtUp() {
	for _, sub := range w.subs {
		_, ended, _ := sub.peek()
		sub.mu.Lock()
		cur := sub.cursor
		sub.mu.Unlock()
		if last := int64(len(sub.session.log.events)); !ended && cur != last {
			w.fail("subscription #%d of %s is at seq %d at rest; the log ends at %d", sub.n, w.name(sub.session.id), cur, last)
		}
	}
}

// status is a run's status in the projection of the log.
func (l *logState) status(id string) string {
	if r, ok := l.proj.Run(id); ok {
		return r.Status
	}
	return "unknown"
}
