// Package host coordinates sessions for many clients at once. A Host is a
// registry of session owners (host/internal/session): it loads a session on
// its first request, hands every command to that session's owner, makes
// every mutation idempotent with one wrapper, and fans committed events
// out to subscribers. The owner admits runs under a busy policy, executes
// them in the background, and serialises steering, cancellation, mount
// changes and process starts under its own lock.
//
// Lock order: the registry's mutex is never held while a session is
// loaded or called, and a session never calls back into the registry
// while holding its own lock.
package host

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"log/slog"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"

	"weft.dev/weft/agent"
	"weft.dev/weft/api"
	"weft.dev/weft/env"
	"weft.dev/weft/event"
	"weft.dev/weft/host/internal/checkpoint"
	"weft.dev/weft/host/internal/journal"
	"weft.dev/weft/host/internal/session"
	"weft.dev/weft/host/internal/spans"
	"weft.dev/weft/host/internal/stats"
	"weft.dev/weft/host/internal/transcript"
	"weft.dev/weft/internal/ids"
	"weft.dev/weft/policy"
	"weft.dev/weft/process"
	"weft.dev/weft/redact"
	"weft.dev/weft/store"
	"weft.dev/weft/store/record"
	"weft.dev/weft/tool"
	"weft.dev/weft/tool/mcp"
)

// Model is a resolved model (see [agent.Model]).
type Model = agent.Model

// Config configures a [Host]. Zero fields take the documented defaults.
type Config struct {
	// Store holds every session. Required. The host does not close it.
	Store store.Store
	// ResolveModel turns a model name into a model. Required.
	ResolveModel func(name string) (*Model, error)
	// DefaultModel is used when neither the run nor its session names one.
	DefaultModel string
	// Tools are offered to every run; nil means none.
	Tools *tool.Registry
	// MCP offers every run's steps, beside Tools, the tools of the MCP
	// servers of the host's configuration and of the run's session
	// (session/create mcpServers); nil means none, and refuses sessions
	// that name servers. The host does not close it: close it after the
	// host.
	MCP *mcp.Manager
	// Leases grants the session leases that keep other hosts from
	// writing a session this host owns (see [store.Leases]). Nil means
	// the store's own: when the store is a [store.LeaseProvider]
	// (store/postgres: lease rows with fencing epochs; store/sqlite:
	// flocks beside its file, with a store-wide host lock), New takes
	// them under Name before it recovers anything and gives them up on
	// Close; a store that provides none (in memory) is used without
	// leases. A session whose lease is lost is dropped, and the next
	// request loads it again (refused while another host holds it).
	// Set it to share leases the caller manages; leases with fencing
	// epochs should then also implement Fenced() bool, reporting true
	// (as [store.HostLeases] do), so that recovery leaves other hosts'
	// processes alone.
	Leases store.Leases
	// Name describes the host to other hosts of its store (see
	// [store.HostLeaseParams]): "weft serve", say. Empty names it by its
	// process alone.
	Name string
	// Notices, if set, tells the host when other hosts commit to a
	// session's log (store/postgres.Notifier): a subscription to a
	// session another host owns then follows it through the store
	// instead of being refused. Nil refuses such subscriptions
	// (run_conflict naming the holder).
	Notices Notices
	// Shared marks a host that shares its store with other live hosts of
	// the same kind (a one-shot `weft run`): it does not recover sessions
	// or processes at start, only the sessions it opens (under their
	// leases), and the queued runs it finds there wait until a run is
	// admitted through it (they run before it, with busy queue). A
	// serving host is not shared: it recovers everything a crash left,
	// which is only safe when no other host uses the store, and runs the
	// queues it finds.
	Shared bool
	// MaxCommandLimits is the most a session may ask for each of its
	// commands (session/create limits); a zero field sets no ceiling.
	// The limits themselves are the sandbox's (process.Config.Sandbox,
	// builtin.Options.Sandbox).
	MaxCommandLimits event.Limits
	// MaxSteps caps a run's steps unless the run says otherwise; zero means 50.
	MaxSteps int
	// ReceiptTTL is how long idempotency receipts are kept; zero means 24 h.
	ReceiptTTL time.Duration
	// SubscriberBuffer is how many events a subscriber may fall behind by
	// before it is closed with reason overflow; zero means 4096.
	SubscriberBuffer int
	// SubscriberBytes is how many bytes of events a subscriber may fall
	// behind by before it is closed with reason overflow; zero means 4 MiB.
	SubscriberBytes int
	// CoalesceWindow is how long a streamed-text event may collect deltas
	// before it is committed; zero means 50 ms.
	CoalesceWindow time.Duration
	// CoalesceBytes is the most text one streamed-text event collects;
	// zero means 16 KiB.
	CoalesceBytes int
	// Logger receives diagnostics; nil means silent.
	Logger *slog.Logger
	// Processes runs background processes; nil refuses them. The host
	// attaches itself as the manager's tool runner and notifier, recovers
	// the processes a crash left (unless Shared), and closes the manager
	// on Close. Each process runs under the lease of its session and its
	// writes are fenced with it. With fenced leases (several live hosts
	// on one store) the host reconciles no process at start: it does so
	// for each session whose lease it takes (see
	// process.Manager.RecoverSession), settling the processes that a
	// host which lost the lease left, and it keeps a session that has
	// processes running here loaded.
	Processes *process.Manager
	// MaxLoadedSessions is how many sessions stay loaded (a journal
	// goroutine, a lease file and their transcript each); beyond it the
	// least recently used idle sessions are unloaded at once, down to
	// seven eighths of it. Zero means 512.
	MaxLoadedSessions int
	// IdleUnload is how long a session with no run, no subscriber and no
	// request stays loaded; zero means ten minutes. An unloaded session
	// loads again on its next request.
	IdleUnload time.Duration
	// TranscriptIdle is how long a loaded session with no run, no
	// subscriber and no request keeps its transcript in memory; then it
	// keeps none, and its next run start reads the latest snapshot and
	// the log after it (a few milliseconds, against a model call's
	// seconds). So a host's memory follows the sessions in use, not
	// every session it served since the last unload: a watched session
	// (a console, a TUI) keeps its transcript, and so does one whose
	// client starts its next run at once; one nobody watches lets go a
	// second after it was last used. Zero means one second; negative
	// keeps transcripts until the session unloads.
	TranscriptIdle time.Duration
	// MemoryIdle is how long the host goes without committing an event
	// before it gives the memory it no longer uses back to the operating
	// system (a garbage collection, then debug.FreeOSMemory), once per
	// quiet spell: the resident memory of an idle host then follows what
	// it holds, not the garbage collector's goal of its busiest moment
	// (about twice the live heap). The collection runs in the host's
	// housekeeping goroutine and costs a few milliseconds of CPU. Zero
	// means two seconds; negative never.
	MemoryIdle time.Duration
	// TranscriptBytes is the memory the loaded sessions may keep their
	// transcripts in between runs, so that a run starts without reading
	// its session's log again; a session whose transcript does not fit
	// reads it at each run start instead. Zero means 256 MiB; negative
	// keeps none.
	TranscriptBytes int64
	// StorageRetry is the first wait between attempts of a session to
	// recover from a failed write (disk full, I/O error); it doubles up
	// to 32 times. Zero means 100 ms.
	StorageRetry time.Duration
	// Redactor masks secret values (the provider keys, the host's token)
	// in everything the host stores in a session's log or sends to a
	// model. The values the MCP servers' ${VAR} reach (MCP's
	// mcp.Manager.Secrets) are added to it. Nil masks only those.
	Redactor *redact.Redactor
	// Protected is what a remote client's sessions may not reach: a
	// session's mount (session/create, env/mount) or MCP server (its
	// readOnly paths, its command) that is, lies under or contains one of
	// its paths is refused with Denied, after its symbolic links are
	// followed (see [env.Protected]; the MCP client checks the servers
	// again when it starts them). Calls made in-process (the embedding
	// program, `weft run` without a server) are the operator's and are
	// not checked. Nil protects the kernel's file systems (/proc, /sys,
	// /dev) only: set it with the host's state directory, store, token
	// and configuration files.
	Protected *env.Protected
	// ScratchDir holds the directories of scratch mounts; empty refuses them.
	ScratchDir string
	// Policy is the host's approval policy (the config file's), the
	// lowest layer under each session's and each run's; the zero Policy
	// allows every call (never-ask). See docs/policy.md.
	Policy api.Policy
	// InputTimeout, if positive, is how long a question the model asks
	// (ask_user) waits for its answer before the call fails.
	InputTimeout time.Duration
	// Budgets are the default budgets of runs and sessions (see
	// [Budgets]); the zero Budgets sets none.
	Budgets Budgets
	// NewID makes IDs with a prefix; nil means random time-ordered IDs.
	NewID func(prefix string) string
	// CheckpointDir, if set, keeps file checkpoints: before each step
	// whose tools may write (file tools, shells, background processes),
	// the content of the session's read-write mounts is kept there
	// (content-addressed) and the step's changes are recorded as
	// checkpoint.recorded, so that session/rewind with files can put them
	// back. Empty keeps none: a rewind of files is refused.
	CheckpointDir string
	// Checkpoint bounds the checkpoints (file size, bytes and paths per
	// checkpoint); zero fields take the defaults of checkpoint.Config.
	CheckpointMaxFileBytes, CheckpointMaxBytes int64
	// Subagents bounds the spawn_agent tool, offered to every run beside
	// Tools when Processes is set (unless Subagents.Off): its depth and
	// the children a run may have running at once.
	Subagents Subagents
	// TracerProvider, if set, traces every run this host executes with
	// OpenTelemetry: a span per execution of a run (its first start and
	// each resume), and under it a span per step, per model call (with
	// the GenAI semantic conventions' model and token attributes) and per
	// tool call, each carrying the session's ID and the seq of its event.
	// The run's trace and span IDs are recorded in run.started and its
	// record (record.Run.TraceID). Spans are made as events commit and
	// handed to the provider's processor, which must not block (the
	// SDK's batch processor does not). Nil traces nothing and costs
	// nothing.
	TracerProvider trace.TracerProvider
	// TraceContent records the text of runs in their spans: the user's
	// input, the model's output, tool calls' arguments and results (each
	// cut to 16 KiB). False keeps every text out of traces.
	TraceContent bool
	// Retention purges ended sessions and sweeps checkpoint blobs no
	// session references, in the background (unless Shared) and on
	// session/prune; see [Retention]. The zero value purges no session
	// and sweeps blobs hourly (with CheckpointDir). Purging needs a store
	// that implements [store.Purger] (every store of weft does).
	Retention Retention
}

// Host is a registry of session owners. Its methods are safe for
// concurrent use.
type Host struct {
	cfg  Config
	scfg session.Config
	// spawns holds the subagent spawns in flight, per run.
	spawns spawnSlots
	// ckpt keeps the file checkpoints; nil without Config.CheckpointDir.
	ckpt *checkpoint.Store
	ctx  context.Context // cancelled by Close
	stop context.CancelFunc
	// bg counts the host's own goroutines (the housekeeping loop and the
	// process notices); Add only with mu held and closed unset.
	bg sync.WaitGroup

	// hostLeases are the leases New took from the store (nil with
	// Config.Leases, or a store without); Close closes them last.
	hostLeases store.HostLeases
	// fenced is set when the session leases carry fencing epochs: other
	// live hosts may share the store (see [store.HostLeases.Fenced]).
	fenced bool
	// stats counts runs, takeovers and append latencies (Metrics).
	stats *stats.Stats
	// released counts the housekeeping's returns of memory to the
	// operating system (Config.MemoryIdle), for tests.
	released atomic.Int64

	// crowded wakes the housekeeping goroutine when more sessions are
	// loaded than MaxLoadedSessions.
	crowded chan struct{}

	mu       sync.Mutex
	sessions map[string]*entry
	closed   bool
	// draining is set by Drain: no session loads or is created any more.
	draining bool

	keyLocks [64]sync.Mutex // striped by idempotency key
	seed     maphash.Seed

	// ret is the state of the retention passes (retention.go).
	ret retention
}

// entry is a session in the registry: loading (ready open) or loaded.
type entry struct {
	ready chan struct{} // closed when s or err is set
	s     *session.Session
	err   error
}

// ErrClosed reports a request to a host that is shutting down; it is
// retryable on another host or after a restart.
var ErrClosed = api.NewError(api.KindOverloaded, "the host is shutting down")

// New starts a host over cfg.Store. Unless cfg.Shared, it first
// recovers every session that a crash left with an active or queued run
// (a run that was running ends as interrupted; one that waits for
// answers goes on waiting; one a draining host handed over (see Drain)
// continues; queued runs start, in order) and the
// background processes a crash left. A session whose lease another
// holder still has (a dead host's, until it expires) is recovered in the
// background as soon as its lease can be taken. It first takes the
// store's leases (Config.Leases, else the store's [store.LeaseProvider])
// and fails at once when the store refuses them (a SQLite store another
// process serves). With fenced leases, the processes it recovers are
// those of sessions whose lease is free, each once it holds the lease;
// another live host's are left alone.
func New(ctx context.Context, cfg Config) (*Host, error) {
	if cfg.Store == nil || cfg.ResolveModel == nil {
		return nil, errors.New("host: Config.Store and Config.ResolveModel are required")
	}
	if cfg.MaxSteps <= 0 {
		cfg.MaxSteps = 50
	}
	if err := cfg.Budgets.check(); err != nil {
		return nil, fmt.Errorf("host: %w", err)
	}
	if cfg.ReceiptTTL <= 0 {
		cfg.ReceiptTTL = 24 * time.Hour
	}
	if cfg.MaxLoadedSessions <= 0 {
		cfg.MaxLoadedSessions = 512
	}
	if cfg.IdleUnload <= 0 {
		cfg.IdleUnload = 10 * time.Minute
	}
	if cfg.TranscriptIdle == 0 {
		cfg.TranscriptIdle = time.Second
	}
	if cfg.MemoryIdle == 0 {
		cfg.MemoryIdle = 2 * time.Second
	}
	if cfg.StorageRetry <= 0 {
		cfg.StorageRetry = 100 * time.Millisecond
	}
	if cfg.TranscriptBytes == 0 {
		cfg.TranscriptBytes = 256 << 20
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if _, err := policy.Compile(cfg.Policy); err != nil {
		return nil, fmt.Errorf("host: Config.Policy: %w", err)
	}
	if cfg.NewID == nil {
		cfg.NewID = ids.New
	}
	cfg.Retention.defaults()
	if cfg.Protected == nil {
		cfg.Protected = env.NewProtected()
	}
	if cfg.Subagents.MaxDepth <= 0 {
		cfg.Subagents.MaxDepth = 2
	}
	if cfg.Subagents.MaxChildren <= 0 {
		cfg.Subagents.MaxChildren = 4
	}
	hctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	h := &Host{cfg: cfg, ctx: hctx, stop: stop, sessions: map[string]*entry{}, crowded: make(chan struct{}, 1), seed: maphash.MakeSeed(),
		stats: &stats.Stats{}}
	if cfg.Processes != nil && !cfg.Subagents.Off {
		spawn, err := h.spawnTool()
		if err == nil {
			reg := tool.NewRegistry()
			if err = reg.Add(spawn); err == nil {
				h.cfg.Tools, err = tool.Merge(cfg.Tools, reg)
			}
		}
		if err != nil {
			stop()
			return nil, fmt.Errorf("host: the spawn_agent tool: %w", err)
		}
		cfg.Tools = h.cfg.Tools
	}
	leases := cfg.Leases
	if p, ok := cfg.Store.(store.LeaseProvider); ok && leases == nil {
		hl, err := p.HostLeases(ctx, store.HostLeaseParams{Name: cfg.Name, Shared: cfg.Shared, Logger: cfg.Logger})
		if err != nil {
			stop()
			return nil, fmt.Errorf("host: %w", err)
		}
		h.hostLeases, leases = hl, hl
	}
	if f, ok := leases.(interface{ Fenced() bool }); ok {
		h.fenced = f.Fenced()
	}
	orphanEvery := defaultOrphanEvery
	if t, ok := leases.(interface{ TTL() time.Duration }); ok && t.TTL() > 0 {
		orphanEvery = t.TTL()
	}
	spend, err := hostSpend(ctx, cfg.Store, cfg.Budgets)
	if err != nil {
		return nil, err
	}
	h.scfg = session.Config{
		Store: cfg.Store, ResolveModel: cfg.ResolveModel, DefaultModel: cfg.DefaultModel,
		Journal: journal.Config{CoalesceWindow: cfg.CoalesceWindow, CoalesceBytes: cfg.CoalesceBytes, Logger: cfg.Logger},
		Tools:   cfg.Tools, MaxSteps: cfg.MaxSteps, Processes: cfg.Processes, Leases: leases, Dropped: h.dropped,
		SubscriberBuffer: cfg.SubscriberBuffer, SubscriberBytes: cfg.SubscriberBytes, RetryBackoff: cfg.StorageRetry,
		HoldQueued: cfg.Shared,
		Policy:     cfg.Policy, InputTimeout: cfg.InputTimeout, NewID: cfg.NewID, Logger: cfg.Logger,
		RunBudget: cfg.Budgets.Run, HostSpend: spend,
		Transcripts: transcript.NewBudget(max(cfg.TranscriptBytes, 0)),
	}
	h.scfg.Journal.Redactor = cfg.Redactor
	h.scfg.Spans = spans.New(cfg.TracerProvider, spans.Options{Content: cfg.TraceContent})
	h.scfg.Stats = h.stats
	h.scfg.Protected = cfg.Protected
	if cfg.MCP != nil {
		h.scfg.MCP = cfg.MCP
		h.scfg.Journal.Redactor = cfg.Redactor.With(cfg.MCP.Secrets()...)
	}
	if m := cfg.Processes; m != nil {
		m.Attach(processHooks{h}, processHooks{h})
	}
	if cfg.CheckpointDir != "" {
		ck, err := checkpoint.New(checkpoint.Config{Dir: cfg.CheckpointDir, MaxFileBytes: cfg.CheckpointMaxFileBytes, MaxBytes: cfg.CheckpointMaxBytes})
		if err != nil {
			h.Close()
			return nil, fmt.Errorf("host: %w", err)
		}
		h.ckpt = ck
		h.scfg.Checkpoint = h.checkpoint
	}
	var held []string
	if !cfg.Shared {
		var err error
		if held, err = h.recover(ctx); err != nil {
			h.Close()
			return nil, err
		}
		if m := cfg.Processes; m != nil && !h.fenced {
			rep, err := m.Recover(ctx)
			if err != nil {
				h.Close()
				return nil, fmt.Errorf("host: recover processes: %w", err)
			}
			cfg.Logger.Info("processes recovered", "abandoned", len(rep.Abandoned), "rerun", len(rep.Rerun), "left", len(rep.Left), "killed", rep.Killed)
		} else if m != nil {
			m.RemoveStaleTemp() // the processes: per session, under its lease (recoverProcesses)
		}
		if _, err := cfg.Store.PruneReceipts(ctx, time.Now().Add(-cfg.ReceiptTTL)); err != nil {
			h.Close()
			return nil, fmt.Errorf("host: prune receipts: %w", err)
		}
	}
	if !h.goBackground(h.housekeeping) {
		return nil, ErrClosed
	}
	if !cfg.Shared && cfg.Retention.Interval > 0 && (!cfg.Retention.Policy.IsZero() || h.ckpt != nil) && !h.goBackground(h.retainLoop) {
		return nil, ErrClosed
	}
	if len(held) > 0 && !h.goBackground(func() { h.recoverHeld(held) }) {
		return nil, ErrClosed
	}
	if f, ok := cfg.Store.(store.OrphanFinder); ok && !cfg.Shared && h.fenced && cfg.Processes != nil &&
		!h.goBackground(func() { h.sweepOrphans(f, orphanEvery) }) {
		return nil, ErrClosed
	}
	return h, nil
}

// goBackground runs f in a goroutine that Close waits for, unless the
// host is closed.
func (h *Host) goBackground(f func()) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return false
	}
	h.bg.Go(f)
	return true
}

// housekeeping deletes expired idempotency receipts every hour, unloads
// idle sessions, lets go of idle sessions' transcripts and gives memory
// back once the host is quiet, until the host closes.
func (h *Host) housekeeping() {
	t := time.NewTicker(time.Hour)
	defer t.Stop()
	idle := time.NewTicker(min(time.Minute, h.cfg.IdleUnload))
	defer idle.Stop()
	var drop <-chan time.Time // nil: transcripts stay until the unload
	if h.cfg.TranscriptIdle > 0 {
		t := time.NewTicker(h.cfg.TranscriptIdle / 2)
		defer t.Stop()
		drop = t.C
	}
	var quietC <-chan time.Time // nil: memory goes back at the runtime's pace
	if h.cfg.MemoryIdle > 0 {
		t := time.NewTicker(h.cfg.MemoryIdle / 2)
		defer t.Stop()
		quietC = t.C
	}
	var q quiet
	for {
		select {
		case <-h.ctx.Done():
			return
		case <-t.C:
			if h.cfg.Shared {
				continue
			}
			if _, err := h.cfg.Store.PruneReceipts(h.ctx, time.Now().Add(-h.cfg.ReceiptTTL)); err != nil && h.ctx.Err() == nil {
				h.cfg.Logger.Warn("prune idempotency receipts", "err", err)
			}
		case <-idle.C:
			h.unloadIdle(h.cfg.IdleUnload)
		case <-drop:
			cutoff := time.Now().Add(-h.cfg.TranscriptIdle).UnixNano()
			for _, s := range h.loadedSessions() {
				s.ReleaseTranscriptIfIdle(cutoff)
			}
		case <-h.crowded:
			h.trim()
		case now := <-quietC:
			if q.due(h.stats.Appends(), now, h.cfg.MemoryIdle) {
				debug.FreeOSMemory()
				h.released.Add(1)
			}
		}
	}
}

// quiet tells when a host has been quiet long enough to give memory
// back: once per spell without a commit. Owned by the housekeeping
// goroutine.
type quiet struct {
	seen  uint64    // the append count last seen
	since time.Time // when it last moved (zero: never looked)
	done  bool      // memory went back in this spell
}

// due reports, given the host's append count n at now, whether the host
// has appended nothing for at least after and memory has not gone back
// since its last append.
func (q *quiet) due(n uint64, now time.Time, after time.Duration) bool {
	if q.since.IsZero() || n != q.seen {
		q.seen, q.since, q.done = n, now, false
		return false
	}
	if q.done || now.Sub(q.since) < after {
		return false
	}
	q.done = true
	return true
}

// trim unloads the least recently used idle sessions while more than
// MaxLoadedSessions are loaded, down to seven eighths of it, so that what
// a host holds in memory is bounded however fast sessions come.
func (h *Host) trim() {
	loaded := h.loadedSessions()
	if len(loaded) <= h.cfg.MaxLoadedSessions {
		return
	}
	excess := len(loaded) - h.cfg.MaxLoadedSessions*7/8
	slices.SortFunc(loaded, func(a, b *session.Session) int { return cmp.Compare(a.LastUsed(), b.LastUsed()) })
	now := time.Now().UnixNano()
	for _, s := range loaded {
		if excess == 0 {
			return
		}
		if s.UnloadIfIdle(now) {
			h.forget(s)
			excess--
		}
	}
}

// loadedSessions returns the sessions that are loaded.
func (h *Host) loadedSessions() []*session.Session {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []*session.Session
	for _, e := range h.sessions {
		select {
		case <-e.ready:
			if e.s != nil {
				out = append(out, e.s)
			}
		default:
		}
	}
	return out
}

// recover loads every session that a crash left with an active or
// queued run (its record names an active run while it has either): the
// load closes what was running and starts the queue. It returns the
// sessions it could not load because another holder has their lease.
func (h *Host) recover(ctx context.Context) (held []string, err error) {
	// With fenced leases, the sessions of running processes too: taking
	// a session's lease reconciles the processes a host that lost it left
	// (see recoverProcesses); a session whose lease a live host holds is
	// that host's, with its processes.
	procs := map[string]bool{}
	if h.fenced && h.cfg.Processes != nil {
		ps, err := h.cfg.Store.Processes(ctx, store.ListProcessesParams{Statuses: []string{record.ProcessRunning}, Limit: 1 << 30})
		if err != nil {
			return nil, fmt.Errorf("host: recover: %w", err)
		}
		for _, p := range ps {
			procs[p.SessionID] = true
		}
	}
	before := ""
	for {
		page, err := h.cfg.Store.Sessions(ctx, store.ListSessionsParams{Before: before, Limit: 500})
		if err != nil {
			return held, fmt.Errorf("host: recover: %w", err)
		}
		for _, s := range page {
			if s.ActiveRunID == "" && !procs[s.ID] {
				continue
			}
			if _, err := h.session(ctx, s.ID); err != nil {
				if errors.Is(err, store.ErrLeaseHeld) && s.ActiveRunID == "" {
					continue // its processes are the live holder's
				}
				if errors.Is(err, store.ErrLeaseHeld) {
					h.cfg.Logger.Info("session leased by another holder; recovering it once the lease can be taken", "session", s.ID, "err", err)
					held = append(held, s.ID)
					continue
				}
				return held, fmt.Errorf("host: recover session %s: %w", s.ID, err)
			}
		}
		if len(page) < 500 {
			return held, nil
		}
		before = page[len(page)-1].ID
	}
}

// recoverHeld retries the recovery of sessions whose lease another holder
// had at start (a host that died keeps its leases until they expire),
// each with its own backoff from one second to five, until the session
// loads, it has no active or queued run any more (a live holder ran
// them), or the host closes. So the queue a dead host left runs once its
// lease expires, without waiting for a client to ask for the session.
func (h *Host) recoverHeld(ids []string) {
	type pending struct {
		id    string
		next  time.Time
		delay time.Duration
	}
	var todo []pending
	for _, id := range ids {
		todo = append(todo, pending{id: id, next: time.Now().Add(time.Second), delay: time.Second})
	}
	t := time.NewTimer(time.Second)
	defer t.Stop()
	for len(todo) > 0 {
		select {
		case <-h.ctx.Done():
			return
		case <-t.C:
		}
		now := time.Now()
		next := now.Add(30 * time.Second)
		kept := todo[:0]
		for _, p := range todo {
			if p.next.After(now) {
				kept = append(kept, p)
				next = minTime(next, p.next)
				continue
			}
			rec, err := h.cfg.Store.Session(h.ctx, p.id)
			if err == nil && (rec.ActiveRunID == "" || rec.Deleted) || errors.Is(err, store.ErrNotFound) {
				continue
			}
			if err == nil {
				_, err = h.session(h.ctx, p.id)
			}
			if err == nil {
				h.stats.TookOver()
				h.cfg.Logger.Info("session recovered", "session", p.id)
				continue
			}
			if h.ctx.Err() != nil {
				return
			}
			if !errors.Is(err, store.ErrLeaseHeld) {
				h.cfg.Logger.Warn("recover a session; retrying", "session", p.id, "err", err)
			}
			p.delay = min(2*p.delay, 5*time.Second)
			p.next = now.Add(p.delay)
			next = minTime(next, p.next)
			kept = append(kept, p)
		}
		todo = kept
		t.Reset(time.Until(next))
	}
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// HostLeases returns the leases New took from its store ([store.LeaseProvider]),
// or nil when it was given Config.Leases or its store provides none: a
// PostgreSQL store's dispatcher names the host by their holder. They stay
// the host's: closing them is Close's.
func (h *Host) HostLeases() store.HostLeases { return h.hostLeases }

// Close stops the host: background processes end first (their ends still
// reach their sessions' logs), then every session closes, cancelling its
// runs and waiting for their terminal events. It is safe to call twice.
func (h *Host) Close() error {
	if m := h.cfg.Processes; m != nil {
		m.Close()
	}
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil
	}
	h.closed = true
	h.mu.Unlock()
	h.stop()
	h.bg.Wait()
	h.mu.Lock()
	entries := h.sessions
	h.sessions = map[string]*entry{}
	h.mu.Unlock()
	var wg sync.WaitGroup
	for _, e := range entries {
		<-e.ready
		if e.s != nil {
			wg.Go(e.s.Close)
		}
	}
	wg.Wait()
	if h.hostLeases != nil {
		h.hostLeases.Close()
	}
	return nil
}

// session returns the loaded owner of session id, loading it (lease,
// journal, reconciliation) on first use. The load happens outside the
// registry lock: requests to other sessions go on meanwhile, and
// concurrent requests to this one wait for the same load (or purge: see
// retention.go, after which it loads again unless the purge removed it).
func (h *Host) session(ctx context.Context, id string) (*session.Session, error) {
	for {
		s, err := h.sessionOnce(ctx, id)
		if err != errReload {
			return s, err
		}
	}
}

// sessionOnce is session, but returns errReload when the entry it waited
// for was a purge's that removed nothing.
func (h *Host) sessionOnce(ctx context.Context, id string) (*session.Session, error) {
	if id == "" {
		return nil, api.Errorf(api.KindInvalidParams, "sessionId is required").With("field", "sessionId")
	}
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil, ErrClosed
	}
	e, ok := h.sessions[id]
	if !ok && h.draining {
		h.mu.Unlock()
		return nil, ErrClosed
	}
	if !ok {
		e = &entry{ready: make(chan struct{})}
		h.sessions[id] = e
	}
	h.mu.Unlock()
	if ok {
		select {
		case <-e.ready:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if e.err != nil {
			return nil, e.err
		}
		e.s.Touch()
		return e.s, nil
	}
	s, err := h.load(ctx, id)
	h.mu.Lock()
	e.s, e.err = s, err
	if err != nil || h.closed {
		if h.sessions[id] == e {
			delete(h.sessions, id)
		}
	}
	closed := h.closed
	n := len(h.sessions)
	h.mu.Unlock()
	close(e.ready)
	if err != nil {
		return nil, err
	}
	if closed {
		s.Close()
		return nil, ErrClosed
	}
	h.checkCrowded(n)
	h.recoverProcesses(ctx, s)
	return s, nil
}

// recoverProcesses reconciles, under fenced leases, the processes of
// session s that a host which lost the session's lease left running (see
// process.Manager.RecoverSession): this host took the lease, so it, and
// no host merely because it starts, settles them. Their ends reach the
// session's log through the host's process notices. A failure is logged:
// the next load of the session tries again.
func (h *Host) recoverProcesses(ctx context.Context, s *session.Session) {
	m := h.cfg.Processes
	if !h.fenced || m == nil || s.Epoch() == 0 {
		return
	}
	rep, err := m.RecoverSession(context.WithoutCancel(ctx), s.ID(), s.Owner())
	if err != nil {
		h.cfg.Logger.Warn("recover the processes of a session", "session", s.ID(), "err", err)
		return
	}
	if n := len(rep.Abandoned) + len(rep.Rerun) + len(rep.Left); n > 0 {
		h.cfg.Logger.Info("processes recovered", "session", s.ID(), "abandoned", len(rep.Abandoned), "rerun", len(rep.Rerun),
			"left", len(rep.Left), "killed", rep.Killed)
	}
}

// load opens session id's owner, or reports it not found.
func (h *Host) load(ctx context.Context, id string) (*session.Session, error) {
	rec, err := h.cfg.Store.Session(ctx, id)
	if errors.Is(err, store.ErrNotFound) || err == nil && rec.Deleted {
		return nil, notFound(id)
	} else if err != nil {
		return nil, apiError(err)
	}
	return session.Load(context.WithoutCancel(ctx), &h.scfg, id)
}

// add registers a session created by this host.
func (h *Host) add(s *session.Session) error {
	h.mu.Lock()
	if h.closed || h.draining {
		h.mu.Unlock()
		s.Close()
		return ErrClosed
	}
	e := &entry{ready: make(chan struct{}), s: s}
	close(e.ready)
	h.sessions[s.ID()] = e
	n := len(h.sessions)
	h.mu.Unlock()
	h.checkCrowded(n)
	return nil
}

// checkCrowded wakes the housekeeping goroutine to trim the registry when
// n sessions are more than MaxLoadedSessions.
func (h *Host) checkCrowded(n int) {
	if n <= h.cfg.MaxLoadedSessions {
		return
	}
	select {
	case h.crowded <- struct{}{}:
	default: // a trim is due already
	}
}

// dropped is the sessions' Dropped hook: a session that stopped on its
// own (it lost its lease, or its recovery found it deleted) is forgotten
// and closed by a goroutine of the host, so that the next request loads
// it again (or finds it deleted). A closing host closes it itself.
func (h *Host) dropped(s *session.Session) {
	h.goBackground(func() {
		h.forget(s)
		s.Close()
	})
}

// forget removes s from the registry, if it is still the session there.
func (h *Host) forget(s *session.Session) {
	h.mu.Lock()
	if e, ok := h.sessions[s.ID()]; ok && e.s == s {
		delete(h.sessions, s.ID())
	}
	h.mu.Unlock()
	// Its mounts' manifests go with it (the next writing step after a
	// load takes a new baseline), so that they cost memory only while
	// it is loaded.
	if h.ckpt != nil {
		h.ckpt.Forget(s.ID())
	}
}

// with calls f with the owner of session id. When the owner closed under
// the call (it was unloaded as idle), it is loaded again and f retried.
// f's error reaches the client through apiError.
func (h *Host) with(ctx context.Context, id string, f func(*session.Session) error) error {
	for {
		s, err := h.session(ctx, id)
		if err != nil {
			return err
		}
		err = f(s)
		if !errors.Is(err, session.ErrClosed) {
			return apiError(err)
		}
		h.forget(s)
	}
}

// unloadIdle closes loaded sessions that have had no run, no queued run,
// no subscriber and no request for at least idle; the next request loads
// them again.
func (h *Host) unloadIdle(idle time.Duration) {
	cutoff := time.Now().Add(-idle).UnixNano()
	for _, s := range h.loadedSessions() {
		if s.UnloadIfIdle(cutoff) {
			h.forget(s)
		}
	}
}

// keyLock returns the lock that serialises mutations with one idempotency key.
func (h *Host) keyLock(key string) *sync.Mutex {
	return &h.keyLocks[maphash.String(h.seed, key)%uint64(len(h.keyLocks))]
}

func notFound(id string) error {
	return api.Errorf(api.KindNotFound, "session %s not found", id).With("sessionId", id)
}
