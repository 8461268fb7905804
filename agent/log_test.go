package agent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"weft.dev/weft/event"
	"weft.dev/weft/store"
	"weft.dev/weft/store/record"
)

// storeLog is the agent.Log of these tests: it appends each call's events
// to a store at once, in one batch with the records they project, as the
// host's journal does, but with no writer goroutine, no group commit and
// no coalescing (each Delta is one message.delta event). The journal
// itself lives under host/internal, where the compiler keeps it; its own
// tests, and the step benchmark beside them, run the loop over it.
type storeLog struct {
	st        store.Store
	sessionID string

	mu   sync.Mutex // guards last and proj, and orders the appends
	last int64
	proj *record.Projection
}

// createLog appends session.created for sessionID to st and returns its log.
func createLog(ctx context.Context, st store.Store, sessionID string, data event.SessionCreatedData) (*storeLog, error) {
	l := &storeLog{st: st, sessionID: sessionID, proj: record.NewProjection(record.Session{}, nil)}
	e, err := event.New("", event.SessionCreated, data)
	if err != nil {
		return nil, err
	}
	if _, err := l.Append(ctx, e); err != nil {
		return nil, fmt.Errorf("create session %s: %w", sessionID, err)
	}
	return l, nil
}

// Append sequences events after the last, projects them and writes them
// with their records in one batch.
func (l *storeLog) Append(ctx context.Context, events ...event.Event) ([]event.Event, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]event.Event, len(events))
	now := time.Now().UTC()
	for i, e := range events {
		e.Seq, e.SessionID, e.Time = l.last+int64(i)+1, l.sessionID, now
		if e.Data == nil {
			e.Data = json.RawMessage("{}")
		}
		if err := l.proj.Apply(e); err != nil {
			return nil, fmt.Errorf("%w: %w", store.ErrInvalid, err)
		}
		out[i] = e
	}
	b := store.Batch{SessionID: l.sessionID, Events: out}
	b.SetRecords(l.proj.Flush())
	// As the journal's writer, the write is not cut by the caller's
	// cancel: a run's terminal events are appended after it.
	if err := l.st.Append(context.WithoutCancel(ctx), b); err != nil {
		return nil, err
	}
	l.last += int64(len(out))
	return out, nil
}

// Delta appends text as one message delta of its own.
func (l *storeLog) Delta(ctx context.Context, runID string, t event.Type, step int, text string) error {
	if text == "" {
		return nil
	}
	e, err := event.New(runID, t, event.DeltaData{Step: step, Text: text})
	if err != nil {
		return err
	}
	_, err = l.Append(ctx, e)
	return err
}

// Flush returns at once: every Append is durable when it returns.
func (l *storeLog) Flush(context.Context) error { return nil }

// Run returns the projected record of a run.
func (l *storeLog) Run(id string) (record.Run, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.proj.Run(id)
}
