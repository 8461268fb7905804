package host

import (
	"context"
	"fmt"
	"sync"
	"time"

	"weft.dev/weft/agent"
	"weft.dev/weft/event"
)

// DrainReason is the reason run.suspended records for a run that Drain
// handed over.
const DrainReason = "the host is draining"

// Drain stops the host as Close does, but hands its executing runs over
// instead of ending them, as [net/http.Server.Shutdown] lets the requests
// in flight finish where Close cuts them. It is what a host does on
// SIGTERM in a rolling deploy.
//
// At once, the host loads and creates no session any more (ErrClosed,
// which a client retries on another host), and no run starts or resumes
// on a loaded session: queued runs stay queued. Each executing run stops
// at its next step boundary and is handed over: run.suspended records the
// host and why, and the run's status is waiting, neither ended nor
// failed. A model call under way is cut at once (its step's output is
// discarded and asked for again, see [event.RunSuspendedData]); a tool
// call under way is let finish, since it may have effects and never runs
// twice. Drain waits for that until ctx is done: a run still in a tool
// call then ends as today's Close would end it, interrupted
// (run.interrupted, error kind [agent.KindDrainTimeout], the call
// closed). Then Drain closes the host: the sessions release their
// leases at once, and whoever owns a session next — another host on a
// shared store (its dispatch wakes the session's runs), or this host's
// store after a restart (New's recovery) — continues the run handed over
// from its log, with the same run ID, then the queued runs in order.
//
// The lease stays the source of truth: a host killed half-way through
// its drain leaves its runs to be recovered once its leases expire, a
// run suspended continued, one still executing interrupted, as after any
// crash. Drain returns ctx's error if the grace ended with a run still
// executing, nil otherwise; Close (or Drain) afterwards does nothing.
func (h *Host) Drain(ctx context.Context) error {
	h.mu.Lock()
	if h.closed || h.draining {
		h.mu.Unlock()
		return nil
	}
	h.draining = true
	entries := make([]*entry, 0, len(h.sessions))
	for _, e := range h.sessions {
		entries = append(entries, e)
	}
	h.mu.Unlock()
	start := time.Now()
	name := h.cfg.Name
	if hl, ok := h.hostLeases.(interface{ Holder() string }); ok && hl.Holder() != "" {
		name = hl.Holder()
	}
	why := event.RunSuspendedData{Host: name, Reason: DrainReason}
	grace := "its grace"
	if d, ok := ctx.Deadline(); ok {
		grace = fmt.Sprintf("its grace of %v", d.Sub(start).Round(10*time.Millisecond))
	}
	var (
		wg                  sync.WaitGroup
		mu                  sync.Mutex
		handed, interrupted int
	)
	for _, e := range entries {
		wg.Go(func() {
			select {
			case <-e.ready: // no new load starts while draining; one under way ends
			case <-ctx.Done():
				return // Close waits for it
			}
			s := e.s
			if s == nil {
				return
			}
			cut := &agent.Interrupt{Kind: agent.KindDrainTimeout, Message: fmt.Sprintf(
				"interrupted: the host %s drained, and %s ended while a tool call of the run still ran", name, grace)}
			r := s.Handover(ctx, why, cut)
			if r.RunID == "" {
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if r.Interrupted {
				interrupted++
				h.cfg.Logger.Warn("run interrupted: the drain grace ended while a tool call still ran", "session", s.ID(), "run", r.RunID)
			} else {
				handed++
			}
		})
	}
	wg.Wait()
	err := ctx.Err()
	if handed+interrupted > 0 {
		h.cfg.Logger.Info("runs handed over", "handedOver", handed, "interrupted", interrupted, "took", time.Since(start).Round(time.Millisecond))
	}
	h.Close()
	if interrupted == 0 {
		err = nil
	}
	return err
}
