package store_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"weft.dev/weft/event"
	"weft.dev/weft/store"
	"weft.dev/weft/store/memory"
)

// A session's writer appends its log in batches, each with the records
// the events imply (the session, its runs), in one transaction; readers
// read the log after a cursor and the records by ID. Here a Sequencer
// plays the writer and the in-memory store the storage: store/sqlite and
// store/postgres behave the same.
func Example() {
	ctx := context.Background()
	var st store.Store = memory.New()
	defer st.Close()

	sq := store.NewSequencer("ses_1", time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC))
	mk := func(runID string, t event.Type, v any) event.Event {
		e, err := event.New(runID, t, v)
		if err != nil {
			panic(err)
		}
		return e
	}
	for _, evs := range [][]event.Event{
		{mk("", event.SessionCreated, event.SessionCreatedData{Title: "demo"}), mk("run_1", event.RunQueued, event.RunQueuedData{Model: "scripted:hello", Input: event.TextParts("hi")})},
		{mk("run_1", event.RunStarted, event.RunStartedData{Model: "scripted:hello"}), mk("run_1", event.RunCompleted, event.RunEndedData{Steps: 1})},
	} {
		b, err := sq.Batch(evs)
		if err != nil {
			panic(err)
		}
		if err := st.Append(ctx, b); err != nil {
			panic(err)
		}
	}

	s, _ := st.Session(ctx, "ses_1")
	fmt.Println(s.ID, s.Title, "last seq", s.LastSeq)
	r, _ := st.Run(ctx, "run_1")
	fmt.Println(r.ID, r.Status, "events", r.FirstSeq, "to", r.LastSeq)
	evs, _ := st.Read(ctx, store.ReadParams{SessionID: "ses_1", After: 2})
	for _, e := range evs {
		fmt.Println(e.Seq, e.Type)
	}

	// An append that would leave a gap, or overwrite an event, is refused
	// whole: the log stays gap-free.
	stale, _ := event.New("run_1", event.RunCompleted, event.RunEndedData{})
	stale.SessionID, stale.Seq, stale.Time = "ses_1", 4, time.Now().UTC()
	err := st.Append(ctx, store.Batch{SessionID: "ses_1", Events: []event.Event{stale}})
	fmt.Println(errors.Is(err, store.ErrSeqConflict))
	_, err = st.Session(ctx, "ses_2")
	fmt.Println(errors.Is(err, store.ErrNotFound))
	// Output:
	// ses_1 demo last seq 4
	// run_1 completed events 2 to 4
	// 3 run.started
	// 4 run.completed
	// true
	// true
}
