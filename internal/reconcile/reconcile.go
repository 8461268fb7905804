// Package reconcile closes what a crash left open in a session's log: a run
// that was not terminal gets run.interrupted, a tool call that started but
// never finished gets a closing error result, and a steer that was accepted
// but never consumed is dropped. Afterwards every tool call in the
// transcript is answered, so the session can be continued. What the
// caller keeps (a queued run, which has not started and runs after the
// restart; a run that waits for answers) is left open.
//
// The caller must own the session (package lease): reconciling a session
// that a live process is writing would interrupt its run.
package reconcile

import (
	"context"
	"fmt"

	"weft.dev/weft/event"
	"weft.dev/weft/store"
)

// Appender appends events to the session's log; journal.Journal implements it.
type Appender interface {
	Append(ctx context.Context, events ...event.Event) ([]event.Event, error)
}

// InterruptedOutput is the result given to tool calls a crash cut short.
const InterruptedOutput = "error: interrupted: the host stopped before this tool call finished; its effects, if any, are unknown"

// Options say how [Session] closes runs. The zero value closes every
// non-terminal run as interrupted, as after a crash.
type Options struct {
	// Keep, if set, names runs to leave open: the queued runs, which have
	// not started (after a crash, the owner runs them; after a storage
	// failure, the queued runs the live owner still holds).
	Keep func(r store.Run) bool
	// Failure, if set, ends the runs as failed with this error instead of
	// interrupted: a run cut short by a store that refused writes.
	Failure *event.Error
	// Waiting, if set, names runs that wait for answers and go on after
	// the crash: only their tool calls that started and never finished
	// are closed; the runs stay open, with their requests and steers.
	Waiting func(r store.Run) bool
}

// Session closes every non-terminal run of sessionID (but those
// opts.Keep names). It returns the IDs of the runs it closed.
func Session(ctx context.Context, st store.Store, log Appender, sessionID string, opts Options) ([]string, error) {
	runs, err := st.Runs(ctx, store.ListRunsParams{SessionID: sessionID, Statuses: []string{store.RunQueued, store.RunRunning, store.RunWaiting}, Limit: 1 << 20})
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

// closing returns the events that close run r.
func closing(ctx context.Context, st store.Store, r store.Run, failure *event.Error, waiting bool) ([]event.Event, error) {
	var (
		open   []event.ToolCall
		done   = map[string]bool{}
		steers []event.SteerData
		ended  = map[string]bool{}
		u      event.TokenUsage
	)
	after := r.FirstSeq - 1
	for {
		page, err := st.Read(ctx, store.ReadParams{SessionID: r.SessionID, After: after, RunID: r.ID, Limit: 1000,
			Types: []event.Type{event.ToolCallStarted, event.ToolCallCompleted, event.SteerAccepted, event.SteerConsumed, event.SteerDropped, event.Usage}})
		if err != nil {
			return nil, fmt.Errorf("reconcile run %s: %w", r.ID, err)
		}
		for _, e := range page {
			switch e.Type {
			case event.ToolCallStarted:
				var d event.ToolCallStartedData
				if err := e.Decode(&d); err != nil {
					return nil, err
				}
				open = append(open, d.ToolCall)
			case event.ToolCallCompleted:
				var d event.ToolCallCompletedData
				if err := e.Decode(&d); err != nil {
					return nil, err
				}
				done[d.ID] = true
			case event.SteerAccepted:
				var d event.SteerData
				if err := e.Decode(&d); err != nil {
					return nil, err
				}
				steers = append(steers, d)
			case event.SteerConsumed, event.SteerDropped:
				var d event.SteerData
				if err := e.Decode(&d); err != nil {
					return nil, err
				}
				ended[d.SteerID] = true
			case event.Usage:
				var d event.UsageData
				if err := e.Decode(&d); err != nil {
					return nil, err
				}
				u.Add(d.Usage)
			}
		}
		if len(page) < 1000 {
			break
		}
		after = page[len(page)-1].Seq
	}
	var evs []event.Event
	add := func(t event.Type, v any) error {
		e, err := event.New(r.ID, t, v)
		evs = append(evs, e)
		return err
	}
	for _, c := range open {
		if done[c.ID] {
			continue
		}
		out := InterruptedOutput
		if failure != nil {
			out = "error: the run failed before this tool call's result could be stored; its effects, if any, are unknown"
		}
		if err := add(event.ToolCallCompleted, event.ToolCallCompletedData{ID: c.ID, Name: c.Name, Output: out, IsError: true}); err != nil {
			return nil, err
		}
	}
	if waiting {
		return evs, nil // the run goes on: its steers wait for its next step
	}
	for _, s := range steers {
		if ended[s.SteerID] {
			continue
		}
		reason := "the host stopped before the steer was consumed"
		if failure != nil {
			reason = "the run failed before the steer was consumed"
		}
		if err := add(event.SteerDropped, event.SteerData{SteerID: s.SteerID, Input: s.Input, Reason: reason}); err != nil {
			return nil, err
		}
	}
	if failure != nil {
		err := add(event.RunFailed, event.RunEndedData{Steps: r.Steps, Usage: u, Error: failure})
		return evs, err
	}
	err := add(event.RunInterrupted, event.RunEndedData{Steps: r.Steps, Usage: u,
		Error: &event.Error{Kind: "interrupted", Message: "the host stopped while the run was " + r.Status}})
	return evs, err
}
