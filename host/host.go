// Package host coordinates sessions for many clients at once: it admits
// runs under a busy policy, executes them in the background, delivers
// steering and cancellation, makes every mutation idempotent, and fans
// committed events out to subscribers.
//
// Each loaded session has one owner inside the host: a session value whose
// mutex serialises its commands and whose journal is the single writer of
// its log. Runs execute in goroutines owned by the host; Close cancels them
// and waits.
package host

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"log/slog"
	"sync"
	"time"

	"weft.dev/weft/env"
	"weft.dev/weft/event"
	"weft.dev/weft/internal/journal"
	"weft.dev/weft/internal/lease"
	"weft.dev/weft/internal/reconcile"
	"weft.dev/weft/llm"
	"weft.dev/weft/process"
	"weft.dev/weft/store"
	"weft.dev/weft/tool"
)

// Model is a resolved model.
type Model struct {
	// Name is the "provider:model" name recorded on runs.
	Name     string
	Provider llm.Provider
	// Model is the provider's own model name.
	Model     string
	MaxTokens int
}

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
	// LockDir holds the session leases that keep other processes from
	// writing a session the host owns; empty means no leases (an in-memory
	// store, or a store no other process opens).
	LockDir string
	// MaxSteps caps a run's steps unless the run says otherwise; zero means 50.
	MaxSteps int
	// ReceiptTTL is how long idempotency receipts are kept; zero means 24 h.
	ReceiptTTL time.Duration
	// SubscriberBuffer is how many events a subscriber may fall behind by
	// before it is closed with reason overflow; zero means 4096.
	SubscriberBuffer int
	// Journal tunes the session writers; its Store field is ignored.
	Journal journal.Config
	// Logger receives diagnostics; nil means silent.
	Logger *slog.Logger
	// Processes runs background processes; nil refuses them. The host
	// attaches itself as the manager's tool runner and notifier, recovers
	// the processes a crash left, and closes the manager on Close.
	Processes *process.Manager
	// MaxLoadedSessions is how many sessions stay loaded (a journal
	// goroutine and a lease file each) before sessions idle for a minute
	// (or IdleUnload, if shorter) are unloaded; zero means 512.
	MaxLoadedSessions int
	// IdleUnload is how long a session with no run, no subscriber and no
	// request stays loaded; zero means ten minutes. An unloaded session
	// loads again on its next request.
	IdleUnload time.Duration
	// ScratchDir holds the directories of scratch mounts; empty refuses them.
	ScratchDir string
	// LiveProcesses returns the IDs of the running processes that a mount
	// of a session owns; env/unmount refuses to detach a mount that owns
	// one. It is called with the session's lock held, so it must not call
	// back into the Host. Nil means no mount ever owns a process.
	LiveProcesses func(ctx context.Context, sessionID, mountID string) ([]string, error)
	// NewID makes IDs with a prefix; nil means random time-ordered IDs.
	NewID func(prefix string) string
}

// Host is a running coordinator. Its methods are safe for concurrent use.
type Host struct {
	cfg    Config
	ctx    context.Context // parent of every run; cancelled by Close
	cancel context.CancelFunc
	runs   sync.WaitGroup

	mu       sync.Mutex
	sessions map[string]*session
	closing  bool // Close has begun
	closed   bool // sessions may no longer be loaded

	keyLocks [64]sync.Mutex // striped by idempotency key
	seed     maphash.Seed
}

// New starts a host over cfg.Store. It first reconciles every session that
// a crash left with an active run: those runs end as interrupted.
func New(ctx context.Context, cfg Config) (*Host, error) {
	if cfg.Store == nil || cfg.ResolveModel == nil {
		return nil, errors.New("host: Config.Store and Config.ResolveModel are required")
	}
	if cfg.MaxSteps <= 0 {
		cfg.MaxSteps = 50
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
	if cfg.SubscriberBuffer <= 0 {
		cfg.SubscriberBuffer = 4096
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.NewID == nil {
		cfg.NewID = newID
	}
	cfg.Journal.Store = cfg.Store
	if cfg.Journal.Logger == nil {
		cfg.Journal.Logger = cfg.Logger
	}
	hctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	if cfg.Processes != nil && cfg.LiveProcesses == nil {
		cfg.LiveProcesses = cfg.Processes.LiveByMount
	}
	h := &Host{cfg: cfg, ctx: hctx, cancel: cancel, sessions: map[string]*session{}, seed: maphash.MakeSeed()}
	if err := h.recover(ctx); err != nil {
		h.Close()
		return nil, err
	}
	if m := cfg.Processes; m != nil {
		m.Attach(h, h)
		rep, err := m.Recover(ctx)
		if err != nil {
			h.Close()
			return nil, fmt.Errorf("host: recover processes: %w", err)
		}
		cfg.Logger.Info("processes recovered", "abandoned", len(rep.Abandoned), "rerun", len(rep.Rerun), "left", len(rep.Left), "killed", rep.Killed)
	}
	if _, err := cfg.Store.PruneReceipts(ctx, time.Now().Add(-cfg.ReceiptTTL)); err != nil {
		h.Close()
		return nil, fmt.Errorf("host: prune receipts: %w", err)
	}
	h.runs.Go(h.pruneLoop)
	return h, nil
}

// pruneLoop deletes expired idempotency receipts every hour and unloads
// idle sessions (Config.IdleUnload), until the host closes.
func (h *Host) pruneLoop() {
	t := time.NewTicker(time.Hour)
	defer t.Stop()
	idle := time.NewTicker(min(time.Minute, h.cfg.IdleUnload))
	defer idle.Stop()
	for {
		select {
		case <-h.ctx.Done():
			return
		case <-t.C:
			if _, err := h.cfg.Store.PruneReceipts(h.ctx, time.Now().Add(-h.cfg.ReceiptTTL)); err != nil && h.ctx.Err() == nil {
				h.cfg.Logger.Warn("prune idempotency receipts", "err", err)
			}
		case <-idle.C:
			h.mu.Lock()
			if !h.closed {
				h.unloadIdleLocked(h.cfg.IdleUnload)
			}
			h.mu.Unlock()
		}
	}
}

// recover closes the runs a crash left open.
func (h *Host) recover(ctx context.Context) error {
	before := ""
	for {
		page, err := h.cfg.Store.Sessions(ctx, store.ListSessionsParams{Before: before, Limit: 500})
		if err != nil {
			return fmt.Errorf("host: recover: %w", err)
		}
		for _, s := range page {
			if s.ActiveRunID == "" {
				continue
			}
			if _, err := h.session(ctx, s.ID); err != nil {
				if errors.Is(err, lease.ErrHeld) {
					h.cfg.Logger.Warn("session owned by another process; not recovered", "session", s.ID)
					continue
				}
				return fmt.Errorf("host: recover session %s: %w", s.ID, err)
			}
		}
		if len(page) < 500 {
			return nil
		}
		before = page[len(page)-1].ID
	}
}

// Close cancels every active run, waits for the runs to write their
// terminal events, and releases the sessions. It is safe to call twice.
func (h *Host) Close() error {
	h.mu.Lock()
	if h.closed || h.closing {
		h.mu.Unlock()
		return nil
	}
	h.closing = true
	h.mu.Unlock()
	h.cancel()
	if m := h.cfg.Processes; m != nil {
		// Ending processes still reach their sessions' logs.
		m.Close()
	}
	h.mu.Lock()
	h.closed = true
	h.mu.Unlock()
	h.runs.Wait()
	h.mu.Lock()
	defer h.mu.Unlock()
	for id, s := range h.sessions {
		s.mu.Lock()
		s.close()
		s.mu.Unlock()
		delete(h.sessions, id)
	}
	return nil
}

// session returns the loaded session, loading it (lease, journal,
// reconciliation) on first use.
func (h *Host) session(ctx context.Context, id string) (*session, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, ErrClosed
	}
	if s, ok := h.sessions[id]; ok {
		s.used.Store(time.Now().UnixNano())
		return s, nil
	}
	rec, err := h.cfg.Store.Session(ctx, id)
	if errors.Is(err, store.ErrNotFound) || err == nil && rec.Deleted {
		return nil, errf(ErrNotFound, map[string]any{"sessionId": id}, "session %s not found", id)
	} else if err != nil {
		return nil, err
	}
	s, err := h.load(ctx, id, nil)
	if err != nil {
		return nil, err
	}
	h.sessions[id] = s
	s.used.Store(time.Now().UnixNano())
	if len(h.sessions) > h.cfg.MaxLoadedSessions {
		h.unloadIdleLocked(min(time.Minute, h.cfg.IdleUnload))
	}
	return s, nil
}

// lockedSession returns the loaded session with its mutex held, loading
// it again if it was unloaded as idle between the look-up and the lock.
func (h *Host) lockedSession(ctx context.Context, id string) (*session, error) {
	for {
		s, err := h.session(ctx, id)
		if err != nil {
			return nil, err
		}
		s.mu.Lock()
		if !s.closed {
			return s, nil
		}
		s.mu.Unlock()
	}
}

// unloadIdleLocked closes loaded sessions that have had no run, no queued
// run, no subscriber and no request for at least idle, releasing their
// journal goroutine and lease; the next request loads them again. Called
// with h.mu held.
func (h *Host) unloadIdleLocked(idle time.Duration) {
	cutoff := time.Now().Add(-idle).UnixNano()
	for id, s := range h.sessions {
		if s.used.Load() > cutoff || !s.mu.TryLock() {
			continue
		}
		if s.active == nil && len(s.queue) == 0 && len(s.done) == 0 && s.j.Subscribers() == 0 {
			s.close()
			delete(h.sessions, id)
		}
		s.mu.Unlock()
	}
}

// load takes the session's lease and opens (or, with created set, creates)
// its journal, then reconciles what a crash left open.
func (h *Host) load(ctx context.Context, id string, created *event.SessionCreatedData, receipts ...store.Receipt) (*session, error) {
	var ls *lease.Lease
	if h.cfg.LockDir != "" {
		var err error
		if ls, err = lease.Acquire(h.cfg.LockDir, id); err != nil {
			if errors.Is(err, lease.ErrHeld) {
				return nil, errf(ErrRunConflict, map[string]any{"sessionId": id}, "session %s: %v", id, err)
			}
			return nil, err
		}
	}
	var (
		j   *journal.Journal
		err error
	)
	if created != nil {
		j, err = journal.Create(ctx, h.cfg.Journal, id, *created, receipts...)
	} else {
		j, err = journal.Open(ctx, h.cfg.Journal, id)
	}
	if err != nil {
		ls.Release()
		return nil, err
	}
	if created == nil {
		if _, err := reconcile.Session(ctx, h.cfg.Store, j, id); err != nil {
			j.Close()
			ls.Release()
			return nil, err
		}
	}
	return &session{h: h, id: id, j: j, lease: ls, done: map[string]chan struct{}{}}, nil
}

// keyLock returns the lock that serialises mutations with one idempotency key.
func (h *Host) keyLock(key string) *sync.Mutex {
	return &h.keyLocks[maphash.String(h.seed, key)%uint64(len(h.keyLocks))]
}

// binding opens the session's mounts for a run.
func binding(s store.Session) (*env.Binding, error) {
	b, err := env.Open(s.Binding)
	if err != nil {
		return nil, errf(ErrEnvUnavailable, map[string]any{"sessionId": s.ID}, "session %s: mounts: %v", s.ID, err)
	}
	return b, nil
}
