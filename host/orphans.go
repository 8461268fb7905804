package host

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"weft.dev/weft/store"
)

// orphanBatch bounds the sessions one sweep loads.
const orphanBatch = 64

// defaultOrphanEvery is the sweep's period when the host's leases do not
// say their TTL.
const defaultOrphanEvery = 10 * time.Second

// sweepOrphans settles, until the host closes, the processes that dead
// hosts left running in sessions nobody asks for: about once a lease TTL
// (jittered, so that hosts started together do not sweep together) it
// asks the store for sessions with a running process and no live lease
// ([store.OrphanFinder]) and loads each through the normal path, whose
// lease take-over reconciles their processes (recoverProcesses). Each
// host sweeps; two that find one session race for its lease, and the
// loser's load fails with ErrLeaseHeld, which is fine. A loaded session
// stays until it is idle, as after any load.
func (h *Host) sweepOrphans(f store.OrphanFinder, every time.Duration) {
	t := time.NewTimer(jitter(every))
	defer t.Stop()
	for {
		select {
		case <-h.ctx.Done():
			return
		case <-t.C:
		}
		h.sweepOrphansOnce(h.ctx, f)
		t.Reset(jitter(every))
	}
}

// sweepOrphansOnce runs one sweep and returns the sessions it loaded.
func (h *Host) sweepOrphansOnce(ctx context.Context, f store.OrphanFinder) []string {
	ids, err := f.OrphanedSessions(ctx, orphanBatch)
	if err != nil {
		if ctx.Err() == nil {
			h.cfg.Logger.Warn("find sessions whose processes no live host owns", "err", err)
		}
		return nil
	}
	var loaded []string
	for _, id := range ids {
		if _, err := h.session(ctx, id); err != nil {
			if ctx.Err() != nil {
				return loaded
			}
			if !errors.Is(err, store.ErrLeaseHeld) && !errors.Is(err, ErrClosed) {
				h.cfg.Logger.Warn("load a session to settle its orphaned processes", "session", id, "err", err)
			}
			continue
		}
		h.stats.TookOver()
		h.cfg.Logger.Info("session with orphaned processes recovered", "session", id)
		loaded = append(loaded, id)
	}
	return loaded
}

// jitter returns d scaled by a random factor in [0.75, 1.25).
func jitter(d time.Duration) time.Duration {
	return d*3/4 + rand.N(d/2+1)
}
