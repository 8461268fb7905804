package store_test

import (
	"context"
	"testing"
	"time"

	"weft.dev/weft/event"
	"weft.dev/weft/store"
	"weft.dev/weft/store/memory"
	"weft.dev/weft/store/record"
)

// A Sequencer's batches append to a store as the session's writer's
// would: gap-free, with the records that make the run readable.
func TestSequencer(t *testing.T) {
	ctx := context.Background()
	st := memory.New()
	sq := store.NewSequencer("s1", time.Unix(0, 0))
	mk := func(runID string, typ event.Type, v any) event.Event {
		e, err := event.New(runID, typ, v)
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	for _, evs := range [][]event.Event{
		{mk("", event.SessionCreated, event.SessionCreatedData{Title: "t"}), mk("r1", event.RunQueued, event.RunQueuedData{Model: "m"})},
		{mk("r1", event.RunStarted, event.RunStartedData{Model: "m"}), mk("r1", event.RunCompleted, event.RunEndedData{Steps: 1})},
	} {
		b, err := sq.Batch(evs)
		if err != nil {
			t.Fatal(err)
		}
		if err := st.Append(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	if sq.LastSeq() != 4 {
		t.Fatalf("LastSeq = %d, want 4", sq.LastSeq())
	}
	if last, err := st.LastSeq(ctx, "s1"); err != nil || last != 4 {
		t.Fatalf("store's last seq %d, %v", last, err)
	}
	if r, err := st.Run(ctx, "r1"); err != nil || r.Status != record.RunCompleted {
		t.Fatalf("run r1: %+v, %v", r, err)
	}
}
