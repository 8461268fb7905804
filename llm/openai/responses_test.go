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

// rev formats a Responses stream event; fields is the JSON object's
// members after "type".
func rev(typ, fields string) string {
	data := `{"type":"` + typ + `"`
	if fields != "" {
		data += "," + fields
	}
	return sse(typ, data+`}`)
}

func respCreated() string {
	return rev("response.created", `"sequence_number":0,"response":{"id":"resp_1","object":"response","status":"in_progress","output":[]}`)
}

func textDelta(s string) string {
	return rev("response.output_text.delta", `"item_id":"msg_1","output_index":0,"content_index":0,"delta":`+mustJSON(s))
}

const respUsage = `"usage":{"input_tokens":20,"input_tokens_details":{"cached_tokens":8},"output_tokens":12,"output_tokens_details":{"reasoning_tokens":5},"total_tokens":32}`

func respCompleted() string {
	return rev("response.completed", `"response":{"id":"resp_1","object":"response","status":"completed","output":[],`+respUsage+`}`)
}

func fnAdded(outIdx int, callID, name string) string {
	return rev("response.output_item.added", `"output_index":`+mustJSON(outIdx)+
		`,"item":{"type":"function_call","id":"fc_`+callID+`","call_id":"`+callID+`","name":"`+name+`","arguments":"","status":"in_progress"}`)
}

// fnArgs: args is the raw content of the JSON string (already escaped).
func fnArgs(outIdx int, args string) string {
	return rev("response.function_call_arguments.delta", `"item_id":"x","output_index":`+mustJSON(outIdx)+`,"delta":"`+args+`"`)
}

func fnDone(outIdx int, callID, name, args string) string {
	return rev("response.output_item.done", `"output_index":`+mustJSON(outIdx)+
		`,"item":{"type":"function_call","id":"fc_`+callID+`","call_id":"`+callID+`","name":"`+name+`","arguments":`+mustJSON(args)+`,"status":"completed"}`)
}

func newResponses(t testing.TB, s *server, mod ...func(*Config)) *Responses {
	t.Helper()
	cfg := s.config()
	for _, m := range mod {
		m(&cfg)
	}
	p, err := NewResponses(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestResponsesText(t *testing.T) {
	s := newServer(t, reply{parts: []string{
		respCreated(),
		rev("response.output_item.added", `"output_index":0,"item":{"type":"message","id":"msg_1","role":"assistant","content":[]}`),
		textDelta("Hel"), textDelta("lo, "), textDelta("wörld"),
		rev("response.output_text.done", `"output_index":0,"text":"Hello, wörld"`),
		respCompleted(),
	}})
	r := collect(t, newResponses(t, s).Stream(ctxT(t), simpleRequest()))
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.text != "Hello, wörld" || r.finish.Reason != llm.FinishStop || r.finish.ProviderState != nil {
		t.Errorf("text %q finish %+v", r.text, r.finish)
	}
	want := event.TokenUsage{InputTokens: 20, OutputTokens: 12, CacheReadTokens: 8, ReasoningTokens: 5}
	if r.usage == nil || *r.usage != want {
		t.Errorf("usage = %+v, want %+v", r.usage, want)
	}
}

func TestResponsesToolCallSplitUTF8(t *testing.T) {
	for _, escaped := range []bool{false, true} {
		t.Run(map[bool]string{false: "bytes", true: "escaped"}[escaped], func(t *testing.T) {
			parts := []string{respCreated(), fnAdded(0, "call_1", "weather")}
			for _, f := range argFragments(escaped) {
				parts = append(parts, fnArgs(0, f))
			}
			parts = append(parts, fnDone(0, "call_1", "weather", splitArgs), respCompleted())
			s := newServer(t, reply{parts: parts})
			r := collect(t, newResponses(t, s).Stream(ctxT(t), simpleRequest()))
			if r.err != nil {
				t.Fatal(r.err)
			}
			want := event.ToolCall{ID: "call_1", Name: "weather", Arguments: splitArgs}
			if len(r.calls) != 1 || r.calls[0] != want {
				t.Errorf("calls = %q, want %q", r.calls, want)
			}
			if r.finish.Reason != llm.FinishToolCalls {
				t.Errorf("finish = %q", r.finish.Reason)
			}
		})
	}
}

func TestResponsesParallelToolCalls(t *testing.T) {
	s := newServer(t, reply{parts: []string{
		respCreated(),
		// A reasoning item takes output_index 0; calls are numbered from 0
		// among themselves.
		rev("response.output_item.added", `"output_index":0,"item":{"type":"reasoning","id":"rs_1","summary":[]}`),
		fnAdded(1, "call_a", "read"),
		fnAdded(2, "call_b", "list"),
		fnArgs(1, `{\"path\":`),
		fnArgs(2, `{\"dir\":`),
		fnArgs(1, `\"a.txt\"}`),
		fnDone(1, "call_a", "read", `{"path":"a.txt"}`),
		// The done item completes arguments the deltas left out.
		fnDone(2, "call_b", "list", `{"dir":"/"}`),
		// A call seen only in its done item.
		fnDone(3, "call_c", "noop", `{}`),
		respCompleted(),
	}})
	r := collect(t, newResponses(t, s).Stream(ctxT(t), simpleRequest()))
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
}

func TestResponsesReasoningRoundTrip(t *testing.T) {
	reasoningItem := `{"type":"reasoning","id":"rs_1","summary":[{"type":"summary_text","text":"Plan. Check."}],"encrypted_content":"gAAAA-secret"}`
	s := newServer(t,
		reply{parts: []string{
			respCreated(),
			rev("response.output_item.added", `"output_index":0,"item":{"type":"reasoning","id":"rs_1","summary":[]}`),
			rev("response.reasoning_summary_part.added", `"output_index":0,"summary_index":0,"part":{"type":"summary_text","text":""}`),
			rev("response.reasoning_summary_text.delta", `"output_index":0,"summary_index":0,"delta":"Plan."`),
			rev("response.reasoning_summary_part.added", `"output_index":0,"summary_index":1,"part":{"type":"summary_text","text":""}`),
			rev("response.reasoning_summary_text.delta", `"output_index":0,"summary_index":1,"delta":"Check."`),
			rev("response.output_item.done", `"output_index":0,"item":`+reasoningItem),
			fnAdded(1, "call_1", "ls"),
			fnArgs(1, `{}`),
			fnDone(1, "call_1", "ls", `{}`),
			respCompleted(),
		}},
		reply{parts: []string{respCreated(), textDelta("done"), respCompleted()}},
	)
	p := newResponses(t, s, func(c *Config) { c.ReasoningEffort = "medium" })
	req := &llm.Request{Model: "gpt-5", System: "Be brief.",
		Messages: []llm.Message{{Role: llm.RoleUser, Content: "List"}}}
	r := collect(t, p.Stream(ctxT(t), req))
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.reasoning != "Plan.\n\nCheck." {
		t.Errorf("reasoning = %q", r.reasoning)
	}
	if r.finish.ProviderState == nil {
		t.Fatal("no ProviderState for an encrypted reasoning item")
	}

	// The next request carries the reasoning item back, before the call.
	req.Messages = append(req.Messages,
		llm.Message{Role: llm.RoleAssistant, Reasoning: r.reasoning, ToolCalls: r.calls, ProviderState: r.finish.ProviderState},
		llm.Message{Role: llm.RoleTool, ToolCallID: "call_1", ToolName: "ls", Content: "a.txt"},
	)
	if r := collect(t, p.Stream(ctxT(t), req)); r.err != nil {
		t.Fatal(r.err)
	}
	got := s.requests()[1]
	var body struct {
		Input     json.RawMessage `json:"input"`
		Include   []string        `json:"include"`
		Reasoning map[string]any  `json:"reasoning"`
		Store     *bool           `json:"store"`
	}
	if err := json.Unmarshal(got.raw, &body); err != nil {
		t.Fatal(err)
	}
	assertJSON(t, "input", body.Input, `[
		{"role":"user","content":"List"},
		`+reasoningItem+`,
		{"type":"function_call","call_id":"call_1","name":"ls","arguments":"{}"},
		{"type":"function_call_output","call_id":"call_1","output":"a.txt"}]`)
	if len(body.Include) != 1 || body.Include[0] != "reasoning.encrypted_content" ||
		body.Reasoning["effort"] != "medium" || body.Reasoning["summary"] != "auto" ||
		body.Store == nil || *body.Store {
		t.Errorf("body = %s", got.raw)
	}
}

func TestResponsesReasoningText(t *testing.T) {
	// Open-weight models behind vLLM stream reasoning_text, not summaries.
	s := newServer(t, reply{parts: []string{
		respCreated(),
		rev("response.reasoning_text.delta", `"output_index":0,"content_index":0,"delta":"hmm"`),
		textDelta("ok"), respCompleted(),
	}})
	r := collect(t, newResponses(t, s).Stream(ctxT(t), simpleRequest()))
	if r.err != nil || r.reasoning != "hmm" || r.text != "ok" {
		t.Fatalf("reasoning %q text %q err %v", r.reasoning, r.text, r.err)
	}
}

func TestResponsesIncomplete(t *testing.T) {
	for reason, want := range map[string]string{"max_output_tokens": llm.FinishLength, "content_filter": llm.FinishOther} {
		s := newServer(t, reply{parts: []string{respCreated(), textDelta("par"),
			rev("response.incomplete", `"response":{"status":"incomplete","incomplete_details":{"reason":"`+reason+`"},`+respUsage+`}`)}})
		r := collect(t, newResponses(t, s).Stream(ctxT(t), simpleRequest()))
		if r.err != nil || r.finish.Reason != want || r.usage == nil {
			t.Errorf("%s: finish %+v usage %v err %v", reason, r.finish, r.usage, r.err)
		}
	}
}

func TestResponsesFailed(t *testing.T) {
	for _, tc := range []struct {
		name, part, kind string
		retryable        bool
	}{
		{"failed-server", rev("response.failed", `"response":{"status":"failed","error":{"code":"server_error","message":"boom"}}`), llm.KindServer, true},
		{"failed-prompt", rev("response.failed", `"response":{"status":"failed","error":{"code":"invalid_prompt","message":"boom"}}`), llm.KindBadRequest, false},
		{"error-event", rev("error", `"code":"rate_limit_exceeded","message":"boom","param":null`), llm.KindRateLimited, true},
		{"error-event-null-code", rev("error", `"code":null,"message":"boom","param":null`), llm.KindServer, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newServer(t, reply{parts: []string{respCreated(), textDelta("a"), tc.part}})
			r := collect(t, newResponses(t, s).Stream(ctxT(t), simpleRequest()))
			e := wantError(t, r.err, "openai", tc.kind, tc.retryable)
			if !strings.Contains(e.Error(), "boom") {
				t.Errorf("error %q lacks the message", e)
			}
		})
	}
}

func TestResponsesStreamCut(t *testing.T) {
	for _, tc := range []struct {
		name string
		rep  reply
	}{
		{"clean-eof", reply{parts: []string{respCreated(), textDelta("Hel")}}},
		{"output-done-but-no-completed", reply{parts: []string{respCreated(), textDelta("Hel"),
			rev("response.output_text.done", `"output_index":0,"text":"Hel"`)}}},
		{"connection-dropped", reply{parts: []string{respCreated(), textDelta("Hel"), "event: response.output_te"}, abort: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newServer(t, tc.rep)
			r := collect(t, newResponses(t, s).Stream(ctxT(t), simpleRequest()))
			wantError(t, r.err, "openai", llm.KindStreamCut, true)
			if r.text != "Hel" {
				t.Errorf("text before the cut = %q", r.text)
			}
		})
	}
}

func TestResponsesMalformed(t *testing.T) {
	for name, part := range map[string]string{
		"not-json":      "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\n\n",
		"delta-object":  rev("response.output_text.delta", `"output_index":0,"delta":{"x":1}`),
		"unknown-index": fnArgs(7, "{}"),
	} {
		t.Run(name, func(t *testing.T) {
			s := newServer(t, reply{parts: []string{respCreated(), textDelta("a"), part, respCompleted()}})
			r := collect(t, newResponses(t, s).Stream(ctxT(t), simpleRequest()))
			wantError(t, r.err, "openai", llm.KindMalformed, false)
		})
	}
}

func TestResponsesRateLimitThenSuccess(t *testing.T) {
	s := newServer(t,
		reply{status: 429, header: map[string]string{"Content-Type": "application/json", "Retry-After": "3"},
			parts: []string{`{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}`}},
		reply{parts: []string{respCreated(), textDelta("ok"), respCompleted()}},
	)
	p := newResponses(t, s)
	r := collect(t, p.Stream(ctxT(t), simpleRequest()))
	e := wantError(t, r.err, "openai", llm.KindRateLimited, true)
	if e.StatusCode != 429 || e.RetryAfter != 3*time.Second || !strings.Contains(e.Error(), "Rate limit reached") {
		t.Errorf("error %v: status %d retryAfter %v", e, e.StatusCode, e.RetryAfter)
	}
	r = collect(t, p.Stream(ctxT(t), simpleRequest()))
	if r.err != nil || r.text != "ok" {
		t.Fatalf("second call: %q, %v", r.text, r.err)
	}
	if n := len(s.requests()); n != 2 {
		t.Errorf("server saw %d requests, want 2", n)
	}
}

func TestResponsesServerErrorThenSuccess(t *testing.T) {
	s := newServer(t,
		reply{status: 500, header: map[string]string{"Content-Type": "application/json"},
			parts: []string{`{"error":{"message":"The server had an error","type":"server_error","code":null}}`}},
		reply{parts: []string{respCreated(), textDelta("ok"), respCompleted()}},
	)
	p := newResponses(t, s)
	r := collect(t, p.Stream(ctxT(t), simpleRequest()))
	e := wantError(t, r.err, "openai", llm.KindServer, true)
	if !strings.Contains(e.Error(), "The server had an error") {
		t.Errorf("error %q lacks the message", e)
	}
	if r = collect(t, p.Stream(ctxT(t), simpleRequest())); r.err != nil || r.text != "ok" {
		t.Fatalf("second call: %q, %v", r.text, r.err)
	}
}

func TestResponsesRequestBody(t *testing.T) {
	s := newServer(t, reply{parts: []string{respCreated(), textDelta("ok"), respCompleted()}})
	p := newResponses(t, s, func(c *Config) { c.Project = "proj_1" })
	temp := 0.2
	req := &llm.Request{
		Model:  "gpt-5-mini",
		System: "Be brief.",
		Messages: []llm.Message{
			{Role: llm.RoleUser, Content: "List /tmp"},
			// ProviderState from another provider is ignored.
			{Role: llm.RoleAssistant, Content: "Listing.", ProviderState: json.RawMessage(`{"signature":"x"}`),
				ToolCalls: []event.ToolCall{{ID: "call_1", Name: "ls", Arguments: `{"dir":"/tmp"}`}}},
			{Role: llm.RoleTool, ToolCallID: "call_1", ToolName: "ls", Content: "a.txt", IsError: false},
			{Role: llm.RoleAssistant, Content: "Two files."},
			{Role: llm.RoleUser, Content: "Thanks"},
		},
		Tools: []llm.ToolSpec{
			{Name: "ls", Description: "List a directory.", InputSchema: json.RawMessage(`{"type":"object","properties":{"dir":{"type":"string"}}}`)},
			{Name: "now"},
		},
		MaxTokens:   100,
		Temperature: &temp,
	}
	if r := collect(t, p.Stream(ctxT(t), req)); r.err != nil {
		t.Fatal(r.err)
	}
	got := s.requests()[0]
	if got.path != "/v1/responses" || got.header.Get("Authorization") != "Bearer sk-test" || got.header.Get("OpenAI-Project") != "proj_1" {
		t.Errorf("path %q headers %v", got.path, got.header)
	}
	b := got.body
	if b["model"] != "gpt-5-mini" || b["instructions"] != "Be brief." || b["stream"] != true || b["store"] != false ||
		b["max_output_tokens"] != 100.0 || b["temperature"] != 0.2 || b["include"] != nil || b["reasoning"] != nil {
		t.Errorf("body = %s", got.raw)
	}
	assertJSON(t, "input", json.RawMessage(mustJSON(b["input"])), `[
		{"role":"user","content":"List /tmp"},
		{"role":"assistant","content":"Listing."},
		{"type":"function_call","call_id":"call_1","name":"ls","arguments":"{\"dir\":\"/tmp\"}"},
		{"type":"function_call_output","call_id":"call_1","output":"a.txt"},
		{"role":"assistant","content":"Two files."},
		{"role":"user","content":"Thanks"}]`)
	assertJSON(t, "tools", json.RawMessage(mustJSON(b["tools"])), `[
		{"type":"function","name":"ls","description":"List a directory.","strict":false,
		 "parameters":{"type":"object","properties":{"dir":{"type":"string"}}}},
		{"type":"function","name":"now","strict":false,"parameters":{"type":"object","properties":{}}}]`)
}

func TestResponsesCancelMidStream(t *testing.T) {
	s := newServer(t, reply{parts: []string{respCreated(), textDelta("a")}, hold: true})
	ctx, cancel := context.WithCancel(ctxT(t))
	defer cancel()
	var gotErr error
	for ev, err := range newResponses(t, s).Stream(ctx, simpleRequest()) {
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
}

func TestResponsesCancelBeforeResponse(t *testing.T) {
	s := newServer(t)
	ctx, cancel := context.WithCancel(ctxT(t))
	cancel()
	r := collect(t, newResponses(t, s).Stream(ctx, simpleRequest()))
	if !errors.Is(r.err, context.Canceled) {
		t.Fatalf("err = %v", r.err)
	}
}

func TestResponsesBreakClosesBody(t *testing.T) {
	gone := make(chan struct{})
	s := newServer(t, reply{parts: []string{respCreated(), textDelta("a"), textDelta("b")}, hold: true, gone: gone})
	for ev, err := range newResponses(t, s).Stream(ctxT(t), simpleRequest()) {
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

func TestNoEnvironment(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "sk-from-env")
	t.Setenv("OPENAI_BASE_URL", "http://127.0.0.1:1/nowhere")
	t.Setenv("OPENAI_ORG_ID", "org-env")
	t.Setenv("OPENAI_CUSTOM_HEADERS", "X-Env: yes")
	s := newServer(t,
		reply{parts: []string{respCreated(), textDelta("ok"), respCompleted()}},
		reply{parts: []string{textChunk("ok"), chunk(`{}`, "stop"), chatDone}},
	)
	cfg := s.config()
	cfg.APIKey = ""
	rp, err := NewResponses(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cp, err := NewChat(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []llm.Provider{rp, cp} {
		if r := collect(t, p.Stream(ctxT(t), simpleRequest())); r.err != nil {
			t.Fatal(r.err)
		}
	}
	for _, got := range s.requests() {
		for _, h := range []string{"Authorization", "OpenAI-Organization", "X-Env"} {
			if v := got.header.Get(h); v != "" {
				t.Errorf("%s: header %s = %q came from the environment", got.path, h, v)
			}
		}
	}
}

func TestConfigValidation(t *testing.T) {
	for _, cfg := range []Config{
		{BaseURL: "localhost:8080"},
		{BaseURL: "ftp://example.com"},
		{ExtraBody: json.RawMessage(`[1]`)},
		{ExtraBody: json.RawMessage(`{`)},
		{MaxTokensField: "max_new_tokens"},
		{Headers: map[string]string{"Bad Header": "x"}},
	} {
		if _, err := NewChat(cfg); err == nil {
			t.Errorf("NewChat(%+v) succeeded", cfg)
		}
		if _, err := NewResponses(cfg); err == nil {
			t.Errorf("NewResponses(%+v) succeeded", cfg)
		}
	}
	if _, err := NewResponses(Config{}); err != nil {
		t.Errorf("zero Config: %v", err)
	}
}

func TestExtraBodyKeysAreLiteral(t *testing.T) {
	s := newServer(t, reply{parts: []string{respCreated(), textDelta("ok"), respCompleted()}})
	p := newResponses(t, s, func(c *Config) {
		c.ExtraBody = json.RawMessage(`{"a.b":1,"c:d":[2],"@x":{"y":"z"},"store":true}`)
	})
	if r := collect(t, p.Stream(ctxT(t), simpleRequest())); r.err != nil {
		t.Fatal(r.err)
	}
	b := s.requests()[0].body
	if b["a.b"] != 1.0 || jsonString(b["c:d"]) != `[2]` || jsonString(b["@x"]) != `{"y":"z"}` || b["store"] != true {
		t.Errorf("body = %s", s.requests()[0].raw)
	}
}

func jsonString(v any) string { return mustJSON(v) }
