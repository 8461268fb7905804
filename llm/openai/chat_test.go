package openai

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"weft.dev/weft/event"
	"weft.dev/weft/llm"
)

// chunk formats a chat.completion.chunk with one choice.
func chunk(delta string, finish string) string {
	fr := "null"
	if finish != "" {
		fr = `"` + finish + `"`
	}
	return sse("", `{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":`+delta+`,"finish_reason":`+fr+`}],"usage":null}`)
}

func textChunk(s string) string { return chunk(`{"content":`+mustJSON(s)+`}`, "") }

// toolChunk formats a tool-call fragment; args is the raw content of the
// JSON string (already escaped).
func toolChunk(index int, id, name, args string) string {
	tc := `{"index":` + mustJSON(index)
	if id != "" {
		tc += `,"id":` + mustJSON(id) + `,"type":"function"`
	}
	tc += `,"function":{`
	if name != "" {
		tc += `"name":` + mustJSON(name) + `,`
	}
	tc += `"arguments":"` + args + `"}}`
	return chunk(`{"tool_calls":[`+tc+`]}`, "")
}

const chatUsage = "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[]," +
	"\"usage\":{\"prompt_tokens\":11,\"completion_tokens\":7,\"total_tokens\":18," +
	"\"prompt_tokens_details\":{\"cached_tokens\":4},\"completion_tokens_details\":{\"reasoning_tokens\":3}}}\n\n"

const chatDone = "data: [DONE]\n\n"

func newChat(t testing.TB, s *server) *Chat {
	t.Helper()
	p, err := NewChat(s.config())
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func simpleRequest() *llm.Request {
	return &llm.Request{Model: "m", Messages: []llm.Message{{Role: llm.RoleUser, Content: "hi"}}}
}

func TestChatText(t *testing.T) {
	s := newServer(t, reply{parts: []string{
		chunk(`{"role":"assistant","content":""}`, ""),
		textChunk("Hel"), textChunk("lo, "), textChunk("wörld"),
		chunk(`{}`, "stop"), chatUsage, chatDone,
	}})
	r := collect(t, newChat(t, s).Stream(ctxT(t), simpleRequest()))
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.text != "Hello, wörld" {
		t.Errorf("text = %q", r.text)
	}
	want := event.TokenUsage{InputTokens: 11, OutputTokens: 7, CacheReadTokens: 4, ReasoningTokens: 3}
	if r.usage == nil || *r.usage != want {
		t.Errorf("usage = %+v, want %+v", r.usage, want)
	}
	if r.finish.Reason != llm.FinishStop || r.finish.ProviderState != nil {
		t.Errorf("finish = %+v", r.finish)
	}
	// Usage comes just before Finish.
	if n := len(r.events); n < 2 || r.events[n-2].Usage == nil {
		t.Errorf("usage is not the second-to-last event: %+v", r.events)
	}
}

func TestChatFinishWithoutDone(t *testing.T) {
	// Some servers close the stream after the finish_reason without [DONE].
	s := newServer(t, reply{parts: []string{textChunk("ok"), chunk(`{}`, "length")}})
	r := collect(t, newChat(t, s).Stream(ctxT(t), simpleRequest()))
	if r.err != nil || r.finish.Reason != llm.FinishLength {
		t.Fatalf("got %+v, %v", r.finish, r.err)
	}
}

func TestChatToolCallSplitUTF8(t *testing.T) {
	for _, escaped := range []bool{false, true} {
		t.Run(map[bool]string{false: "bytes", true: "escaped"}[escaped], func(t *testing.T) {
			frags := argFragments(escaped)
			parts := []string{toolChunk(0, "call_1", "weather", frags[0])}
			for _, f := range frags[1:] {
				parts = append(parts, toolChunk(0, "", "", f))
			}
			parts = append(parts, chunk(`{}`, "tool_calls"), chatDone)
			s := newServer(t, reply{parts: parts})
			r := collect(t, newChat(t, s).Stream(ctxT(t), simpleRequest()))
			if r.err != nil {
				t.Fatal(r.err)
			}
			want := []event.ToolCall{{ID: "call_1", Name: "weather", Arguments: splitArgs}}
			if len(r.calls) != 1 || r.calls[0] != want[0] {
				t.Errorf("calls = %q, want %q", r.calls, want)
			}
			if r.finish.Reason != llm.FinishToolCalls {
				t.Errorf("finish = %q", r.finish.Reason)
			}
		})
	}
}

func TestChatParallelToolCalls(t *testing.T) {
	s := newServer(t, reply{parts: []string{
		toolChunk(0, "call_a", "read", `{\"path\":`),
		toolChunk(1, "call_b", "list", ``),
		toolChunk(0, "", "", `\"a.txt\"}`),
		toolChunk(1, "", "", `{\"dir\":\"/\"}`),
		// Ollama-style: a whole call in one fragment.
		toolChunk(2, "call_c", "noop", `{}`),
		chunk(`{}`, "tool_calls"), chatUsage, chatDone,
	}})
	r := collect(t, newChat(t, s).Stream(ctxT(t), simpleRequest()))
	if r.err != nil {
		t.Fatal(r.err)
	}
	want := []event.ToolCall{
		{ID: "call_a", Name: "read", Arguments: `{"path":"a.txt"}`},
		{ID: "call_b", Name: "list", Arguments: `{"dir":"/"}`},
		{ID: "call_c", Name: "noop", Arguments: `{}`},
	}
	if len(r.calls) != len(want) {
		t.Fatalf("calls = %q", r.calls)
	}
	for i := range want {
		if r.calls[i] != want[i] {
			t.Errorf("call %d = %q, want %q", i, r.calls[i], want[i])
		}
	}
	// The first fragment of each call carries its ID and name.
	seen := map[int]bool{}
	for _, ev := range r.events {
		if tc := ev.ToolCall; tc != nil && !seen[tc.Index] {
			seen[tc.Index] = true
			if tc.ID == "" || tc.Name == "" {
				t.Errorf("first fragment of call %d lacks ID or name: %+v", tc.Index, tc)
			}
		}
	}
}

func TestChatArgumentsAsObject(t *testing.T) {
	s := newServer(t, reply{parts: []string{
		chunk(`{"tool_calls":[{"index":0,"id":"c","type":"function","function":{"name":"f","arguments":{"a":"é"}}}]}`, ""),
		chunk(`{}`, "tool_calls"), chatDone}})
	r := collect(t, newChat(t, s).Stream(ctxT(t), simpleRequest()))
	if r.err != nil || len(r.calls) != 1 || r.calls[0].Arguments != `{"a":"é"}` {
		t.Fatalf("calls %q err %v", r.calls, r.err)
	}
}

func TestChatStopWithToolCallsMeansToolCalls(t *testing.T) {
	s := newServer(t, reply{parts: []string{toolChunk(0, "c", "f", `{}`), chunk(`{}`, "stop"), chatDone}})
	r := collect(t, newChat(t, s).Stream(ctxT(t), simpleRequest()))
	if r.err != nil || r.finish.Reason != llm.FinishToolCalls {
		t.Fatalf("got %+v, %v", r.finish, r.err)
	}
}

func TestChatReasoning(t *testing.T) {
	s := newServer(t, reply{parts: []string{
		chunk(`{"reasoning_content":"Let me "}`, ""),       // DeepSeek, older vLLM
		chunk(`{"reasoning":"think.","content":null}`, ""), // OpenRouter, newer vLLM
		chunk(`{"reasoning_content":" Done.","reasoning":" Done."}`, ""),
		textChunk("Answer"),
		chunk(`{}`, "stop"), chatDone,
	}})
	r := collect(t, newChat(t, s).Stream(ctxT(t), simpleRequest()))
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.reasoning != "Let me think. Done." || r.text != "Answer" {
		t.Errorf("reasoning %q, text %q", r.reasoning, r.text)
	}
	if r.events[0].Reasoning == "" {
		t.Errorf("first event %+v is not reasoning", r.events[0])
	}
}

func TestChatStreamCut(t *testing.T) {
	for _, tc := range []struct {
		name string
		rep  reply
	}{
		{"clean-eof", reply{parts: []string{textChunk("Hel"), textChunk("lo")}}},
		{"done-without-finish", reply{parts: []string{textChunk("Hel"), chatDone}}},
		{"connection-dropped", reply{parts: []string{textChunk("Hel"), "data: {\"choi"}, abort: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newServer(t, tc.rep)
			r := collect(t, newChat(t, s).Stream(ctxT(t), simpleRequest()))
			wantError(t, r.err, "openai-chat", llm.KindStreamCut, true)
			if r.text != "Hel" && r.text != "Hello" {
				t.Errorf("text before the cut = %q", r.text)
			}
		})
	}
}

func TestChatMalformedChunk(t *testing.T) {
	s := newServer(t, reply{parts: []string{textChunk("a"), "data: {\"choices\":[{\"delta\":{\"content\":\"b\"}\n\n", chunk(`{}`, "stop"), chatDone}})
	r := collect(t, newChat(t, s).Stream(ctxT(t), simpleRequest()))
	wantError(t, r.err, "openai-chat", llm.KindMalformed, false)
	if r.text != "a" {
		t.Errorf("text = %q", r.text)
	}
}

func TestChatErrorInStream(t *testing.T) {
	s := newServer(t, reply{parts: []string{textChunk("a"),
		sse("", `{"error":{"message":"context too long","type":"BadRequestError","code":400}}`)}})
	r := collect(t, newChat(t, s).Stream(ctxT(t), simpleRequest()))
	e := wantError(t, r.err, "openai-chat", llm.KindBadRequest, false)
	if !strings.Contains(e.Error(), "context too long") {
		t.Errorf("error %q lacks the server's message", e)
	}
}

func TestChatRateLimitThenSuccess(t *testing.T) {
	s := newServer(t,
		reply{status: 429, header: map[string]string{"Content-Type": "application/json", "Retry-After": "2"},
			parts: []string{`{"error":{"message":"Rate limit reached for m","type":"requests","code":"rate_limit_exceeded"}}`}},
		reply{parts: []string{textChunk("ok"), chunk(`{}`, "stop"), chatDone}},
	)
	p := newChat(t, s)
	r := collect(t, p.Stream(ctxT(t), simpleRequest()))
	e := wantError(t, r.err, "openai-chat", llm.KindRateLimited, true)
	if e.StatusCode != 429 || e.RetryAfter != 2*time.Second {
		t.Errorf("status %d retryAfter %v", e.StatusCode, e.RetryAfter)
	}
	if !strings.Contains(e.Error(), "Rate limit reached for m") {
		t.Errorf("error %q lacks the server's message", e)
	}
	if len(r.events) != 0 {
		t.Errorf("events before the error: %+v", r.events)
	}
	r = collect(t, p.Stream(ctxT(t), simpleRequest()))
	if r.err != nil || r.text != "ok" {
		t.Fatalf("second call: %q, %v", r.text, r.err)
	}
	if n := len(s.requests()); n != 2 {
		t.Errorf("server saw %d requests, want 2 (the SDK must not retry)", n)
	}
}

func TestChatServerErrorThenSuccess(t *testing.T) {
	s := newServer(t,
		// vLLM's error body, which the SDK cannot decode; retry-after-ms.
		reply{status: 500, header: map[string]string{"Content-Type": "application/json", "retry-after-ms": "1500"},
			parts: []string{`{"object":"error","message":"engine died","type":"InternalServerError","code":500}`}},
		reply{parts: []string{textChunk("ok"), chunk(`{}`, "stop"), chatDone}},
	)
	p := newChat(t, s)
	r := collect(t, p.Stream(ctxT(t), simpleRequest()))
	e := wantError(t, r.err, "openai-chat", llm.KindServer, true)
	if e.StatusCode != 500 || e.RetryAfter != 1500*time.Millisecond || !strings.Contains(e.Error(), "engine died") {
		t.Errorf("error %v: status %d retryAfter %v", e, e.StatusCode, e.RetryAfter)
	}
	r = collect(t, p.Stream(ctxT(t), simpleRequest()))
	if r.err != nil || r.text != "ok" {
		t.Fatalf("second call: %q, %v", r.text, r.err)
	}
}

func TestChatHTTPErrors(t *testing.T) {
	for _, tc := range []struct {
		status    int
		body      string
		kind      string
		retryable bool
		msg       string
	}{
		{401, `{"error":{"message":"Incorrect API key provided","code":"invalid_api_key"}}`, llm.KindAuth, false, "Incorrect API key"},
		{400, `<html>bad gateway config</html>`, llm.KindBadRequest, false, "bad gateway config"},
		{503, ``, llm.KindServer, true, "503"},
	} {
		s := newServer(t, reply{status: tc.status, parts: []string{tc.body}})
		r := collect(t, newChat(t, s).Stream(ctxT(t), simpleRequest()))
		e := wantError(t, r.err, "openai-chat", tc.kind, tc.retryable)
		if !strings.Contains(e.Error(), tc.msg) {
			t.Errorf("%d: error %q lacks %q", tc.status, e, tc.msg)
		}
	}
}

func TestChatConnectionError(t *testing.T) {
	s := newServer(t)
	cfg := s.config()
	s.srv.Close()
	p, err := NewChat(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r := collect(t, p.Stream(ctxT(t), simpleRequest()))
	wantError(t, r.err, "openai-chat", llm.KindConnection, true)
}

func TestChatJSONInsteadOfStream(t *testing.T) {
	s := newServer(t, reply{status: 200, header: map[string]string{"Content-Type": "application/json"},
		parts: []string{`{"id":"x","object":"chat.completion","choices":[]}`}})
	r := collect(t, newChat(t, s).Stream(ctxT(t), simpleRequest()))
	wantError(t, r.err, "openai-chat", llm.KindMalformed, false)
}

func TestChatRequestBody(t *testing.T) {
	s := newServer(t, reply{parts: []string{textChunk("ok"), chunk(`{}`, "stop"), chatDone}})
	cfg := s.config()
	cfg.Headers = map[string]string{"HTTP-Referer": "https://weft.dev"}
	cfg.Organization = "org-1"
	cfg.ReasoningEffort = "low"
	cfg.ReasoningReplayField = "reasoning_content"
	cfg.ExtraBody = json.RawMessage(`{"chat_template_kwargs":{"enable_thinking":true},"top_k":20}`)
	p, err := NewChat(cfg)
	if err != nil {
		t.Fatal(err)
	}
	temp := 0.5
	req := &llm.Request{
		Model:  "qwen3",
		System: "Be brief.",
		Messages: []llm.Message{
			{Role: llm.RoleUser, Content: "List /tmp"},
			{Role: llm.RoleAssistant, Content: "Listing.", Reasoning: "User wants a listing.",
				ToolCalls: []event.ToolCall{{ID: "call_1", Name: "ls", Arguments: `{"dir":"/tmp"}`}}},
			{Role: llm.RoleTool, ToolCallID: "call_1", ToolName: "ls", Content: "a.txt\nb.txt"},
		},
		Tools: []llm.ToolSpec{{Name: "ls", Description: "List a directory.",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"dir":{"type":"string","maxLength":9007199254740993}},"required":["dir"]}`)}},
		MaxTokens:   256,
		Temperature: &temp,
	}
	if r := collect(t, p.Stream(ctxT(t), req)); r.err != nil {
		t.Fatal(r.err)
	}
	got := s.requests()[0]
	if got.path != "/v1/chat/completions" {
		t.Errorf("path = %q", got.path)
	}
	for h, want := range map[string]string{"Authorization": "Bearer sk-test", "Http-Referer": "https://weft.dev", "Openai-Organization": "org-1"} {
		if v := got.header.Get(h); v != want {
			t.Errorf("header %s = %q, want %q", h, v, want)
		}
	}
	var body struct {
		Model               string          `json:"model"`
		Stream              bool            `json:"stream"`
		StreamOptions       map[string]any  `json:"stream_options"`
		MaxTokens           int             `json:"max_tokens"`
		Temperature         float64         `json:"temperature"`
		ReasoningEffort     string          `json:"reasoning_effort"`
		Messages            json.RawMessage `json:"messages"`
		Tools               json.RawMessage `json:"tools"`
		ChatTemplateKwargs  map[string]any  `json:"chat_template_kwargs"`
		TopK                int             `json:"top_k"`
		MaxCompletionTokens *int            `json:"max_completion_tokens"`
	}
	if err := json.Unmarshal(got.raw, &body); err != nil {
		t.Fatal(err)
	}
	if body.Model != "qwen3" || !body.Stream || body.StreamOptions["include_usage"] != true ||
		body.MaxTokens != 256 || body.MaxCompletionTokens != nil || body.Temperature != 0.5 ||
		body.ReasoningEffort != "low" || body.ChatTemplateKwargs["enable_thinking"] != true || body.TopK != 20 {
		t.Errorf("body = %s", got.raw)
	}
	assertJSON(t, "messages", body.Messages, `[
		{"role":"system","content":"Be brief."},
		{"role":"user","content":"List /tmp"},
		{"role":"assistant","content":"Listing.","reasoning_content":"User wants a listing.",
		 "tool_calls":[{"id":"call_1","type":"function","function":{"name":"ls","arguments":"{\"dir\":\"/tmp\"}"}}]},
		{"role":"tool","tool_call_id":"call_1","content":"a.txt\nb.txt"}]`)
	assertJSON(t, "tools", body.Tools, `[{"type":"function","function":{"name":"ls","description":"List a directory.",
		"parameters":{"type":"object","properties":{"dir":{"type":"string","maxLength":9007199254740993}},"required":["dir"]}}}]`)
	if strings.Contains(string(body.Tools), "strict") {
		t.Errorf("tools force strict mode: %s", body.Tools)
	}
	if !strings.Contains(string(body.Tools), "9007199254740993") {
		t.Errorf("schema numbers were re-encoded: %s", body.Tools)
	}
}

func TestChatMaxCompletionTokens(t *testing.T) {
	s := newServer(t, reply{parts: []string{textChunk("ok"), chunk(`{}`, "stop"), chatDone}})
	cfg := s.config()
	cfg.MaxTokensField = "max_completion_tokens"
	p, err := NewChat(cfg)
	if err != nil {
		t.Fatal(err)
	}
	req := simpleRequest()
	req.MaxTokens = 9
	if r := collect(t, p.Stream(ctxT(t), req)); r.err != nil {
		t.Fatal(r.err)
	}
	b := s.requests()[0].body
	if b["max_completion_tokens"] != 9.0 || b["max_tokens"] != nil {
		t.Errorf("body = %s", s.requests()[0].raw)
	}
}

func TestChatCancelMidStream(t *testing.T) {
	s := newServer(t, reply{parts: []string{textChunk("a")}, hold: true})
	ctx, cancel := context.WithCancel(ctxT(t))
	defer cancel()
	var gotErr error
	start := time.Now()
	for ev, err := range newChat(t, s).Stream(ctx, simpleRequest()) {
		if err != nil {
			gotErr = err
			break
		}
		if ev.Text == "a" {
			cancel()
		}
	}
	if !errors.Is(gotErr, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", gotErr)
	}
	if _, ok := llm.AsError(gotErr); ok {
		t.Errorf("cancellation is an *llm.Error: %v", gotErr)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("cancellation took %v", d)
	}
}

func TestChatBreakClosesBody(t *testing.T) {
	gone := make(chan struct{})
	s := newServer(t, reply{parts: []string{textChunk("a"), textChunk("b")}, hold: true, gone: gone})
	for ev, err := range newChat(t, s).Stream(ctxT(t), simpleRequest()) {
		if err != nil {
			t.Fatal(err)
		}
		if ev.Text != "" {
			break
		}
	}
	select {
	case <-gone:
	case <-time.After(10 * time.Second):
		t.Fatal("the server did not see the client go away after break")
	}
}

func TestChatRequestValidation(t *testing.T) {
	s := newServer(t)
	p := newChat(t, s)
	for _, req := range []*llm.Request{
		nil,
		{Model: "m", Messages: []llm.Message{{Role: "robot"}}},
		{Model: "m", Messages: []llm.Message{{Role: llm.RoleTool, Content: "x"}}},
		{Model: "m", Tools: []llm.ToolSpec{{Name: "t", InputSchema: json.RawMessage(`[1]`)}}},
	} {
		r := collect(t, p.Stream(ctxT(t), req))
		wantError(t, r.err, "openai-chat", llm.KindBadRequest, false)
	}
	if n := len(s.requests()); n != 0 {
		t.Errorf("invalid requests reached the server: %d", n)
	}
}

// assertJSON compares JSON values semantically.
func assertJSON(t testing.TB, what string, got json.RawMessage, want string) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("%s: %v in %s", what, err, got)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("%s: bad want: %v", what, err)
	}
	if mustJSON(g) != mustJSON(w) {
		t.Errorf("%s =\n%s\nwant\n%s", what, mustJSON(g), mustJSON(w))
	}
}

// TestChatContextOverflow: OpenAI's context_length_exceeded, and the
// wording of OpenAI-compatible servers, are the kind context_overflow.
func TestChatContextOverflow(t *testing.T) {
	for _, body := range []string{
		`{"error":{"message":"This model's maximum context length is 128000 tokens. However, your messages resulted in 130000 tokens.","type":"invalid_request_error","code":"context_length_exceeded"}}`,
		`{"object":"error","message":"This model's maximum context length is 8192 tokens. However, you requested 9000 tokens","code":400}`,
	} {
		s := newServer(t, reply{status: 400, parts: []string{body}})
		r := collect(t, newChat(t, s).Stream(ctxT(t), simpleRequest()))
		wantError(t, r.err, "openai-chat", llm.KindContextOverflow, false)
	}
	if e := codeError("openai", "context_length_exceeded", errors.New("too long")); e.Kind != llm.KindContextOverflow {
		t.Errorf("error code context_length_exceeded in a stream: %s", e.Kind)
	}
}
