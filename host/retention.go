package host

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"weft.dev/weft/api"
	"weft.dev/weft/event"
	"weft.dev/weft/host/internal/checkpoint"
	"weft.dev/weft/store"
	"weft.dev/weft/store/record"
)

// Retention is what a host purges and sweeps in the background (see
// [Config.Retention]). The zero Retention purges no session; a host with
// a checkpoint directory still sweeps the blobs no session references.
type Retention struct {
	// Policy selects the ended sessions to purge (see [store.Retention]).
	Policy store.Retention
	// Interval is the time between two background passes; zero means ten
	// minutes, negative runs none (session/prune still runs one).
	Interval time.Duration
	// PassTime bounds the purges of one background pass; the next pass
	// goes on where it stopped. Zero means ten seconds.
	PassTime time.Duration
	// Batch is the most sessions one background pass purges; zero means
	// 100.
	Batch int
	// SweepInterval is the least time between two sweeps of the
	// checkpoint blobs in the background (a sweep reads the checkpoint
	// events of every session); zero means one hour. session/prune always
	// sweeps.
	SweepInterval time.Duration
	// BlobGrace keeps a checkpoint blob younger than it whether or not a
	// session references it (a checkpoint in flight in another process
	// sharing the directory); zero means one hour, negative none.
	BlobGrace time.Duration
}

// retention is the host's state between retention passes: when blobs
// were last swept. Its lock serialises the passes of this host (the
// store's retention lock those of all hosts).
type retention struct {
	mu        sync.Mutex
	lastSweep time.Time
}

// errReload is the error a purge leaves in the registry for requests
// that waited for it when it removed nothing: they load the session
// again (see Host.session).
var errReload = errors.New("host: session purge ended; load again")

func (r *Retention) defaults() {
	if r.Interval == 0 {
		r.Interval = 10 * time.Minute
	}
	if r.PassTime <= 0 {
		r.PassTime = 10 * time.Second
	}
	if r.Batch <= 0 {
		r.Batch = 100
	}
	if r.SweepInterval <= 0 {
		r.SweepInterval = time.Hour
	}
	if r.BlobGrace == 0 {
		r.BlobGrace = time.Hour
	}
}

// retainLoop runs a retention pass every Interval until the host
// closes. A pass that finds another host's pass running leaves it to
// that host.
func (h *Host) retainLoop() {
	t := time.NewTicker(h.cfg.Retention.Interval)
	defer t.Stop()
	for {
		select {
		case <-h.ctx.Done():
			return
		case <-t.C:
		}
		res, err := h.prune(h.ctx, pruneRun{background: true})
		switch {
		case errors.Is(err, store.ErrLeaseHeld) || h.ctx.Err() != nil:
		case err != nil:
			h.cfg.Logger.Warn("retention pass", "err", err)
		case res.PurgedCount > 0 || res.Blobs != nil && res.Blobs.Removed > 0:
			attrs := []any{"purged", res.PurgedCount, "skipped", res.SkippedCount}
			if res.Blobs != nil {
				attrs = append(attrs, "blobsRemoved", res.Blobs.Removed, "blobBytes", res.Blobs.RemovedBytes)
			}
			h.cfg.Logger.Info("retention pass", attrs...)
		}
	}
}

// PruneSessions runs one retention pass now ([api.SessionPrune]): it
// purges every ended session the host's policy selects, newest first (so
// a fork goes before its source), unloading a loaded one first, and then
// sweeps the checkpoint blobs that no remaining session references.
// p.DryRun lists what it would purge and remove. A pass that another
// host (or this one, in the background) is running already is refused
// with overloaded (retry later).
func (h *Host) PruneSessions(ctx context.Context, p api.PruneParams) (*api.PruneResult, error) {
	res, err := h.prune(ctx, pruneRun{dry: p.DryRun})
	if errors.Is(err, store.ErrLeaseHeld) {
		return nil, api.Errorf(api.KindOverloaded, "a retention pass is running on this store (this host's or another's): retry once it has ended")
	}
	if err != nil {
		return nil, apiError(err)
	}
	return res, nil
}

// pruneRun says how one pass runs: in the background (bounded by
// PassTime and Batch, sweeping blobs at most every SweepInterval, and
// after a listing it went through) or on request (the whole listing, and a
// sweep); dry lists and removes nothing.
type pruneRun struct {
	background, dry bool
}

// prune runs one retention pass.
func (h *Host) prune(ctx context.Context, run pruneRun) (*api.PruneResult, error) {
	pol := h.cfg.Retention.Policy
	res := &api.PruneResult{DryRun: run.dry, Purged: []api.PrunedSession{}, Policy: api.RetentionPolicy{MaxSessions: pol.MaxSessions}}
	if pol.MaxAge > 0 {
		res.Policy.MaxAge = pol.MaxAge.String()
	}
	if pol.DeletedAfter > 0 {
		res.Policy.DeletedAfter = pol.DeletedAfter.String()
	}
	purger, ok := h.cfg.Store.(store.Purger)
	if !ok && !pol.IsZero() {
		return nil, fmt.Errorf("host: retention: the store (%T) cannot purge sessions", h.cfg.Store)
	}
	if !h.ret.mu.TryLock() {
		return nil, fmt.Errorf("host: retention: %w", store.ErrLeaseHeld)
	}
	defer h.ret.mu.Unlock()
	complete, err := h.purgeLocked(ctx, purger, run, res)
	if err != nil {
		return res, err
	}
	if h.ckpt == nil || run.background && (!complete || time.Since(h.ret.lastSweep) < h.cfg.Retention.SweepInterval) {
		return res, nil
	}
	res.Blobs = &api.BlobSweep{}
	sw, err := h.sweepBlobs(ctx, run.dry)
	res.Blobs.Removed, res.Blobs.RemovedBytes, res.Blobs.Kept = sw.Removed, sw.RemovedBytes, sw.Kept
	if err != nil {
		res.Blobs.Error = err.Error()
		if ctx.Err() != nil {
			return res, ctx.Err()
		}
		h.cfg.Logger.Warn("sweep checkpoint blobs", "err", err)
	} else if !run.dry {
		h.ret.lastSweep = time.Now()
	}
	return res, nil
}

// purgeLocked runs purgeCandidates under the store's retention lock,
// which keeps the passes of all hosts apart. A background pass that finds
// another host's pass under way leaves the purges to it and reports the
// listing complete: this host's blobs (its own checkpoint directory) may
// still be swept, and a sweep while another host purges only keeps more
// than it must. Called with h.ret.mu held.
func (h *Host) purgeLocked(ctx context.Context, purger store.Purger, run pruneRun, res *api.PruneResult) (complete bool, err error) {
	if h.cfg.Retention.Policy.IsZero() {
		return true, nil
	}
	unlock, err := purger.LockRetention(ctx)
	if run.background && errors.Is(err, store.ErrLeaseHeld) {
		return true, nil
	} else if err != nil {
		return false, err
	}
	defer unlock()
	return h.purgeCandidates(ctx, purger, run, res)
}

// purgeCandidates purges (dry: lists) the sessions the policy selects
// into res, and reports whether it went through the whole listing.
// Called with h.ret.mu held.
func (h *Host) purgeCandidates(ctx context.Context, purger store.Purger, run pruneRun, res *api.PruneResult) (complete bool, err error) {
	pol := h.cfg.Retention.Policy
	if pol.IsZero() {
		return true, nil
	}
	// Every pass lists from the newest session: what earlier passes
	// purged is gone, so a pass cut short by its bounds goes on with what
	// is left, and MaxSessions counts from the top.
	p := store.CandidatesParams{Retention: pol, Now: time.Now()}
	pctx := ctx
	if run.background {
		var cancel context.CancelFunc
		pctx, cancel = context.WithTimeout(ctx, h.cfg.Retention.PassTime)
		defer cancel()
	}
	purged := 0
	for c, err := range store.Candidates(pctx, h.cfg.Store, p) {
		if run.background && (purged == h.cfg.Retention.Batch || pctx.Err() != nil) {
			return false, nil // the next pass goes on
		}
		if err != nil {
			return false, err
		}
		if !run.dry {
			if err := h.purgeSession(pctx, purger, c.Session.ID); err != nil {
				if !errors.Is(err, store.ErrInUse) && !errors.Is(err, store.ErrForkSource) && !errors.Is(err, store.ErrNotFound) {
					return false, fmt.Errorf("purge session %s: %w", c.Session.ID, err)
				}
				if res.SkippedCount++; len(res.Skipped) < api.MaxPruneList {
					res.Skipped = append(res.Skipped, api.SkippedSession{SessionID: c.Session.ID, Reason: c.Reason, Error: err.Error()})
				}
				continue
			}
			purged++
		}
		if res.PurgedCount++; len(res.Purged) < api.MaxPruneList {
			last := c.Session.UpdatedAt
			if last.IsZero() {
				last = c.Session.CreatedAt
			}
			res.Purged = append(res.Purged, api.PrunedSession{SessionID: c.Session.ID, Title: c.Session.Title, Reason: c.Reason, Deleted: c.Session.Deleted, LastAt: last})
		}
	}
	return true, nil
}

// purgeSession purges session id from the store. A loaded session is
// retired first (closed, which ends its subscriptions; refused while it
// has a run); meanwhile a placeholder in the registry holds the requests
// for it, which then get not_found (purged) or load it again (not
// purged).
func (h *Host) purgeSession(ctx context.Context, purger store.Purger, id string) error {
	ph := &entry{ready: make(chan struct{})}
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return ErrClosed
	}
	old, loaded := h.sessions[id]
	if loaded {
		select {
		case <-old.ready:
		default:
			h.mu.Unlock()
			return fmt.Errorf("%w: session %s is being loaded", store.ErrInUse, id)
		}
	}
	h.sessions[id] = ph
	h.mu.Unlock()

	var err error
	kept := false // the loaded session stays
	if loaded && old.s != nil {
		if old.s.Retire() {
			if h.ckpt != nil {
				h.ckpt.Forget(id)
			}
		} else {
			kept = true
			err = fmt.Errorf("%w: session %s has a run", store.ErrInUse, id)
		}
	}
	if err == nil {
		err = h.purgeLeased(ctx, purger, id)
	}
	if err == nil && h.cfg.ScratchDir != "" {
		// Its scratch mounts go with it (a deleted session's went at
		// its deletion).
		os.RemoveAll(filepath.Join(h.cfg.ScratchDir, id))
	}
	h.mu.Lock()
	switch {
	case kept:
		ph.s = old.s
		if h.sessions[id] == ph {
			h.sessions[id] = old
		}
	default:
		ph.err = errReload
		if err == nil {
			ph.err = notFound(id)
		}
		if h.sessions[id] == ph {
			delete(h.sessions, id)
		}
	}
	h.mu.Unlock()
	close(ph.ready)
	return err
}

// purgeLeased purges session id holding its flock lease (a SQLite
// store's, or a lease.Dir given as Config.Leases), so
// that another process on this machine that has the session loaded (a
// `weft run`, a terminal UI sharing the store) keeps it: the purge is
// refused with store.ErrInUse. Stores whose leases are rows (PostgreSQL)
// check the live leases in the purge's own transaction.
func (h *Host) purgeLeased(ctx context.Context, purger store.Purger, id string) error {
	if d, ok := h.scfg.Leases.(interface{ File(string) string }); ok && !h.fenced {
		l, err := h.scfg.Leases.Acquire(ctx, id)
		if errors.Is(err, store.ErrLeaseHeld) {
			return fmt.Errorf("%w: %w", store.ErrInUse, err)
		} else if err != nil {
			return err
		}
		defer l.Release(context.WithoutCancel(ctx))
		if err := purger.Purge(ctx, id); err != nil {
			return err
		}
		// The lock file goes too, while it is held: a process that opens
		// it meanwhile finds it locked, and one that comes later finds
		// the session gone.
		os.Remove(d.File(id))
		return nil
	}
	return purger.Purge(ctx, id)
}

// sweepBlobs marks the blobs the checkpoints of every remaining session
// reference, except those a rewind of files undid (no later rewind can
// reach them), and removes the others. A deleted session marks nothing:
// it is never rewound again, and a fork reads its own checkpoints only
// (its files before the fork are its source's to rewind). Memory: one
// page of records or events at a time, and the set of marks.
func (h *Host) sweepBlobs(ctx context.Context, dry bool) (checkpoint.SweepResult, error) {
	sw, err := h.ckpt.BeginSweep(h.cfg.Retention.BlobGrace)
	if err != nil {
		return checkpoint.SweepResult{}, err
	}
	defer sw.Close()
	for before := ""; ; {
		page, err := h.cfg.Store.Sessions(ctx, store.ListSessionsParams{Before: before, Limit: 200})
		if err != nil {
			return checkpoint.SweepResult{}, fmt.Errorf("sweep checkpoint blobs: %w", err)
		}
		for _, s := range page {
			if err := h.markSession(ctx, sw, s.ID, s.Fork); err != nil {
				if errors.Is(err, store.ErrNotFound) {
					continue // purged meanwhile
				}
				return checkpoint.SweepResult{}, fmt.Errorf("sweep checkpoint blobs: session %s: %w", s.ID, err)
			}
		}
		if len(page) < 200 {
			break
		}
		before = page[len(page)-1].ID
	}
	return sw.Finish(ctx, dry)
}

// markSession marks the blobs of session id's own checkpoints that no
// rewind of files undid.
func (h *Host) markSession(ctx context.Context, sw *checkpoint.Sweep, id string, fork *record.Fork) error {
	var from int64
	if fork != nil {
		from = fork.Seq
	}
	var rewinds []undone
	err := h.eachEvent(ctx, id, from, event.SessionRewound, func(e event.Event) error {
		var d event.SessionRewoundData
		if err := e.Decode(&d); err != nil {
			return err
		}
		rewinds = append(rewinds, undone{to: d.ToSeq, at: e.Seq, files: d.Files})
		return nil
	})
	if err != nil {
		return err
	}
	return h.eachEvent(ctx, id, from, event.CheckpointRecorded, func(e event.Event) error {
		if undoneBy(e.Seq, rewinds) {
			return nil
		}
		var d event.CheckpointData
		if err := e.Decode(&d); err != nil {
			return err
		}
		for _, c := range d.Changes {
			for _, st := range []*event.FileState{c.Before, c.After} {
				if st != nil && st.Hash != "" {
					sw.Mark(st.Hash)
				}
			}
		}
		return nil
	})
}

// eachEvent calls f with each event of type t of session id after seq
// after, a page (of at most 4 MiB of data) at a time.
func (h *Host) eachEvent(ctx context.Context, id string, after int64, t event.Type, f func(event.Event) error) error {
	for {
		evs, err := h.cfg.Store.Read(ctx, store.ReadParams{SessionID: id, After: after, Limit: 500, MaxBytes: 4 << 20, Types: []event.Type{t}})
		if err != nil {
			return err
		}
		for _, e := range evs {
			if err := f(e); err != nil {
				return err
			}
		}
		if len(evs) == 0 {
			return nil
		}
		after = evs[len(evs)-1].Seq
	}
}
