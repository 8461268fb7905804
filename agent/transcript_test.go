package agent_test

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"

	"weft.dev/weft/agent"
	"weft.dev/weft/event"
	"weft.dev/weft/llm"
)

// randomLog makes a log of transcript events in the shapes runs leave:
// user input, assistant messages with 0-3 calls, results in any order
// (some missing, some late or repeated), steering, and events of other
// types in between.
func randomLog(t *testing.T, r *rand.Rand, n int) []event.Event {
	t.Helper()
	mk := func(typ event.Type, v any) event.Event {
		e, err := event.New("run", typ, v)
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	var evs []event.Event
	var calls []event.ToolCall
	for i := 0; len(evs) < n; i++ {
		switch r.IntN(6) {
		case 0:
			in := event.TextParts(fmt.Sprint("user ", i))
			if r.IntN(3) == 0 { // an image
				in = append(in, event.Part{Type: event.PartImage, MediaType: "image/png", Data: []byte(fmt.Sprint("png ", i))})
			}
			evs = append(evs, mk(event.MessageUser, event.MessageUserData{Content: in}))
		case 1:
			evs = append(evs, mk(event.SteerConsumed, event.SteerData{SteerID: "s", Input: event.TextParts(fmt.Sprint("steer ", i))}))
		case 2:
			calls = nil
			for k := range r.IntN(4) {
				calls = append(calls, event.ToolCall{ID: fmt.Sprintf("c%d_%d", i, k), Name: "t", Arguments: "{}"})
			}
			evs = append(evs, mk(event.MessageCompleted, event.MessageCompletedData{Text: fmt.Sprint("answer ", i), ToolCalls: calls}))
		case 3, 4:
			if len(calls) == 0 {
				continue
			}
			c := calls[r.IntN(len(calls))]
			var images []event.Part
			for k := range r.IntN(3) / 2 * 2 { // 0 or 2 images
				images = append(images, event.Part{Type: event.PartImage, MediaType: "image/gif", Data: []byte(fmt.Sprint("gif ", i, k))})
			}
			evs = append(evs, mk(event.ToolCallCompleted, event.ToolCallCompletedData{ID: c.ID, Name: c.Name, Output: fmt.Sprint("out ", i),
				IsError: r.IntN(5) == 0, Attachments: images}))
		case 5:
			evs = append(evs, mk(event.StepStarted, event.StepData{Step: i}))
		}
	}
	return evs
}

// A user message's images and a tool result's images are attachments of
// their messages in the transcript, in order.
func TestTranscriptAttachments(t *testing.T) {
	mk := func(typ event.Type, v any) event.Event {
		e, err := event.New("run", typ, v)
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	img := event.Part{Type: event.PartImage, MediaType: "image/png", Data: []byte("p")}
	shot := event.Part{Type: event.PartImage, MediaType: "image/jpeg", Data: []byte("j")}
	msgs, err := agent.Transcript([]event.Event{
		mk(event.MessageUser, event.MessageUserData{Content: []event.Part{{Type: "text", Text: "what is it?"}, img}}),
		mk(event.MessageCompleted, event.MessageCompletedData{ToolCalls: []event.ToolCall{{ID: "c1", Name: "shot", Arguments: "{}"}}}),
		mk(event.ToolCallCompleted, event.ToolCallCompletedData{ID: "c1", Name: "shot", Output: "a screenshot", Attachments: []event.Part{shot}}),
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []llm.Message{
		{Role: llm.RoleUser, Content: "what is it?", Attachments: []llm.Attachment{{MediaType: "image/png", Data: []byte("p")}}},
		{Role: llm.RoleAssistant, ToolCalls: []event.ToolCall{{ID: "c1", Name: "shot", Arguments: "{}"}}},
		{Role: llm.RoleTool, ToolCallID: "c1", ToolName: "shot", Content: "a screenshot", Attachments: []llm.Attachment{{MediaType: "image/jpeg", Data: []byte("j")}}},
	}
	if !reflect.DeepEqual(msgs, want) {
		t.Errorf("transcript\n got %+v\nwant %+v", msgs, want)
	}
}

// TestTranscriptBuilderIncremental checks that a builder fed a log one
// event at a time holds, after each event, the transcript of the log so
// far, and that reading it never changes what it holds.
func TestTranscriptBuilderIncremental(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 10 {
		evs := randomLog(t, r, 150)
		var b agent.TranscriptBuilder
		for i, e := range evs {
			if err := b.Add(e); err != nil {
				t.Fatal(err)
			}
			want, err := agent.Transcript(evs[:i+1])
			if err != nil {
				t.Fatal(err)
			}
			got := b.Messages()
			if !reflect.DeepEqual(got, want) && !(len(got) == 0 && len(want) == 0) {
				t.Fatalf("after %d events:\n got %+v\nwant %+v", i+1, got, want)
			}
			if b.Len() != len(want) {
				t.Fatalf("after %d events: Len %d, want %d", i+1, b.Len(), len(want))
			}
			// The caller may append to what it got without touching the
			// builder's messages.
			_ = append(got, llm.Message{Role: llm.RoleUser, Content: "scratch"})
		}
		if b.Size() <= 0 {
			t.Fatalf("Size %d", b.Size())
		}
	}
}

func TestIsTranscriptType(t *testing.T) {
	for _, typ := range agent.TranscriptTypes() {
		if !agent.IsTranscriptType(typ) {
			t.Errorf("IsTranscriptType(%s) = false", typ)
		}
	}
	for _, typ := range []event.Type{event.MessageDelta, event.RunCompleted, event.ToolCallStarted, event.SteerAccepted} {
		if agent.IsTranscriptType(typ) {
			t.Errorf("IsTranscriptType(%s) = true", typ)
		}
	}
}

// TestTranscriptBuilderSnapshot checks that a builder restored from its
// binary form at any point holds the same transcript and goes on exactly
// as the original when fed the rest of the log.
func TestTranscriptBuilderSnapshot(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for range 10 {
		evs := randomLog(t, r, 150)
		cut := r.IntN(len(evs))
		orig := feed(t, &agent.TranscriptBuilder{}, evs[:cut])
		data, err := orig.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		var restored agent.TranscriptBuilder
		if err := restored.UnmarshalBinary(data); err != nil {
			t.Fatal(err)
		}
		if restored.Size() != orig.Size() || restored.Len() != orig.Len() {
			t.Fatalf("restored size %d len %d, want %d %d", restored.Size(), restored.Len(), orig.Size(), orig.Len())
		}
		for _, e := range evs[cut:] {
			if err := orig.Add(e); err != nil {
				t.Fatal(err)
			}
			if err := restored.Add(e); err != nil {
				t.Fatal(err)
			}
			if got, want := restored.Messages(), orig.Messages(); !reflect.DeepEqual(got, want) && len(got)+len(want) > 0 {
				t.Fatalf("restored builder diverged:\n got %+v\nwant %+v", got, want)
			}
		}
		// Every truncation of the data is an error, not a panic.
		for i := range len(data) {
			var b agent.TranscriptBuilder
			if err := b.UnmarshalBinary(data[:i]); err == nil {
				t.Fatalf("truncated to %d of %d bytes: no error", i, len(data))
			}
		}
	}
}

// FuzzTranscriptUnmarshal feeds arbitrary bytes to UnmarshalBinary: it
// must not panic nor allocate beyond the input, and whatever it accepts
// must survive a round trip.
func FuzzTranscriptUnmarshal(f *testing.F) {
	var b agent.TranscriptBuilder
	for _, e := range randomLog(&testing.T{}, rand.New(rand.NewPCG(5, 6)), 20) {
		_ = b.Add(e)
	}
	seed, _ := b.MarshalBinary()
	f.Add(seed)
	f.Add([]byte("WTX2"))
	f.Add([]byte("WTX2\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01"))
	f.Fuzz(func(t *testing.T, data []byte) {
		var b agent.TranscriptBuilder
		if err := b.UnmarshalBinary(data); err != nil {
			return
		}
		again, err := b.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		var c agent.TranscriptBuilder
		if err := c.UnmarshalBinary(again); err != nil {
			t.Fatalf("re-encoded snapshot refused: %v", err)
		}
		if !reflect.DeepEqual(b.Messages(), c.Messages()) {
			t.Fatal("round trip changed the transcript")
		}
	})
}

// TestTranscriptBuilderClone checks that a clone holds what the original
// held when cloned, however either is fed afterwards, and that the
// original goes on unaffected by the clone.
func TestTranscriptBuilderClone(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for range 20 {
		evs := randomLog(t, r, 150)
		cut := r.IntN(len(evs))
		orig := feed(t, &agent.TranscriptBuilder{}, evs[:cut])
		c := orig.Clone()
		// Feed the original the rest, and the clone a different rest: a
		// random suffix of the log, so that both append and close calls.
		other := randomLog(t, r, 50)
		feed(t, orig, evs[cut:])
		feed(t, c, other)
		if got, w := orig.Messages(), mustTranscript(t, evs); !reflect.DeepEqual(got, w) && len(got)+len(w) > 0 {
			t.Fatalf("original changed by its clone:\n got %+v\nwant %+v", got, w)
		}
		if got, w := c.Messages(), mustTranscript(t, append(evs[:cut:cut], other...)); !reflect.DeepEqual(got, w) && len(got)+len(w) > 0 {
			t.Fatalf("clone changed by its original:\n got %+v\nwant %+v", got, w)
		}
	}
}

func mustTranscript(t *testing.T, evs []event.Event) []llm.Message {
	t.Helper()
	m, err := agent.Transcript(evs)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// feed adds evs to b and returns it.
func feed(t *testing.T, b *agent.TranscriptBuilder, evs []event.Event) *agent.TranscriptBuilder {
	t.Helper()
	for _, e := range evs {
		if err := b.Add(e); err != nil {
			t.Fatal(err)
		}
	}
	return b
}
