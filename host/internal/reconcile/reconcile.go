// Package reconcile closes what a crash (or a write the store refused)
// left open in a session's log: a run that was not terminal gets
// run.interrupted (or run.failed), and before it, as a cancel would close
// them, its open requests are resolved as cancelled (by policy "cancel"),
// every tool call of its steps without a result gets an error result (one
// that started and never finished, one approved but not started, one
// asked for and never recorded further), and a steer that was accepted
// but never consumed is dropped. Afterwards every tool call in the
// transcript is answered and every request closed once, so the session
// can be continued. What the caller keeps (a queued run, which has not
// started and runs after the restart) is left open, and of a run that
// waits for answers and goes on only the calls that started and never
// finished are closed.
//
// The caller must own the session (package lease): reconciling a session
// that a live process is writing would interrupt its run.
package reconcile

import (
	"context"
	"fmt"

	"weft.dev/weft/agent"
	"weft.dev/weft/event"
	"weft.dev/weft/store"
	"weft.dev/weft/store/record"
)

// Appender appends events to the session's log; journal.Journal implements it.
type Appender interface {
	Append(ctx context.Context, events ...event.Event) ([]event.Event, error)
}

// Reader reads what reconciling a session needs: its unended runs and
// their events. Every [store.Store] is one.
type Reader interface {
	Runs(ctx context.Context, p store.ListRunsParams) ([]record.Run, error)
	Read(ctx context.Context, p store.ReadParams) ([]event.Event, error)
}

// InterruptedOutput is the result given to tool calls a crash cut short.
const InterruptedOutput = "error: interrupted: the host stopped before this tool call finished; its effects, if any, are unknown"

// Options say how [Session] closes runs. The zero value closes every
// non-terminal run as interrupted, as after a crash.
type Options struct {
	// Keep, if set, names runs to leave open: the queued runs, which have
	// not started (after a crash, the owner runs them; after a storage
	// failure, the queued runs the live owner still holds).
	Keep func(r record.Run) bool
	// Failure, if set, ends the runs as failed with this error instead of
	// interrupted: a run cut short by a store that refused writes.
	Failure *event.Error
	// Waiting, if set, names runs that wait for answers and go on after
	// the crash: only their tool calls that started and never finished
	// are closed; the runs stay open, with their requests and steers.
	Waiting func(r record.Run) bool
}

// Session closes every non-terminal run of sessionID (but those
// opts.Keep names). It returns the IDs of the runs it closed.
func Session(ctx context.Context, st Reader, log Appender, sessionID string, opts Options) ([]string, error) {
	runs, err := st.Runs(ctx, store.ListRunsParams{SessionID: sessionID, Statuses: []string{record.RunQueued, record.RunRunning, record.RunWaiting}, Limit: 1 << 20})
	if err != nil {
		return nil, fmt.Errorf("reconcile session %s: %w", sessionID, err)
	}
	var closed []string
	for _, r := range runs {
		if opts.Keep != nil && opts.Keep(r) {
			continue
		}
		waiting := opts.Waiting != nil && opts.Waiting(r)
		evs, err := closing(ctx, st, r, opts.Failure, waiting)
		if err != nil {
			return closed, err
		}
		if len(evs) == 0 {
			continue
		}
		if _, err := log.Append(ctx, evs...); err != nil {
			return closed, fmt.Errorf("reconcile run %s: %w", r.ID, err)
		}
		if !waiting {
			closed = append(closed, r.ID)
		}
	}
	return closed, nil
}

// runLog is what the closing of one run needs from its log.
type runLog struct {
	calls   []event.ToolCall // every call the run's steps asked for or started, in order
	known   map[string]bool  // the IDs in calls
	started map[string]bool
	done    map[string]bool  // calls that have their result
	reqs    []record.Request // requests, in the order they were opened
	closed  map[string]bool  // requests resolved (an approval, a question) or answered (a client tool call)
	steers  []event.SteerData
	ended   map[string]bool // steers consumed or dropped
	usage   event.TokenUsage
}

// read reads run r's events that say what it left open.
func read(ctx context.Context, st Reader, r record.Run) (*runLog, error) {
	l := &runLog{known: map[string]bool{}, started: map[string]bool{}, done: map[string]bool{}, closed: map[string]bool{}, ended: map[string]bool{}}
	call := func(c event.ToolCall) {
		if !l.known[c.ID] {
			l.known[c.ID] = true
			l.calls = append(l.calls, c)
		}
	}
	request := func(id, kind string, c event.ToolCall) {
		l.reqs = append(l.reqs, record.Request{ID: id, RunID: r.ID, Kind: kind, ToolCall: c})
	}
	types := []event.Type{event.MessageCompleted, event.ToolCallStarted, event.ToolCallCompleted,
		event.ApprovalRequested, event.ApprovalResolved, event.ApprovalExpired, event.InputRequested, event.InputResolved,
		event.ToolCallRequested, event.SteerAccepted, event.SteerConsumed, event.SteerDropped, event.Usage}
	after := r.FirstSeq - 1
	for {
		page, err := st.Read(ctx, store.ReadParams{SessionID: r.SessionID, After: after, RunID: r.ID, Limit: 1000, Types: types})
		if err != nil {
			return nil, fmt.Errorf("reconcile run %s: %w", r.ID, err)
		}
		for _, e := range page {
			if err := l.apply(e, call, request); err != nil {
				return nil, fmt.Errorf("reconcile run %s: seq %d: %w", r.ID, e.Seq, err)
			}
		}
		if len(page) < 1000 {
			return l, nil
		}
		after = page[len(page)-1].Seq
	}
}

// apply folds e into l.
func (l *runLog) apply(e event.Event, call func(event.ToolCall), request func(id, kind string, c event.ToolCall)) error {
	switch e.Type {
	case event.MessageCompleted:
		var d event.MessageCompletedData
		if err := e.Decode(&d); err != nil {
			return err
		}
		for _, c := range d.ToolCalls {
			call(c)
		}
	case event.ToolCallStarted:
		var d event.ToolCallStartedData
		if err := e.Decode(&d); err != nil {
			return err
		}
		call(d.ToolCall)
		l.started[d.ID] = true
	case event.ToolCallCompleted:
		var d event.ToolCallCompletedData
		if err := e.Decode(&d); err != nil {
			return err
		}
		l.done[d.ID] = true
		for _, q := range l.reqs {
			if q.Kind == event.RequestTool && q.ToolCall.ID == d.ID {
				l.closed[q.ID] = true // the client's result answers it
			}
		}
	case event.ApprovalRequested:
		var d event.ApprovalRequestedData
		if err := e.Decode(&d); err != nil {
			return err
		}
		call(d.ToolCall)
		request(d.ApprovalID, event.RequestApproval, d.ToolCall)
	case event.InputRequested:
		var d event.InputRequestedData
		if err := e.Decode(&d); err != nil {
			return err
		}
		if d.ToolCall.ID != "" { // a budget question gates no call
			call(d.ToolCall)
		}
		request(d.RequestID, event.RequestInput, d.ToolCall)
	case event.ToolCallRequested:
		var d event.ToolCallRequestedData
		if err := e.Decode(&d); err != nil {
			return err
		}
		call(d.ToolCall)
		request(d.RequestID, event.RequestTool, d.ToolCall)
	case event.ApprovalResolved, event.ApprovalExpired:
		var d event.ApprovalResolvedData
		if err := e.Decode(&d); err != nil {
			return err
		}
		l.closed[d.ApprovalID] = true
	case event.InputResolved:
		var d event.InputResolvedData
		if err := e.Decode(&d); err != nil {
			return err
		}
		l.closed[d.RequestID] = true
	case event.SteerAccepted:
		var d event.SteerData
		if err := e.Decode(&d); err != nil {
			return err
		}
		l.steers = append(l.steers, d)
	case event.SteerConsumed, event.SteerDropped:
		var d event.SteerData
		if err := e.Decode(&d); err != nil {
			return err
		}
		l.ended[d.SteerID] = true
	case event.Usage:
		var d event.UsageData
		if err := e.Decode(&d); err != nil {
			return err
		}
		l.usage.Add(d.Usage)
	}
	return nil
}

// closing returns the events that close run r: for a run that goes on
// waiting, the results of its calls that started and never finished; for
// a run that ends, also the closing of its open requests (as a cancel
// closes them: resolved as cancelled, by policy "cancel"), a result for
// every other call of its steps without one (approved or denied but not
// settled, or asked for and never recorded further), its unconsumed
// steers dropped, and its terminal event.
func closing(ctx context.Context, st Reader, r record.Run, failure *event.Error, waiting bool) ([]event.Event, error) {
	l, err := read(ctx, st, r)
	if err != nil {
		return nil, err
	}
	var evs []event.Event
	add := func(t event.Type, v any) error {
		e, err := event.New(r.ID, t, v)
		evs = append(evs, e)
		return err
	}
	for _, c := range l.calls {
		if !l.started[c.ID] || l.done[c.ID] {
			continue
		}
		out := InterruptedOutput
		if failure != nil {
			out = "error: the run failed before this tool call's result could be stored; its effects, if any, are unknown"
		}
		if err := add(event.ToolCallCompleted, event.ToolCallCompletedData{ID: c.ID, Name: c.Name, Output: out, IsError: true}); err != nil {
			return nil, err
		}
		l.done[c.ID] = true
	}
	if waiting {
		return evs, nil // the run goes on: its requests and steers wait for its next step
	}
	why := "the host stopped"
	if failure != nil {
		why = "the run failed"
	}
	var open []record.Request
	for _, q := range l.reqs {
		if !l.closed[q.ID] && !l.done[q.ToolCall.ID] {
			open = append(open, q)
		}
	}
	closeReqs, err := agent.CloseRequests(r.ID, open, why)
	if err != nil {
		return nil, err
	}
	evs = append(evs, closeReqs...)
	for _, q := range open {
		l.done[q.ToolCall.ID] = true
	}
	for _, c := range l.calls {
		if l.done[c.ID] {
			continue
		}
		out := "error: " + why + " before this tool call ran"
		if err := add(event.ToolCallCompleted, event.ToolCallCompletedData{ID: c.ID, Name: c.Name, Output: out, IsError: true}); err != nil {
			return nil, err
		}
	}
	for _, s := range l.steers {
		if l.ended[s.SteerID] {
			continue
		}
		if err := add(event.SteerDropped, event.SteerData{SteerID: s.SteerID, Input: s.Input, Reason: why + " before the steer was consumed"}); err != nil {
			return nil, err
		}
	}
	if failure != nil {
		err := add(event.RunFailed, event.RunEndedData{Steps: r.Steps, Usage: l.usage, Error: failure})
		return evs, err
	}
	err = add(event.RunInterrupted, event.RunEndedData{Steps: r.Steps, Usage: l.usage,
		Error: &event.Error{Kind: "interrupted", Message: "the host stopped while the run was " + r.Status}})
	return evs, err
}
