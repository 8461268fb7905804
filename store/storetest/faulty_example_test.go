package storetest_test

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"time"

	"weft.dev/weft/event"
	"weft.dev/weft/store"
	"weft.dev/weft/store/memory"
	"weft.dev/weft/store/storetest"
)

// A Faulty wraps a real store for testing what its users do when writes
// fail, as when a disk fills: while a fault is set, writes fail with it
// and write nothing; reads keep working; after Fail(nil) the writer
// goes on where it stopped. (A store implementation instead runs the
// conformance suite, storetest.Run, from its own tests.)
func ExampleFaulty() {
	ctx := context.Background()
	st := &storetest.Faulty{Store: memory.New()}
	defer st.Close()

	sq := store.NewSequencer("ses_1", time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC))
	created, _ := event.New("", event.SessionCreated, event.SessionCreatedData{Title: "demo"})
	b, _ := sq.Batch([]event.Event{created})
	fmt.Println("append:", st.Append(ctx, b))

	st.Fail(syscall.ENOSPC)
	title := "renamed"
	renamed, _ := event.New("", event.SessionUpdated, event.SessionUpdatedData{Title: &title})
	b, _ = sq.Batch([]event.Event{renamed})
	err := st.Append(ctx, b)
	fmt.Println("append:", err, errors.Is(err, syscall.ENOSPC))
	last, _ := st.LastSeq(ctx, "ses_1")
	fmt.Println("last seq while failing:", last)

	st.Fail(nil)
	fmt.Println("retry:", st.Append(ctx, b))
	s, _ := st.Session(ctx, "ses_1")
	fmt.Println(s.Title, s.LastSeq)
	// Output:
	// append: <nil>
	// append: no space left on device true
	// last seq while failing: 1
	// retry: <nil>
	// renamed 2
}
