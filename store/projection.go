package store

import (
	"fmt"

	"weft.dev/weft/event"
)

// Projection derives a session's records from its events. It is the one
// place that says what each event means for the session and run records;
// the session owner applies every event it appends and hands the changed
// records to [Store.Append] in the same batch, and tests rebuild it from
// the log to check the stored records.
//
// A Projection is not safe for concurrent use.
type Projection struct {
	Session Session
	runs    map[string]*Run
	dirty   map[string]bool
	touched bool
}

// NewProjection returns the projection of a session whose records are s and
// runs (as loaded from a store); use a zero Session for a new session.
func NewProjection(s Session, runs []Run) *Projection {
	p := &Projection{Session: s, runs: make(map[string]*Run), dirty: make(map[string]bool)}
	for i := range runs {
		r := runs[i]
		p.runs[r.ID] = &r
	}
	return p
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
		return fmt.Errorf("%w: session %s: apply seq %d after %d", ErrSeqConflict, e.SessionID, e.Seq, p.Session.LastSeq)
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
		s.Title, s.Model, s.Metadata = d.Title, d.Model, d.Metadata
		s.CreatedAt = e.Time
		s.Binding = event.Binding{BindingVersion: 1, Mounts: d.Mounts, Network: d.Network}
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
	case event.SessionDeleted:
		p.touched = true
		s.Deleted = true
	case event.MountAdded, event.MountRemoved:
		var d event.MountChangeData
		if err := e.Decode(&d); err != nil {
			return err
		}
		p.touched = true
		s.Binding = event.Binding{BindingVersion: d.BindingVersion, Mounts: d.Mounts, Network: s.Binding.Network}
	case event.RunQueued:
		var d event.RunQueuedData
		if err := e.Decode(&d); err != nil {
			return err
		}
		p.runs[e.RunID] = &Run{
			ID: e.RunID, SessionID: e.SessionID, Status: RunQueued, Model: d.Model,
			MaxSteps: d.MaxSteps, CreatedAt: e.Time, FirstSeq: e.Seq,
		}
		p.dirty[e.RunID] = true
		if s.ActiveRunID == "" {
			s.ActiveRunID = e.RunID
		}
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
		t := e.Time
		r.Status, r.StartedAt = RunRunning, &t
		s.ActiveRunID = r.ID
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
		p.dirty[r.ID] = true
	case event.RunCompleted, event.RunFailed, event.RunCancelled, event.RunInterrupted:
		var d event.RunEndedData
		if err := e.Decode(&d); err != nil {
			return err
		}
		t := e.Time
		r.EndedAt, r.Error = &t, d.Error
		r.Status = map[event.Type]string{
			event.RunCompleted: RunCompleted, event.RunFailed: RunFailed,
			event.RunCancelled: RunCancelled, event.RunInterrupted: RunInterrupted,
		}[e.Type]
		if s.ActiveRunID == r.ID {
			s.ActiveRunID = p.nextQueued()
		}
		p.dirty[r.ID] = true
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

// Flush returns the records changed since the last Flush, ready for a
// [Batch], and forgets them. An event that changes nothing but the seq and
// time of the last event (a delta, a tool call) changes no record: a
// session's LastSeq and UpdatedAt and a run's LastSeq are read from the log
// by the store, so a stream of such events writes only events.
func (p *Projection) Flush() (*Session, []Run) {
	if !p.touched && len(p.dirty) == 0 {
		return nil, nil
	}
	var sess *Session
	if p.touched {
		s := p.Session
		sess = &s
	}
	runs := make([]Run, 0, len(p.dirty))
	for id := range p.dirty {
		runs = append(runs, *p.runs[id])
	}
	clear(p.dirty)
	p.touched = false
	return sess, runs
}

// Runs returns all projected runs in no particular order.
func (p *Projection) Runs() []Run {
	out := make([]Run, 0, len(p.runs))
	for _, r := range p.runs {
		out = append(out, *r)
	}
	return out
}
