package anthropic_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"weft.dev/weft/event"
	"weft.dev/weft/llm"
	"weft.dev/weft/llm/anthropic"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// sse builds a text/event-stream body.
type sse struct{ strings.Builder }

// event appends one event whose data is v encoded as JSON (or v itself if
// it is a string).
func (s *sse) event(typ string, v any) *sse {
	data, ok := v.(string)
	if !ok {
		b, err := json.Marshal(v)
		if err != nil {
			panic(err)
		}
		data = string(b)
	}
	fmt.Fprintf(s, "event: %s\ndata: %s\n\n", typ, data)
	return s
}

type obj = map[string]any

func (s *sse) messageStart(input, cacheRead, cacheWrite int) *sse {
	return s.event("message_start", obj{"type": "message_start", "message": obj{
		"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-test",
		"content": []any{}, "stop_reason": nil,
		"usage": obj{"input_tokens": input, "output_tokens": 1,
			"cache_read_input_tokens": cacheRead, "cache_creation_input_tokens": cacheWrite},
	}})
}

func (s *sse) textBlock(index int, parts ...string) *sse {
	s.event("content_block_start", obj{"type": "content_block_start", "index": index,
		"content_block": obj{"type": "text", "text": ""}})
	for _, p := range parts {
		s.event("content_block_delta", obj{"type": "content_block_delta", "index": index,
			"delta": obj{"type": "text_delta", "text": p}})
	}
	return s.event("content_block_stop", obj{"type": "content_block_stop", "index": index})
}

func (s *sse) toolBlock(index int, id, name string, fragments ...string) *sse {
	s.event("content_block_start", obj{"type": "content_block_start", "index": index,
		"content_block": obj{"type": "tool_use", "id": id, "name": name, "input": obj{}}})
	for _, f := range fragments {
		s.event("content_block_delta", obj{"type": "content_block_delta", "index": index,
			"delta": obj{"type": "input_json_delta", "partial_json": f}})
	}
	return s.event("content_block_stop", obj{"type": "content_block_stop", "index": index})
}

func (s *sse) messageEnd(stopReason string, output int) *sse {
	s.event("message_delta", obj{"type": "message_delta",
		"delta": obj{"stop_reason": stopReason, "stop_sequence": nil},
		"usage": obj{"output_tokens": output}})
	return s.event("message_stop", obj{"type": "message_stop"})
}

// reply is one scripted HTTP response.
type reply struct {
	status  int
	header  http.Header
	body    string
	chunk   int  // if > 0, write the body in chunks of this many bytes, flushing each
	abort   bool // after the body, kill the connection without finishing the response
	waitCtx bool // after the body, block until the request's context ends
}

// server serves replies in order (the last one repeats) and records the
// request bodies it receives.
type server struct {
	*httptest.Server
	mu       sync.Mutex
	replies  []reply
	requests [][]byte
	headers  []http.Header
}

func newServer(t testing.TB, replies ...reply) *server {
	t.Helper()
	s := &server{replies: replies}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

func (s *server) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	n := len(s.requests)
	s.requests = append(s.requests, body)
	s.headers = append(s.headers, r.Header.Clone())
	rep := s.replies[min(n, len(s.replies)-1)]
	s.mu.Unlock()

	for k, vs := range rep.header {
		w.Header()[k] = vs
	}
	if rep.status == 0 || rep.status == http.StatusOK {
		w.Header().Set("Content-Type", "text/event-stream")
	} else if w.Header().Get("Content-Type") == "" {
		w.Header().Set("Content-Type", "application/json")
	}
	w.WriteHeader(max(rep.status, http.StatusOK))
	flusher := w.(http.Flusher)
	body = []byte(rep.body)
	step := rep.chunk
	if step <= 0 {
		step = len(body)
	}
	for len(body) > 0 {
		k := min(step, len(body))
		if _, err := w.Write(body[:k]); err != nil {
			return
		}
		flusher.Flush()
		body = body[k:]
	}
	if rep.waitCtx {
		<-r.Context().Done()
	}
	if rep.abort {
		panic(http.ErrAbortHandler)
	}
}

func (s *server) request(t *testing.T, i int) map[string]any {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if i >= len(s.requests) {
		t.Fatalf("server got %d requests, want more than %d", len(s.requests), i)
	}
	var m map[string]any
	if err := json.Unmarshal(s.requests[i], &m); err != nil {
		t.Fatalf("request %d body: %v\n%s", i, err, s.requests[i])
	}
	return m
}

func (s *server) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.requests)
}

func newProvider(t testing.TB, s *server, mod ...func(*anthropic.Config)) *anthropic.Provider {
	t.Helper()
	cfg := anthropic.Config{APIKey: "sk-test", BaseURL: s.URL, HTTPClient: s.Client()}
	for _, f := range mod {
		f(&cfg)
	}
	p, err := anthropic.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// result is a stream collected.
type result struct {
	text, reasoning string
	calls           []event.ToolCall
	usage           []event.TokenUsage
	finish          *llm.Finish
	err             error
	events          int
}

func collect(ctx context.Context, p llm.Provider, req *llm.Request) result {
	var r result
	for ev, err := range p.Stream(ctx, req) {
		if err != nil {
			r.err = err
			break
		}
		r.events++
		switch {
		case ev.Text != "":
			r.text += ev.Text
		case ev.Reasoning != "":
			r.reasoning += ev.Reasoning
		case ev.ToolCall != nil:
			d := ev.ToolCall
			for len(r.calls) <= d.Index {
				r.calls = append(r.calls, event.ToolCall{})
			}
			c := &r.calls[d.Index]
			if d.ID != "" {
				c.ID = d.ID
			}
			if d.Name != "" {
				c.Name = d.Name
			}
			c.Arguments += d.Arguments
		case ev.Usage != nil:
			r.usage = append(r.usage, *ev.Usage)
		case ev.Finish != nil:
			r.finish = ev.Finish
		}
	}
	return r
}

func simpleRequest() *llm.Request {
	return &llm.Request{Model: "claude-test", Messages: []llm.Message{{Role: llm.RoleUser, Content: "hi"}}}
}

func wantKind(t *testing.T, err error, kind string, retryable bool) *llm.Error {
	t.Helper()
	e, ok := llm.AsError(err)
	if !ok {
		t.Fatalf("error = %v (%T), want *llm.Error of kind %s", err, err, kind)
	}
	if e.Kind != kind || e.Retryable != retryable || e.Provider != "anthropic" {
		t.Fatalf("error = %+v, want kind %s retryable %v provider anthropic", e, kind, retryable)
	}
	return e
}

func TestPlainText(t *testing.T) {
	var b sse
	b.messageStart(10, 0, 0).textBlock(0, "Hello", ", ", "world", "!").messageEnd("end_turn", 5)
	s := newServer(t, reply{body: b.String()})
	r := collect(t.Context(), newProvider(t, s), simpleRequest())
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.text != "Hello, world!" {
		t.Errorf("text = %q", r.text)
	}
	if r.finish == nil || r.finish.Reason != llm.FinishStop || r.finish.ProviderState != nil {
		t.Errorf("finish = %+v", r.finish)
	}
}

func TestToolCallAwkwardSplits(t *testing.T) {
	// The arguments hold multi-byte characters, escapes and nesting; the
	// fragments split inside a key, inside an escape sequence and between a
	// backslash and the character it escapes.
	fragments := []string{`{"pa`, `th": "dír/`, `文件😀.txt", "content": "line1\`, `nline2 \"q`, `uoted\" é`, `", "n": [1, {"`, `x": null}]}`}
	want := strings.Join(fragments, "")
	if !json.Valid([]byte(want)) {
		t.Fatalf("test arguments are not valid JSON: %s", want)
	}
	var b sse
	b.messageStart(10, 0, 0).textBlock(0, "Writing ", "the fïle.").toolBlock(1, "toolu_01", "write_file", fragments...).messageEnd("tool_use", 30)
	body := b.String()
	for _, chunk := range []int{1, 2, 3, 5, 7, 13} {
		t.Run(fmt.Sprintf("chunk%d", chunk), func(t *testing.T) {
			s := newServer(t, reply{body: body, chunk: chunk})
			r := collect(t.Context(), newProvider(t, s), simpleRequest())
			if r.err != nil {
				t.Fatal(r.err)
			}
			if r.text != "Writing the fïle." {
				t.Errorf("text = %q", r.text)
			}
			if len(r.calls) != 1 {
				t.Fatalf("calls = %+v", r.calls)
			}
			c := r.calls[0]
			if c.ID != "toolu_01" || c.Name != "write_file" || c.Arguments != want {
				t.Errorf("call = %+v\nwant args %s", c, want)
			}
			if r.finish == nil || r.finish.Reason != llm.FinishToolCalls {
				t.Errorf("finish = %+v", r.finish)
			}
		})
	}
}

func TestParallelToolCalls(t *testing.T) {
	var b sse
	b.messageStart(10, 0, 0).
		textBlock(0, "Two reads.").
		toolBlock(1, "toolu_a", "read", `{"path":`, ` "a.txt"}`).
		toolBlock(2, "toolu_b", "read", `{"path": "b.txt"}`).
		toolBlock(3, "toolu_c", "now"). // no input_json_delta: arguments {}
		messageEnd("tool_use", 40)
	s := newServer(t, reply{body: b.String()})

	var deltas []llm.ToolCallDelta
	for ev, err := range newProvider(t, s).Stream(t.Context(), simpleRequest()) {
		if err != nil {
			t.Fatal(err)
		}
		if ev.ToolCall != nil {
			deltas = append(deltas, *ev.ToolCall)
		}
	}
	want := []llm.ToolCallDelta{
		{Index: 0, ID: "toolu_a", Name: "read"},
		{Index: 0, Arguments: `{"path":`},
		{Index: 0, Arguments: ` "a.txt"}`},
		{Index: 1, ID: "toolu_b", Name: "read"},
		{Index: 1, Arguments: `{"path": "b.txt"}`},
		{Index: 2, ID: "toolu_c", Name: "now"},
		{Index: 2, Arguments: `{}`},
	}
	if fmt.Sprint(deltas) != fmt.Sprint(want) {
		t.Errorf("deltas =\n%+v\nwant\n%+v", deltas, want)
	}
}

func TestUsage(t *testing.T) {
	var b sse
	b.messageStart(25, 100, 7).textBlock(0, "ok")
	b.event("message_delta", obj{"type": "message_delta", "delta": obj{"stop_reason": "max_tokens"},
		"usage": obj{"output_tokens": 42, "input_tokens": 25, "cache_read_input_tokens": 100,
			"cache_creation_input_tokens": 7, "output_tokens_details": obj{"thinking_tokens": 9}}})
	b.event("message_stop", obj{"type": "message_stop"})
	s := newServer(t, reply{body: b.String()})
	r := collect(t.Context(), newProvider(t, s), simpleRequest())
	if r.err != nil {
		t.Fatal(r.err)
	}
	want := []event.TokenUsage{
		{InputTokens: 25, OutputTokens: 1, CacheReadTokens: 100, CacheWriteTokens: 7},
		{InputTokens: 25, OutputTokens: 42, CacheReadTokens: 100, CacheWriteTokens: 7, ReasoningTokens: 9},
	}
	if fmt.Sprint(r.usage) != fmt.Sprint(want) {
		t.Errorf("usage = %+v, want %+v", r.usage, want)
	}
	if r.finish == nil || r.finish.Reason != llm.FinishLength {
		t.Errorf("finish = %+v", r.finish)
	}
}

func TestStreamCut(t *testing.T) {
	var b sse
	b.messageStart(10, 0, 0).textBlock(0, "partial")
	b.event("message_delta", obj{"type": "message_delta", "delta": obj{"stop_reason": "end_turn"}, "usage": obj{"output_tokens": 3}})
	body := b.String()
	t.Run("clean EOF", func(t *testing.T) {
		s := newServer(t, reply{body: body})
		r := collect(t.Context(), newProvider(t, s), simpleRequest())
		wantKind(t, r.err, llm.KindStreamCut, true)
		if r.text != "partial" || r.finish != nil {
			t.Errorf("text %q finish %+v", r.text, r.finish)
		}
	})
	t.Run("connection dropped", func(t *testing.T) {
		s := newServer(t, reply{body: body[:len(body)-10], abort: true})
		r := collect(t.Context(), newProvider(t, s), simpleRequest())
		wantKind(t, r.err, llm.KindStreamCut, true)
	})
	t.Run("message_stop without blank line", func(t *testing.T) {
		// The last event is never dispatched, so message_stop did not arrive.
		s := newServer(t, reply{body: body + "event: message_stop\ndata: {\"type\":\"message_stop\"}\n"})
		r := collect(t.Context(), newProvider(t, s), simpleRequest())
		wantKind(t, r.err, llm.KindStreamCut, true)
	})
}

func TestRateLimitedThenSuccess(t *testing.T) {
	var b sse
	b.messageStart(10, 0, 0).textBlock(0, "fine").messageEnd("end_turn", 2)
	s := newServer(t,
		reply{status: 429, header: http.Header{"Retry-After": {"7"}},
			body: `{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}`},
		reply{body: b.String()})
	p := newProvider(t, s)
	r := collect(t.Context(), p, simpleRequest())
	e := wantKind(t, r.err, llm.KindRateLimited, true)
	if e.StatusCode != 429 || e.RetryAfter != 7*time.Second {
		t.Errorf("error = %+v, want status 429, RetryAfter 7s", e)
	}
	if r.events != 0 {
		t.Errorf("%d events before the error", r.events)
	}
	if n := s.count(); n != 1 {
		t.Fatalf("server got %d requests; the SDK must not retry", n)
	}
	r = collect(t.Context(), p, simpleRequest())
	if r.err != nil || r.text != "fine" {
		t.Fatalf("second attempt: %q, %v", r.text, r.err)
	}
}

func TestServerErrorThenSuccess(t *testing.T) {
	var b sse
	b.messageStart(10, 0, 0).textBlock(0, "recovered").messageEnd("end_turn", 2)
	s := newServer(t,
		reply{status: 500, body: `{"type":"error","error":{"type":"api_error","message":"boom"}}`},
		reply{body: b.String()})
	p := newProvider(t, s)
	r := collect(t.Context(), p, simpleRequest())
	e := wantKind(t, r.err, llm.KindServer, true)
	if e.StatusCode != 500 || e.RetryAfter != 0 {
		t.Errorf("error = %+v", e)
	}
	if n := s.count(); n != 1 {
		t.Fatalf("server got %d requests; the SDK must not retry", n)
	}
	r = collect(t.Context(), p, simpleRequest())
	if r.err != nil || r.text != "recovered" {
		t.Fatalf("second attempt: %q, %v", r.text, r.err)
	}
}

func TestHTTPErrorKinds(t *testing.T) {
	for _, tc := range []struct {
		status    int
		kind      string
		retryable bool
	}{
		{400, llm.KindBadRequest, false},
		{401, llm.KindAuth, false},
		{403, llm.KindAuth, false},
		{529, llm.KindServer, true},
	} {
		t.Run(fmt.Sprint(tc.status), func(t *testing.T) {
			s := newServer(t, reply{status: tc.status, header: http.Header{"Retry-After-Ms": {"1500"}},
				body: `{"type":"error","error":{"type":"x","message":"no"}}`})
			r := collect(t.Context(), newProvider(t, s), simpleRequest())
			e := wantKind(t, r.err, tc.kind, tc.retryable)
			if e.StatusCode != tc.status || e.RetryAfter != 1500*time.Millisecond {
				t.Errorf("error = %+v", e)
			}
		})
	}
}

func TestMalformedChunk(t *testing.T) {
	var b sse
	b.messageStart(10, 0, 0).textBlock(0, "before")
	b.event("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"x"`)
	b.messageEnd("end_turn", 2)
	s := newServer(t, reply{body: b.String()})
	r := collect(t.Context(), newProvider(t, s), simpleRequest())
	wantKind(t, r.err, llm.KindMalformed, false)
	if r.text != "before" {
		t.Errorf("text = %q", r.text)
	}
}

func TestErrorEvent(t *testing.T) {
	for _, tc := range []struct {
		typ       string
		kind      string
		retryable bool
	}{
		{"overloaded_error", llm.KindServer, true},
		{"api_error", llm.KindServer, true},
		{"rate_limit_error", llm.KindRateLimited, true},
		{"invalid_request_error", llm.KindBadRequest, false},
	} {
		t.Run(tc.typ, func(t *testing.T) {
			var b sse
			b.messageStart(10, 0, 0).textBlock(0, "a")
			b.event("error", obj{"type": "error", "error": obj{"type": tc.typ, "message": "Overloaded"}})
			s := newServer(t, reply{body: b.String()})
			r := collect(t.Context(), newProvider(t, s), simpleRequest())
			e := wantKind(t, r.err, tc.kind, tc.retryable)
			if !strings.Contains(e.Error(), tc.typ) || !strings.Contains(e.Error(), "Overloaded") {
				t.Errorf("error text %q", e.Error())
			}
		})
	}
}

func TestConnectionError(t *testing.T) {
	s := newServer(t, reply{})
	p := newProvider(t, s)
	s.Close()
	r := collect(t.Context(), p, simpleRequest())
	wantKind(t, r.err, llm.KindConnection, true)
}

func TestContextCancel(t *testing.T) {
	var b sse
	b.messageStart(10, 0, 0)
	b.event("content_block_start", obj{"type": "content_block_start", "index": 0, "content_block": obj{"type": "text", "text": ""}})
	b.event("content_block_delta", obj{"type": "content_block_delta", "index": 0, "delta": obj{"type": "text_delta", "text": "waiting"}})
	s := newServer(t, reply{body: b.String(), waitCtx: true})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var err error
	for ev, e := range newProvider(t, s).Stream(ctx, simpleRequest()) {
		if e != nil {
			err = e
			break
		}
		if ev.Text != "" {
			cancel()
		}
	}
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if _, ok := llm.AsError(err); ok {
		t.Errorf("cancellation is not a provider error: %v", err)
	}
}

func TestBreakClosesStream(t *testing.T) {
	var b sse
	b.messageStart(10, 0, 0).textBlock(0, "a", "b", "c")
	s := newServer(t, reply{body: b.String(), waitCtx: true})
	for ev, err := range newProvider(t, s).Stream(t.Context(), simpleRequest()) {
		if err != nil {
			t.Fatal(err)
		}
		if ev.Text != "" {
			break // the handler unblocks only if the body is closed
		}
	}
}

func TestThinking(t *testing.T) {
	var b sse
	b.messageStart(10, 0, 0)
	b.event("content_block_start", obj{"type": "content_block_start", "index": 0, "content_block": obj{"type": "thinking", "thinking": "", "signature": ""}})
	for _, part := range []string{"Let me ", "think."} {
		b.event("content_block_delta", obj{"type": "content_block_delta", "index": 0, "delta": obj{"type": "thinking_delta", "thinking": part}})
	}
	b.event("content_block_delta", obj{"type": "content_block_delta", "index": 0, "delta": obj{"type": "signature_delta", "signature": "sig=="}})
	b.event("content_block_stop", obj{"type": "content_block_stop", "index": 0})
	b.event("content_block_start", obj{"type": "content_block_start", "index": 1, "content_block": obj{"type": "redacted_thinking", "data": "opaque"}})
	b.event("content_block_stop", obj{"type": "content_block_stop", "index": 1})
	b.toolBlock(2, "toolu_1", "ls", `{}`).messageEnd("tool_use", 20)
	s := newServer(t, reply{body: b.String()})
	p := newProvider(t, s, func(c *anthropic.Config) { c.ThinkingBudget = 2048 })
	r := collect(t.Context(), p, simpleRequest())
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.reasoning != "Let me think." {
		t.Errorf("reasoning = %q", r.reasoning)
	}
	if r.finish == nil || r.finish.ProviderState == nil {
		t.Fatalf("finish = %+v, want provider state", r.finish)
	}
	if req := s.request(t, 0); fmt.Sprint(req["thinking"]) != "map[budget_tokens:2048 type:enabled]" {
		t.Errorf("thinking = %v", req["thinking"])
	}

	// Replay: the thinking blocks go back first, with their signature.
	next := &llm.Request{Model: "claude-test", Messages: []llm.Message{
		{Role: llm.RoleUser, Content: "hi"},
		{Role: llm.RoleAssistant, Reasoning: r.reasoning, ToolCalls: r.calls, ProviderState: r.finish.ProviderState},
		{Role: llm.RoleTool, ToolCallID: "toolu_1", ToolName: "ls", Content: "a b"},
	}}
	if r := collect(t.Context(), p, next); r.err != nil {
		t.Fatal(r.err)
	}
	msgs := s.request(t, 1)["messages"].([]any)
	content := msgs[1].(map[string]any)["content"].([]any)
	got, _ := json.Marshal(content)
	want := `[{"signature":"sig==","thinking":"Let me think.","type":"thinking"},{"data":"opaque","type":"redacted_thinking"},{"id":"toolu_1","input":{},"name":"ls","type":"tool_use"}]`
	if string(got) != want {
		t.Errorf("assistant content =\n%s\nwant\n%s", got, want)
	}

	// State from another provider is ignored.
	next.Messages[1].ProviderState = json.RawMessage(`{"encrypted":"xyz"}`)
	if r := collect(t.Context(), p, next); r.err != nil {
		t.Fatal(r.err)
	}
	content = s.request(t, 2)["messages"].([]any)[1].(map[string]any)["content"].([]any)
	if len(content) != 1 {
		t.Errorf("foreign state produced blocks: %v", content)
	}
}

func TestRequestBody(t *testing.T) {
	// The SDK's environment defaults must stay off.
	t.Setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:1")
	t.Setenv("ANTHROPIC_API_KEY", "sk-from-env")
	t.Setenv("ANTHROPIC_CUSTOM_HEADERS", "X-From-Env: yes")

	var b sse
	b.messageStart(1, 0, 0).textBlock(0, "ok").messageEnd("end_turn", 1)
	s := newServer(t, reply{body: b.String()})
	p := newProvider(t, s, func(c *anthropic.Config) {
		c.Headers = http.Header{"Anthropic-Beta": {"test-beta"}}
	})
	temp := 0.5
	req := &llm.Request{
		Model:       "claude-test",
		System:      "You are terse.",
		Temperature: &temp,
		Tools: []llm.ToolSpec{{
			Name: "read", Description: "Read a file.",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"],"additionalProperties":false}`),
		}, {Name: "now"}},
		Messages: []llm.Message{
			{Role: llm.RoleUser, Content: "read a and b"},
			{Role: llm.RoleAssistant, Content: "Reading.", ToolCalls: []event.ToolCall{
				{ID: "t1", Name: "read", Arguments: `{"path":"a"}`},
				{ID: "t2", Name: "read", Arguments: `{"path": "b"`}, // broken JSON from the model
				{ID: "t3", Name: "now"},
			}},
			{Role: llm.RoleTool, ToolCallID: "t1", ToolName: "read", Content: "A"},
			{Role: llm.RoleTool, ToolCallID: "t2", ToolName: "read", Content: "invalid arguments", IsError: true},
			{Role: llm.RoleTool, ToolCallID: "t3", ToolName: "now"},
			{Role: llm.RoleUser, Content: "also: hurry"},
		},
	}
	if r := collect(t.Context(), p, req); r.err != nil {
		t.Fatal(r.err)
	}
	got, _ := json.Marshal(s.request(t, 0))
	want := `{"max_tokens":8192,` +
		`"messages":[` +
		`{"content":[{"text":"read a and b","type":"text"}],"role":"user"},` +
		`{"content":[{"text":"Reading.","type":"text"},` +
		`{"id":"t1","input":{"path":"a"},"name":"read","type":"tool_use"},` +
		`{"id":"t2","input":{"_raw":"{\"path\": \"b\""},"name":"read","type":"tool_use"},` +
		`{"id":"t3","input":{},"name":"now","type":"tool_use"}],"role":"assistant"},` +
		`{"content":[{"content":[{"text":"A","type":"text"}],"tool_use_id":"t1","type":"tool_result"},` +
		`{"content":[{"text":"invalid arguments","type":"text"}],"is_error":true,"tool_use_id":"t2","type":"tool_result"},` +
		`{"tool_use_id":"t3","type":"tool_result"},` +
		`{"text":"also: hurry","type":"text"}],"role":"user"}],` +
		`"model":"claude-test","stream":true,` +
		`"system":[{"text":"You are terse.","type":"text"}],` +
		`"temperature":0.5,` +
		`"tools":[{"description":"Read a file.","input_schema":{"additionalProperties":false,"properties":{"path":{"type":"string"}},"required":["path"],"type":"object"},"name":"read"},` +
		`{"input_schema":{"type":"object"},"name":"now"}]}`
	if string(got) != want {
		t.Errorf("request body =\n%s\nwant\n%s", got, want)
	}
	h := s.headers[0]
	if h.Get("Authorization") != "Bearer sk-test" || h.Get("Anthropic-Beta") != "test-beta" || h.Get("X-From-Env") != "" {
		t.Errorf("headers = %v", h)
	}
}

func TestRequestMaxTokens(t *testing.T) {
	var b sse
	b.messageStart(1, 0, 0).textBlock(0, "ok").messageEnd("end_turn", 1)
	s := newServer(t, reply{body: b.String()})
	p := newProvider(t, s, func(c *anthropic.Config) { c.MaxTokens = 1000 })
	if r := collect(t.Context(), p, simpleRequest()); r.err != nil {
		t.Fatal(r.err)
	}
	req := simpleRequest()
	req.MaxTokens = 77
	if r := collect(t.Context(), p, req); r.err != nil {
		t.Fatal(r.err)
	}
	if a, b := s.request(t, 0)["max_tokens"], s.request(t, 1)["max_tokens"]; a != 1000.0 || b != 77.0 {
		t.Errorf("max_tokens = %v, %v; want 1000, 77", a, b)
	}
}

func TestBadRequestBeforeSending(t *testing.T) {
	s := newServer(t, reply{})
	p := newProvider(t, s)
	for name, req := range map[string]*llm.Request{
		"no model":     {Messages: []llm.Message{{Role: llm.RoleUser, Content: "x"}}},
		"unknown role": {Model: "m", Messages: []llm.Message{{Role: "system", Content: "x"}}},
		"bad schema":   {Model: "m", Tools: []llm.ToolSpec{{Name: "t", InputSchema: json.RawMessage(`{`)}}},
	} {
		r := collect(t.Context(), p, req)
		if e, ok := llm.AsError(r.err); !ok || e.Kind != llm.KindBadRequest || e.Retryable {
			t.Errorf("%s: err = %v", name, r.err)
		}
	}
	if n := s.count(); n != 0 {
		t.Errorf("sent %d requests", n)
	}
}

func TestNewValidates(t *testing.T) {
	for name, cfg := range map[string]anthropic.Config{
		"no key":              {},
		"negative max tokens": {APIKey: "k", MaxTokens: -1},
		"budget too large":    {APIKey: "k", ThinkingBudget: 8192},
		"both thinking modes": {APIKey: "k", ThinkingBudget: 1024, AdaptiveThinking: true},
	} {
		if _, err := anthropic.New(cfg); err == nil {
			t.Errorf("%s: New succeeded", name)
		}
	}
	if _, err := anthropic.New(anthropic.Config{Headers: http.Header{"X-Api-Key": {"k"}}}); err != nil {
		t.Errorf("key in headers: %v", err)
	}
}

func BenchmarkStream1000Tokens(b *testing.B) {
	var body sse
	body.messageStart(100, 0, 0)
	parts := make([]string, 1000)
	for i := range parts {
		parts[i] = " tok"
	}
	body.textBlock(0, parts...).messageEnd("end_turn", 1000)
	s := newServer(b, reply{body: body.String()})
	p := newProvider(b, s)
	req := simpleRequest()
	ctx := context.Background()
	b.ReportAllocs()
	b.SetBytes(int64(body.Len()))
	for b.Loop() {
		n := 0
		for ev, err := range p.Stream(ctx, req) {
			if err != nil {
				b.Fatal(err)
			}
			if ev.Text != "" {
				n++
			}
		}
		if n != 1000 {
			b.Fatalf("%d text events", n)
		}
	}
}

// TestContextOverflow: Anthropic's "prompt is too long" (HTTP 400, or an
// error event) is the kind context_overflow, on which the loop compacts.
func TestContextOverflow(t *testing.T) {
	s := newServer(t, reply{status: 400,
		body: `{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 215402 tokens > 200000 maximum"}}`})
	r := collect(t.Context(), newProvider(t, s), simpleRequest())
	wantKind(t, r.err, llm.KindContextOverflow, false)

	var b sse
	b.messageStart(10, 0, 0)
	b.event("error", obj{"type": "error", "error": obj{"type": "invalid_request_error", "message": "prompt is too long: 215402 tokens > 200000 maximum"}})
	s = newServer(t, reply{body: b.String()})
	r = collect(t.Context(), newProvider(t, s), simpleRequest())
	wantKind(t, r.err, llm.KindContextOverflow, false)
}
