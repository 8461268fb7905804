package record

import (
	"bytes"
	"cmp"
	"fmt"
	"slices"

	"weft.dev/weft/event"
)

// Projection derives a session's records from its events. It is the one
// place that says what each event means for the session, run and request
// records; the session owner applies every event it appends and hands the
// records [Projection.Flush] returns to the store in the same batch as the
// events, and tests rebuild it from the log to check the stored records.
//
// A Projection is not safe for concurrent use.
type Projection struct {
	Session Session
	runs    map[string]*Run
	dirty   map[string]bool
	touched bool
	// open are the open requests, by ID; requests holds them and those
	// that changed since the last Flush.
	open      map[string]*Request
	changed   map[string]*Request
	toolCalls map[string]string // open client-tool call ID -> request ID
	// ended are the IDs of the runs that ended, oldest end first, while
	// their records are kept (see Trim).
	ended []string
}

// NewProjection returns the projection of a session whose records are s,
// runs and open requests (as loaded from a store); use a zero Session for
// a new session. Closed requests need not be given.
func NewProjection(s Session, runs []Run, open ...Request) *Projection {
	p := &Projection{Session: s, runs: make(map[string]*Run), dirty: make(map[string]bool),
		open: map[string]*Request{}, changed: map[string]*Request{}, toolCalls: map[string]string{}}
	for i := range runs {
		r := runs[i]
		p.runs[r.ID] = &r
		if IsTerminal(r.Status) {
			p.ended = append(p.ended, r.ID)
		}
	}
	for i := range open {
		q := open[i]
		if q.Status != RequestOpen {
			continue
		}
		p.open[q.ID] = &q
		if q.Kind == event.RequestTool {
			p.toolCalls[q.ToolCall.ID] = q.ID
		}
	}
	return p
}

// Request returns an open request, or one that changed since the last
// Flush, or false.
func (p *Projection) Request(id string) (Request, bool) {
	if q, ok := p.open[id]; ok {
		return *q, true
	}
	if q, ok := p.changed[id]; ok {
		return *q, true
	}
	return Request{}, false
}

// OpenRequests returns the open requests, oldest first.
func (p *Projection) OpenRequests() []Request {
	out := make([]Request, 0, len(p.open))
	for _, q := range p.open {
		out = append(out, *q)
	}
	slices.SortFunc(out, func(a, b Request) int { return cmp.Compare(a.Seq, b.Seq) })
	return out
}

// ClientToolRequest returns the ID of the open request of the client tool
// call callID, if any.
func (p *Projection) ClientToolRequest(callID string) (string, bool) {
	id, ok := p.toolCalls[callID]
	return id, ok
}

// openRequest records a new open request of run r.
func (p *Projection) openRequest(r *Run, q Request) {
	p.open[q.ID] = &q
	p.changed[q.ID] = &q
	if q.Kind == event.RequestTool {
		p.toolCalls[q.ToolCall.ID] = q.ID
	}
	r.Requests = append(r.Requests, q.ID)
	if !IsTerminal(r.Status) {
		r.Status = RunWaiting
	}
	p.dirty[r.ID] = true
}

// closeRequest ends open request id with status; set fills in the rest.
func (p *Projection) closeRequest(id string, e event.Event, status string, set func(*Request)) {
	q, ok := p.open[id]
	if !ok {
		return // already closed: a later answer changes nothing
	}
	t := e.Time
	q.Status, q.ResolvedAt = status, &t
	if set != nil {
		set(q)
	}
	delete(p.open, id)
	if q.Kind == event.RequestTool {
		delete(p.toolCalls, q.ToolCall.ID)
	}
	p.changed[id] = q
	if r, ok := p.runs[q.RunID]; ok {
		r.Requests = slices.DeleteFunc(r.Requests, func(x string) bool { return x == id })
		if len(r.Requests) == 0 {
			r.Requests = nil // the run stays waiting until run.resumed
		}
		p.dirty[r.ID] = true
	}
}

// Run returns the projected run or false.
func (p *Projection) Run(id string) (Run, bool) {
	r, ok := p.runs[id]
	if !ok {
		return Run{}, false
	}
	return *r, true
}

// Apply folds one sequenced event into the projection.
func (p *Projection) Apply(e event.Event) error {
	if e.Seq != p.Session.LastSeq+1 {
		return fmt.Errorf("session %s: apply seq %d after %d: not the next event", e.SessionID, e.Seq, p.Session.LastSeq)
	}
	s := &p.Session
	s.LastSeq = e.Seq
	s.UpdatedAt = e.Time
	before := s.ActiveRunID
	defer func() {
		if s.ActiveRunID != before {
			p.touched = true
		}
	}()
	switch e.Type {
	case event.SessionCreated:
		var d event.SessionCreatedData
		if err := e.Decode(&d); err != nil {
			return err
		}
		p.touched = true
		s.ID = e.SessionID
		s.Title, s.Model, s.Metadata, s.Policy, s.Tools, s.MCPServers = d.Title, d.Model, d.Metadata, d.Policy, d.Tools, d.MCPServers
		s.CreatedAt = e.Time
		s.Binding = event.Binding{BindingVersion: 1, Mounts: d.Mounts, Network: d.Network, Limits: d.Limits}
		s.Budget = d.Budget
		s.Parent = d.Parent
	case event.SessionForked:
		var d event.SessionForkedData
		if err := e.Decode(&d); err != nil {
			return err
		}
		p.touched = true
		s.ID = e.SessionID
		s.Title, s.Model, s.Metadata, s.Policy, s.Tools, s.MCPServers = d.Title, d.Model, d.Metadata, d.Policy, d.Tools, d.MCPServers
		s.CreatedAt = e.Time
		s.Binding = event.Binding{BindingVersion: 1, Mounts: d.Mounts, Network: d.Network, Limits: d.Limits}
		s.Fork = &Fork{SessionID: d.From, Seq: d.Seq}
		s.Budget = d.Budget
	case event.SessionUpdated:
		var d event.SessionUpdatedData
		if err := e.Decode(&d); err != nil {
			return err
		}
		p.touched = true
		if d.Title != nil {
			s.Title = *d.Title
		}
		if d.Model != nil {
			s.Model = *d.Model
		}
		if d.Budget != nil {
			b := *d.Budget
			s.Budget = &b
			if b.IsZero() {
				s.Budget = nil
			}
		}
	case event.SessionDeleted:
		p.touched = true
		s.Deleted = true
	case event.MountAdded, event.MountRemoved:
		var d event.MountChangeData
		if err := e.Decode(&d); err != nil {
			return err
		}
		p.touched = true
		s.Binding = event.Binding{BindingVersion: d.BindingVersion, Mounts: d.Mounts, Network: s.Binding.Network, Limits: s.Binding.Limits}
	case event.RunQueued:
		var d event.RunQueuedData
		if err := e.Decode(&d); err != nil {
			return err
		}
		p.runs[e.RunID] = &Run{
			ID: e.RunID, SessionID: e.SessionID, Status: RunQueued, Model: d.Model,
			MaxSteps: d.MaxSteps, CreatedAt: e.Time, FirstSeq: e.Seq, Budget: d.Budget,
		}
		p.dirty[e.RunID] = true
		if s.ActiveRunID == "" {
			s.ActiveRunID = e.RunID
		}
	}
	if e.Type == event.ContextCompacted {
		// Every summary request costs the session, inside a run or not.
		var d event.ContextCompactedData
		if err := e.Decode(&d); err != nil {
			return err
		}
		p.touched = true
		s.Usage.Add(d.Usage)
	}
	if e.RunID == "" {
		return nil
	}
	r, ok := p.runs[e.RunID]
	if !ok {
		return fmt.Errorf("session %s seq %d: event %s for unknown run %s", e.SessionID, e.Seq, e.Type, e.RunID)
	}
	r.LastSeq = e.Seq
	switch e.Type {
	case event.RunStarted:
		var d event.RunStartedData
		// Only a traced run's event has more than its model to read.
		if bytes.Contains(e.Data, []byte(traceIDKey)) {
			if err := e.Decode(&d); err != nil {
				return err
			}
		}
		t := e.Time
		r.Status, r.StartedAt = RunRunning, &t
		r.TraceID, r.SpanID = d.TraceID, d.SpanID
		s.ActiveRunID = r.ID
		p.dirty[r.ID] = true
	case event.RunResumed:
		r.Status = RunRunning
		p.dirty[r.ID] = true
	case event.RunSuspended:
		// Handed over by a draining host: it waits for the session's
		// next owner to continue it.
		r.Status = RunWaiting
		p.dirty[r.ID] = true
	case event.StepStarted:
		var d event.StepData
		if err := e.Decode(&d); err != nil {
			return err
		}
		r.Steps = max(r.Steps, d.Step)
		p.dirty[r.ID] = true
	case event.Usage:
		var d event.UsageData
		if err := e.Decode(&d); err != nil {
			return err
		}
		r.Usage.Add(d.Usage)
		s.Usage.Add(d.Usage)
		p.touched = true
		p.dirty[r.ID] = true
	case event.BudgetRaised:
		var d event.BudgetRaisedData
		if err := e.Decode(&d); err != nil {
			return err
		}
		switch d.Scope {
		case event.ScopeRun:
			b := event.Budget{}
			if r.Budget != nil {
				b = *r.Budget
			}
			b = b.WithLimit(d.Budget, d.Limit)
			r.Budget = &b
			p.dirty[r.ID] = true
		case event.ScopeSession:
			b := event.Budget{}
			if s.Budget != nil {
				b = *s.Budget
			}
			b = b.WithLimit(d.Budget, d.Limit)
			s.Budget = &b
			p.touched = true
		}
	case event.ContextCompacted:
		// The summary request of a compaction inside the run is the
		// run's too: its tokens and cost count, as in the run's end
		// event.
		var d event.ContextCompactedData
		if err := e.Decode(&d); err != nil {
			return err
		}
		r.Usage.Add(d.Usage)
		p.dirty[r.ID] = true
	case event.ApprovalRequested:
		var d event.ApprovalRequestedData
		if err := e.Decode(&d); err != nil {
			return err
		}
		rule := d.Rule
		p.openRequest(r, Request{ID: d.ApprovalID, SessionID: e.SessionID, RunID: r.ID, Kind: event.RequestApproval,
			ToolCall: d.ToolCall, Step: d.Step, Status: RequestOpen, Rule: &rule, Options: d.Options,
			Deadline: d.Deadline, Default: d.Default, Seq: e.Seq, CreatedAt: e.Time})
	case event.ApprovalResolved, event.ApprovalExpired:
		var d event.ApprovalResolvedData
		if err := e.Decode(&d); err != nil {
			return err
		}
		status := RequestResolved
		switch {
		case e.Type == event.ApprovalExpired:
			status = RequestExpired
		case d.Decision == event.DecisionCancelled:
			status = RequestCancelled
		}
		by := d.By
		p.closeRequest(d.ApprovalID, e, status, func(q *Request) { q.Decision, q.Message, q.By = d.Decision, d.Message, &by })
	case event.InputRequested:
		var d event.InputRequestedData
		if err := e.Decode(&d); err != nil {
			return err
		}
		p.openRequest(r, Request{ID: d.RequestID, SessionID: e.SessionID, RunID: r.ID, Kind: event.RequestInput,
			ToolCall: d.ToolCall, Step: d.Step, Status: RequestOpen, Question: d.Question, Choices: d.Choices,
			Deadline: d.Deadline, Budget: d.Budget, Seq: e.Seq, CreatedAt: e.Time})
	case event.InputResolved:
		var d event.InputResolvedData
		if err := e.Decode(&d); err != nil {
			return err
		}
		status := map[string]string{event.InputAnswered: RequestResolved, event.InputExpired: RequestExpired, event.InputCancelled: RequestCancelled}[d.Status]
		if status == "" {
			return fmt.Errorf("session %s seq %d: input.resolved with status %q", e.SessionID, e.Seq, d.Status)
		}
		by := d.By
		p.closeRequest(d.RequestID, e, status, func(q *Request) { q.Message, q.By = d.Text, &by })
	case event.ToolCallRequested:
		var d event.ToolCallRequestedData
		if err := e.Decode(&d); err != nil {
			return err
		}
		p.openRequest(r, Request{ID: d.RequestID, SessionID: e.SessionID, RunID: r.ID, Kind: event.RequestTool,
			ToolCall: d.ToolCall, Step: d.Step, Status: RequestOpen, Seq: e.Seq, CreatedAt: e.Time})
	case event.ToolCallCompleted:
		if len(p.toolCalls) == 0 {
			break
		}
		var d event.ToolCallCompletedData
		if err := e.Decode(&d); err != nil {
			return err
		}
		if id, ok := p.toolCalls[d.ID]; ok && p.open[id].RunID == r.ID {
			status := RequestResolved
			if d.By != nil && d.By.Policy != "" {
				status = RequestCancelled
			}
			p.closeRequest(id, e, status, func(q *Request) { q.By = d.By })
		}
	case event.RunCompleted, event.RunFailed, event.RunCancelled, event.RunInterrupted:
		var d event.RunEndedData
		if err := e.Decode(&d); err != nil {
			return err
		}
		// A run that ends takes its open requests with it.
		for _, id := range slices.Clone(r.Requests) {
			p.closeRequest(id, e, RequestCancelled, nil)
		}
		t := e.Time
		r.EndedAt, r.Error = &t, d.Error
		// The session's steps and wall time count its runs as they end;
		// its usage counts every step as it comes.
		s.Steps += r.Steps
		if r.StartedAt != nil {
			s.WallTimeMs += t.Sub(*r.StartedAt).Milliseconds()
		}
		p.touched = true
		r.Status = map[event.Type]string{
			event.RunCompleted: RunCompleted, event.RunFailed: RunFailed,
			event.RunCancelled: RunCancelled, event.RunInterrupted: RunInterrupted,
		}[e.Type]
		if s.ActiveRunID == r.ID {
			s.ActiveRunID = p.nextQueued()
		}
		p.dirty[r.ID] = true
		p.ended = append(p.ended, r.ID)
	}
	return nil
}

// nextQueued returns the oldest queued run, which becomes active when the
// active run ends.
func (p *Projection) nextQueued() string {
	var next *Run
	for _, r := range p.runs {
		if r.Status == RunQueued && (next == nil || r.FirstSeq < next.FirstSeq) {
			next = r
		}
	}
	if next == nil {
		return ""
	}
	return next.ID
}

// Changes are the records a [Projection] changed since its last Flush:
// what the batch that appends the events beside them writes.
type Changes struct {
	// Session is the session record, if it changed.
	Session *Session
	// Runs and Requests are the run and request records that changed, in
	// no particular order.
	Runs     []Run
	Requests []Request
}

// Flush returns the records changed since the last Flush and forgets
// them. An event that changes nothing but the seq and time of the last
// event (a delta, a tool call) changes no record: a session's LastSeq and
// UpdatedAt and a run's LastSeq are read from the log by the store, so a
// stream of such events writes only events.
func (p *Projection) Flush() Changes {
	var c Changes
	if p.touched {
		s := p.Session
		c.Session = &s
	}
	if len(p.dirty) > 0 {
		c.Runs = make([]Run, 0, len(p.dirty))
	}
	for id := range p.dirty {
		r := *p.runs[id]
		r.Requests = slices.Clone(r.Requests)
		c.Runs = append(c.Runs, r)
	}
	if len(p.changed) > 0 {
		c.Requests = make([]Request, 0, len(p.changed))
	}
	for _, q := range p.changed {
		r := *q
		r.Choices, r.Options = slices.Clone(r.Choices), slices.Clone(r.Options)
		c.Requests = append(c.Requests, r)
	}
	clear(p.dirty)
	clear(p.changed)
	p.touched = false
	return c
}

// Trim forgets the records of the runs that ended, but for the keep that
// ended last and those changed since the last Flush, so that a long-lived
// owner holds its session's live runs rather than its history. Run
// reports false for a forgotten run: the store has its record. A
// projection never forgets a run that has not ended. Trim(0) on a
// projection whose runs have all ended and been flushed frees the memory
// they took (a map does not shrink as its entries go).
func (p *Projection) Trim(keep int) {
	trimmed := false
	for len(p.ended) > max(keep, 0) {
		id := p.ended[0]
		if p.dirty[id] {
			break
		}
		delete(p.runs, id)
		p.ended = p.ended[1:]
		trimmed = true
	}
	if trimmed && len(p.runs) == 0 {
		p.runs, p.ended = make(map[string]*Run), nil
	}
}

// Runs returns all projected runs in no particular order.
func (p *Projection) Runs() []Run {
	out := make([]Run, 0, len(p.runs))
	for _, r := range p.runs {
		out = append(out, *r)
	}
	return out
}

// traceIDKey is the key of event.RunStartedData.TraceID in its JSON.
const traceIDKey = `"traceId"`
