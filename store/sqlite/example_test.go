package sqlite_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"weft.dev/weft/event"
	"weft.dev/weft/store"
	"weft.dev/weft/store/record"
	"weft.dev/weft/store/sqlite"
)

func Example() {
	dir, err := os.MkdirTemp("", "weft-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()
	s, err := sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(dir, "weft.db")})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()

	// The session owner sequences events, folds them into the projection
	// and appends them with the changed records in one batch.
	p := record.NewProjection(record.Session{}, nil)
	now := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	var b store.Batch
	b.SessionID = "s1"
	for i, e := range []event.Event{
		must(event.New("", event.SessionCreated, event.SessionCreatedData{Title: "demo"})),
		must(event.New("r1", event.RunQueued, event.RunQueuedData{Model: "scripted:demo", Input: event.TextParts("hello")})),
		must(event.New("r1", event.RunStarted, event.RunStartedData{Model: "scripted:demo"})),
	} {
		e.SessionID, e.Seq, e.Time = "s1", int64(i+1), now.Add(time.Duration(i)*time.Millisecond)
		if err := p.Apply(e); err != nil {
			log.Fatal(err)
		}
		b.Events = append(b.Events, e)
	}
	b.SetRecords(p.Flush())
	if err := s.Append(ctx, b); err != nil {
		log.Fatal(err)
	}

	// A client resuming after cursor 1.
	evs, err := s.Read(ctx, store.ReadParams{SessionID: "s1", After: 1})
	if err != nil {
		log.Fatal(err)
	}
	for _, e := range evs {
		fmt.Println(e.Seq, e.Type, e.RunID, e.Time.Format(time.RFC3339Nano))
	}
	sess, _ := s.Session(ctx, "s1")
	run, _ := s.Run(ctx, "r1")
	fmt.Println(sess.Title, sess.LastSeq, sess.ActiveRunID, run.Status)
	// Output:
	// 2 run.queued r1 2025-06-01T12:00:00.001Z
	// 3 run.started r1 2025-06-01T12:00:00.002Z
	// demo 3 r1 running
}

func ExampleOpen_seqConflict() {
	dir, err := os.MkdirTemp("", "weft-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()
	s, err := sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(dir, "weft.db"), Synchronous: "FULL"})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	e := event.Event{Seq: 1, SessionID: "s1", Type: event.MessageUser, Time: time.Unix(0, 0), Data: []byte(`{"content":[]}`)}
	fmt.Println(s.Append(ctx, store.Batch{SessionID: "s1", Events: []event.Event{e}}))
	// Appending seq 1 again would overwrite it: the store refuses.
	fmt.Println(s.Append(ctx, store.Batch{SessionID: "s1", Events: []event.Event{e}}))
	// Output:
	// <nil>
	// sequence conflict: session s1: expected seq 2, got 1
}

func must(e event.Event, err error) event.Event {
	if err != nil {
		log.Fatal(err)
	}
	return e
}
