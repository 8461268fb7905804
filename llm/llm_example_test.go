package llm_test

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"strings"
	"time"

	"weft.dev/weft/event"
	"weft.dev/weft/llm"
	"weft.dev/weft/llm/scripted"
)

// A caller sends a Request to any Provider and reads the typed stream:
// text and tool-call fragments, then Finish, or at most one error. Here
// the provider is the offline scripted model; llm/openai, llm/anthropic
// and llm/gemini stream the same events.
func Example() {
	p, err := scripted.Parse("weather.json", []byte(`{"steps": [
		{"text": "Let me look.", "toolCalls": [{"name": "weather", "arguments": {"city": "Oslo"}}]}
	]}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	req := &llm.Request{
		System:   "You answer briefly.",
		Messages: []llm.Message{{Role: llm.RoleUser, Content: "Weather in Oslo?"}},
		Tools:    []llm.ToolSpec{{Name: "weather", Description: "Today's weather in a city.", InputSchema: []byte(`{"type":"object","properties":{"city":{"type":"string"}}}`)}},
	}
	var text strings.Builder
	calls := map[int]*event.ToolCall{}
	for ev, err := range p.Stream(context.Background(), req) {
		switch {
		case err != nil:
			fmt.Println("error:", err)
			return
		case ev.Text != "":
			text.WriteString(ev.Text)
		case ev.ToolCall != nil:
			d := ev.ToolCall
			if calls[d.Index] == nil {
				calls[d.Index] = &event.ToolCall{ID: d.ID, Name: d.Name}
			}
			calls[d.Index].Arguments += d.Arguments
		case ev.Finish != nil:
			fmt.Printf("%q, finish: %s\n", text.String(), ev.Finish.Reason)
		}
	}
	for i := range len(calls) {
		fmt.Println("call", calls[i].Name, calls[i].Arguments)
	}
	// Output:
	// "Let me look.", finish: tool_calls
	// call weather {"city":"Oslo"}
}

// echo is a Provider of its own: it answers with the last user message.
type echo struct{}

// Stream yields the answer in two fragments, then Finish, the last item
// of every successful stream; a provider stops when the consumer breaks.
func (echo) Stream(ctx context.Context, req *llm.Request) iter.Seq2[llm.StreamEvent, error] {
	return func(yield func(llm.StreamEvent, error) bool) {
		if err := ctx.Err(); err != nil {
			yield(llm.StreamEvent{}, err)
			return
		}
		last := req.Messages[len(req.Messages)-1].Content
		half := len(last) / 2
		for _, part := range []string{last[:half], last[half:]} {
			if !yield(llm.StreamEvent{Text: part}, nil) {
				return
			}
		}
		yield(llm.StreamEvent{Finish: &llm.Finish{Reason: llm.FinishStop}}, nil)
	}
}

// A provider is one method: a single-use iterator of stream events.
func ExampleProvider() {
	var p llm.Provider = echo{}
	for ev, err := range p.Stream(context.Background(), &llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "ping pong"}}}) {
		if err != nil {
			fmt.Println(err)
			return
		}
		switch {
		case ev.Text != "":
			fmt.Printf("text %q\n", ev.Text)
		case ev.Finish != nil:
			fmt.Println("finish", ev.Finish.Reason)
		}
	}
	// Output:
	// text "ping"
	// text " pong"
	// finish stop
}

// A provider reports an HTTP failure as an *llm.Error, which says whether
// the same request may succeed later and how long the server asked to
// wait; the agent loop retries on it, providers never do.
func ExampleStatusError() {
	now := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	wait := llm.ParseRetryAfter("3", "", now)
	var err error = llm.StatusError("openai", 429, wait, errors.New("rate limit reached"))
	if e, ok := llm.AsError(err); ok {
		fmt.Println(e.Kind, e.Retryable, e.RetryAfter)
	}
	err = fmt.Errorf("step 2: %w", llm.StatusError("openai", 400, 0, errors.New("unknown model")))
	if e, ok := llm.AsError(err); ok {
		fmt.Println(e.Kind, e.Retryable, e)
	}
	// Output:
	// rate_limited true 3s
	// bad_request false openai: bad_request (HTTP 400): unknown model
}
