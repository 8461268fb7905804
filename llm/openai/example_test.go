package openai_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"

	"weft.dev/weft/llm"
	"weft.dev/weft/llm/openai"
)

// A Chat provider streaming from an OpenAI-compatible server (here an
// httptest stand-in for vLLM or Ollama).
func ExampleChat() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for _, data := range []string{
			`{"choices":[{"index":0,"delta":{"reasoning_content":"Greet back."}}]}`,
			`{"choices":[{"index":0,"delta":{"content":"Hello"}}]}`,
			`{"choices":[{"index":0,"delta":{"content":", world"}}]}`,
			`{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`,
			`{"choices":[],"usage":{"prompt_tokens":9,"completion_tokens":4}}`,
			`[DONE]`,
		} {
			io.WriteString(w, "data: "+data+"\n\n")
		}
	}))
	defer srv.Close()

	p, err := openai.NewChat(openai.Config{BaseURL: srv.URL + "/v1"})
	if err != nil {
		panic(err)
	}
	req := &llm.Request{Model: "qwen3", Messages: []llm.Message{{Role: llm.RoleUser, Content: "Hi"}}}
	for ev, err := range p.Stream(context.Background(), req) {
		switch {
		case err != nil:
			fmt.Println("error:", err)
		case ev.Reasoning != "":
			fmt.Printf("reasoning: %q\n", ev.Reasoning)
		case ev.Text != "":
			fmt.Printf("text: %q\n", ev.Text)
		case ev.Usage != nil:
			fmt.Printf("usage: in=%d out=%d\n", ev.Usage.InputTokens, ev.Usage.OutputTokens)
		case ev.Finish != nil:
			fmt.Println("finish:", ev.Finish.Reason)
		}
	}
	// Output:
	// reasoning: "Greet back."
	// text: "Hello"
	// text: ", world"
	// usage: in=9 out=4
	// finish: stop
}

// A Responses provider whose stream is cut before response.completed: the
// iterator ends with a retryable stream_cut error, never quietly.
func ExampleResponses_streamCut() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "event: response.output_text.delta\n"+
			`data: {"type":"response.output_text.delta","output_index":0,"delta":"Hel"}`+"\n\n")
	}))
	defer srv.Close()

	p, err := openai.NewResponses(openai.Config{BaseURL: srv.URL + "/v1", APIKey: "sk-example"})
	if err != nil {
		panic(err)
	}
	req := &llm.Request{Model: "gpt-5-mini", Messages: []llm.Message{{Role: llm.RoleUser, Content: "Hi"}}}
	for ev, err := range p.Stream(context.Background(), req) {
		if err != nil {
			e, _ := llm.AsError(err)
			fmt.Println("error kind:", e.Kind, "retryable:", e.Retryable)
			break
		}
		fmt.Printf("text: %q\n", ev.Text)
	}
	// Output:
	// text: "Hel"
	// error kind: stream_cut retryable: true
}
