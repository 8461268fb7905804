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
// stays until it is idle, as after any load. A session that fails to
// load for another reason waits before its next try, longer after each
// failure (see orphanRetry), so that it does not hold one of a sweep's
// places for ever.
func (h *Host) sweepOrphans(f store.OrphanFinder, every time.Duration) {
	t := time.NewTimer(jitter(every))
	defer t.Stop()
	retry := newOrphanRetry(every)
	for {
		select {
		case <-h.ctx.Done():
			return
		case <-t.C:
		}
		h.sweepOrphansOnce(h.ctx, f, retry, time.Now())
		t.Reset(jitter(every))
	}
}

// sweepOrphansOnce runs one sweep at now and returns the sessions it
// loaded. It tries at most orphanBatch sessions, skipping those retry
// says must wait.
func (h *Host) sweepOrphansOnce(ctx context.Context, f store.OrphanFinder, retry *orphanRetry, now time.Time) []string {
	limit := orphanBatch + retry.len()
	ids, err := f.OrphanedSessions(ctx, limit)
	if err != nil {
		if ctx.Err() == nil {
			h.cfg.Logger.Warn("find sessions whose processes no live host owns", "err", err)
		}
		return nil
	}
	if len(ids) < limit {
		// The whole list: a session not on it is no longer orphaned.
		retry.keepOnly(ids)
	}
	var loaded []string
	tried := 0
	for _, id := range ids {
		if tried == orphanBatch {
			break
		}
		if retry.waits(id, now) {
			continue
		}
		tried++
		if _, err := h.session(ctx, id); err != nil {
			if ctx.Err() != nil {
				return loaded
			}
			if !errors.Is(err, store.ErrLeaseHeld) && !errors.Is(err, ErrClosed) {
				wait := retry.failed(id, now)
				h.cfg.Logger.Warn("load a session to settle its orphaned processes", "session", id, "err", err, "retryIn", wait)
			}
			continue
		}
		retry.forget(id)
		h.stats.TookOver()
		h.cfg.Logger.Info("session with orphaned processes recovered", "session", id)
		loaded = append(loaded, id)
	}
	return loaded
}

// orphanRetryMax bounds the sessions an [orphanRetry] remembers.
const orphanRetryMax = 1024

// orphanRetryCeiling is the longest an orphaned session that keeps
// failing to load waits between tries.
const orphanRetryCeiling = time.Hour

// orphanRetry is the sweep's memory of the orphaned sessions it failed
// to load: each waits the sweep's period doubled at each failure, up to
// orphanRetryCeiling, before it is tried again. It remembers at most
// orphanRetryMax sessions (past that, a new failure is retried at the
// next sweep, as with no memory). The sweep goroutine owns it.
type orphanRetry struct {
	base time.Duration
	next map[string]orphanTry
}

type orphanTry struct {
	fails int
	at    time.Time // not tried before at
}

func newOrphanRetry(base time.Duration) *orphanRetry {
	return &orphanRetry{base: base, next: make(map[string]orphanTry)}
}

func (r *orphanRetry) len() int { return len(r.next) }

// waits reports whether session id must not be tried at now.
func (r *orphanRetry) waits(id string, now time.Time) bool {
	t, ok := r.next[id]
	return ok && now.Before(t.at)
}

// failed records a failed load of id at now and returns how long it waits.
func (r *orphanRetry) failed(id string, now time.Time) time.Duration {
	t, ok := r.next[id]
	if !ok && len(r.next) >= orphanRetryMax {
		return 0
	}
	t.fails++
	wait := r.base
	for i := 1; i < t.fails && wait < orphanRetryCeiling; i++ {
		wait *= 2
	}
	wait = min(wait, orphanRetryCeiling)
	t.at = now.Add(wait)
	r.next[id] = t
	return wait
}

func (r *orphanRetry) forget(id string) { delete(r.next, id) }

// keepOnly forgets every session not in ids.
func (r *orphanRetry) keepOnly(ids []string) {
	in := make(map[string]bool, len(ids))
	for _, id := range ids {
		in[id] = true
	}
	for id := range r.next {
		if !in[id] {
			delete(r.next, id)
		}
	}
}

// jitter returns d scaled by a random factor in [0.75, 1.25).
func jitter(d time.Duration) time.Duration {
	return d*3/4 + rand.N(d/2+1)
}
