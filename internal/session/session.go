// Package session is the owner of one loaded session: its lease, its
// journal (the single writer of its log), its binding and the bindings it
// retired, its run queue and active run, the active run's steering inbox,
// and every start of a background process. Each command is a method that
// takes the session's own lock; no other package reaches its state.
//
// Lock order: a Session's mutex is never held while taking the host's
// registry lock, and the host never holds its registry lock while calling
// a Session. Inside a Session, the order is mu, then the active run's
// inbox lock (agent.Steers), then the journal's; doneMu and a run's
// receipt lock are leaves.
package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"weft.dev/weft/agent"
	"weft.dev/weft/api"
	"weft.dev/weft/env"
	"weft.dev/weft/event"
	"weft.dev/weft/internal/idem"
	"weft.dev/weft/internal/journal"
	"weft.dev/weft/internal/lease"
	"weft.dev/weft/internal/reconcile"
	"weft.dev/weft/llm"
	"weft.dev/weft/policy"
	"weft.dev/weft/process"
	"weft.dev/weft/store"
	"weft.dev/weft/tool"
)

// ErrClosed reports a command on a session that was unloaded, deleted or
// closed with its host. The host loads the session again (unless it was
// deleted) and retries.
var ErrClosed = fmt.Errorf("session closed: %w", agent.ErrHostStopped)

// Config is what the sessions of one host share. The host fills in every
// field's default; a Session does not copy it.
type Config struct {
	// Store holds every session. Required.
	Store store.Store
	// Journal tunes the session writers; its Store is Store and its
	// Committed hook is the session's own.
	Journal journal.Config
	// ResolveModel turns a model name into a model. Required.
	ResolveModel func(name string) (*agent.Model, error)
	// DefaultModel is used when neither the run nor its session names one.
	DefaultModel string
	// Tools are offered to every run; nil means none.
	Tools *tool.Registry
	// MaxSteps caps a run's steps unless the run says otherwise.
	MaxSteps int
	// Processes runs background processes; nil refuses them.
	Processes *process.Manager
	// LockDir holds the session leases; empty means none.
	LockDir string
	// SubscriberBuffer bounds a subscriber's queue (see journal.SubscribeOptions).
	SubscriberBuffer int
	// SubscriberBytes bounds a subscriber's queue in bytes.
	SubscriberBytes int
	// RetryBackoff is the first wait between attempts to recover from a
	// write failure; it doubles up to 32 times it.
	RetryBackoff time.Duration
	// Policy is the host's approval policy, the lowest layer under the
	// session's and the run's.
	Policy api.Policy
	// InputTimeout, if positive, is how long a question (ask_user) waits
	// for its answer.
	InputTimeout time.Duration
	// Transcripts is the memory the host's sessions keep their transcripts
	// in between runs; nil keeps none (every run start reads the log).
	Transcripts *Budget
	// NewID makes IDs with a prefix. Required.
	NewID func(prefix string) string
	// Logger receives diagnostics. Required (may discard).
	Logger *slog.Logger
}

type state int

const (
	stateOpen   state = iota
	stateFailed       // a write failed; the session is recovering
	stateClosed       // unloaded, deleted or closed with the host
)

// Session owns one loaded session. Its methods are safe for concurrent
// use. Create or Load it, and Close it when it is unloaded.
type Session struct {
	cfg *Config
	id  string
	// ctx is the parent of the session's runs and goroutines; Close
	// cancels it.
	ctx    context.Context
	cancel context.CancelCauseFunc
	used   atomic.Int64 // unix nanos of the last request

	mu      sync.Mutex
	state   state
	failure error // the write failure the session recovers from (stateFailed)
	j       *journal.Journal
	lease   *lease.Lease
	bind    *env.Binding   // current binding, opened on first use
	retired []*env.Binding // replaced while a run was active
	queue   []queuedRun
	active  *activeRun
	wg      sync.WaitGroup // the session's goroutines; Add only with mu held and state not closed
	release sync.Once

	doneMu sync.Mutex // leaf
	done   map[string]chan struct{}

	// approved are the rules that allow_session answers added, for every
	// later run of the session; guarded by mu.
	approved []api.Rule

	timerMu sync.Mutex             // leaf
	timers  map[string]*time.Timer // request ID -> its deadline

	// conv is the transcript kept for the next run start; the journal's
	// Committed hook feeds it.
	conv transcript
}

// activeRun is the session's active run. While it executes, a goroutine
// of the session's runs its loop (cancel stops it, finished closes when it
// is done); while it waits for answers it is parked: no goroutine, and
// the session resumes it once its requests are answered.
type activeRun struct {
	id       string
	q        queuedRun
	inbox    *agent.Steers
	policy   *policy.Set             // the run's compiled policy; guarded by the session's mu
	cancel   context.CancelCauseFunc // nil while parked
	finished chan struct{}           // closed when the goroutine is done with it
	parked   bool
	// resume and history are what a parked run resumes from, kept in
	// memory with the answers applied as they commit; nil after a restart
	// (the log is read instead).
	resume  *agent.Resume
	history []llm.Message

	mu       sync.Mutex    // leaf; guards receipts
	receipts []*idem.Claim // cancels waiting to be stored with the terminal event
}

type queuedRun struct {
	id       string
	model    string
	maxSteps int
	input    []event.Part
	policy   json.RawMessage
	// defaultPreset is the host layer's preset when no layer names one.
	defaultPreset string
	tools         []event.ClientTool
}

// Create creates session id with data, storing rc's receipt in the same
// transaction as session.created, and returns its owner.
func Create(ctx context.Context, cfg *Config, id string, data event.SessionCreatedData, rc *idem.Claim) (*Session, error) {
	s, err := newSession(cfg, id)
	if err != nil {
		return nil, err
	}
	j, err := journal.Create(ctx, s.journalConfig(), id, data, rc.Receipts(id, idem.Ref{ID: id})...)
	if err != nil {
		s.lease.Release()
		return nil, storageErr(id, err)
	}
	rc.Stored()
	s.start(j)
	return s, nil
}

// Load opens the existing session id: it takes the lease, loads the
// projection and closes what a crash left open (reconcile).
func Load(ctx context.Context, cfg *Config, id string) (*Session, error) {
	s, err := newSession(cfg, id)
	if err != nil {
		return nil, err
	}
	j, err := journal.Open(ctx, s.journalConfig(), id)
	if err != nil {
		s.lease.Release()
		return nil, storageErr(id, err)
	}
	waiting := func(r store.Run) bool { return r.Status == store.RunWaiting }
	if _, err := reconcile.Session(ctx, cfg.Store, j, id, reconcile.Options{Waiting: waiting}); err != nil {
		j.Close()
		s.lease.Release()
		return nil, storageErr(id, err)
	}
	s.start(j)
	if err := s.restore(ctx); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

func newSession(cfg *Config, id string) (*Session, error) {
	var ls *lease.Lease
	if cfg.LockDir != "" {
		var err error
		if ls, err = lease.Acquire(cfg.LockDir, id); err != nil {
			if errors.Is(err, lease.ErrHeld) {
				return nil, api.Wrap(api.KindRunConflict, err, "session %s is in use by another weft process", id).With("sessionId", id)
			}
			return nil, fmt.Errorf("session %s: %w", id, err)
		}
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	s := &Session{cfg: cfg, id: id, ctx: ctx, cancel: cancel, lease: ls, done: map[string]chan struct{}{},
		conv: transcript{budget: cfg.Transcripts}}
	s.Touch()
	return s, nil
}

func (s *Session) journalConfig() journal.Config {
	jc := s.cfg.Journal
	jc.Store = s.cfg.Store
	jc.Committed = s.committed
	return jc
}

// start makes j the session's journal and starts the goroutine that
// watches it for write failures.
func (s *Session) start(j *journal.Journal) {
	s.mu.Lock()
	s.j = j
	s.wg.Go(s.watch)
	s.mu.Unlock()
}

// ID returns the session's ID.
func (s *Session) ID() string { return s.id }

// Touch records a request, for idle unloading.
func (s *Session) Touch() { s.used.Store(time.Now().UnixNano()) }

// Record returns the session's projected record.
func (s *Session) Record() store.Session {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.j.Session()
}

// Run returns a run's record: the projection's for a run that has not
// ended or ended lately, the store's otherwise.
func (s *Session) Run(ctx context.Context, id string) (store.Run, error) {
	s.mu.Lock()
	r, ok := s.j.Run(id)
	s.mu.Unlock()
	if ok {
		return r, nil
	}
	r, err := s.cfg.Store.Run(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return store.Run{}, api.Wrap(api.KindNotFound, err, "run %s not found", id).With("runId", id)
	}
	if err != nil {
		return store.Run{}, fmt.Errorf("run %s: %w", id, err)
	}
	return r, nil
}

// command runs f with the session's lock held, once the session is open:
// it fails with ErrClosed on a closed session and with a storage error
// while the session recovers from a write failure.
func (s *Session) command(f func() error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch s.state {
	case stateClosed:
		return ErrClosed
	case stateFailed:
		return storageErr(s.id, s.failure)
	}
	return f()
}

// append commits events with rc's receipt naming ref in one transaction.
// Called from commands (with mu held).
func (s *Session) append(ctx context.Context, rc *idem.Claim, ref idem.Ref, evs ...event.Event) ([]event.Event, error) {
	out, err := s.j.AppendReceipts(ctx, rc.Receipts(s.id, ref), evs...)
	if err != nil {
		return nil, s.writeErr(err)
	}
	rc.Stored()
	return out, nil
}

// writeErr maps a journal failure to what a client sees.
func (s *Session) writeErr(err error) error {
	switch {
	case errors.Is(err, journal.ErrClosed):
		return ErrClosed
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return err
	case errors.Is(err, store.ErrReceiptExists):
		return err
	}
	return storageErr(s.id, err)
}

// storageErr is the error of a command refused because the store does
// not take writes: retryable, with the cause kept for errors.Is.
func storageErr(id string, cause error) error {
	var ae *api.Error
	if errors.As(cause, &ae) {
		return cause
	}
	if errors.Is(cause, store.ErrNotFound) {
		return api.Wrap(api.KindNotFound, cause, "session %s not found", id).With("sessionId", id)
	}
	return api.Wrap(api.KindStorageUnavailable, cause, "session %s: the store is not taking writes (%v); nothing committed is lost, retry later", id, cause).
		With("sessionId", id)
}

// committed is the journal's Committed hook: it folds the batch into the
// kept transcript and closes the done channel of every run whose terminal
// event is now durable.
func (s *Session) committed(batch []event.Event) {
	s.conv.observe(batch)
	for _, e := range batch {
		if !event.IsTerminalRun(e.Type) {
			continue
		}
		s.doneMu.Lock()
		if ch, ok := s.done[e.RunID]; ok {
			close(ch)
			delete(s.done, e.RunID)
		}
		s.doneMu.Unlock()
	}
}

// track returns a channel closed when run id's terminal event commits.
func (s *Session) track(id string) {
	s.doneMu.Lock()
	s.done[id] = make(chan struct{})
	s.doneMu.Unlock()
}

// doneChan returns run id's done channel, or nil when the session is not
// waiting for the run to end.
func (s *Session) doneChan(id string) chan struct{} {
	s.doneMu.Lock()
	defer s.doneMu.Unlock()
	return s.done[id]
}

// Idle reports whether the session has no run, no queued run, no
// subscriber and no request since cutoff (unix nanos).
func (s *Session) idle(cutoff int64) bool {
	return s.used.Load() <= cutoff && s.active == nil && len(s.queue) == 0 && s.j.Subscribers() == 0
}

// UnloadIfIdle closes the session if it is idle since cutoff (unix nanos)
// and its lock is free, and reports whether it did.
func (s *Session) UnloadIfIdle(cutoff int64) bool {
	if !s.mu.TryLock() {
		return false
	}
	if s.state != stateOpen || !s.idle(cutoff) {
		s.mu.Unlock()
		return false
	}
	s.state = stateClosed
	s.cancel(ErrClosed)
	s.mu.Unlock()
	s.finish()
	return true
}

// Close cancels the session's runs, waits for its goroutines, and
// releases its journal, lease and bindings. Runs end as cancelled. It is
// safe to call more than once.
func (s *Session) Close() {
	s.mu.Lock()
	s.state = stateClosed
	s.cancel(ErrClosed)
	s.mu.Unlock()
	s.finish()
}

// finish waits for the goroutines of a closed session and releases what
// it holds.
func (s *Session) finish() {
	s.stopTimers()
	s.wg.Wait()
	s.release.Do(func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.j.Close()
		s.conv.drop()
		s.lease.Release()
		s.closeRetired()
		s.bind.Close()
		s.bind = nil
	})
}

// Closed reports whether the session was closed.
func (s *Session) Closed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.state == stateClosed
}

// watch waits for a write failure of the journal and recovers from it,
// until the session closes.
func (s *Session) watch() {
	for {
		s.mu.Lock()
		j := s.j
		s.mu.Unlock()
		select {
		case <-s.ctx.Done():
			return
		case <-j.Failed():
		}
		if !s.recover(j) {
			return
		}
	}
}

// recover ends the active run and brings the session back once the store
// takes writes again: it opens a new journal from what the store holds
// and fails the runs the failure cut short (run.failed, kind storage), so
// that nothing committed is lost and no seq is skipped. Queued runs stay
// queued. It reports false when the session closed meanwhile.
func (s *Session) recover(failed *journal.Journal) bool {
	s.mu.Lock()
	if s.state == stateClosed {
		s.mu.Unlock()
		return false
	}
	cause := failed.Err()
	s.state, s.failure = stateFailed, cause
	a := s.active
	s.mu.Unlock()
	defer func() {
		// Once a new journal has replaced it, the failed one is done;
		// until then it is the session's, and Close releases it.
		s.mu.Lock()
		replaced := s.j != failed
		s.mu.Unlock()
		if replaced {
			failed.Close()
		}
	}()
	s.cfg.Logger.Error("session write failed; recovering", "session", s.id, "err", cause)
	if a != nil && !a.parked {
		a.cancel(fmt.Errorf("the store refused a write: %w", cause))
		select {
		case <-a.finished:
		case <-s.ctx.Done():
			return false
		}
	}
	failure := &event.Error{Kind: "storage", Message: fmt.Sprintf("the store refused a write: %v", cause)}
	backoff := s.cfg.RetryBackoff
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			t := time.NewTimer(backoff)
			select {
			case <-t.C:
			case <-s.ctx.Done():
				t.Stop()
				return false
			}
			backoff = min(2*backoff, 32*s.cfg.RetryBackoff)
		}
		j, err := journal.Open(s.ctx, s.journalConfig(), s.id)
		if err != nil {
			s.cfg.Logger.Warn("session recovery: reload", "session", s.id, "err", err)
			continue
		}
		// The new journal is the session's from now on (commands still
		// refused), so that whoever wakes on a run's terminal event reads
		// the projection that holds it.
		s.mu.Lock()
		if s.state == stateClosed {
			s.mu.Unlock()
			j.Close()
			return false
		}
		if s.j != failed {
			s.j.Close() // an earlier attempt's
		}
		s.j = j
		// The failed write may have committed without the hook seeing
		// it: the next run start reads the log.
		s.conv.drop()
		queued := map[string]bool{}
		for _, q := range s.queue {
			queued[q.id] = true
		}
		s.mu.Unlock()
		_, err = reconcile.Session(s.ctx, s.cfg.Store, j, s.id, reconcile.Options{
			Keep: func(id string) bool { return queued[id] }, Failure: failure,
		})
		if err != nil {
			s.cfg.Logger.Warn("session recovery: close runs", "session", s.id, "err", err)
			continue
		}
		s.mu.Lock()
		if s.state == stateClosed {
			s.mu.Unlock()
			return false
		}
		s.state, s.failure = stateOpen, nil
		if s.active == nil {
			s.startNext()
		}
		s.mu.Unlock()
		s.cfg.Logger.Info("session recovered from a write failure", "session", s.id)
		return true
	}
}

// Events returns the session's events after the cursor: the replay, then
// the live tail, with no gap and no duplicate (see journal.Journal.Events).
func (s *Session) Events(ctx context.Context, after int64, runID string) (iter.Seq2[event.Event, error], error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state == stateClosed {
		return nil, ErrClosed
	}
	return s.j.Events(ctx, after, journal.SubscribeOptions{RunID: runID, Buffer: s.cfg.SubscriberBuffer, Bytes: s.cfg.SubscriberBytes}), nil
}

// LastSeq returns the seq of the session's last committed event.
func (s *Session) LastSeq() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.j.LastSeq()
}
