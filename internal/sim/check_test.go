package sim

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	gocmp "github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"weft.dev/weft/api"
	"weft.dev/weft/event"
	"weft.dev/weft/store"
	"weft.dev/weft/store/record"
)

// recoveryWindow is how long after a failed write a session may still be
// retrying it: its backoff doubles from storageRetry up to 32 times that.
const recoveryWindow = 64 * storageRetry

// logState is what the checks know of one session's log: the events read
// so far with their encodings, the projection rebuilt from them, and what
// became of each run, tool call, request and steer.
type logState struct {
	events   []event.Event
	raw      [][]byte
	proj     *record.Projection
	requests map[string]record.Request // every request record, as the projection flushed it
	deleted  bool
	// checked is the length of the log when the records were last checked.
	checked int

	runs     map[string]*runState
	runOrder []string
	calls    map[string]*callState
	reqs     map[string]*reqState
	reqOrder []string
	steers   map[string]*steerState
	tokens   map[string]string // input token → the run or steer it made
	active   string            // the run that started and has not ended
}

type runState struct {
	id, token  string
	queuedSeq  int64
	startedSeq int64
	started    bool
	terminal   event.Type
	retrying   bool // its model call failed (model.retry) and has not been made again
	calls      []string
	reqs       []string
	steers     []string
}

type callState struct {
	id, run, name string
	started       bool
	requested     bool
	completed     int
	approval      string // the approval that gates it
	request       string // the request of a client tool call
}

type reqState struct {
	id, run, kind, call string
	choices             []string
	resolved            int
	answer              string // the decision, the answer's text, or the client tool's output
}

type steerState struct {
	id, run, token string
	ended          int
}

func newLogState() *logState {
	return &logState{proj: record.NewProjection(record.Session{}, nil), requests: map[string]record.Request{},
		runs: map[string]*runState{}, calls: map[string]*callState{}, reqs: map[string]*reqState{},
		steers: map[string]*steerState{}, tokens: map[string]string{}}
}

// check checks every invariant, after a step, at rest.
func (w *world) check() {
	w.checkLogs(false)
	for _, v := range w.client.verify {
		if msg := v(w); msg != "" {
			w.fail("%s", msg)
		}
	}
	w.client.verify = nil
	w.checkTools()
	w.checkSubscribers()
	w.checkLiveness()
	w.checkSurvivors()
	for _, p := range w.m.takeProblems() {
		w.fail("%s", p)
	}
}

// fullEvery is how often (in steps) the checks read every log whole and
// compare it with what they read before, and compare the stored records
// with the projection of the log; in between they read only the new
// events. Restarts and the end of a seed check in full too.
const fullEvery = 16

// checkLogs reads and checks the logs and records of every session: all
// of each log when full, else the new events.
func (w *world) checkLogs(full bool) {
	if full || w.created || w.step%fullEvery == 0 {
		w.discover()
		w.created = false
	}
	full = full || w.step%fullEvery == 0
	for _, s := range w.sessions {
		if s.id != "" {
			w.checkSession(s, full)
		}
	}
}

// discover finds the sessions in the store: a create the client was not
// told about may have committed (its answer lost). Each slot's model
// names it; one create (one key) makes at most one session.
func (w *world) discover() {
	ss, err := w.disk.Sessions(context.Background(), store.ListSessionsParams{IncludeDeleted: true, Limit: 1000})
	if err != nil {
		w.fail("list the sessions: %v", err)
	}
	slices.SortFunc(ss, func(a, b record.Session) int { return strings.Compare(a.ID, b.ID) })
	for _, rec := range ss {
		k, err := strconv.Atoi(strings.TrimPrefix(rec.Model, "sim:"))
		if err != nil || k >= len(w.sessions) {
			w.fail("session %s has model %q, which no create asked for", rec.ID, rec.Model)
		}
		s := w.sessions[k]
		if s.id == "" {
			w.tracef("found %s: s%d's create committed though its answer was lost", rec.ID, k)
			s.id = rec.ID
		}
		if s.id != rec.ID {
			w.fail("two sessions for one create of s%d: %s and %s", k, s.id, rec.ID)
		}
	}
	keys := map[string]*simSession{}
	for _, s := range w.sessions {
		if s.key == "" || s.id == "" {
			continue
		}
		if o := keys[s.key]; o != nil {
			w.fail("idempotency key %s made two sessions: %s and %s", s.key, o.id, s.id)
		}
		keys[s.key] = s
	}
}

// checkSession reads s's log (whole, or after what was read before) and
// its records from the store and checks them.
func (w *world) checkSession(s *simSession, full bool) {
	ctx := context.Background()
	if s.log == nil {
		s.log = newLogState()
	}
	l := s.log
	// read is the log after first: all of it when full, else what is new.
	first := int64(len(l.events))
	if full {
		first = 0
	}
	var read []event.Event
	for after := first; ; {
		page, err := w.disk.Read(ctx, store.ReadParams{SessionID: s.id, After: after, Limit: 1000})
		if err != nil {
			w.fail("read the log of %s: %v", s.id, err)
		}
		read = append(read, page...)
		if len(page) < 1000 {
			break
		}
		after = page[len(page)-1].Seq
	}
	if full {
		if len(read) < len(l.events) {
			w.fail("the log of %s shrank from %d to %d events", w.name(s.id), len(l.events), len(read))
		}
		for i, old := range l.events {
			e := read[i]
			if e.Seq != old.Seq || e.Type != old.Type || e.RunID != old.RunID || !e.Time.Equal(old.Time) || !bytes.Equal(e.Data, old.Data) {
				w.fail("event %d of %s was rewritten: was %s %s, now %s %s", old.Seq, w.name(s.id), old.Type, old.Data, e.Type, e.Data)
			}
		}
		read = read[len(l.events):]
	}
	for _, e := range read {
		if want := int64(len(l.events) + 1); e.Seq != want {
			w.fail("the log of %s is not contiguous: position %d holds seq %d", w.name(s.id), want, e.Seq)
		}
		if e.SessionID != s.id {
			w.fail("event %d of %s names session %s", e.Seq, w.name(s.id), e.SessionID)
		}
		raw, err := json.Marshal(e)
		if err != nil {
			w.fail("event %d of %s does not encode: %v", e.Seq, w.name(s.id), err)
		}
		l.events = append(l.events, e)
		l.raw = append(l.raw, raw)
		if msg := l.feed(e); msg != "" {
			w.fail("%s, seq %d (%s %s): %s", w.name(s.id), e.Seq, e.Type, e.RunID, msg)
		}
	}
	if !full || l.checked == len(l.events) {
		return // the records change only with the log; a divergence stays
	}
	var b store.Batch
	b.SetRecords(l.proj.Flush())
	for _, q := range b.Requests {
		l.requests[q.ID] = q
	}
	l.checked = len(l.events)
	w.checkRecords(s)
}

// same says how e differs from the event the log holds at its seq.
func (l *logState) same(e event.Event) string {
	if e.Seq < 1 || e.Seq > int64(len(l.raw)) {
		return fmt.Sprintf("event %d is not in the log, which ends at %d", e.Seq, len(l.raw))
	}
	raw, err := json.Marshal(e)
	if err != nil {
		return err.Error()
	}
	if !bytes.Equal(raw, l.raw[e.Seq-1]) {
		return fmt.Sprintf("event %d is\n%s\nbut the log holds\n%s", e.Seq, raw, l.raw[e.Seq-1])
	}
	return ""
}

// checkRecords compares the stored records with the projection of the log.
func (w *world) checkRecords(s *simSession) {
	ctx := context.Background()
	l := s.log
	rec, err := w.disk.Session(ctx, s.id)
	if err != nil {
		w.fail("read session %s: %v", s.id, err)
	}
	if d := diff(l.proj.Session, rec); d != "" {
		w.fail("the record of %s is not the projection of its log (-projection +stored):\n%s", w.name(s.id), d)
	}
	runs, err := w.disk.Runs(ctx, store.ListRunsParams{SessionID: s.id, Limit: 1 << 20})
	if err != nil {
		w.fail("list the runs of %s: %v", s.id, err)
	}
	want := l.proj.Runs()
	byID := func(a, b record.Run) int { return strings.Compare(a.ID, b.ID) }
	slices.SortFunc(want, byID)
	slices.SortFunc(runs, byID)
	if d := diff(want, runs); d != "" {
		w.fail("the run records of %s are not the projection of its log (-projection +stored):\n%s", w.name(s.id), d)
	}
	reqs, err := w.disk.Requests(ctx, store.ListRequestsParams{SessionID: s.id, Limit: 1 << 20})
	if err != nil {
		w.fail("list the requests of %s: %v", s.id, err)
	}
	wantReqs := slices.Collect(maps.Values(l.requests))
	bySeq := func(a, b record.Request) int { return cmp.Or(cmp.Compare(a.Seq, b.Seq), strings.Compare(a.ID, b.ID)) }
	slices.SortFunc(wantReqs, bySeq)
	slices.SortFunc(reqs, bySeq)
	if d := diff(wantReqs, reqs); d != "" {
		w.fail("the request records of %s are not the projection of its log (-projection +stored):\n%s", w.name(s.id), d)
	}
}

// diff says how got differs from want (-want +got), treating nil and
// empty alike: their JSON encodings are compared first, and go-cmp
// (slower) explains a difference.
func diff[T any](want, got T) string {
	a, errA := json.Marshal(want)
	b, errB := json.Marshal(got)
	if errA == nil && errB == nil && bytes.Equal(a, b) {
		return ""
	}
	return gocmp.Diff(want, got, cmpopts.EquateEmpty())
}

// feed folds the next event of the log into l and says what invariant
// it breaks, if any.
func (l *logState) feed(e event.Event) string {
	if l.deleted {
		return "an event after session.deleted"
	}
	if err := l.proj.Apply(e); err != nil {
		return fmt.Sprintf("the projection refuses it: %v", err)
	}
	if (e.Seq == 1) != (e.Type == event.SessionCreated) {
		return "session.created must be the first event, and only the first"
	}
	switch e.Type {
	case event.SessionDeleted:
		l.deleted = true
	case event.RunQueued:
		var d event.RunQueuedData
		if err := e.Decode(&d); err != nil {
			return err.Error()
		}
		if l.runs[e.RunID] != nil {
			return "the run is queued twice"
		}
		r := &runState{id: e.RunID, token: tokenOf(d.Input), queuedSeq: e.Seq}
		l.runs[r.id] = r
		l.runOrder = append(l.runOrder, r.id)
		if msg := l.made(r.token, r.id); msg != "" {
			return msg
		}
	}
	if e.RunID == "" {
		return ""
	}
	r := l.runs[e.RunID]
	if r == nil {
		return "an event of a run that was never queued"
	}
	if r.terminal != "" {
		return fmt.Sprintf("an event after the run's terminal event %s", r.terminal)
	}
	switch e.Type {
	case event.ModelRetry:
		r.retrying = true
	case event.StepStarted, event.MessageDelta, event.ReasoningDelta, event.MessageCompleted:
		r.retrying = false
	}
	switch e.Type {
	case event.RunStarted:
		if r.started {
			return "the run started twice"
		}
		if l.active != "" {
			return fmt.Sprintf("the run started while run %s is active", l.active)
		}
		r.started, r.startedSeq, l.active = true, e.Seq, r.id
	case event.ToolCallStarted:
		var d event.ToolCallStartedData
		if err := e.Decode(&d); err != nil {
			return err.Error()
		}
		c, msg := l.call(d.ID, d.Name, r)
		if msg != "" {
			return msg
		}
		if c.started {
			return fmt.Sprintf("tool call %s started twice", d.ID)
		}
		if c.completed > 0 {
			return fmt.Sprintf("tool call %s started after its result", d.ID)
		}
		c.started = true
	case event.ToolCallCompleted:
		var d event.ToolCallCompletedData
		if err := e.Decode(&d); err != nil {
			return err.Error()
		}
		c, msg := l.call(d.ID, d.Name, r)
		if msg != "" {
			return msg
		}
		if c.completed++; c.completed > 1 {
			return fmt.Sprintf("tool call %s has two results", d.ID)
		}
		if q := l.reqs[c.request]; q != nil {
			q.resolved++
			q.answer = d.Output
		}
	case event.ApprovalRequested:
		var d event.ApprovalRequestedData
		if err := e.Decode(&d); err != nil {
			return err.Error()
		}
		c, msg := l.call(d.ToolCall.ID, d.ToolCall.Name, r)
		if msg != "" {
			return msg
		}
		c.requested, c.approval = true, d.ApprovalID
		return l.request(&reqState{id: d.ApprovalID, run: r.id, kind: event.RequestApproval, call: c.id}, r)
	case event.ApprovalResolved, event.ApprovalExpired:
		var d event.ApprovalResolvedData
		if err := e.Decode(&d); err != nil {
			return err.Error()
		}
		return l.resolve(d.ApprovalID, event.RequestApproval, d.Decision, r)
	case event.InputRequested:
		var d event.InputRequestedData
		if err := e.Decode(&d); err != nil {
			return err.Error()
		}
		c, msg := l.call(d.ToolCall.ID, d.ToolCall.Name, r)
		if msg != "" {
			return msg
		}
		c.requested = true
		return l.request(&reqState{id: d.RequestID, run: r.id, kind: event.RequestInput, call: c.id, choices: d.Choices}, r)
	case event.InputResolved:
		var d event.InputResolvedData
		if err := e.Decode(&d); err != nil {
			return err.Error()
		}
		return l.resolve(d.RequestID, event.RequestInput, d.Text, r)
	case event.ToolCallRequested:
		var d event.ToolCallRequestedData
		if err := e.Decode(&d); err != nil {
			return err.Error()
		}
		c, msg := l.call(d.ToolCall.ID, d.ToolCall.Name, r)
		if msg != "" {
			return msg
		}
		c.requested, c.request = true, d.RequestID
		return l.request(&reqState{id: d.RequestID, run: r.id, kind: event.RequestTool, call: c.id}, r)
	case event.SteerAccepted:
		var d event.SteerData
		if err := e.Decode(&d); err != nil {
			return err.Error()
		}
		if l.steers[d.SteerID] != nil {
			return fmt.Sprintf("steer %s is accepted twice", d.SteerID)
		}
		st := &steerState{id: d.SteerID, run: r.id, token: tokenOf(d.Input)}
		l.steers[st.id] = st
		r.steers = append(r.steers, st.id)
		return l.made(st.token, st.id)
	case event.SteerConsumed, event.SteerDropped:
		var d event.SteerData
		if err := e.Decode(&d); err != nil {
			return err.Error()
		}
		st := l.steers[d.SteerID]
		if st == nil || st.run != r.id {
			return fmt.Sprintf("steer %s was never accepted by this run", d.SteerID)
		}
		if st.ended++; st.ended > 1 {
			return fmt.Sprintf("steer %s is consumed or dropped twice", d.SteerID)
		}
	case event.RunCompleted, event.RunFailed, event.RunCancelled, event.RunInterrupted:
		r.terminal = e.Type
		if l.active == r.id {
			l.active = ""
		}
		var d event.RunEndedData
		if err := e.Decode(&d); err != nil {
			return err.Error()
		}
		for _, id := range r.calls {
			if c := l.calls[id]; c.completed != 1 {
				return fmt.Sprintf("the run ended, but tool call %s (%s) has no result", id, c.name)
			}
		}
		for _, id := range r.reqs {
			if q := l.reqs[id]; q.resolved != 1 {
				return fmt.Sprintf("the run ended, but its %s request %s is still open", q.kind, id)
			}
		}
		for _, id := range r.steers {
			if l.steers[id].ended != 1 {
				return fmt.Sprintf("the run ended, but steer %s was neither consumed nor dropped", id)
			}
		}
	}
	return ""
}

// made records that input token made run or steer id: a token is sent
// again only with its key, so it makes at most one.
func (l *logState) made(token, id string) string {
	if token == "" {
		return "an input without its token"
	}
	if other, ok := l.tokens[token]; ok {
		return fmt.Sprintf("input %s made two runs or steers: %s and %s (an idempotency key applied twice)", token, other, id)
	}
	l.tokens[token] = id
	return ""
}

// call returns tool call id of run r, recording it on first sight.
func (l *logState) call(id, name string, r *runState) (*callState, string) {
	c := l.calls[id]
	if c == nil {
		c = &callState{id: id, run: r.id, name: name}
		l.calls[id] = c
		r.calls = append(r.calls, id)
	}
	if c.run != r.id {
		return nil, fmt.Sprintf("tool call %s of run %s appears in run %s", id, c.run, r.id)
	}
	return c, ""
}

// request records a new request of run r.
func (l *logState) request(q *reqState, r *runState) string {
	if l.reqs[q.id] != nil {
		return fmt.Sprintf("request %s is opened twice", q.id)
	}
	l.reqs[q.id] = q
	l.reqOrder = append(l.reqOrder, q.id)
	r.reqs = append(r.reqs, q.id)
	return ""
}

// resolve records the answer to request id, of kind, from run r.
func (l *logState) resolve(id, kind, answer string, r *runState) string {
	q := l.reqs[id]
	if q == nil || q.kind != kind || q.run != r.id {
		return fmt.Sprintf("it answers %s request %s, which the run never opened", kind, id)
	}
	if q.resolved++; q.resolved > 1 {
		return fmt.Sprintf("request %s is answered twice", id)
	}
	q.answer = answer
	return ""
}

// checkTools checks the tool calls that ran since the last check: each
// ran once, after its tool.call.started was committed, and only when
// the policy or its approval allowed it.
func (w *world) checkTools() {
	ran, n := w.tools.since(w.ranSeen)
	w.ranSeen = n
	for _, id := range ran {
		if k := w.tools.runs(id); k > 1 {
			w.fail("tool call %s ran %d times", id, k)
		}
		var c *callState
		var l *logState
		for _, s := range w.sessions {
			if s.log != nil && s.log.calls[id] != nil {
				c, l = s.log.calls[id], s.log
			}
		}
		switch {
		case c == nil || !c.started:
			w.fail("tool call %s ran, but no log holds its tool.call.started", id)
		case c.name == toolDenied:
			w.fail("tool call %s ran, but the policy denies %s", id, c.name)
		case c.approval != "":
			q := l.reqs[c.approval]
			if q.resolved == 0 || q.answer != "allow_once" && q.answer != "allow_session" {
				w.fail("tool call %s ran, but its approval %s says %q", id, q.id, q.answer)
			}
		}
	}
}

// checkSubscribers checks what each subscription received since the
// last check: the next events of the log, in order, exactly as stored.
func (w *world) checkSubscribers() {
	for _, sub := range w.subs {
		got, ended, err := sub.take()
		for _, e := range got {
			if e.Seq != sub.checked+1 {
				w.fail("subscription #%d of %s received seq %d after seq %d", sub.n, w.name(sub.session.id), e.Seq, sub.checked)
			}
			if msg := sub.session.log.same(e); msg != "" {
				w.fail("subscription #%d of %s: %s", sub.n, w.name(sub.session.id), msg)
			}
			sub.checked = e.Seq
		}
		if ended && err == nil {
			w.fail("subscription #%d of %s ended without an error", sub.n, w.name(sub.session.id))
		}
	}
}

// checkLiveness checks that nothing is stuck: a running run has
// something that drives it (a model call, a tool call, a retry's timer,
// a held commit or a storage recovery), a waiting run waits for an open
// request, and queued runs wait behind an active one.
func (w *world) checkLiveness() {
	for _, s := range w.known() {
		l := s.log
		excused := w.fs.holding(s.id) || w.fs.recovering(s.id, recoveryWindow)
		queued := ""
		for _, id := range l.runOrder {
			r := l.runs[id]
			if r.terminal != "" {
				continue
			}
			pr, _ := l.proj.Run(id)
			driven := excused || w.m.streaming(s.k) || w.tools.busy(id) || r.retrying
			switch pr.Status {
			case record.RunRunning:
				if !driven {
					w.fail("run %s of %s is running, but nothing drives it: no model call, no tool call, no retry", id, w.name(s.id))
				}
			case record.RunWaiting:
				// Its other calls of the step may still run; then it parks.
				if !driven && len(pr.Requests) == 0 {
					w.fail("run %s of %s is waiting, but for no open request", id, w.name(s.id))
				}
			case record.RunQueued:
				if queued == "" {
					queued = id
				}
			}
		}
		if queued != "" && l.active == "" && !excused {
			w.fail("run %s of %s is queued, but no run is active to wait for", queued, w.name(s.id))
		}
	}
}

// survivor is a run that was queued when a host stopped.
type survivor struct {
	s   *simSession
	run string
}

// noteQueued remembers the runs queued now (the host stopped), for
// checkSurvivors.
func (w *world) noteQueued() {
	for _, s := range w.known() {
		for _, id := range s.log.runOrder {
			if r := s.log.runs[id]; !r.started && r.terminal == "" {
				w.survivors = append(w.survivors, survivor{s, id})
			}
		}
	}
}

// checkSurvivors checks that the runs queued when a host stopped were
// not interrupted while queued, and started in the order they were
// queued (unless one of them was admitted with busy interrupt, which
// puts a run first).
func (w *world) checkSurvivors() {
	for _, a := range w.survivors {
		ra := a.s.log.runs[a.run]
		if ra.terminal == event.RunInterrupted && !ra.started {
			w.fail("run %s of %s was queued when the host stopped, and the next host interrupted it", a.run, w.name(a.s.id))
		}
		if w.interrupting(ra) {
			continue
		}
		for _, b := range w.survivors {
			rb := b.s.log.runs[b.run]
			if b.s != a.s || rb.queuedSeq <= ra.queuedSeq || !rb.started || w.interrupting(rb) {
				continue
			}
			if ra.started && ra.startedSeq > rb.startedSeq || !ra.started && ra.terminal == "" {
				w.fail("runs %s and %s of %s were queued in this order when the host stopped, but %s started first",
					a.run, b.run, w.name(a.s.id), b.run)
			}
		}
	}
}

// interrupting reports whether run r was asked for with busy interrupt.
func (w *world) interrupting(r *runState) bool {
	req := w.client.starts[r.token]
	return req != nil && req.busy == api.BusyInterrupt
}
