package memory_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"weft.dev/weft/event"
	"weft.dev/weft/store"
	"weft.dev/weft/store/memory"
	"weft.dev/weft/store/record"
)

func Example() {
	ctx := context.Background()
	s := memory.New()
	defer s.Close()

	now := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	p := record.NewProjection(record.Session{}, nil)
	created, _ := event.New("", event.SessionCreated, event.SessionCreatedData{Title: "demo"})
	user, _ := event.New("", event.MessageUser, event.MessageUserData{Content: event.TextParts("hi")})
	b := store.Batch{SessionID: "s1"}
	for i, e := range []event.Event{created, user} {
		e.SessionID, e.Seq, e.Time = "s1", int64(i+1), now
		if err := p.Apply(e); err != nil {
			log.Fatal(err)
		}
		b.Events = append(b.Events, e)
	}
	b.SetRecords(p.Flush())
	if err := s.Append(ctx, b); err != nil {
		log.Fatal(err)
	}

	evs, _ := s.Read(ctx, store.ReadParams{SessionID: "s1"})
	for _, e := range evs {
		fmt.Println(e.Seq, e.Type, string(e.Data))
	}
	last, _ := s.LastSeq(ctx, "s1")
	fmt.Println("last seq", last)
	_, err := s.Read(ctx, store.ReadParams{SessionID: "nope"})
	fmt.Println(errors.Is(err, store.ErrNotFound), err)
	// Output:
	// 1 session.created {"title":"demo"}
	// 2 message.user {"content":[{"type":"text","text":"hi"}]}
	// last seq 2
	// true not found: session nope
}
