package host

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"weft.dev/weft/store/memory"
)

// listFinder is a store.OrphanFinder over a fixed list.
type listFinder struct {
	ids    []string
	limits []int
}

func (f *listFinder) OrphanedSessions(_ context.Context, limit int) ([]string, error) {
	f.limits = append(f.limits, limit)
	return f.ids[:min(limit, len(f.ids))], nil
}

// A session that keeps failing to load waits before its next try, longer
// each time, and gives its place in the sweep to the next one: with a
// full batch of sessions that cannot load ahead of it, a session further
// down the list is reached at the second sweep.
func TestOrphanSweepBacksOffFailingSessions(t *testing.T) {
	h, err := New(context.Background(), Config{Store: memory.New(),
		ResolveModel: func(name string) (*Model, error) { return nil, fmt.Errorf("no model %q", name) }})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	var ids []string
	for i := range orphanBatch {
		ids = append(ids, fmt.Sprintf("ses_gone%02d", i)) // not in the store: load fails
	}
	f := &listFinder{ids: append(ids, "ses_last")}
	ctx := context.Background()
	retry := newOrphanRetry(10 * time.Second)
	now := time.Now()

	h.sweepOrphansOnce(ctx, f, retry, now)
	if retry.len() != orphanBatch || retry.waits("ses_last", now) {
		t.Fatalf("after the first sweep %d sessions wait (ses_last waits: %v); want the %d that failed", retry.len(), retry.waits("ses_last", now), orphanBatch)
	}
	h.sweepOrphansOnce(ctx, f, retry, now.Add(time.Second))
	if got := f.limits[1]; got != 2*orphanBatch {
		t.Fatalf("the second sweep asked for %d sessions; want %d, past those that wait", got, 2*orphanBatch)
	}
	if !retry.waits("ses_last", now.Add(time.Second)) {
		t.Fatal("the second sweep did not try ses_last, behind a batch of sessions that wait")
	}

	// Each failure doubles the wait, up to the ceiling.
	at := now
	var waits []time.Duration
	for range 12 {
		waits = append(waits, retry.failed("ses_gone00", at))
	}
	if waits[1] != 40*time.Second || waits[len(waits)-1] != orphanRetryCeiling || !slices.IsSorted(waits) {
		t.Fatalf("waits %v; want doubling from the base up to %v", waits, orphanRetryCeiling)
	}

	// A session no longer on the whole list is forgotten.
	f.ids = []string{"ses_last"}
	h.sweepOrphansOnce(ctx, f, retry, now.Add(2*time.Hour))
	if retry.waits("ses_gone00", now.Add(2*time.Hour)) || retry.len() > 1 {
		t.Fatalf("%d sessions remembered after they left the list", retry.len())
	}
}
