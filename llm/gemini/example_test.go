package gemini_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"

	"weft.dev/weft/llm"
	"weft.dev/weft/llm/gemini"
)

func Example() {
	// A stand-in for the Gemini API that streams one short answer.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, `data: {"candidates": [{"content": {"parts": [{"text": "Hello"}],"role": "model"},"index": 0}],"usageMetadata": {"promptTokenCount": 4,"totalTokenCount": 4},"modelVersion": "gemini-2.5-flash"}

data: {"candidates": [{"content": {"parts": [{"text": " there."}],"role": "model"},"finishReason": "STOP","index": 0}],"usageMetadata": {"promptTokenCount": 4,"candidatesTokenCount": 3,"totalTokenCount": 7},"modelVersion": "gemini-2.5-flash"}

`)
	}))
	defer srv.Close()

	p, err := gemini.New(gemini.Config{APIKey: "example-key", BaseURL: srv.URL, HTTPClient: srv.Client()})
	if err != nil {
		fmt.Println(err)
		return
	}
	req := &llm.Request{
		Model:    "gemini-2.5-flash",
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
	// text "Hello"
	// text " there."
	// usage in=4 out=3
	// finish stop
}
