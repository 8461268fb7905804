package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
	"weft.dev/weft/env"

	"weft.dev/weft/agent"
	"weft.dev/weft/api"
	"weft.dev/weft/event"
	"weft.dev/weft/host/internal/idem"
	"weft.dev/weft/host/internal/reconcile"
	"weft.dev/weft/host/internal/spans"
	"weft.dev/weft/host/internal/transcript"
	"weft.dev/weft/llm"
	"weft.dev/weft/store"
	"weft.dev/weft/store/record"
	"weft.dev/weft/tool"
	"weft.dev/weft/tool/mcp"
)

// activeID returns the run that makes the session busy: the active run
// unless its terminal event is already committed (its goroutine is only
// tidying up, and starts the next queued run when it has).
func (s *Session) activeID() string {
	if s.active == nil {
		return ""
	}
	// The projection holds every run that has not ended.
	if r, ok := s.j.Run(s.active.id); !ok || record.IsTerminal(r.Status) {
		return ""
	}
	return s.active.id
}

// busyWith returns the run a client sees as the session's active run: the
// active run, or, while that one only tidies up after its terminal event
// (or while the session holds its queue, see Config.HoldQueued), the
// queued run that starts next.
func (s *Session) busyWith() (id string, queued bool) {
	if id := s.activeID(); id != "" {
		return id, false
	}
	if len(s.queue) > 0 {
		return s.queue[0].id, true
	}
	return "", false
}

// Start admits a run of p (validated by the host) under p.Busy: it starts
// at once on an idle session; otherwise it is queued behind the active run
// (queue), replaces it (interrupt), or is folded into it as a steer
// (steer); reject refuses with api.ErrRunConflict naming the active run.
// run.queued (or steer.accepted) is committed with rc's receipt.
func (s *Session) Start(ctx context.Context, p api.StartRunParams, rc *idem.Claim) (*api.RunResult, error) {
	var res *api.RunResult
	err := s.command(func() error {
		activeID := s.activeID()
		busyID, busyQueued := s.busyWith()
		q := queuedRun{id: s.cfg.NewID("run"), model: p.Model, maxSteps: p.MaxSteps, input: p.Input, tools: clientTools(p.Tools),
			defaultPreset: p.DefaultPreset, busy: p.Busy}
		var own event.Budget
		if p.Budget != nil {
			own = *p.Budget
		}
		if b := own.Over(s.cfg.RunBudget); !b.IsZero() {
			q.budget = &b
		}
		if p.Policy != nil {
			q.policy, _ = json.Marshal(p.Policy)
		}
		ref := idem.Ref{ID: q.id}
		if activeID == "" && len(s.queue) == 0 {
			r, err := s.admit(ctx, q, rc, ref, false)
			res = &api.RunResult{Run: r}
			return err
		}
		switch p.Busy {
		case api.BusyQueue:
			r, err := s.admit(ctx, q, rc, ref, false)
			res = &api.RunResult{Run: r}
			return err
		case api.BusyInterrupt:
			reason := "interrupted by run " + q.id
			if busyQueued {
				// It has not started: it ends now, and the new run takes its place.
				if err := s.cancelQueued(ctx, busyID, reason, nil); err != nil {
					return err
				}
			}
			r, err := s.admit(ctx, q, rc, ref, true)
			if err != nil {
				return err
			}
			if !busyQueued && s.active != nil {
				if s.active.parked {
					if err := s.cancelParked(ctx, s.active, reason, nil); err != nil {
						return err
					}
				} else {
					s.active.cancel(errors.New(reason))
				}
			}
			res = &api.RunResult{Run: r}
			return nil
		case api.BusySteer:
			if activeID == "" {
				// The active run only tidies up (or the queue is held):
				// the run that starts next takes the steer.
				rcpt := &api.SteerReceipt{SteerID: s.cfg.NewID("steer"), RunID: busyID, Status: "accepted"}
				cur, err := s.steerQueued(ctx, rcpt.SteerID, p.Input, rc, idem.Ref{ID: busyID, Steer: rcpt})
				if err != nil {
					return err
				}
				rcpt.EventCursor = cur
				r, _ := s.j.Run(busyID)
				res = &api.RunResult{Run: r, Steer: rcpt}
				return nil
			}
			rcpt := &api.SteerReceipt{SteerID: s.cfg.NewID("steer"), RunID: activeID, Status: "accepted"}
			cur, err := s.steer(ctx, s.active, rcpt.SteerID, p.Input, rc, idem.Ref{ID: activeID, Steer: rcpt})
			if err != nil {
				return err
			}
			rcpt.EventCursor = cur
			r, _ := s.j.Run(activeID)
			res = &api.RunResult{Run: r, Steer: rcpt}
			return nil
		}
		return api.Errorf(api.KindRunConflict, "session %s is busy with run %s (start with busy queue, interrupt or steer)", s.id, busyID).
			With("sessionId", s.id).With("activeRunId", busyID)
	})
	return res, err
}

// admit appends run.queued for a new run and starts it if the session is
// idle. Called by commands.
func (s *Session) admit(ctx context.Context, q queuedRun, rc *idem.Claim, ref idem.Ref, front bool) (record.Run, error) {
	e, err := event.New(q.id, event.RunQueued, event.RunQueuedData{Model: q.model, MaxSteps: q.maxSteps, Input: q.input, Policy: q.policy,
		DefaultPreset: q.defaultPreset, Tools: q.tools, Busy: q.busy, Budget: q.budget})
	if err != nil {
		return record.Run{}, err
	}
	s.track(q.id)
	if _, err := s.append(ctx, rc, ref, e); err != nil {
		s.waits.untrack(q.id)
		return record.Run{}, err
	}
	if front {
		s.queue = append([]queuedRun{q}, s.queue...)
	} else {
		s.queue = append(s.queue, q)
	}
	s.held = false
	if s.active == nil {
		s.startNext()
	}
	r, _ := s.j.Run(q.id)
	return r, nil
}

// steerQueued appends steer.accepted for the queued run that starts next
// and keeps the steer for its inbox, starting the queue if the session
// held it. Called by commands.
func (s *Session) steerQueued(ctx context.Context, steerID string, input []event.Part, rc *idem.Claim, ref idem.Ref) (int64, error) {
	q := &s.queue[0]
	e, err := event.New(q.id, event.SteerAccepted, event.SteerData{SteerID: steerID, Input: input})
	if err != nil {
		return 0, err
	}
	evs, err := s.append(ctx, rc, ref, e)
	if err != nil {
		return 0, err
	}
	q.steers = append(q.steers, agent.Steer{ID: steerID, Input: input})
	s.held = false
	if s.active == nil {
		s.startNext()
	}
	return evs[0].Seq, nil
}

// startNext starts the first queued run. Called with mu held and no
// active run; it does nothing while the session is not open or holds its
// queue, and while its journal has failed: a run whose own write failed
// is done with the session before the watcher marks it failed, and the
// next run must stay queued for the recovery to start, not start on a
// journal that refuses every write.
func (s *Session) startNext() {
	if len(s.queue) == 0 || s.held || s.compacting || s.handingOver || s.state != stateOpen || s.ctx.Err() != nil || s.j.Err() != nil {
		return
	}
	q := s.queue[0]
	s.queue = s.queue[1:]
	s.active = &activeRun{id: q.id, q: q, inbox: &agent.Steers{}}
	for _, st := range q.steers {
		s.active.inbox.Add(nil, st)
	}
	s.launch(s.active, false)
}

// restoreQueue rebuilds, on load, the queue from the log (see
// queueFromLog); the first run starts unless a run is active or
// Config.HoldQueued holds the queue. Called with mu held.
func (s *Session) restoreQueue(ctx context.Context) error {
	queue, err := s.queueFromLog(ctx, "")
	if err != nil {
		return err
	}
	s.queue = append(s.queue, queue...)
	s.held = s.cfg.HoldQueued && len(s.queue) > 0
	if s.active == nil {
		s.startNext()
	}
	return nil
}

// queueFromLog returns the queue the log holds: the runs whose record is
// queued (admitted, never started), but run except, in the order the
// session starts them (the order of their run.queued, a run admitted with busy
// interrupt before those queued earlier), each with the parameters and
// the steers (accepted, neither consumed nor dropped) its log holds, and
// with its done channel made (see track). A load, and the recovery from
// a write failure (whose lost answer may have committed a run.queued or
// a steer the session does not know of), take the queue from it.
func (s *Session) queueFromLog(ctx context.Context, except string) ([]queuedRun, error) {
	runs, err := s.cfg.Store.Runs(ctx, store.ListRunsParams{SessionID: s.id, Statuses: []string{record.RunQueued}, Limit: 1 << 20})
	if err != nil {
		return nil, storageErr(s.id, err)
	}
	queued := map[string]bool{}
	var first int64
	for _, r := range runs {
		if r.ID == except {
			continue
		}
		if len(queued) == 0 || r.FirstSeq < first {
			first = r.FirstSeq
		}
		queued[r.ID] = true
	}
	if len(queued) == 0 {
		return nil, nil
	}
	evs, err := s.readAll(ctx, first-1, []event.Type{event.RunQueued, event.SteerAccepted, event.SteerConsumed, event.SteerDropped})
	if err != nil {
		return nil, storageErr(s.id, err)
	}
	var order []string
	byRun := map[string][]event.Event{}
	for _, e := range evs {
		if !queued[e.RunID] {
			continue
		}
		if e.Type == event.RunQueued {
			order = append(order, e.RunID)
		}
		byRun[e.RunID] = append(byRun[e.RunID], e)
	}
	var queue []queuedRun
	for _, id := range order {
		q, err := runFromLog(byRun[id], id)
		if err != nil {
			return nil, fmt.Errorf("session %s: %w", s.id, err)
		}
		if q.busy == api.BusyInterrupt {
			queue = append([]queuedRun{q}, queue...)
		} else {
			queue = append(queue, q)
		}
	}
	for _, q := range queue {
		s.track(q.id)
	}
	return queue, nil
}

// runFromLog returns run id as its run.queued in evs admitted it, with
// the steers evs show it accepted and neither consumed nor dropped. evs
// hold at least the run's run.queued and steer events.
func runFromLog(evs []event.Event, id string) (queuedRun, error) {
	var q queuedRun
	var steers []event.SteerData
	ended := map[string]bool{}
	for _, e := range evs {
		if e.RunID != id {
			continue
		}
		switch e.Type {
		case event.RunQueued:
			var d event.RunQueuedData
			if err := e.Decode(&d); err != nil {
				return q, fmt.Errorf("run %s: %w", id, err)
			}
			q = queuedFrom(id, d)
		case event.SteerAccepted:
			var d event.SteerData
			if err := e.Decode(&d); err != nil {
				return q, fmt.Errorf("run %s: %w", id, err)
			}
			steers = append(steers, d)
		case event.SteerConsumed, event.SteerDropped:
			var d event.SteerData
			if err := e.Decode(&d); err != nil {
				return q, fmt.Errorf("run %s: %w", id, err)
			}
			ended[d.SteerID] = true
		}
	}
	if q.id == "" {
		return q, fmt.Errorf("run %s: no run.queued in its log", id)
	}
	for _, st := range steers {
		if !ended[st.SteerID] {
			q.steers = append(q.steers, agent.Steer{ID: st.SteerID, Input: st.Input})
		}
	}
	return q, nil
}

// launch runs a's loop in a goroutine of the session's: from the start,
// or, with resume, on from the step it waited in. When the loop parks the
// run waits without a goroutine; when it ends, the next queued run
// starts. Called with mu held, the session open.
func (s *Session) launch(a *activeRun, resume bool) {
	ctx, cancel := context.WithCancelCause(s.ctx)
	a.cancel, a.parked, a.finished, a.handover = cancel, false, make(chan struct{}), &agent.Handover{}
	finished := a.finished
	s.wg.Go(func() {
		defer close(finished)
		defer cancel(nil)
		out := s.execute(ctx, a, resume)
		s.mu.Lock()
		defer s.mu.Unlock()
		if out.Suspended {
			// Handed over (run.suspended): it stays the active run,
			// parked with no request, until the session closes; its next
			// owner resumes it from the log.
			a.parked, a.cancel, a.handover = true, nil, nil
			a.resume, a.history = nil, nil
			return
		}
		if out.Waiting {
			a.parked, a.cancel = true, nil
			a.resume, a.history = out.Resume, out.History
			if s.answeredWhileParking(a) {
				// An answer committed before the run parked is not in the
				// state it parked with: resume from the log.
				a.resume, a.history = nil, nil
			}
			if s.state != stateOpen {
				return
			}
			if f := a.declined; f != nil && ctx.Err() == nil {
				// "No" to its budget question came as it parked.
				a.declined = nil
				if err := s.endParked(context.WithoutCancel(ctx), a, parkedEnd{failure: f, reason: "the run ended", ref: idem.Ref{ID: a.id}}, nil); err != nil {
					s.cfg.Logger.Error("end a run whose budget was not raised", "session", s.id, "run", a.id, "err", err)
				}
				return
			}
			if ctx.Err() != nil && s.ctx.Err() == nil {
				// A cancel came after the loop last looked and before the
				// run parked; its caller waits for the terminal event.
				wctx := context.WithoutCancel(ctx)
				if err := s.cancelParked(wctx, a, context.Cause(ctx).Error(), nil); err != nil {
					s.cfg.Logger.Error("cancel a run as it parked", "session", s.id, "run", a.id, "err", err)
				}
				return
			}
			// An answer may have come while the run was parking.
			s.resumeIfAnswered(a.id)
			return
		}
		s.active = nil
		if h := s.cfg.HostSpend; h != nil && out.Type != "" {
			h.add(&a.hostSeen, out.Usage, out.Steps) // the run's last step
		}
		if r, ok := s.j.Run(a.id); ok && !record.IsTerminal(r.Status) && s.j.Err() != nil {
			// The journal failed under the run: the recovery ends it,
			// whether or not its run.started committed.
			s.orphan = a.id
		}
		s.closeRetired()
		s.saveTranscript()
		if r, ok := s.j.Run(a.id); ok && !record.IsTerminal(r.Status) && s.j.Err() == nil {
			// The loop stopped without a terminal event the store took
			// (it refused that batch alone): end the run as the log
			// stands, so that it is not left running.
			s.endCutShort(a.id)
		}
		s.startNext()
		if r, ok := s.j.Run(a.id); !ok || record.IsTerminal(r.Status) {
			// A run that did not end here (the journal failed) is
			// settled by the recovery that ends it.
			s.settle(a.id)
		}
	})
}

// endCutShort ends run id, whose loop stopped without a terminal event
// the store took, with run.failed, closing its tool calls and dropping
// its steers (as recovery would). Called with mu held, the run's
// goroutine done.
func (s *Session) endCutShort(id string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(s.ctx), 30*time.Second)
	defer cancel()
	failure := &event.Error{Kind: "log", Message: "the store refused the run's last events"}
	_, err := reconcile.Session(ctx, s.cfg.Store, s.j, s.id, reconcile.Options{
		Keep: func(r record.Run) bool { return r.ID != id }, Failure: failure,
	})
	if err != nil {
		s.cfg.Logger.Error("end a run the store cut short", "session", s.id, "run", id, "err", err)
	}
}

// saveTranscript stores a snapshot of the session's transcript, when one
// is due, in a goroutine of the session's, so that the next run does not
// wait for it. Called with mu held.
func (s *Session) saveTranscript() {
	if s.state != stateOpen {
		return
	}
	j, ok := s.conv.Due()
	if !ok {
		return
	}
	s.wg.Go(func() {
		err := s.putSnapshot(j)
		if err != nil {
			s.cfg.Logger.Warn("store transcript snapshot", "session", s.id, "seq", j.Seq(), "err", err)
		}
		s.conv.Saved(j, err)
	})
}

// putSnapshot encodes and stores j.
func (s *Session) putSnapshot(j transcript.Snapshot) error {
	data, err := j.MarshalBinary()
	if err != nil {
		return err
	}
	// Not cancelled by the session's close, which waits for it: a
	// snapshot due when the session unloads is the one its next load
	// reads. A store that hangs is given a bound.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(s.ctx), 10*time.Second)
	defer cancel()
	return s.cfg.Store.PutSnapshot(ctx, record.Snapshot{
		SessionID: s.id, Kind: record.SnapshotTranscript, Seq: j.Seq(), Data: data, CreatedAt: time.Now(),
		Epoch: s.Epoch(), // fenced: a host that lost the session writes no snapshot
	})
}

// sessionLog is the session's [transcript.Log]: its snapshot and its log
// in the store.
type sessionLog struct{ s *Session }

func (l sessionLog) Snapshot(ctx context.Context) (*agent.TranscriptBuilder, int64, bool) {
	snap, err := l.s.cfg.Store.Snapshot(ctx, l.s.id, record.SnapshotTranscript)
	if err != nil {
		if !errors.Is(err, store.ErrNotFound) {
			l.s.cfg.Logger.Warn("read transcript snapshot; reading the log instead", "session", l.s.id, "err", err)
		}
		return nil, 0, false
	}
	b := &agent.TranscriptBuilder{}
	if err := b.UnmarshalBinary(snap.Data); err != nil {
		l.s.cfg.Logger.Warn("transcript snapshot does not decode; reading the log instead", "session", l.s.id, "seq", snap.Seq, "err", err)
		return nil, 0, false
	}
	return b, snap.Seq, true
}

func (l sessionLog) Events(ctx context.Context, after int64) ([]event.Event, error) {
	return l.s.readAll(ctx, after, agent.TranscriptTypes())
}

// answeredWhileParking reports whether any of a's requests was answered
// between their commit and a parking: then a.resume lacks that answer.
func (s *Session) answeredWhileParking(a *activeRun) bool {
	if a.resume == nil {
		return false
	}
	waiting := 0
	if a.resume.Budget != "" {
		waiting++
	}
	for _, p := range a.resume.Calls {
		if p.Result == nil && !p.Run && p.Refuse == "" {
			waiting++
		}
	}
	open := 0
	for _, q := range s.j.OpenRequests() {
		if q.RunID == a.id {
			open++
		}
	}
	return open != waiting
}

// runLog is the log a run's agent loop writes to: the session's journal,
// with the receipts of the cancels that ended the run stored in the same
// transaction as its terminal event.
type runLog struct {
	s *Session
	a *activeRun
}

func (l runLog) journal() journalWriter {
	l.s.mu.Lock()
	defer l.s.mu.Unlock()
	return l.s.j
}

// journalWriter is what a run writes through.
type journalWriter interface {
	AppendReceipts(ctx context.Context, receipts []record.Receipt, events ...event.Event) ([]event.Event, error)
	Delta(ctx context.Context, runID string, t event.Type, step int, text string) error
}

func (l runLog) Append(ctx context.Context, evs ...event.Event) ([]event.Event, error) {
	out, err := l.append(ctx, evs...)
	if err == nil {
		l.s.scheduleDeadlines(out)
	}
	return out, err
}

// AppendEnd implements agent.EndLog: under the session's lock, against
// which the answers commit, it closes what of gated is still open (an
// answer that came while the step's other calls ran stays the answer)
// and appends last with it.
func (l runLog) AppendEnd(ctx context.Context, runID string, gated []record.Request, reason string, last ...event.Event) ([]event.Event, error) {
	l.s.mu.Lock()
	defer l.s.mu.Unlock()
	open := map[string]bool{}
	for _, q := range l.s.j.OpenRequests() {
		if q.RunID == runID {
			open[q.ID] = true
		}
	}
	evs, err := agent.CloseGated(runID, gated, func(id string) bool { return open[id] }, reason)
	if err != nil {
		return nil, err
	}
	out, err := l.appendTo(ctx, l.s.j, append(evs, last...)...)
	if err == nil {
		for _, q := range gated {
			l.s.deadlines.stop(q.ID)
		}
	}
	return out, err
}

func (l runLog) append(ctx context.Context, evs ...event.Event) ([]event.Event, error) {
	return l.appendTo(ctx, l.journal(), evs...)
}

// appendTo appends evs to j, with the receipts of the cancels that ended
// the run if evs hold its terminal event.
func (l runLog) appendTo(ctx context.Context, j journalWriter, evs ...event.Event) ([]event.Event, error) {
	var claims []*idem.Claim
	var rcpts []record.Receipt
	for _, e := range evs {
		if e.RunID == l.a.id && event.IsTerminalRun(e.Type) {
			claims = l.a.receipts.take()
			for _, c := range claims {
				rcpts = append(rcpts, c.Receipt(l.s.id, idem.Ref{ID: l.a.id}))
			}
		}
	}
	out, err := j.AppendReceipts(ctx, rcpts, evs...)
	if len(rcpts) > 0 && errors.Is(err, store.ErrReceiptExists) {
		// Another writer stored a cancel's key first: the run ends all the
		// same, and those cancels are answered from the stored receipts.
		claims = nil
		out, err = j.AppendReceipts(ctx, nil, evs...)
	}
	if err == nil {
		for _, c := range claims {
			c.Stored()
		}
	}
	return out, err
}

func (l runLog) Delta(ctx context.Context, runID string, t event.Type, step int, text string) error {
	return l.journal().Delta(ctx, runID, t, step, text)
}

// execute runs a's loop until the run ends or parks: from the start, or
// with resume, on from the step it waited in. A failure before the loop
// starts (unknown model, unusable mounts, a policy that does not
// compile) still ends the run.
func (s *Session) execute(ctx context.Context, a *activeRun, resume bool) agent.Outcome {
	q := a.q
	log := runLog{s: s, a: a}
	fail := func(kind, msg string) agent.Outcome {
		a.inbox.Close()
		e, _ := event.New(q.id, event.RunFailed, event.RunEndedData{Error: &event.Error{Kind: kind, Message: msg}})
		if ctx.Err() != nil {
			// Cancelled before the loop began: that is a cancel, not a failure.
			e, _ = event.New(q.id, event.RunCancelled, event.RunEndedData{Reason: context.Cause(ctx).Error()})
		}
		if _, err := log.Append(context.WithoutCancel(ctx), e); err != nil {
			s.cfg.Logger.Error("write the end of a run", "session", s.id, "run", q.id, "err", err)
		}
		return agent.Outcome{Type: e.Type}
	}
	name := q.model
	if name == "" {
		name = s.Record().Model
	}
	if name == "" {
		name = s.cfg.DefaultModel
	}
	m, err := s.cfg.ResolveModel(name)
	if err != nil {
		return fail("model", err.Error())
	}
	if _, err := s.binding(); err != nil {
		return fail("environment", err.Error())
	}
	s.mu.Lock()
	set, err := s.compilePolicy(q.policy, q.defaultPreset)
	specs, names := s.clientTools(q)
	a.policy = set
	s.mu.Unlock()
	if err != nil {
		return fail("policy", err.Error())
	}
	run := agent.Run{
		ID: q.id, SessionID: s.id, ModelName: m.Name, Input: q.input,
		Env: s.currentBinding, Inbox: a.inbox, Background: background{s},
		Gate: &gate{s: s, a: a, client: names}, ClientTools: specs, Instructions: s.instructions(a),
		Guard: s.guardFor(a), Budget: budgetCheck{s: s, a: a, id: q.id},
	}
	s.mu.Lock()
	run.Handover = a.handover
	s.mu.Unlock()
	if s.cfg.MCP != nil {
		run.Tools = func(ctx context.Context) *tool.Registry { return s.stepTools(ctx, q.id, log) }
	}
	if par := s.Record().Parent; par != nil {
		// A subagent's session: only the tools its parent gave it.
		all, names := run.Tools, par.Tools
		run.Tools = func(ctx context.Context) *tool.Registry {
			reg := s.cfg.Tools
			if all != nil {
				reg = all(ctx)
			}
			return reg.Subset(names)
		}
	}
	run.State = s.compactionState
	summarizer, err := s.compactModel(m)
	if err != nil {
		return fail("model", err.Error())
	}
	if ck := s.cfg.Checkpoint; ck != nil {
		run.Checkpoint = func(ctx context.Context, b *env.Binding, calls []event.ToolCall) func(context.Context) []event.Event {
			return ck(ctx, s.id, b, calls)
		}
	}
	if resume {
		s.mu.Lock()
		run.History, run.Resume = a.history, a.resume
		a.history, a.resume = nil, nil
		s.mu.Unlock()
		if run.Resume == nil {
			evs, err := s.readAll(ctx, 0, agent.ResumeTypes())
			if err != nil {
				return fail("log", err.Error())
			}
			if run.History, run.Resume, err = agent.ResumeState(evs, q.id); err != nil {
				return fail("log", err.Error())
			}
		}
	} else {
		hist, basis, err := s.conv.Messages(ctx, sessionLog{s})
		if err != nil {
			return fail("log", err.Error())
		}
		run.History, run.Basis, run.OwnHistory = s.takeRunBuf(hist), basis, true
	}
	s.mu.Lock()
	if !a.hostSeen.seeded {
		// A run resumed after a restart: the host's spend at its start
		// counted what its record held.
		a.hostSeen.seeded = true
		if run.Resume != nil {
			a.hostSeen.usage, a.hostSeen.steps = run.Resume.Usage, run.Resume.Steps
		}
	}
	s.mu.Unlock()
	maxSteps := q.maxSteps
	if maxSteps <= 0 {
		maxSteps = s.cfg.MaxSteps
	}
	if s.spans != nil {
		var parent spans.Parent
		if resume {
			// A resumed run's span continues its first execution's trace.
			s.mu.Lock()
			j := s.j
			s.mu.Unlock()
			if r, ok := j.Run(q.id); ok {
				parent = spans.Parent{TraceID: r.TraceID, SpanID: r.SpanID}
			}
		}
		run.TraceID, run.SpanID = s.spans.StartRun(q.id, m.Name, parent)
	}
	out, err := agent.Execute(ctx, agent.Config{
		Provider: m.Provider, Model: m.Model, Tools: s.cfg.Tools, MaxSteps: maxSteps,
		MaxTokens: m.MaxTokens, Logger: s.cfg.Logger,
		ContextWindow: m.ContextWindow, CompactAt: m.CompactAt, CompactModel: summarizer, Price: m.Price,
	}, log, run)
	if err != nil {
		s.cfg.Logger.Error("run ended without its terminal event", "session", s.id, "run", q.id, "err", err)
	}
	s.spans.EndRun(q.id, out.Type)
	if run.OwnHistory && !out.Waiting {
		// Nothing of the run's refers to its messages any more (a run
		// that parked keeps them in out.History).
		s.mu.Lock()
		s.runBuf = run.History[:0]
		s.mu.Unlock()
	}
	return out
}

// runBufSlack is the room a run's message array has beyond the
// transcript for the run's own messages, at the least.
const runBufSlack = 32

// takeRunBuf returns hist copied into the session's run array
// (growing or shrinking it when it does not fit), for a new run to own
// (agent.Run.OwnHistory).
func (s *Session) takeRunBuf(hist []llm.Message) []llm.Message {
	s.mu.Lock()
	buf := s.runBuf
	s.runBuf = nil
	s.mu.Unlock()
	if need := len(hist) + runBufSlack; cap(buf) < need || cap(buf) > 2*need {
		// A transcript that compaction shrank does not keep its old
		// size in memory.
		buf = make([]llm.Message, 0, need+len(hist)/8)
	}
	return append(buf[:0], hist...)
}

// stepTools is the tools of a run's step: the host's, and those of the
// MCP servers of the host's configuration and the session. A server
// that cannot start is left out (but for the tools it listed last, which
// answer with its error), and its failure is recorded in the session's
// log as mcp.server_failed of the run, once (see recordMCPFailures).
func (s *Session) stepTools(ctx context.Context, runID string, log runLog) *tool.Registry {
	servers := s.Record().MCPServers
	mcp, err := s.cfg.MCP.Tools(ctx, servers, s.currentBinding())
	if ctx.Err() == nil {
		if err != nil {
			s.cfg.Logger.Debug("mcp servers left out of the step", "session", s.id, "err", err)
		}
		s.recordMCPFailures(ctx, runID, log, err)
	}
	if mcp == nil || mcp.Len() == 0 && err == nil { // a failed server's registry says why its tools are missing
		return s.cfg.Tools
	}
	reg, err := tool.Merge(s.cfg.Tools, mcp)
	if err != nil {
		s.cfg.Logger.Warn("mcp tools left out of the step", "session", s.id, "err", err)
		return s.cfg.Tools
	}
	return reg
}

// readAll reads the session's events of the given types.
func (s *Session) readAll(ctx context.Context, after int64, types []event.Type) ([]event.Event, error) {
	var out []event.Event
	for {
		page, err := s.cfg.Store.Read(ctx, store.ReadParams{SessionID: s.id, After: after, Limit: 1000, Types: types})
		if err != nil {
			return nil, fmt.Errorf("read session %s: %w", s.id, err)
		}
		out = append(out, page...)
		if len(page) < 1000 {
			return out, nil
		}
		after = page[len(page)-1].Seq
	}
}

// clientTools converts the tools a client declared.
func clientTools(ts []api.ToolSpec) []event.ClientTool {
	var out []event.ClientTool
	for _, t := range ts {
		out = append(out, event.ClientTool{Name: t.Name, Description: t.Description, InputSchema: t.InputSchema})
	}
	return out
}

// Steer injects input into the active run p.RunID (p.ExpectedRunID, if
// set, must be the active run). steer.accepted is committed with rc's
// receipt before the run can consume the steer.
func (s *Session) Steer(ctx context.Context, p api.SteerParams, rc *idem.Claim) (*api.SteerReceipt, error) {
	var rcpt *api.SteerReceipt
	err := s.command(func() error {
		activeID := s.activeID()
		if p.ExpectedRunID != "" && p.ExpectedRunID != activeID {
			return api.Errorf(api.KindRunConflict, "expected active run %s, but the active run is %q", p.ExpectedRunID, activeID).
				With("expectedRunId", p.ExpectedRunID).With("activeRunId", activeID)
		}
		if activeID != p.RunID {
			cur, ok := s.j.Run(p.RunID)
			if !ok {
				// Ended a while ago (or unknown): the store says which.
				var err error
				if cur, err = s.cfg.Store.Run(ctx, p.RunID); errors.Is(err, store.ErrNotFound) {
					return api.Wrap(api.KindNotFound, err, "run %s not found", p.RunID).With("runId", p.RunID)
				}
			}
			return api.Errorf(api.KindRunConflict, "run %s is not active (status %s)", p.RunID, cur.Status).
				With("runId", p.RunID).With("status", cur.Status).With("activeRunId", activeID)
		}
		r := &api.SteerReceipt{SteerID: s.cfg.NewID("steer"), RunID: p.RunID, Status: "accepted"}
		cur, err := s.steer(ctx, s.active, r.SteerID, p.Input, rc, idem.Ref{ID: p.RunID, Steer: r})
		if err != nil {
			return err
		}
		r.EventCursor = cur
		rcpt = r
		return nil
	})
	return rcpt, err
}

// steer appends steer.accepted and hands the input to the active run.
// Called by commands.
func (s *Session) steer(ctx context.Context, a *activeRun, steerID string, input []event.Part, rc *idem.Claim, ref idem.Ref) (int64, error) {
	var cursor int64
	err := a.inbox.Add(func() error {
		e, err := event.New(a.id, event.SteerAccepted, event.SteerData{SteerID: steerID, Input: input})
		if err != nil {
			return err
		}
		evs, err := s.append(ctx, rc, ref, e)
		if err != nil {
			return err
		}
		cursor = evs[0].Seq
		return nil
	}, agent.Steer{ID: steerID, Input: input})
	if errors.Is(err, agent.ErrSteersClosed) {
		return 0, api.Errorf(api.KindRunConflict, "run %s is finishing and takes no more steering", a.id).
			With("runId", a.id).With("status", "finishing")
	}
	return cursor, err
}

// Cancel cancels run id and returns once its terminal event is committed;
// a queued run ends at once with run.cancelled. Cancelling a run that has
// ended returns it as it is. rc's receipt is stored with the terminal
// event when this cancel ends the run.
func (s *Session) Cancel(ctx context.Context, id, reason string, rc *idem.Claim) (record.Run, error) {
	var ch <-chan struct{}
	err := s.command(func() error {
		ch = s.doneChan(id)
		if s.active != nil && s.active.id == id && s.activeID() == id {
			if s.active.parked {
				return s.cancelParked(ctx, s.active, reason, rc)
			}
			if rc != nil {
				s.active.receipts.add(rc)
			}
			s.active.cancel(errors.New(reason))
			return nil
		}
		return s.cancelQueued(ctx, id, reason, rc)
	})
	if err != nil {
		return record.Run{}, err
	}
	if ch != nil {
		select {
		case <-ch:
		case <-ctx.Done():
			return record.Run{}, ctx.Err()
		}
	}
	return s.Run(ctx, id)
}

// cancelQueued ends queued run id with run.cancelled (and rc's receipt),
// dropping the steers it took while queued; a run that is not queued is
// left alone. Called by commands.
func (s *Session) cancelQueued(ctx context.Context, id, reason string, rc *idem.Claim) error {
	for i, q := range s.queue {
		if q.id != id {
			continue
		}
		var evs []event.Event
		for _, st := range q.steers {
			e, err := event.New(q.id, event.SteerDropped, event.SteerData{SteerID: st.ID, Input: st.Input, Reason: "the run was cancelled before it started"})
			if err != nil {
				return err
			}
			evs = append(evs, e)
		}
		e, err := event.New(q.id, event.RunCancelled, event.RunEndedData{Reason: reason})
		if err != nil {
			return err
		}
		if _, err := s.append(ctx, rc, idem.Ref{ID: id}, append(evs, e)...); err != nil {
			return err
		}
		s.queue = append(s.queue[:i], s.queue[i+1:]...)
		s.settle(id)
		return nil
	}
	return nil
}

// Wait waits until run id has ended and the session is done with it, or
// timeout passes, and returns the run as it is then. Done means that the
// next run/start is admitted (with busy reject) unless another run came
// first: the run is no longer active, and the queued run that follows it
// has started. It fails with ErrClosed if the session closes meanwhile,
// unless the run ended as it closed: then it waits for the close to
// finish and returns the run.
func (s *Session) Wait(ctx context.Context, id string, timeout time.Duration) (record.Run, error) {
	if ch := s.doneChan(id); ch != nil {
		t := time.NewTimer(timeout)
		defer t.Stop()
		select {
		case <-ch:
		case <-t.C:
		case <-ctx.Done():
			return record.Run{}, ctx.Err()
		case <-s.ctx.Done():
			// The session stops: its running runs end as it does, so
			// the answer waits for the stop to settle rather than
			// depend on which of the two a waiter hears first. A run
			// that outlives it (waiting, queued) is ErrClosed.
			select {
			case <-s.finished:
			case <-t.C:
			case <-ctx.Done():
				return record.Run{}, ctx.Err()
			}
			select {
			case <-ch:
			default:
				return record.Run{}, ErrClosed
			}
		}
	}
	return s.Run(ctx, id)
}

// recordMCPFailures appends an mcp.server_failed event of run runID for
// each server whose failure err names (a join of *mcp.ServerError) and
// that the log does not already hold as that server's last failure; a
// server that is not named has recovered, so its next failure is
// recorded again. A failed append is logged: the step goes on, and the
// run meets the store's failure on its next append.
func (s *Session) recordMCPFailures(ctx context.Context, runID string, log runLog, err error) {
	var failed []*mcp.ServerError
	if err != nil {
		errs := []error{err}
		if j, ok := err.(interface{ Unwrap() []error }); ok {
			errs = j.Unwrap()
		}
		for _, e := range errs {
			var se *mcp.ServerError
			if errors.As(e, &se) {
				failed = append(failed, se)
			}
		}
	}
	s.mu.Lock()
	if len(failed) == 0 && len(s.mcpFailed) == 0 {
		s.mu.Unlock()
		return
	}
	now := make(map[string]string, len(failed))
	var evs []event.Event
	for _, se := range failed {
		last := se.Last.Error()
		now[se.Server] = last
		if s.mcpFailed[se.Server] == last {
			continue
		}
		e, err := event.New(runID, event.MCPServerFailed, event.MCPServerFailedData{
			Server: se.Server, Error: se.Err.Error(), Failures: se.Failures, Tools: se.Tools,
		})
		if err == nil {
			evs = append(evs, e)
		}
	}
	s.mcpFailed = now
	s.mu.Unlock()
	if len(evs) == 0 {
		return
	}
	if _, err := log.Append(ctx, evs...); err != nil {
		s.cfg.Logger.Warn("record mcp server failures", "session", s.id, "run", runID, "err", err)
	}
}
