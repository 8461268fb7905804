package process

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"weft.dev/weft/env/sandbox"
	"weft.dev/weft/event"
	"weft.dev/weft/redact"
	"weft.dev/weft/store"
	"weft.dev/weft/store/record"
	"weft.dev/weft/tool"
)

// Errors callers branch on with errors.Is.
var (
	// ErrNotFound reports a process that does not exist or that the caller
	// may not address; the two are not told apart, so existence is not
	// leaked.
	ErrNotFound = errors.New("process not found")
	// ErrDenied reports an operation the caller may not perform on a
	// process it can address (a cancel refused by the [CancelPolicy], a
	// grant by a non-owner). It wraps the policy's error.
	ErrDenied = errors.New("denied")
	// ErrEnded reports a signal or input to a process that has ended (or
	// is not running under this host).
	ErrEnded = errors.New("process has ended")
	// ErrExists reports a Start with the ID of an existing process.
	ErrExists = errors.New("process exists")
	// ErrClosed reports use of a closed Manager.
	ErrClosed = errors.New("process manager closed")
	// ErrInvalid reports bad [StartParams] or arguments.
	ErrInvalid = errors.New("invalid process request")
)

// Caller is who asks: the session and run of a tool call or RPC request.
//
// Visibility: the owning session addresses its processes; a run may
// always address the processes it created itself; a session that holds a
// grant addresses the process; Host addresses everything. Anything else
// gets [ErrNotFound].
type Caller struct {
	SessionID string `json:"sessionId,omitempty"`
	RunID     string `json:"runId,omitempty"`
	// Host marks the host itself (recovery, operators); it sees every
	// process and passes every check but the cancel policy.
	Host bool `json:"host,omitempty"`
	// Receipt, if set, makes the idempotency receipt of the request that
	// asks, given the seq of the one event the request appends to the
	// process's log (signal.<name>, process.cancel_requested,
	// process.granted or process.revoked, process.input); the Manager
	// stores it in that append's transaction. It is not recorded.
	Receipt Receipt `json:"-"`
}

// Receipt makes an idempotency receipt for the event at seq; see
// [Caller.Receipt].
type Receipt func(seq int64) record.Receipt

// receipts returns the receipt for the last of evs, or none.
func (c Caller) receipts(evs []record.ProcessEvent) []record.Receipt {
	if c.Receipt == nil || len(evs) == 0 {
		return nil
	}
	return []record.Receipt{c.Receipt(evs[len(evs)-1].Seq)}
}

// CanSee reports whether c may address the process p.
func (c Caller) CanSee(p record.Process) bool {
	switch {
	case c.Host:
		return true
	case c.SessionID != "" && c.SessionID == p.SessionID:
		return true
	case c.RunID != "" && c.RunID == p.RunID:
		return true
	case c.SessionID != "" && slices.Contains(p.Grants, c.SessionID):
		return true
	}
	return false
}

// CancelPolicy decides whether a caller that can address a process may
// cancel it. AllowCancel returns nil to allow, or an error that says why
// not; the Manager records the refusal in the process log and returns an
// error wrapping [ErrDenied] and this error. It is called without the
// Manager's locks held and must be safe for concurrent use.
type CancelPolicy interface {
	AllowCancel(ctx context.Context, p record.Process, by Caller) error
}

// DefaultPolicy is the default [CancelPolicy]: whoever can address a
// process (the owner, the creating run, grantees, the host) may cancel it.
type DefaultPolicy struct{}

// AllowCancel allows every caller that can see p.
func (DefaultPolicy) AllowCancel(_ context.Context, p record.Process, by Caller) error {
	if !by.CanSee(p) {
		return errors.New("not visible to the caller")
	}
	return nil
}

// Notifier learns that a process ended. ProcessEnded is called once per
// process after its terminal event is committed (by Start's goroutines,
// Cancel, Close and Recover), never under the Manager's locks; it must
// return quickly (hand the record to the session actor). The host writes
// process.exited into the session log, tells the agent at the next step
// boundary and, for WakeOnExit, starts a follow-up run.
type Notifier interface {
	ProcessEnded(p record.Process)
}

// ToolRun is one execution of a tool process.
type ToolRun struct {
	// Process is the process record.
	Process record.Process
	// Call is the prepared call: ID is the process ID (the tool call ID),
	// SessionID and RunID the owner, Arguments the validated arguments.
	// Env is nil: the runner supplies the session's binding for the
	// duration of the call.
	Call *tool.Call
}

// ToolRunner runs the tool call of a tool process, for [Manager.Start] and
// for reruns by [Manager.Recover]. RunTool must honour ctx (cancelled by
// [Manager.Cancel] and [Manager.Close]) and is called on a goroutine the
// Manager owns. A host implements it over its tool.Registry, opening the
// session's env.Binding for the call.
type ToolRunner interface {
	RunTool(ctx context.Context, run ToolRun) tool.Result
}

// AgentRun is one execution of a subagent process (kind
// record.ProcessAgent): the process's record, whose Spec.Agent names the
// child session, and where the child's streamed answer goes.
type AgentRun struct {
	// Process is the process record.
	Process record.Process
	// Restarted is set when [Manager.Recover] runs the process again
	// after a host restart: the child's run may have started, ended or
	// been interrupted meanwhile, and output written before the restart
	// is in the log already.
	Restarted bool
	// Output appends text to the process's output (stream "agent"); it
	// is safe to call from the runner's goroutine only.
	Output func(text string)
	// Started records the child run's ID in the process record, once it
	// is started (see [record.AgentSpec]).
	Started func(ctx context.Context, runID string) error
}

// AgentResult is how a subagent ended: its final answer, or the typed
// reason it failed.
type AgentResult struct {
	// Answer is the child run's final answer.
	Answer string
	// Failure, if set, is why the child did not complete; the process
	// then ends failed (or cancelled, for a cancel).
	Failure *event.ToolFailure
}

// AgentRunner runs subagent processes, for [Manager.Start] and for
// [Manager.Recover], which runs every subagent that was running again
// (whatever its disposition: the child's run follows the runs' recovery
// rules, and the process follows the child). A [ToolRunner] that can run
// them implements it too. RunAgent is called on a goroutine the Manager
// owns; its ctx is cancelled with cause [ErrCancelled] by [Manager.Cancel]
// (the runner then cancels the child's run) and with cause [ErrClosed]
// by [Manager.Close] (the child is left to the next host).
type AgentRunner interface {
	RunAgent(ctx context.Context, run AgentRun) AgentResult
	// SteerAgent hands input written to the process ([Manager.Write]) to
	// the child's run as a steer.
	SteerAgent(ctx context.Context, p record.Process, text string) error
}

// ErrCancelled is the cause of a tool or subagent process's ctx when
// [Manager.Cancel] stopped it.
var ErrCancelled = errors.New("process cancelled")

// defaultAllow names the variables of [Config.BaseEnv] that shell
// processes inherit when [Config.EnvAllowList] is nil.
var defaultAllow = []string{"PATH", "HOME", "LANG", "LC_ALL", "LC_CTYPE", "TERM", "USER", "LOGNAME", "TZ", "TMPDIR", "SHELL"}

// DefaultEnvAllowList returns the default allow-list of environment
// variable names (a new slice each call).
func DefaultEnvAllowList() []string { return slices.Clone(defaultAllow) }

// Config configures [New]. Zero fields mean the defaults noted.
type Config struct {
	// Store keeps the registry and the logs: the process log of a store
	// (every [store.Store] is one). Required.
	Store store.ProcessLog
	// Logger receives the Manager's log lines; nil means silent.
	Logger *slog.Logger
	// Tools runs tool processes; nil refuses them.
	Tools ToolRunner
	// Notify learns of ended processes; nil means nobody.
	Notify Notifier
	// Policy decides cancels; nil means [DefaultPolicy].
	Policy CancelPolicy
	// OutputCap is the most output bytes a process log keeps; beyond it
	// the oldest chunks are dropped (down to 3/4 of the cap) with an
	// [EventOutputDropped] marker. Zero means 64 MiB; it must be at least
	// 8 × ChunkBytes.
	OutputCap int64
	// ChunkBytes is the most bytes of one output event. Zero means 64 KiB.
	ChunkBytes int
	// FlushInterval is how long small writes are coalesced into one output
	// event. Zero means 20 ms.
	FlushInterval time.Duration
	// OutageBuffer bounds, in bytes, the output that all live processes of
	// the Manager together hold in memory while the store refuses writes
	// (host-wide); one process holds at most a quarter of it. Held output
	// is written in order, with a retry and backoff (50 ms doubling to
	// 2 s), as soon as the store takes writes again. Beyond the bound a
	// process's oldest held output is dropped and written, in its place,
	// as one [EventOutputLost] range that every reader sees; its offsets
	// stay reserved and the record's DroppedBytes and LostBytes count it.
	// Zero means 16 MiB; it must be at least 8 × ChunkBytes.
	OutageBuffer int64
	// Sandbox runs shell processes under the sandbox helper, as the
	// foreground shell tool runs (see package env/sandbox): confined by
	// Landlock unless Sandbox.Unsandboxed, and with their whole process
	// tree contained, so that cancel, Close and the host's death end
	// everything a shell started, setsid and double-forked processes
	// included. Nil runs them directly: unconfined, and only their
	// process group is stopped. A program that sets it must call
	// sandbox.Main when sandbox.IsHelper reports true.
	Sandbox *sandbox.Config
	// Shell is the shell binary for shell processes, run as Shell -c
	// COMMAND. Empty means /bin/sh.
	Shell string
	// BaseEnv is the environment shell processes may inherit from
	// (KEY=VALUE, e.g. the host's os.Environ(); library code reads no
	// environment itself). Only the names in EnvAllowList are kept.
	BaseEnv []string
	// EnvAllowList names the variables kept from BaseEnv. Nil means
	// [DefaultEnvAllowList]. PATH defaults to a standard PATH when
	// BaseEnv has none.
	EnvAllowList []string
	// KillGrace is how long a cancelled shell's group has between SIGTERM
	// and SIGKILL, and how long output is drained after a shell exits.
	// Zero means 2 s.
	KillGrace time.Duration
	// TailBytes is how much output [Manager.Await] returns. Zero means
	// 4 KiB.
	TailBytes int
	// Redactor masks secret values in everything a process log stores:
	// its output (a value split between two chunks included) and its
	// other events (a tool process's result, its command). Nil masks
	// nothing.
	Redactor *redact.Redactor
}

// Manager runs durable background processes: shell commands in process
// groups of their own and tool calls on goroutines it owns, each with a
// log in the store. Create it with [New], run [Manager.Recover] once
// before use after a host start, and [Manager.Close] it. All methods are
// safe for concurrent use.
type Manager struct {
	cfg   Config
	st    store.ProcessLog
	log   *slog.Logger
	allow map[string]bool

	ctx    context.Context // cancelled by Close (cause ErrClosed); parent of tool runs
	cancel context.CancelCauseFunc
	wg     sync.WaitGroup // one per live process (its supervisor)

	mu     sync.Mutex
	closed bool
	live   map[string]*proc

	// dormant serialises appends to processes that are not live here
	// (ended, or left by an earlier host).
	dormant sync.Mutex

	hooks atomic.Pointer[hooks] // Config.Tools and Config.Notify, or Attach's

	held        atomic.Int64 // output bytes held by live processes' outboxes
	perProcHeld int64        // the most one process holds: Config.OutageBuffer / 4
}

type hooks struct {
	tools  ToolRunner
	notify Notifier
}

// Attach replaces the tool runner and the notifier of Config. A host is
// usually built after its Manager (the host's tools need the Manager), so
// it attaches itself afterwards; call Attach before Recover and before the
// first Start. Safe for concurrent use.
func (m *Manager) Attach(tools ToolRunner, notify Notifier) {
	m.hooks.Store(&hooks{tools: tools, notify: notify})
}

// New validates cfg and returns a Manager. It starts no goroutine until a
// process is started.
func New(cfg Config) (*Manager, error) {
	if cfg.Store == nil {
		return nil, errors.New("process: Config.Store is nil")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Policy == nil {
		cfg.Policy = DefaultPolicy{}
	}
	if cfg.ChunkBytes <= 0 {
		cfg.ChunkBytes = 64 << 10
	}
	if cfg.OutputCap <= 0 {
		cfg.OutputCap = 64 << 20
	}
	if cfg.OutputCap < 8*int64(cfg.ChunkBytes) {
		return nil, fmt.Errorf("process: Config.OutputCap %d is below 8 × ChunkBytes (%d)", cfg.OutputCap, cfg.ChunkBytes)
	}
	if cfg.OutageBuffer <= 0 {
		cfg.OutageBuffer = 16 << 20
	}
	if cfg.OutageBuffer < 8*int64(cfg.ChunkBytes) {
		return nil, fmt.Errorf("process: Config.OutageBuffer %d is below 8 × ChunkBytes (%d)", cfg.OutageBuffer, cfg.ChunkBytes)
	}
	if cfg.FlushInterval <= 0 {
		cfg.FlushInterval = 20 * time.Millisecond
	}
	if cfg.Shell == "" {
		cfg.Shell = "/bin/sh"
	}
	if cfg.KillGrace <= 0 {
		cfg.KillGrace = 2 * time.Second
	}
	if cfg.TailBytes <= 0 {
		cfg.TailBytes = 4 << 10
	}
	if cfg.EnvAllowList == nil {
		cfg.EnvAllowList = defaultAllow
	}
	allow := make(map[string]bool, len(cfg.EnvAllowList))
	for _, k := range cfg.EnvAllowList {
		allow[k] = true
	}
	cfg.BaseEnv = slices.Clone(cfg.BaseEnv)
	cfg.EnvAllowList = slices.Clone(cfg.EnvAllowList)
	ctx, cancel := context.WithCancelCause(context.Background())
	m := &Manager{cfg: cfg, st: cfg.Store, log: cfg.Logger, allow: allow, ctx: ctx, cancel: cancel, live: make(map[string]*proc),
		perProcHeld: cfg.OutageBuffer / 4}
	m.Attach(cfg.Tools, cfg.Notify)
	return m, nil
}

// proc is a live process: one started by this Manager that has not ended.
type proc struct {
	m  *Manager
	id string

	mu      sync.Mutex // guards rec, box, changed, cancel, closing and appends
	rec     record.Process
	box     outbox        // output reserved, held or lost, not yet committed
	changed chan struct{} // closed and replaced on every append
	cancelq *CancelRequestedData
	closing bool // Close is killing it
	// fenced is the store's refusal once another host holds a later
	// lease of the process's session: the process is stopped and
	// nothing more is written for it.
	fenced error

	done chan struct{} // closed once the terminal event is committed (or Close gave up on it)

	// shell processes
	sandbox *sandbox.Cmd // nil without Config.Sandbox; its Wait removes the TMPDIR
	cmd     *exec.Cmd
	stdin   *os.File // nil if none (the PTY master for PTY processes)
	pty     *os.File

	// tool and agent processes
	stopTool context.CancelCauseFunc
}

// newProc returns the live state of the process rec.
func (m *Manager) newProc(rec record.Process) *proc {
	if rec.TrimmedBefore == 0 && rec.LostBytes == 0 {
		rec.TrimmedBefore = rec.DroppedBytes // a record written before lost ranges were counted
	}
	p := &proc{m: m, id: rec.ID, rec: rec, changed: make(chan struct{}), done: make(chan struct{})}
	p.box.next = rec.OutputBytes
	if lost := rec.DroppedBytes - rec.TrimmedBefore; lost > 0 {
		// Lost before this host ran it (a rerun): where exactly is not
		// known here, so count it as the latest output.
		p.box.gaps = []span{{rec.OutputBytes - lost, rec.OutputBytes}}
	}
	return p
}

// append commits evs (sequenced after the log, after any held output)
// and the record as changed by mutate, under p.mu. mutate may be nil.
func (p *proc) append(ctx context.Context, evs []record.ProcessEvent, mutate func(*record.Process)) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.appendLocked(ctx, evs, mutate, Caller{})
}

// appendLocked is append with p.mu held; by's receipt, if any, joins the
// transaction.
func (p *proc) appendLocked(ctx context.Context, evs []record.ProcessEvent, mutate func(*record.Process), by Caller) error {
	return p.commitLocked(ctx, nil, evs, mutate, by)
}

func (p *proc) snapshot() (record.Process, <-chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	r := p.rec
	r.Grants = slices.Clone(r.Grants)
	return r, p.changed
}

// newEvent builds an unsequenced event.
func newEvent(typ event.Type, v any) record.ProcessEvent {
	raw, err := json.Marshal(v)
	if err != nil {
		raw = []byte(`{}`)
	}
	return record.ProcessEvent{Type: typ, Data: raw}
}

// update appends to process id whether it is live or not: mutate sees the
// current record and returns the events to append (none: nothing is
// written) or an error. by's receipt, if any, joins the transaction. It
// returns the record after the append.
func (m *Manager) update(ctx context.Context, id string, by Caller, mutate func(rec *record.Process) ([]record.ProcessEvent, error)) (record.Process, error) {
	if p := m.liveProc(id); p != nil {
		p.mu.Lock()
		defer p.mu.Unlock()
		rec := p.rec
		evs, err := mutate(&rec)
		if err != nil || len(evs) == 0 {
			return p.rec, err
		}
		if err := p.appendLocked(ctx, evs, func(r *record.Process) { *r = rec; r.LastSeq = p.rec.LastSeq }, by); err != nil {
			return p.rec, err
		}
		return p.rec, nil
	}
	m.dormant.Lock()
	defer m.dormant.Unlock()
	rec, err := m.st.Process(ctx, id)
	if err != nil {
		return record.Process{}, m.notFound(id, err)
	}
	evs, err := mutate(&rec)
	if err != nil || len(evs) == 0 {
		return rec, err
	}
	now := time.Now().UTC()
	for i := range evs {
		rec.LastSeq++
		evs[i].Seq, evs[i].ProcessID, evs[i].Time = rec.LastSeq, id, now
	}
	if err := m.st.AppendProcess(ctx, store.ProcessBatch{ProcessID: id, Events: evs, Record: &rec, Receipts: by.receipts(evs), Epoch: rec.Epoch}); err != nil {
		return rec, fmt.Errorf("process %s: %w", id, err)
	}
	return rec, nil
}

func (m *Manager) notFound(id string, err error) error {
	if errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	return fmt.Errorf("process %s: %w", id, err)
}

func (m *Manager) liveProc(id string) *proc {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.live[id]
}

// get returns the current record of id: the live copy if any, else the
// stored one.
func (m *Manager) get(ctx context.Context, id string) (record.Process, *proc, error) {
	if p := m.liveProc(id); p != nil {
		r, _ := p.snapshot()
		return r, p, nil
	}
	r, err := m.st.Process(ctx, id)
	if err != nil {
		return record.Process{}, nil, m.notFound(id, err)
	}
	return r, nil, nil
}

// access returns the record of id if caller can see it. Otherwise it
// records the attempt (op) when audit is set and returns ErrNotFound.
func (m *Manager) access(ctx context.Context, id string, caller Caller, op string, audit bool) (record.Process, *proc, error) {
	if id == "" {
		return record.Process{}, nil, fmt.Errorf("%w: empty process id", ErrNotFound)
	}
	rec, p, err := m.get(ctx, id)
	if err != nil {
		return record.Process{}, nil, err
	}
	if caller.CanSee(rec) {
		return rec, p, nil
	}
	if audit {
		var ev record.ProcessEvent
		if op == "cancel" {
			ev = newEvent(EventCancelRequested, CancelRequestedData{By: caller, Denied: true, DenyReason: "not visible to the caller"})
		} else {
			ev = newEvent(EventAccessDenied, AccessDeniedData{Op: op, By: caller})
		}
		if _, err := m.update(context.WithoutCancel(ctx), id, Caller{}, func(*record.Process) ([]record.ProcessEvent, error) {
			return []record.ProcessEvent{ev}, nil
		}); err != nil {
			m.log.Warn("record denied access", "process", id, "op", op, "err", err)
		}
	}
	return record.Process{}, nil, fmt.Errorf("%w: %s", ErrNotFound, id)
}

// Get returns the record of process id if caller can address it, else an
// error wrapping [ErrNotFound].
func (m *Manager) Get(ctx context.Context, id string, caller Caller) (record.Process, error) {
	rec, _, err := m.access(ctx, id, caller, "get", false)
	return rec, err
}

// ListParams selects processes for [Manager.List].
type ListParams struct {
	// Statuses, if set, keeps only processes in one of them.
	Statuses []string
	// Limit caps the list; zero means 1000.
	Limit int
}

// List returns the processes caller can address through its session: the
// session's own and those granted to it (a Host caller lists all),
// oldest first.
func (m *Manager) List(ctx context.Context, p ListParams, caller Caller) ([]record.Process, error) {
	if !caller.Host && caller.SessionID == "" {
		return nil, nil
	}
	q := store.ListProcessesParams{Statuses: p.Statuses, Limit: p.Limit, IncludeGranted: true}
	if !caller.Host {
		q.SessionID = caller.SessionID
	}
	ps, err := m.st.Processes(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("list processes: %w", err)
	}
	return ps, nil
}

// LiveByMount returns the IDs of the running processes of sessionID whose
// working directory lies in mount mountID, so that a mount that owns a
// live process is not unmounted. Records left running by a dead host
// count until [Manager.Recover] settles them.
func (m *Manager) LiveByMount(ctx context.Context, sessionID, mountID string) ([]string, error) {
	ps, err := m.st.Processes(ctx, store.ListProcessesParams{SessionID: sessionID, MountID: mountID, Statuses: []string{record.ProcessRunning}})
	if err != nil {
		return nil, fmt.Errorf("session %s mount %s: list processes: %w", sessionID, mountID, err)
	}
	ids := make([]string, len(ps))
	for i, p := range ps {
		ids[i] = p.ID
	}
	return ids, nil
}

// Grant lets session toSession address process id. Only the owning session
// (or the host) may grant; another caller that can see the process gets
// [ErrDenied], one that cannot gets [ErrNotFound]. Granting twice is a
// no-op.
func (m *Manager) Grant(ctx context.Context, id, toSession string, caller Caller) (record.Process, error) {
	return m.changeGrant(ctx, id, toSession, caller, true)
}

// Revoke withdraws a grant made by [Manager.Grant], with the same rules.
func (m *Manager) Revoke(ctx context.Context, id, fromSession string, caller Caller) (record.Process, error) {
	return m.changeGrant(ctx, id, fromSession, caller, false)
}

func (m *Manager) changeGrant(ctx context.Context, id, session string, caller Caller, grant bool) (record.Process, error) {
	op := "revoke"
	if grant {
		op = "grant"
	}
	if session == "" {
		return record.Process{}, fmt.Errorf("%w: %s of process %s: empty session", ErrInvalid, op, id)
	}
	if _, _, err := m.access(ctx, id, caller, op, true); err != nil {
		return record.Process{}, err
	}
	return m.update(ctx, id, caller, func(rec *record.Process) ([]record.ProcessEvent, error) {
		if !caller.Host && caller.SessionID != rec.SessionID {
			return nil, fmt.Errorf("%w: %s of process %s: only the owning session may %s", ErrDenied, op, id, op)
		}
		has := slices.Contains(rec.Grants, session)
		if grant == has || session == rec.SessionID {
			return nil, nil
		}
		typ := EventRevoked
		if grant {
			rec.Grants = append(rec.Grants, session)
			typ = EventGranted
		} else {
			rec.Grants = slices.DeleteFunc(rec.Grants, func(s string) bool { return s == session })
		}
		return []record.ProcessEvent{newEvent(typ, GrantData{SessionID: session, By: caller})}, nil
	})
}

// newID returns a fresh process ID.
func newID() string {
	var b [12]byte
	rand.Read(b[:])
	return "proc_" + hex.EncodeToString(b[:])
}

// register adds a live process; it fails after Close.
func (m *Manager) register(p *proc) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	if _, dup := m.live[p.id]; dup {
		return fmt.Errorf("%w: %s", ErrExists, p.id)
	}
	m.live[p.id] = p
	m.wg.Add(1)
	return nil
}

// finish removes a live process after its terminal event (or after
// giving up on it), gives back the output it held, and tells the
// notifier if notify is set.
func (m *Manager) finish(p *proc, notify bool) {
	m.mu.Lock()
	delete(m.live, p.id)
	m.mu.Unlock()
	p.mu.Lock()
	p.box.release(m)
	p.mu.Unlock()
	close(p.done)
	if notify && m.hooks.Load().notify != nil {
		rec, _ := p.snapshot()
		m.hooks.Load().notify.ProcessEnded(rec)
	}
}

// end writes the terminal event of a live process with its record, after
// the output it holds. While the store refuses, it tries again with
// backoff until the store takes it, so that an end is never lost to an
// outage; it gives up only when the store is closed, or when the Manager
// is closing and one more try failed (the next host's Recover then settles
// the process). It reports whether the end was committed.
func (p *proc) end(status string, d EndedData, exit *int) (record.Process, bool) {
	m := p.m
	d.Status = status
	now := time.Now().UTC()
	ev := newEvent(terminalType(status), d)
	ev.Time = now
	mutate := func(r *record.Process) { r.Status, r.EndedAt, r.ExitCode = status, &now, exit }
	for closing := false; ; {
		ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
		p.mu.Lock()
		if record.IsProcessTerminal(p.rec.Status) {
			// A try reported failed was committed (see catchUpLocked).
			p.mu.Unlock()
			cancel()
			rec, _ := p.snapshot()
			return rec, true
		}
		err := p.commitLocked(ctx, nil, []record.ProcessEvent{ev}, mutate, Caller{})
		var wait time.Duration
		if err != nil {
			wait = p.refusedLocked(err)
		}
		p.mu.Unlock()
		cancel()
		if err == nil {
			rec, _ := p.snapshot()
			return rec, true
		}
		if errors.Is(err, store.ErrFenced) {
			m.log.Warn("process terminal event not written: another host owns its session now", "process", p.id, "status", status, "err", err)
			rec, _ := p.snapshot()
			return rec, false
		}
		if closing || errors.Is(err, store.ErrClosed) {
			p.mu.Lock()
			held, lost := p.box.bytes, p.box.lost
			p.mu.Unlock()
			m.log.Error("process terminal event not written", "process", p.id, "status", status,
				"heldBytes", held, "lostBytes", lost, "err", err)
			rec, _ := p.snapshot()
			return rec, false
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-m.ctx.Done():
			closing = true
		}
		t.Stop()
	}
}

// Close stops the Manager and waits for the goroutines it started. What
// happens to a live process depends on its disposition:
//
//   - owner_bound (and rerunnable shell) processes are killed (SIGKILL to
//     their whole tree under the sandbox helper, else to their group) and
//     recorded as abandoned with evidence "close";
//   - rerunnable tool processes have their ctx cancelled and stay
//     "running" in the store, so that the next host's Recover runs them
//     again;
//   - externally_owned tool processes are cancelled like rerunnable ones
//     and stay "running" (shells cannot be externally owned: a shell the
//     host started dies with the host).
//
// Close returns after every supervisor goroutine has exited. It is safe
// to call more than once; later calls of other methods that start or
// change live processes return [ErrClosed].
func (m *Manager) Close() error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		m.wg.Wait()
		return nil
	}
	m.closed = true
	live := make([]*proc, 0, len(m.live))
	for _, p := range m.live {
		live = append(live, p)
	}
	m.mu.Unlock()
	for _, p := range live {
		p.mu.Lock()
		p.closing = true
		p.mu.Unlock()
		if p.cmd != nil {
			p.kill()
		}
	}
	m.cancel(ErrClosed)
	m.wg.Wait()
	return nil
}
