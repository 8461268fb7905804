package anthropic_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"

	"weft.dev/weft/llm"
	"weft.dev/weft/llm/anthropic"
)

func Example() {
	// A stand-in for the Messages API that streams one short answer.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, `event: message_start
data: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"model":"claude-sonnet-4-5","usage":{"input_tokens":12,"output_tokens":1}}}

event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello"}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":" there."}}

event: content_block_stop
data: {"type":"content_block_stop","index":0}

event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":3}}

event: message_stop
data: {"type":"message_stop"}

`)
	}))
	defer srv.Close()

	p, err := anthropic.New(anthropic.Config{APIKey: "sk-example", BaseURL: srv.URL, HTTPClient: srv.Client()})
	if err != nil {
		fmt.Println(err)
		return
	}
	req := &llm.Request{
		Model:    "claude-sonnet-4-5",
		Messages: []llm.Message{{Role: llm.RoleUser, Content: "Say hello."}},
	}
	for ev, err := range p.Stream(context.Background(), req) {
		switch {
		case err != nil:
			fmt.Println("error:", err)
		case ev.Text != "":
			fmt.Printf("text %q\n", ev.Text)
		case ev.Usage != nil:
			fmt.Printf("usage in=%d out=%d\n", ev.Usage.InputTokens, ev.Usage.OutputTokens)
		case ev.Finish != nil:
			fmt.Println("finish", ev.Finish.Reason)
		}
	}
	// Output:
	// usage in=12 out=1
	// text "Hello"
	// text " there."
	// usage in=0 out=3
	// finish stop
}
