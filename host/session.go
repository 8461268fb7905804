package host

import (
	"context"
	"sync"
	"sync/atomic"

	"weft.dev/weft/agent"
	"weft.dev/weft/env"
	"weft.dev/weft/event"
	"weft.dev/weft/internal/ids"
	"weft.dev/weft/internal/journal"
	"weft.dev/weft/internal/lease"
	"weft.dev/weft/store"
)

func newID(prefix string) string { return ids.New(prefix) }

// session is the host's owner of one session. Its mutex serialises the
// session's commands; its journal is the single writer of its log.
type session struct {
	h     *Host
	id    string
	j     *journal.Journal
	lease *lease.Lease

	used atomic.Int64 // unix nanos of the last request that loaded it

	mu     sync.Mutex
	closed bool // unloaded (idle, host closed or session deleted); guarded by mu
	active *activeRun
	queue  []queuedRun
	// done holds a channel per non-terminal run, closed when it ends.
	done map[string]chan struct{}
	// bind is the session's current binding (see mounts.go): written with
	// mu held, read by the active run's tool calls without it. retired
	// holds the bindings it replaced while a run was active; they close
	// when that run ends.
	bind    atomic.Pointer[env.Binding]
	retired []*env.Binding
}

type activeRun struct {
	id     string
	cancel context.CancelCauseFunc
	inbox  *agent.Steers
}

type queuedRun struct {
	id       string
	model    string
	maxSteps int
	input    []event.Part
}

// close releases the session. Called with s.mu held.
// activeID returns the run that makes the session busy: the active run
// unless its terminal event is already committed (its goroutine is only
// tidying up, and starts the next queued run when it has). Called with
// s.mu held.
func (s *session) activeID() string {
	if s.active == nil {
		return ""
	}
	if r, ok := s.j.Run(s.active.id); ok && store.IsTerminal(r.Status) {
		return ""
	}
	return s.active.id
}

func (s *session) close() {
	s.closed = true
	s.j.Close()
	s.lease.Release()
	s.closeRetired()
	s.bind.Swap(nil).Close()
}

// admit appends run.queued for a new run and starts it if the session is
// idle. Called with s.mu held.
func (s *session) admit(ctx context.Context, q queuedRun, receipts []store.Receipt, front bool) (store.Run, error) {
	e, err := event.New(q.id, event.RunQueued, event.RunQueuedData{Model: q.model, MaxSteps: q.maxSteps, Input: q.input})
	if err != nil {
		return store.Run{}, err
	}
	if _, err := s.j.AppendReceipts(ctx, receipts, e); err != nil {
		return store.Run{}, err
	}
	s.done[q.id] = make(chan struct{})
	if front {
		s.queue = append([]queuedRun{q}, s.queue...)
	} else {
		s.queue = append(s.queue, q)
	}
	if s.active == nil {
		s.startNext()
	}
	r, _ := s.j.Run(q.id)
	return r, nil
}

// startNext starts the first queued run. Called with s.mu held and no
// active run.
func (s *session) startNext() {
	if len(s.queue) == 0 || s.h.ctx.Err() != nil {
		return
	}
	q := s.queue[0]
	s.queue = s.queue[1:]
	ctx, cancel := context.WithCancelCause(s.h.ctx)
	a := &activeRun{id: q.id, cancel: cancel, inbox: &agent.Steers{}}
	s.active = a
	s.h.runs.Add(1)
	go func() {
		defer s.h.runs.Done()
		defer cancel(nil)
		s.execute(ctx, q, a)
		s.mu.Lock()
		s.active = nil
		s.closeRetired()
		if ch, ok := s.done[q.id]; ok {
			close(ch)
			delete(s.done, q.id)
		}
		s.startNext()
		s.mu.Unlock()
	}()
}

// execute runs one run to its terminal event. A failure before the agent
// loop starts (unknown model, unusable mounts) still ends the run.
func (s *session) execute(ctx context.Context, q queuedRun, a *activeRun) {
	fail := func(kind, msg string) {
		a.inbox.Close()
		e, _ := event.New(q.id, event.RunFailed, event.RunEndedData{Error: &event.Error{Kind: kind, Message: msg}})
		if ctx.Err() != nil {
			// Cancelled before the loop began: that is a cancel, not a failure.
			e, _ = event.New(q.id, event.RunCancelled, event.RunEndedData{Reason: context.Cause(ctx).Error()})
		}
		if _, err := s.j.Append(context.WithoutCancel(ctx), e); err != nil {
			s.h.cfg.Logger.Error("write run.failed", "session", s.id, "run", q.id, "err", err)
		}
	}
	name := q.model
	sess := s.j.Session()
	if name == "" {
		name = sess.Model
	}
	if name == "" {
		name = s.h.cfg.DefaultModel
	}
	m, err := s.h.cfg.ResolveModel(name)
	if err != nil {
		fail("model", err.Error())
		return
	}
	s.mu.Lock()
	_, err = s.envBinding()
	s.mu.Unlock()
	if err != nil {
		fail("environment", err.Error())
		return
	}
	history, err := agent.LoadTranscript(ctx, s.h.cfg.Store, s.id)
	if err != nil {
		fail("log", err.Error())
		return
	}
	maxSteps := q.maxSteps
	if maxSteps <= 0 {
		maxSteps = s.h.cfg.MaxSteps
	}
	_, err = agent.Execute(ctx, agent.Config{
		Provider: m.Provider, Model: m.Model, Tools: s.h.cfg.Tools, MaxSteps: maxSteps,
		MaxTokens: m.MaxTokens, Logger: s.h.cfg.Logger,
	}, s.j, agent.Run{
		ID: q.id, SessionID: s.id, ModelName: m.Name, Input: q.input, History: history,
		Env: s.bind.Load, Inbox: a.inbox,
	})
	if err != nil {
		s.h.cfg.Logger.Error("run ended without its terminal event", "session", s.id, "run", q.id, "err", err)
	}
}
