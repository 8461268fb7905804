package host

import (
	"context"
	"errors"

	"weft.dev/weft/api"
	"weft.dev/weft/store"
	"weft.dev/weft/store/record"
)

// Wake makes sure that a live host owns session sessionID and runs its
// queue, for run runID, and reports done once that run needs no more
// waking: it ended, or it or its session is gone. It is the work of a
// dispatch job (store/postgres.Dispatcher), which looks again later while
// the run is not done, so that whichever host looks first after a dead
// owner's lease expired takes the session over.
//
// Wake never waits for the run. It loads the session unless this host has
// it: the load takes the session's lease, closes what a dead owner left
// (its mid-flight run ends as interrupted; a run a draining owner handed
// over continues) and starts the queued runs in the order they were
// queued. While another host holds the lease, Wake
// does nothing (that host runs the queue). The lease decides who runs a
// session, never the job, so a run never runs twice however many jobs or
// hosts wake it. A shared host (Config.Shared) never takes a session
// for a job. Errors are the store's (retry later) or ErrClosed.
func (h *Host) Wake(ctx context.Context, sessionID, runID string) (done bool, err error) {
	r, err := h.cfg.Store.Run(ctx, runID)
	if errors.Is(err, store.ErrNotFound) {
		return true, nil
	}
	if err != nil {
		return false, apiError(err)
	}
	if record.IsTerminal(r.Status) {
		return true, nil
	}
	if h.cfg.Shared || h.loaded(sessionID) != nil {
		return false, nil
	}
	if _, err := h.session(ctx, sessionID); err != nil {
		switch {
		case errors.Is(err, store.ErrLeaseHeld):
			return false, nil
		case errors.Is(err, api.ErrNotFound):
			return true, nil // deleted
		}
		return false, err
	}
	h.cfg.Logger.Info("session taken for its queued run", "session", sessionID, "run", runID)
	return false, nil
}
