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
	p.touched = true
	s := &p.Session
	s.LastSeq = e.Seq
	s.UpdatedAt = e.Time
	switch e.Type {
	case event.SessionCreated:
		var d event.SessionCreatedData
		if err := e.Decode(&d); err != nil {
			return err
		}
		s.ID = e.SessionID
		s.Title, s.Model, s.Metadata = d.Title, d.Model, d.Metadata
		s.CreatedAt = e.Time
		s.Binding = event.Binding{BindingVersion: 1, Mounts: d.Mounts, Network: d.Network}
	case event.SessionUpdated:
		var d event.SessionUpdatedData
		if err := e.Decode(&d); err != nil {
			return err
		}
		if d.Title != nil {
			s.Title = *d.Title
		}
		if d.Model != nil {
			s.Model = *d.Model
		}
	case event.SessionDeleted:
		s.Deleted = true
	case event.MountAdded, event.MountRemoved:
		var d event.MountChangeData
		if err := e.Decode(&d); err != nil {
			return err
		}
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
	p.dirty[r.ID] = true
	r.LastSeq = e.Seq
	switch e.Type {
	case event.RunStarted:
		t := e.Time
		r.Status, r.StartedAt = RunRunning, &t
		s.ActiveRunID = r.ID
	case event.StepStarted:
		var d event.StepData
		if err := e.Decode(&d); err != nil {
			return err
		}
		r.Steps = max(r.Steps, d.Step)
	case event.Usage:
		var d event.UsageData
		if err := e.Decode(&d); err != nil {
			return err
		}
		r.Usage.Add(d.Usage)
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
// [Batch], and forgets them.
func (p *Projection) Flush() (*Session, []Run) {
	if !p.touched {
		return nil, nil
	}
	s := p.Session
	runs := make([]Run, 0, len(p.dirty))
	for id := range p.dirty {
		runs = append(runs, *p.runs[id])
	}
	clear(p.dirty)
	p.touched = false
	return &s, runs
}

// Runs returns all projected runs in no particular order.
func (p *Projection) Runs() []Run {
	out := make([]Run, 0, len(p.runs))
	for _, r := range p.runs {
		out = append(out, *r)
	}
	return out
}
