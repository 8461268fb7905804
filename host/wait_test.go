package host_test

import (
	"context"
	"testing"

	"weft.dev/weft/api"
)

// run/wait means "the next run/start is admitted": a client that starts
// a run with busy reject right after run/wait reported the previous one
// terminal is never refused with run_conflict.
func TestWaitThenStartNeverConflicts(t *testing.T) {
	h, _ := newHost(t)
	sid := session(t, h, "scripted:fast")
	ctx := context.Background()
	for i := range 300 {
		r, err := h.StartRun(ctx, api.StartRunParams{SessionID: sid, Input: input("go"), Busy: api.BusyReject})
		if err != nil {
			t.Fatalf("iteration %d: run/start after run/wait: %v", i, err)
		}
		wait(t, h, r.Run.ID)
	}
}

// run/wait returns once the session's owner is done with the run: the
// next queued run has started, so a steer sent right after run/wait goes
// to it rather than being refused because the first run was still
// tidying up.
func TestWaitThenSteerReachesNextRun(t *testing.T) {
	h, _ := newHost(t)
	sid := session(t, h, "scripted:fast")
	ctx := context.Background()
	for i := range 100 {
		a := start(t, h, api.StartRunParams{SessionID: sid, Input: input("a")})
		b := start(t, h, api.StartRunParams{SessionID: sid, Input: input("b"), Busy: api.BusyQueue, Model: "scripted:pause"})
		wait(t, h, a.Run.ID)
		c, err := h.StartRun(ctx, api.StartRunParams{SessionID: sid, Input: input("c"), Busy: api.BusySteer})
		if err != nil {
			t.Fatalf("iteration %d: run/start busy steer right after run/wait: %v", i, err)
		}
		if c.Steer == nil || c.Steer.RunID != b.Run.ID {
			t.Fatalf("iteration %d: run/start busy steer: %+v; want a steer into run %s", i, c, b.Run.ID)
		}
		wait(t, h, b.Run.ID)
	}
}
