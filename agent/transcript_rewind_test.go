package agent_test

import (
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"

	"weft.dev/weft/agent"
	"weft.dev/weft/event"
)

// TestTranscriptRewind: a session.rewound takes the transcript back to
// what it was after its toSeq, also in a builder restored from a
// snapshot taken before it, and leaves a clone taken before it alone.
func TestTranscriptRewind(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for range 50 {
		// A log holds one result per call.
		evs := oneResultPerCall(t, randomLog(t, r, 120))
		tail := oneResultPerCall(t, randomLog(t, r, 30))
		for i := range evs {
			evs[i].Seq = int64(i + 1)
		}
		k := r.IntN(len(evs)) + 1
		rw, err := event.New("", event.SessionRewound, event.SessionRewoundData{ToSeq: int64(k)})
		if err != nil {
			t.Fatal(err)
		}
		rw.Seq = int64(len(evs) + 1)
		for i := range tail {
			tail[i].Seq = rw.Seq + int64(i+1)
		}
		// What the log's first k events and then the tail make (the rewind
		// right after event k changes nothing but closing k's open calls).
		want := mustTranscript(t, append(append(evs[:k:k], rw), tail...))
		whole := append(append(evs[:len(evs):len(evs)], rw), tail...)
		if got := mustTranscript(t, whole); !cmp.Equal(got, want) {
			t.Fatalf("rewound to %d:\n%s", k, cmp.Diff(want, got))
		}

		b := feed(t, &agent.TranscriptBuilder{}, evs)
		before := b.Clone()
		beforeMsgs := before.Messages()
		data, err := b.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		var restored agent.TranscriptBuilder
		if err := restored.UnmarshalBinary(data); err != nil {
			t.Fatal(err)
		}
		feed(t, b, append([]event.Event{rw}, tail...))
		feed(t, &restored, append([]event.Event{rw}, tail...))
		if got := b.Messages(); !cmp.Equal(got, want) {
			t.Fatalf("the builder rewound to %d:\n%s", k, cmp.Diff(want, got))
		}
		if got := restored.Messages(); !cmp.Equal(got, want) {
			t.Fatalf("the restored builder rewound to %d:\n%s", k, cmp.Diff(want, got))
		}
		if got := before.Messages(); !cmp.Equal(got, beforeMsgs) {
			t.Fatal("a clone taken before the rewind changed")
		}
	}
}

// oneResultPerCall drops the results of calls answered before.
func oneResultPerCall(t *testing.T, evs []event.Event) []event.Event {
	seen := map[string]bool{}
	var out []event.Event
	for _, e := range evs {
		if e.Type == event.ToolCallCompleted {
			var d event.ToolCallCompletedData
			if err := e.Decode(&d); err != nil {
				t.Fatal(err)
			}
			if seen[d.ID] {
				continue
			}
			seen[d.ID] = true
		}
		out = append(out, e)
	}
	return out
}
