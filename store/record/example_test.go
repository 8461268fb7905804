package record_test

import (
	"fmt"
	"time"

	"weft.dev/weft/event"
	"weft.dev/weft/store/record"
)

// A session's owner folds each event it appends into the projection and
// writes the records Flush returns in the same batch as the events.
func ExampleProjection() {
	p := record.NewProjection(record.Session{}, nil)
	var seq int64
	apply := func(runID string, typ event.Type, data any) {
		e, err := event.New(runID, typ, data)
		if err != nil {
			panic(err)
		}
		seq++
		e.SessionID, e.Seq, e.Time = "s1", seq, time.Date(2025, 3, 1, 12, 0, int(seq), 0, time.UTC)
		if err := p.Apply(e); err != nil {
			panic(err)
		}
	}
	apply("", event.SessionCreated, event.SessionCreatedData{})
	apply("r1", event.RunQueued, event.RunQueuedData{Model: "m"})
	apply("r1", event.RunStarted, event.RunStartedData{Model: "m"})
	c := p.Flush()
	fmt.Println("session changed:", c.Session != nil, "active run:", c.Session.ActiveRunID)
	fmt.Println("run", c.Runs[0].ID, c.Runs[0].Status)

	apply("r1", event.RunCompleted, event.RunEndedData{Steps: 1})
	for _, r := range p.Flush().Runs {
		fmt.Println("run", r.ID, r.Status, "terminal:", record.IsTerminal(r.Status))
	}
	// Output:
	// session changed: true active run: r1
	// run r1 running
	// run r1 completed terminal: true
}
