// Package session is the owner of one loaded session: its lease, its
// journal (the single writer of its log), its binding and the bindings it
// retired, its run queue and active run, the active run's steering inbox,
// and every start of a background process. Each command is a method that
// takes the session's own lock; no other package reaches its state.
//
// Lock order: a Session's mutex is never held while taking the host's
// registry lock, and the host never holds its registry lock while calling
// a Session. Inside a Session, the order is mu, then the active run's
// inbox lock (agent.Steers), then the journal's; the locks of the run
// waits, the request deadlines and a run's held receipts are leaves, and
// so is the transcript cache's state lock (its build lock is taken only
// by a run's start, with no lock of the session held; see package
// transcript).
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
	"weft.dev/weft/host/internal/idem"
	"weft.dev/weft/host/internal/journal"
	"weft.dev/weft/host/internal/reconcile"
	"weft.dev/weft/host/internal/spans"
	"weft.dev/weft/host/internal/stats"
	"weft.dev/weft/host/internal/transcript"
	"weft.dev/weft/llm"
	"weft.dev/weft/policy"
	"weft.dev/weft/process"
	"weft.dev/weft/store"
	"weft.dev/weft/store/record"
	"weft.dev/weft/tool"
)

// ErrClosed reports a command on a session that was unloaded, deleted or
// closed with its host. The host loads the session again (unless it was
// deleted) and retries.
var ErrClosed = fmt.Errorf("session closed: %w", agent.ErrHostStopped)

// Store is what a session needs of the store: what its journal appends
// and reads (which covers what reconciling it reads), the runs and
// requests it looks up, the processes a compaction names, and the
// snapshots of its transcript. Every [store.Store] is one.
type Store interface {
	journal.Store
	Run(ctx context.Context, id string) (record.Run, error)
	Request(ctx context.Context, id string) (record.Request, error)
	Processes(ctx context.Context, p store.ListProcessesParams) ([]record.Process, error)
	store.Snapshots
}

// Config is what the sessions of one host share. The host fills in every
// field's default; a Session does not copy it.
type Config struct {
	// Store holds every session. Required.
	Store Store
	// Journal tunes the session writers; its Store is Store and its
	// Committed hook is the session's own.
	Journal journal.Config
	// ResolveModel turns a model name into a model. Required.
	ResolveModel func(name string) (*agent.Model, error)
	// DefaultModel is used when neither the run nor its session names one.
	DefaultModel string
	// Tools are offered to every run; nil means none.
	Tools *tool.Registry
	// MCP offers, beside Tools, the tools of the MCP servers of the
	// host's configuration and of the session, asked again before every
	// step; nil means none.
	MCP MCPTools
	// MaxSteps caps a run's steps unless the run says otherwise.
	MaxSteps int
	// Processes runs background processes; nil refuses them.
	Processes *process.Manager
	// Leases grants the session leases; nil means none (a store no other
	// process opens). A session holds its lease from its load to its
	// close; every append carries the lease's epoch, and a session whose
	// lease is lost (Lost closes, or an append is refused with
	// store.ErrFenced) stops at once: it closes its runs' context, writes
	// nothing more, and calls Dropped.
	Leases store.Leases
	// Dropped, if set, is called once, from a goroutine of the session
	// and with none of its locks held, when the session stopped on its
	// own: it lost its lease, or its recovery from a write failure found
	// it deleted (a session/delete whose answer was lost). The callee
	// must Close the session (not from that goroutine: Close waits for
	// it) and forget it; commands meanwhile fail with ErrClosed.
	Dropped func(*Session)
	// SubscriberBuffer bounds a subscriber's queue (see journal.SubscribeOptions).
	SubscriberBuffer int
	// SubscriberBytes bounds a subscriber's queue in bytes.
	SubscriberBytes int
	// RetryBackoff is the first wait between attempts to recover from a
	// write failure; it doubles up to 32 times it.
	RetryBackoff time.Duration
	// HoldQueued makes a loaded session keep the queued runs it finds in
	// its log (acknowledged by an earlier host) until a run is admitted
	// through this one: set by a host that shares its store and closes
	// when its own run ends (a one-shot `weft run`), so that it neither
	// starts work another host acknowledged nor cancels it when it
	// closes. A serving host runs them at once.
	HoldQueued bool
	// Policy is the host's approval policy, the lowest layer under the
	// session's and the run's.
	Policy api.Policy
	// InputTimeout, if positive, is how long a question (ask_user) waits
	// for its answer.
	InputTimeout time.Duration
	// RunBudget is the default budget of a run: a run's own budget is
	// laid over it, field by field. The zero Budget means none.
	RunBudget event.Budget
	// HostSpend, if set, holds every run to the host's budget; nil means
	// the host has none.
	HostSpend *HostSpend
	// Protected is what a session's mounts may not reach (see
	// env.Protected): a local mount whose directory is no longer the path
	// stored for it (a component was made a symbolic link since) is
	// checked again whenever the session's binding is opened. Nil
	// protects the kernel's file systems only.
	Protected *env.Protected
	// Transcripts is the memory the host's sessions keep their transcripts
	// in between runs; nil keeps none (every run start reads the log).
	Transcripts *transcript.Budget
	// NewID makes IDs with a prefix. Required.
	NewID func(prefix string) string
	// Logger receives diagnostics. Required (may discard).
	Logger *slog.Logger
	// Checkpoint, if set, checkpoints the read-write mounts around each
	// step's tool calls (see agent.Run.Checkpoint), for session id.
	Checkpoint func(ctx context.Context, id string, b *env.Binding, calls []event.ToolCall) func(context.Context) []event.Event
	// Stats, if set, counts the session's run starts and ends, append
	// latencies and lost leases for the host's metrics.
	Stats *stats.Stats
	// Spans, if set, traces the session's runs (a span per run, step,
	// model call and tool call); nil traces nothing.
	Spans *spans.Tracer
}

// MCPTools lists the tools of MCP servers for one step of a run in
// binding b: the host's and those of session (tool/mcp.Manager). The
// error names the servers left out; the registry holds the others'.
type MCPTools interface {
	Tools(ctx context.Context, session map[string]event.MCPServer, b *env.Binding) (*tool.Registry, error)
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
	// recovering is set while a goroutine of the session recovers from
	// write failures (recoverFailed).
	recovering bool
	j          *journal.Journal
	lease      store.Lease    // nil without Config.Leases; set before the session is shared
	bind       *env.Binding   // current binding, opened on first use
	retired    []*env.Binding // replaced while a run was active
	queue      []queuedRun
	held       bool // the queue waits for a run admitted through this host (Config.HoldQueued)
	// compacting is set while session/compact runs: the queue waits.
	compacting bool
	// handingOver is set once the session hands its runs over (a
	// draining host, see Handover): no run starts or resumes any more.
	handingOver bool
	active      *activeRun
	// orphan is the run whose loop ended on a journal that had failed,
	// before the recovery looked for the active run: the recovery cuts it
	// as it would the active one (see recover).
	orphan  string
	wg      sync.WaitGroup // the session's goroutines; Add only with mu held and state not closed
	release sync.Once
	// finished is closed once a closed session's goroutines have ended
	// and what it held is released (finish).
	finished chan struct{}

	// waits are the done channels of the runs admitted and not settled.
	waits runWaits

	// mcpFailed holds, by MCP server, the last failure the log records
	// as mcp.server_failed (recordMCPFailures); guarded by mu.
	mcpFailed map[string]string

	// approved are the rules that allow_session answers added, for every
	// later run of the session; guarded by mu.
	approved []api.Rule

	// deadlines are the timers of the open requests that have one.
	deadlines *deadlines

	// conv is the transcript kept for the next run start; the journal's
	// Committed hook feeds it.
	conv *transcript.Cache
	// runBuf is the array a new run's messages go in (the transcript,
	// then what the run appends: agent.Run.OwnHistory), kept from one
	// run to the next so that a run start copies the transcript into
	// memory it already has instead of allocating its size afresh; nil
	// while a run holds it, and let go with the transcript when the
	// session idles. Guarded by mu.
	runBuf []llm.Message

	// spans are the open trace spans of the session's runs; nil when the
	// host does not trace. The journal's Committed hook feeds it.
	spans *spans.Session
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
	// handover stops the executing loop at its next step boundary (see
	// Session.Handover); a new one per execution, nil while parked.
	handover *agent.Handover
	// resume and history are what a parked run resumes from, kept in
	// memory with the answers applied as they commit; nil after a restart
	// (the log is read instead).
	resume  *agent.Resume
	history []llm.Message

	// receipts are the cancels waiting to be stored with the terminal event.
	receipts heldClaims

	// approved is policy with the first nApproved of the session's
	// approved rules added, guarded by the session's mu: each approval
	// is compiled once per run, not at every call.
	approved  *policy.Set
	approvedB *policy.Set // the policy approved was made from
	nApproved int

	// declined is set when a person answered "no" to the run's budget
	// question while the run was parking: it ends, parked, with it.
	declined *event.Error
	// hostSeen is what of the run's spend went into Config.HostSpend;
	// guarded by the session's mu.
	hostSeen hostSeen
}

// queuedRun is a run admitted and not started: everything it starts
// from, as its run.queued records it, so that a restarted host rebuilds
// it from the log.
type queuedRun struct {
	id       string
	model    string
	maxSteps int
	input    []event.Part
	policy   json.RawMessage
	// defaultPreset is the host layer's preset when no layer names one.
	defaultPreset string
	tools         []event.ClientTool
	// busy is the busy policy it was admitted under; one admitted with
	// interrupt went before the runs queued earlier.
	busy string
	// budget is the run's budget (its own over the host's default), if
	// any.
	budget *event.Budget
	// steers were accepted for it before it started (see Start's busy
	// steer); its inbox starts with them.
	steers []agent.Steer
}

// queuedFrom returns the queued run that run.queued d of run id admitted.
func queuedFrom(id string, d event.RunQueuedData) queuedRun {
	return queuedRun{id: id, model: d.Model, maxSteps: d.MaxSteps, input: d.Input, policy: d.Policy,
		defaultPreset: d.DefaultPreset, tools: d.Tools, busy: d.Busy, budget: d.Budget}
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
		s.releaseLease()
		return nil, s.loadErr(err)
	}
	rc.Stored()
	s.start(j)
	return s, nil
}

// Fork creates session id, a fork of data.From at data.Seq (see
// journal.Fork), and returns its owner, which holds its lease.
func Fork(ctx context.Context, cfg *Config, id string, data event.SessionForkedData, rc *idem.Claim) (*Session, error) {
	s, err := newSession(cfg, id)
	if err != nil {
		return nil, err
	}
	j, err := journal.Fork(ctx, s.journalConfig(), id, data, rc.Receipts(id, idem.Ref{ID: id})...)
	if err != nil {
		s.releaseLease()
		return nil, s.loadErr(err)
	}
	rc.Stored()
	s.start(j)
	return s, nil
}

// Load opens the existing session id: it takes the lease, loads the
// projection, closes what a crash left open (reconcile), restores the run
// that waits for answers and the queue from the log, and starts the first
// queued run unless a run waits or Config.HoldQueued holds the queue.
func Load(ctx context.Context, cfg *Config, id string) (*Session, error) {
	s, err := newSession(cfg, id)
	if err != nil {
		return nil, err
	}
	j, err := journal.Open(ctx, s.journalConfig(), id)
	if err != nil {
		s.releaseLease()
		return nil, s.loadErr(err)
	}
	// A crash interrupts what was running; a run that waits for answers
	// goes on waiting, and a queued run, which never started, runs.
	waiting := func(r record.Run) bool { return r.Status == record.RunWaiting }
	queued := func(r record.Run) bool { return r.Status == record.RunQueued }
	if _, err := reconcile.Session(ctx, cfg.Store, j, id, reconcile.Options{Waiting: waiting, Keep: queued}); err != nil {
		j.Close()
		s.releaseLease()
		return nil, s.loadErr(err)
	}
	s.start(j)
	if err := s.restore(ctx); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

func newSession(cfg *Config, id string) (*Session, error) {
	var ls store.Lease
	if cfg.Leases != nil {
		var err error
		if ls, err = cfg.Leases.Acquire(context.Background(), id); err != nil {
			var held *store.LeaseHeldError
			if errors.As(err, &held) {
				return nil, api.Wrap(api.KindRunConflict, err, "session %s is in use by another weft process: held by %s", id, held.Holder).
					With("sessionId", id).With("holder", held.Holder)
			}
			return nil, storageErr(id, fmt.Errorf("session %s: lease: %w", id, err))
		}
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	s := &Session{cfg: cfg, id: id, ctx: ctx, cancel: cancel, lease: ls,
		conv: transcript.NewCache(cfg.Transcripts), finished: make(chan struct{}), spans: cfg.Spans.Session(id)}
	s.deadlines = newDeadlines(s.expire)
	s.Touch()
	return s, nil
}

func (s *Session) journalConfig() journal.Config {
	jc := s.cfg.Journal
	jc.Store = s.cfg.Store
	jc.Committed = s.committed
	if s.cfg.Stats != nil {
		jc.AppendTook = s.cfg.Stats.AppendTook
	}
	jc.Epoch = s.Epoch()
	return jc
}

// Epoch returns the fencing epoch of the session's lease: 0 without
// leases, or with leases that are not fenced (flock).
func (s *Session) Epoch() int64 {
	if s.lease == nil {
		return 0
	}
	return s.lease.Epoch()
}

// Owner returns who owns the session as a process's owner (see
// process.Owner): the holder the session's lease names (a lease that has
// a Holder() string method, as store/postgres's do) and its epoch. Both
// are zero without fenced leases.
func (s *Session) Owner() process.Owner {
	o := process.Owner{Epoch: s.Epoch()}
	if h, ok := s.lease.(interface{ Holder() string }); ok {
		o.Host = h.Holder()
	}
	return o
}

// loadErr is the error of a load or create that failed after the lease
// was taken: a refused (fenced) write means another holder took the lease
// meanwhile.
func (s *Session) loadErr(err error) error {
	if errors.Is(err, store.ErrFenced) {
		return api.Wrap(api.KindRunConflict, err, "session %s is in use by another weft process: its lease moved while it loaded", s.id).With("sessionId", s.id)
	}
	return storageErr(s.id, err)
}

// releaseLease gives the session's lease up, if it has one. A release
// that fails leaves the lease to expire.
func (s *Session) releaseLease() {
	if s.lease == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.lease.Release(ctx); err != nil {
		s.cfg.Logger.Warn("release session lease; it will expire", "session", s.id, "err", err)
	}
}

// start makes j the session's journal, watches it for write failures,
// and starts the goroutine that watches the lease for its loss (a lease
// that cannot be lost, a flock, needs none).
func (s *Session) start(j *journal.Journal) {
	s.mu.Lock()
	s.j = j
	s.watch(j)
	if s.lease != nil && s.lease.Lost() != nil {
		s.wg.Go(s.watchLease)
	}
	s.mu.Unlock()
}

// watchLease drops the session when its lease is lost, until the session
// closes.
func (s *Session) watchLease() {
	select {
	case <-s.ctx.Done():
	case <-s.lease.Lost():
		s.lose(errors.New("the lease expired before it could be renewed, or moved to another holder"))
	}
}

// lose stops a session whose lease is lost: it is closed at once (runs
// cancelled, commands refused with ErrClosed; nothing it writes can
// commit any more) and handed to Config.Dropped, which closes it and
// forgets it. The write that found the lease gone is never retried: the
// next request loads the session anew, under a new lease or refused
// while another holder has it.
func (s *Session) lose(cause error) {
	if s.drop() {
		s.cfg.Stats.LostLease()
		s.cfg.Logger.Error("session lease lost; dropping the session", "session", s.id, "epoch", s.Epoch(), "err", cause)
		s.dropped()
	}
}

// stop stops a session whose recovery found it deleted, as lose does,
// saying why.
func (s *Session) stop(why string) {
	if s.drop() {
		s.cfg.Logger.Info("session stopped: "+why, "session", s.id)
		s.dropped()
	}
}

// drop closes the session at once (runs cancelled, commands refused with
// ErrClosed) and reports whether it was open.
func (s *Session) drop() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state == stateClosed {
		return false
	}
	s.state = stateClosed
	s.cancel(ErrClosed)
	return true
}

// dropped hands the stopped session to Config.Dropped, if set.
func (s *Session) dropped() {
	if s.cfg.Dropped != nil {
		s.cfg.Dropped(s)
	}
}

// ID returns the session's ID.
func (s *Session) ID() string { return s.id }

// Holding is what a session holds at one moment, for the host's metrics.
type Holding struct {
	// Running is 1 while a run executes, Waiting 1 while it is parked
	// for answers; Queued counts the runs behind it.
	Running, Waiting, Queued int
	// Subscribers counts the live subscriptions to the session's log.
	Subscribers int
}

// Holding returns what the session holds now.
func (s *Session) Holding() Holding {
	s.mu.Lock()
	defer s.mu.Unlock()
	var l Holding
	if a := s.active; a != nil {
		if a.parked {
			l.Waiting = 1
		} else {
			l.Running = 1
		}
	}
	l.Queued = len(s.queue)
	if s.j != nil {
		l.Subscribers = s.j.Subscribers()
	}
	return l
}

// Touch records a request, for idle unloading.
func (s *Session) Touch() { s.used.Store(time.Now().UnixNano()) }

// LastUsed returns when the session last had a request, in unix nanos.
func (s *Session) LastUsed() int64 { return s.used.Load() }

// Record returns the session's projected record.
func (s *Session) Record() record.Session {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.j.Session()
}

// Run returns a run's record: the projection's for a run that has not
// ended or ended lately, the store's otherwise.
func (s *Session) Run(ctx context.Context, id string) (record.Run, error) {
	s.mu.Lock()
	r, ok := s.j.Run(id)
	s.mu.Unlock()
	if ok {
		return r, nil
	}
	r, err := s.cfg.Store.Run(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return record.Run{}, api.Wrap(api.KindNotFound, err, "run %s not found", id).With("runId", id)
	}
	if err != nil {
		return record.Run{}, fmt.Errorf("run %s: %w", id, err)
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
	case errors.Is(err, journal.ErrClosed), errors.Is(err, store.ErrFenced):
		// A fenced write: the session is being dropped (see watch); the
		// host loads it again, which fails while another holder has it.
		return ErrClosed
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return err
	case errors.Is(err, store.ErrReceiptExists), errors.Is(err, store.ErrInvalid):
		// The store refused this batch alone (the journal goes on): the
		// caller's error, which the host maps (a receipt another writer
		// stored first is answered as a retry).
		return fmt.Errorf("session %s: %w", s.id, err)
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
// kept transcript, and into the runs' trace spans when the host traces.
func (s *Session) committed(batch []event.Event) {
	s.conv.Observe(batch)
	s.cfg.Stats.Observe(batch)
	if s.spans != nil {
		s.spans.Observe(batch)
	}
}

// track makes the done channel of run id, which settle closes once the
// run has ended and the session is done with it; a run that has one
// keeps it, with whoever waits on it.
func (s *Session) track(id string) { s.waits.track(id) }

// settleEnded settles every run the session tracks that it no longer
// holds: neither active nor queued, so ended (a recovery that reloaded
// the log may find a run ended by a write whose answer was lost). Called
// with mu held, once the next run has started.
func (s *Session) settleEnded() {
	held := map[string]bool{}
	if s.active != nil {
		held[s.active.id] = true
	}
	for _, q := range s.queue {
		held[q.id] = true
	}
	s.waits.settleAllBut(held)
}

// settle closes run id's done channel: its terminal event is committed
// and the session is done with it (it is no longer active, and the next
// queued run has started, or the session holds it). Run/wait and
// run/cancel return then, so that the next run/start is admitted. Called
// by commands and by the run's goroutine once it has tidied up.
func (s *Session) settle(id string) { s.waits.settle(id) }

// doneChan returns run id's done channel, or nil when the session is not
// waiting for the run to end.
func (s *Session) doneChan(id string) <-chan struct{} { return s.waits.chanOf(id) }

// idle reports whether the session has no run, no queued run, no
// subscriber and no request since cutoff (unix nanos), and, under a
// fenced lease, no process running here: its processes' writes are
// fenced with the lease, which unloading would give up.
func (s *Session) idle(cutoff int64) bool {
	return s.used.Load() <= cutoff && s.active == nil && len(s.queue) == 0 && s.j.Subscribers() == 0 &&
		(s.cfg.Processes == nil || s.lease == nil || s.lease.Epoch() == 0 || !s.cfg.Processes.Runs(s.id))
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

// ReleaseTranscriptIfIdle lets go of the transcript the session keeps
// between runs if it is idle since cutoff (unix nanos) and its lock is
// free, unless a snapshot of it is due (see transcript.Cache.Release);
// the next run start builds it again from the latest snapshot and the
// log after it. It also forgets the records of its ended runs (the
// store has them) and parks its journal's writer goroutine until the
// next write (journal.Park). It reports whether it let a transcript go.
func (s *Session) ReleaseTranscriptIfIdle(cutoff int64) bool {
	if !s.mu.TryLock() {
		return false
	}
	defer s.mu.Unlock()
	if s.state != stateOpen || !s.idle(cutoff) {
		return false
	}
	s.j.TrimEnded()
	s.runBuf = nil
	s.j.Park()
	return s.conv.Release()
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
	s.deadlines.stopAll()
	s.wg.Wait()
	s.release.Do(func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.j.Close()
		s.conv.Drop()
		s.releaseLease()
		s.closeRetired()
		s.bind.Close()
		s.bind = nil
		close(s.finished)
	})
}

// Closed reports whether the session was closed.
func (s *Session) Closed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.state == stateClosed
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

// EncodedEvents is Events with each event's JSON encoding, shared by
// every subscriber of the session, in slices read at once (see
// journal.Journal.EncodedEvents).
func (s *Session) EncodedEvents(ctx context.Context, after int64, runID string) (iter.Seq2[[]event.Encoded, error], error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state == stateClosed {
		return nil, ErrClosed
	}
	return s.j.EncodedEvents(ctx, after, journal.SubscribeOptions{RunID: runID, Buffer: s.cfg.SubscriberBuffer, Bytes: s.cfg.SubscriberBytes}), nil
}

// LastSeq returns the seq of the session's last committed event.
func (s *Session) LastSeq() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.j.LastSeq()
}
