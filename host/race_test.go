package host_test

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"

	"weft.dev/weft/api"
)

// Close racing session/delete (the old code took the session's lock and
// then the host's in one, the reverse in the other: a deadlock) and run
// starts (a run could be added to the host's WaitGroup after Close began
// waiting). Inside a bubble, a deadlock fails the test at once instead of
// hanging it; -race reports a WaitGroup misuse.
func TestCloseRacesDeleteAndStart(t *testing.T) {
	for range 20 {
		synctest.Test(t, func(t *testing.T) {
			h, _ := newHost(t)
			ctx := context.Background()
			var ids []string
			for range 4 {
				ids = append(ids, session(t, h, "scripted:slow"))
			}
			var wg sync.WaitGroup
			for i, id := range ids {
				wg.Go(func() {
					if i%2 == 0 {
						h.DeleteSession(ctx, api.SessionIDParams{SessionID: id})
					} else {
						h.StartRun(ctx, api.StartRunParams{SessionID: id, Input: input("x"), Busy: api.BusyQueue})
					}
				})
			}
			wg.Go(func() { h.Close() })
			wg.Wait()
			// After Close, every command is refused and nothing is left running.
			if _, err := h.StartRun(ctx, api.StartRunParams{SessionID: ids[1], Input: input("y")}); err == nil {
				t.Fatal("a closed host started a run")
			}
		})
	}
}
