package sqlite_test

import (
	"context"
	"fmt"
	"testing"

	"weft.dev/weft/event"
	"weft.dev/weft/store/sqlite"
)

// BenchmarkPurge purges a session of 10,000 events (about 2 MB of
// message.delta data) from a SQLite store that also holds a neighbour of
// the same size: what one purge of a retention pass costs the writer.
func BenchmarkPurge(b *testing.B) {
	const events = 10_000
	s := open(b, sqlite.Config{})
	ctx := context.Background()
	fill := func(id string) {
		o := newBenchOwner(b, s, id)
		for range events / 100 {
			if err := s.Append(ctx, o.deltas(b, 100)); err != nil {
				b.Fatal(err)
			}
		}
		done, _ := event.New("r-"+id, event.RunCompleted, event.RunEndedData{Steps: 1})
		if err := s.Append(ctx, o.batch(b, []event.Event{done})); err != nil {
			b.Fatal(err)
		}
	}
	fill("neighbour")
	i := 0
	for b.Loop() {
		b.StopTimer()
		id := fmt.Sprintf("s%d", i)
		i++
		fill(id)
		b.StartTimer()
		if err := s.Purge(ctx, id); err != nil {
			b.Fatal(err)
		}
	}
}
