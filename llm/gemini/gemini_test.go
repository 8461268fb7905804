package gemini_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"weft.dev/weft/event"
	"weft.dev/weft/llm"
	"weft.dev/weft/llm/gemini"
)

func TestTextAwkwardSplits(t *testing.T) {
	rec := fixture(t, "text.sse")
	want := "Grüezi from Zürich — and 日本 says こんにちは. 👋\n"
	for name, body := range map[string]string{"lf": rec, "crlf": crlf(rec)} {
		for _, n := range []int{0, 1, 2, 3, 5, 7, 13} {
			t.Run(fmt.Sprintf("%s/chunk%d", name, n), func(t *testing.T) {
				s := newServer(t, reply{body: body, chunk: n})
				r := collect(t, t.Context(), newProvider(t, s), simpleRequest())
				if r.err != nil {
					t.Fatal(r.err)
				}
				if r.text != want {
					t.Errorf("text = %q, want %q", r.text, want)
				}
				if r.finish == nil || r.finish.Reason != llm.FinishStop || r.finish.ProviderState != nil {
					t.Errorf("finish = %+v", r.finish)
				}
				if fmt.Sprint(r.usage) != fmt.Sprint([]event.TokenUsage{{InputTokens: 9, OutputTokens: 15}}) {
					t.Errorf("usage = %+v", r.usage)
				}
			})
		}
	}
}

func TestParallelFunctionCalls(t *testing.T) {
	s := newServer(t, reply{body: fixture(t, "parallel_calls.sse"), chunk: 11},
		reply{body: chunk([]obj{text("Paris 18°C.")}, "STOP", nil)})
	p := newProvider(t, s, func(c *gemini.Config) { c.IncludeThoughts = true })
	req := &llm.Request{Model: "gemini-2.5-flash", Messages: []llm.Message{
		{Role: llm.RoleUser, Content: "weather in Paris?"},
		{Role: llm.RoleAssistant, Content: "Sunny."},
		{Role: llm.RoleUser, Content: "and in Paris and Zürich?"},
	}}
	r := collect(t, t.Context(), p, req)
	if r.err != nil {
		t.Fatal(r.err)
	}
	// Gemini 2.5 sends no call IDs: they are made from the number of
	// assistant messages (1) and the call's position. The arguments keep
	// the server's bytes, big numbers included.
	want := []llm.ToolCallDelta{
		{Index: 0, ID: "call_1_0", Name: "get_weather", Arguments: `{"city":"Paris","unit":"celsius"}`},
		{Index: 1, ID: "call_1_1", Name: "get_weather", Arguments: `{"city":"Zürich","unit":"celsius","days":[1,2.5e0,10000000000000001]}`},
	}
	if fmt.Sprint(r.deltas) != fmt.Sprint(want) {
		t.Errorf("deltas =\n%+v\nwant\n%+v", r.deltas, want)
	}
	if !strings.HasPrefix(r.reasoning, "**Checking two cities**") || r.text != "" {
		t.Errorf("reasoning %q text %q", r.reasoning, r.text)
	}
	if r.finish == nil || r.finish.Reason != llm.FinishToolCalls {
		t.Fatalf("finish = %+v", r.finish)
	}
	// The first call's signature must go back on that call.
	wantState := fmt.Sprintf(`{"provider":"gemini","parts":[{"kind":"thought","len":%d},{"kind":"call","sig":"CiQBcsjafLM2dKpgZ9A7xHtFJjAS0yiKtUpCX9c6xt0mx+I0aF8KbQFyyNp8W4k9g5wCq2vQ/Wd1HNTR8HTF6bxZ0nLb+R5s"},{"kind":"call","call":1}]}`, len(r.reasoning))
	if string(r.finish.ProviderState) != wantState {
		t.Errorf("provider state =\n%s\nwant\n%s", r.finish.ProviderState, wantState)
	}
	if got := s.request(t, 0).json(t)["generationConfig"]; mustJSON(t, got) != `{"thinkingConfig":{"includeThoughts":true}}` {
		t.Errorf("generationConfig = %s", mustJSON(t, got))
	}

	// The next request sends the calls back with the signature and the
	// results by name, without the made-up IDs.
	next := &llm.Request{Model: "gemini-2.5-flash", Messages: append(req.Messages,
		llm.Message{Role: llm.RoleAssistant, Reasoning: r.reasoning, ToolCalls: r.calls, ProviderState: r.finish.ProviderState},
		llm.Message{Role: llm.RoleTool, ToolCallID: "call_1_0", ToolName: "get_weather", Content: "18°C"},
		llm.Message{Role: llm.RoleTool, ToolCallID: "call_1_1", ToolName: "get_weather", Content: "no station", IsError: true},
	)}
	if r := collect(t, t.Context(), p, next); r.err != nil || r.text != "Paris 18°C." {
		t.Fatalf("second request: %q %v", r.text, r.err)
	}
	contents := s.request(t, 1).json(t)["contents"].([]any)
	got := mustJSON(t, contents[3:])
	wantContents := `[{"parts":[{"functionCall":{"args":{"city":"Paris","unit":"celsius"},"name":"get_weather"},"thoughtSignature":"CiQBcsjafLM2dKpgZ9A7xHtFJjAS0yiKtUpCX9c6xt0mx+I0aF8KbQFyyNp8W4k9g5wCq2vQ/Wd1HNTR8HTF6bxZ0nLb+R5s"},` +
		`{"functionCall":{"args":{"city":"Zürich","days":[1,2.5,10000000000000000],"unit":"celsius"},"name":"get_weather"}}],"role":"model"},` +
		`{"parts":[{"functionResponse":{"name":"get_weather","response":{"output":"18°C"}}},{"functionResponse":{"name":"get_weather","response":{"error":"no station"}}}],"role":"user"}]`
	if got != wantContents {
		t.Errorf("contents =\n%s\nwant\n%s", got, wantContents)
	}
}

func TestFunctionCallIDsFromTheAPI(t *testing.T) {
	// Gemini 3 sends call IDs; they are kept and sent back.
	body := chunk([]obj{
		{"functionCall": obj{"name": "translate_es", "args": obj{"text": "good morning"}, "id": "rgjcr7hc"}, "thoughtSignature": "EooFCocF"},
		{"functionCall": obj{"name": "translate_fr", "args": obj{"text": "good morning"}, "id": "cu6rg45q"}},
		{"functionCall": obj{"name": "now"}},
	}, "STOP", nil)
	s := newServer(t, reply{body: body})
	p := newProvider(t, s)
	r := collect(t, t.Context(), p, simpleRequest())
	if r.err != nil {
		t.Fatal(r.err)
	}
	want := `[{rgjcr7hc translate_es {"text":"good morning"}} {cu6rg45q translate_fr {"text":"good morning"}} {call_0_2 now {}}]`
	if fmt.Sprint(r.calls) != want {
		t.Errorf("calls = %v\nwant %s", r.calls, want)
	}
	next := &llm.Request{Model: "gemini-3-flash-preview", Messages: []llm.Message{
		{Role: llm.RoleUser, Content: "hi"},
		{Role: llm.RoleAssistant, ToolCalls: r.calls, ProviderState: r.finish.ProviderState},
		{Role: llm.RoleTool, ToolCallID: "rgjcr7hc", ToolName: "translate_es", Content: "Buenos días"},
		{Role: llm.RoleTool, ToolCallID: "cu6rg45q", Content: "Bonjour"}, // name found from the call
		{Role: llm.RoleTool, ToolCallID: "call_0_2", ToolName: "now", Content: "12:00"},
		{Role: llm.RoleUser, Content: "thanks"},
	}}
	if r := collect(t, t.Context(), p, next); r.err != nil {
		t.Fatal(r.err)
	}
	got := mustJSON(t, s.request(t, 1).json(t)["contents"])
	wantContents := `[{"parts":[{"text":"hi"}],"role":"user"},` +
		`{"parts":[{"functionCall":{"args":{"text":"good morning"},"id":"rgjcr7hc","name":"translate_es"},"thoughtSignature":"EooFCocF"},` +
		`{"functionCall":{"args":{"text":"good morning"},"id":"cu6rg45q","name":"translate_fr"}},` +
		`{"functionCall":{"name":"now"}}],"role":"model"},` +
		`{"parts":[{"functionResponse":{"id":"rgjcr7hc","name":"translate_es","response":{"output":"Buenos días"}}},` +
		`{"functionResponse":{"id":"cu6rg45q","name":"translate_fr","response":{"output":"Bonjour"}}},` +
		`{"functionResponse":{"name":"now","response":{"output":"12:00"}}},` +
		`{"text":"thanks"}],"role":"user"}]`
	if got != wantContents {
		t.Errorf("contents =\n%s\nwant\n%s", got, wantContents)
	}
}

func TestThinking(t *testing.T) {
	s := newServer(t, reply{body: fixture(t, "thinking.sse"), chunk: 17})
	budget := 1024
	p := newProvider(t, s, func(c *gemini.Config) {
		c.IncludeThoughts, c.ThinkingBudget, c.ThinkingLevel = true, &budget, "low"
	})
	r := collect(t, t.Context(), p, simpleRequest())
	if r.err != nil {
		t.Fatal(r.err)
	}
	wantReasoning := "**Adding primes**\n\nThe first five primes are 2, 3, 5, 7 and 11.\n\n**Checking the sum**\n\n2 + 3 + 5 + 7 + 11 = 28.\n\n"
	if r.reasoning != wantReasoning || r.text != "The sum of the first five primes is **28**." {
		t.Errorf("reasoning %q\ntext %q", r.reasoning, r.text)
	}
	// The signature came in a last chunk without text; it belongs to the
	// whole text part.
	sig := "EuIECt8EAQw51sdnEHyodJT5jN/Q+BervKxsKTxyYQ8zzM6VNr9kX2IfFr57PQ+KYiPR46cjx0/a5ec4eUt+whSB7gLP1cEtoV6jMrWFyMSLY2i/fGchzTACDKNHH9GZ3o/yp9TwfQ=="
	wantState := fmt.Sprintf(`{"provider":"gemini","parts":[{"kind":"thought","len":%d},{"kind":"text","len":%d,"sig":"%s"}]}`, len(r.reasoning), len(r.text), sig)
	if r.finish == nil || string(r.finish.ProviderState) != wantState {
		t.Fatalf("finish = %+v\nwant state %s", r.finish, wantState)
	}
	if got := mustJSON(t, s.request(t, 0).json(t)["generationConfig"]); got != `{"thinkingConfig":{"includeThoughts":true,"thinkingBudget":1024,"thinkingLevel":"LOW"}}` {
		t.Errorf("generationConfig = %s", got)
	}

	// Replay: the text goes back with its signature, unsigned thoughts
	// do not.
	next := &llm.Request{Model: "gemini-3-flash-preview", Messages: []llm.Message{
		{Role: llm.RoleUser, Content: "hi"},
		{Role: llm.RoleAssistant, Content: r.text, Reasoning: r.reasoning, ProviderState: r.finish.ProviderState},
		{Role: llm.RoleUser, Content: "and the next five?"},
	}}
	if r := collect(t, t.Context(), p, next); r.err != nil {
		t.Fatal(r.err)
	}
	model := mustJSON(t, s.request(t, 1).json(t)["contents"].([]any)[1])
	if want := `{"parts":[{"text":"The sum of the first five primes is **28**.","thoughtSignature":"` + sig + `"}],"role":"model"}`; model != want {
		t.Errorf("model content =\n%s\nwant\n%s", model, want)
	}

	// State that does not fit the message (or is another provider's) is
	// not used: the message goes back as text.
	for _, state := range []string{`{"provider":"gemini","parts":[{"kind":"text","len":999,"sig":"c2ln"}]}`, `{"provider":"anthropic","thinking":[]}`} {
		next.Messages[1].ProviderState = json.RawMessage(state)
		if r := collect(t, t.Context(), p, next); r.err != nil {
			t.Fatal(r.err)
		}
		model = mustJSON(t, s.request(t, s.count()-1).json(t)["contents"].([]any)[1])
		if want := `{"parts":[{"text":"The sum of the first five primes is **28**."}],"role":"model"}`; model != want {
			t.Errorf("state %s: model content =\n%s\nwant\n%s", state, model, want)
		}
	}
}

func TestSignedThoughtsAndOrder(t *testing.T) {
	// Parts go back in their order with their signatures; a signed thought
	// goes back too.
	body := chunk([]obj{{"text": "plan", "thought": true, "thoughtSignature": "dGhvdWdodA=="}}, "", nil) +
		chunk([]obj{text("Let me "), text("look.")}, "", nil) +
		chunk([]obj{{"functionCall": obj{"name": "ls", "args": obj{"path": "."}}, "thoughtSignature": "Y2FsbA=="}}, "", nil) +
		chunk([]obj{{"text": "", "thoughtSignature": "dGFpbA=="}}, "STOP", nil)
	s := newServer(t, reply{body: body})
	p := newProvider(t, s)
	r := collect(t, t.Context(), p, simpleRequest())
	if r.err != nil {
		t.Fatal(r.err)
	}
	next := &llm.Request{Model: "gemini-2.5-pro", Messages: []llm.Message{
		{Role: llm.RoleUser, Content: "hi"},
		{Role: llm.RoleAssistant, Content: r.text, Reasoning: r.reasoning, ToolCalls: r.calls, ProviderState: r.finish.ProviderState},
		{Role: llm.RoleTool, ToolCallID: r.calls[0].ID, ToolName: "ls", Content: "a b"},
	}}
	if r := collect(t, t.Context(), p, next); r.err != nil {
		t.Fatal(r.err)
	}
	model := mustJSON(t, s.request(t, 1).json(t)["contents"].([]any)[1])
	want := `{"parts":[{"text":"plan","thought":true,"thoughtSignature":"dGhvdWdodA=="},{"text":"Let me look."},` +
		`{"functionCall":{"args":{"path":"."},"name":"ls"},"thoughtSignature":"Y2FsbA=="},{"thoughtSignature":"dGFpbA=="}],"role":"model"}`
	if model != want {
		t.Errorf("model content =\n%s\nwant\n%s", model, want)
	}
}

func TestUsage(t *testing.T) {
	s := newServer(t, reply{body: fixture(t, "parallel_calls.sse")})
	r := collect(t, t.Context(), newProvider(t, s), simpleRequest())
	if r.err != nil {
		t.Fatal(r.err)
	}
	// One report, the last running total; output counts the thoughts.
	want := []event.TokenUsage{{InputTokens: 1203, OutputTokens: 41 + 62, CacheReadTokens: 1024, ReasoningTokens: 62}}
	if fmt.Sprint(r.usage) != fmt.Sprint(want) {
		t.Errorf("usage = %+v, want %+v", r.usage, want)
	}
}

func TestStreamCut(t *testing.T) {
	rec := fixture(t, "text.sse")
	last := strings.LastIndex(strings.TrimSuffix(rec, "\n\n"), "\n\n") + 2 // start of the final event
	for name, rep := range map[string]reply{
		"clean end before the finish":     {body: rec[:last]},
		"connection dropped":              {body: rec[:last+40], abort: true},
		"cut inside the final event":      {body: rec[:last+40]},
		"final event without blank line":  {body: strings.TrimSuffix(rec, "\n")},
		"final event without line ending": {body: strings.TrimSuffix(rec, "\n\n")},
	} {
		t.Run(name, func(t *testing.T) {
			s := newServer(t, rep)
			r := collect(t, t.Context(), newProvider(t, s), simpleRequest())
			wantKind(t, r.err, llm.KindStreamCut, true)
			if r.text != "Grüezi from Zürich — and 日本 says こんにちは" || r.finish != nil {
				t.Errorf("text %q finish %+v", r.text, r.finish)
			}
		})
	}
	t.Run("empty body", func(t *testing.T) {
		s := newServer(t, reply{})
		r := collect(t, t.Context(), newProvider(t, s), simpleRequest())
		wantKind(t, r.err, llm.KindStreamCut, true)
	})
}

func TestCutAfterFinish(t *testing.T) {
	// The finish reason is the terminal evidence; a connection that breaks
	// after it loses nothing.
	s := newServer(t, reply{body: fixture(t, "text.sse") + "data: {\"candi", abort: true})
	r := collect(t, t.Context(), newProvider(t, s), simpleRequest())
	if r.err != nil || r.finish == nil || r.finish.Reason != llm.FinishStop {
		t.Fatalf("err %v finish %+v", r.err, r.finish)
	}
}

func TestQuotaWithRetryDelay(t *testing.T) {
	s := newServer(t,
		reply{status: 429, header: http.Header{"Retry-After": {"5"}}, body: fixture(t, "quota_429.json")},
		reply{body: fixture(t, "text.sse")})
	p := newProvider(t, s)
	r := collect(t, t.Context(), p, simpleRequest())
	e := wantKind(t, r.err, llm.KindRateLimited, true)
	// RetryInfo's retryDelay is more precise than the header.
	if e.StatusCode != 429 || e.RetryAfter != 37*time.Second {
		t.Errorf("error = %+v, want status 429, RetryAfter 37s", e)
	}
	if msg := e.Error(); !strings.Contains(msg, "RESOURCE_EXHAUSTED") || !strings.Contains(msg, "exceeded your current quota") {
		t.Errorf("error text %q", msg)
	}
	if r.events != 0 || s.count() != 1 {
		t.Fatalf("%d events, %d requests; the SDK must not retry", r.events, s.count())
	}
	if r := collect(t, t.Context(), p, simpleRequest()); r.err != nil || r.finish == nil {
		t.Fatalf("second attempt: %v", r.err)
	}
}

func TestRetryAfterHeader(t *testing.T) {
	s := newServer(t, reply{status: 429, header: http.Header{"Retry-After": {"3"}},
		body: `{"error":{"code":429,"message":"Resource has been exhausted (e.g. check quota).","status":"RESOURCE_EXHAUSTED"}}`})
	r := collect(t, t.Context(), newProvider(t, s), simpleRequest())
	if e := wantKind(t, r.err, llm.KindRateLimited, true); e.RetryAfter != 3*time.Second {
		t.Errorf("RetryAfter = %v", e.RetryAfter)
	}
}

func TestServerErrorThenSuccess(t *testing.T) {
	s := newServer(t,
		reply{status: 500, body: `{"error":{"code":500,"message":"An internal error has occurred. Please retry or report in https://developers.generativeai.google/guide/troubleshooting","status":"INTERNAL"}}`},
		reply{body: fixture(t, "text.sse")})
	p := newProvider(t, s)
	r := collect(t, t.Context(), p, simpleRequest())
	e := wantKind(t, r.err, llm.KindServer, true)
	if e.StatusCode != 500 || e.RetryAfter != 0 {
		t.Errorf("error = %+v", e)
	}
	if n := s.count(); n != 1 {
		t.Fatalf("server got %d requests; the SDK must not retry", n)
	}
	r = collect(t, t.Context(), p, simpleRequest())
	if r.err != nil || !strings.HasPrefix(r.text, "Grüezi") {
		t.Fatalf("second attempt: %q, %v", r.text, r.err)
	}
}

func TestHTTPErrorKinds(t *testing.T) {
	for _, tc := range []struct {
		name      string
		status    int
		body      string
		kind      string
		retryable bool
		msg       string
	}{
		{"bad request", 400, `{"error":{"code":400,"message":"* GenerateContentRequest.contents: contents is not specified","status":"INVALID_ARGUMENT"}}`, llm.KindBadRequest, false, "INVALID_ARGUMENT: * GenerateContentRequest.contents"},
		{"bad key", 400, `{"error":{"code":400,"message":"API key not valid. Please pass a valid API key.","status":"INVALID_ARGUMENT","details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"API_KEY_INVALID","domain":"googleapis.com"}]}}`, llm.KindAuth, false, "API key not valid. Please pass a valid API key. (API_KEY_INVALID)"},
		{"context overflow", 400, `{"error":{"code":400,"message":"The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).","status":"INVALID_ARGUMENT"}}`, llm.KindContextOverflow, false, "exceeds the maximum number of tokens"},
		{"unauthenticated", 401, `{"error":{"code":401,"message":"Request had invalid authentication credentials.","status":"UNAUTHENTICATED"}}`, llm.KindAuth, false, "UNAUTHENTICATED"},
		{"permission", 403, `{"error":{"code":403,"message":"Method doesn't allow unregistered callers.","status":"PERMISSION_DENIED"}}`, llm.KindAuth, false, "PERMISSION_DENIED"},
		{"unknown model", 404, `{"error":{"code":404,"message":"models/gemini-9 is not found for API version v1beta","status":"NOT_FOUND"}}`, llm.KindBadRequest, false, "models/gemini-9 is not found"},
		{"overloaded", 503, `{"error":{"code":503,"message":"The model is overloaded. Please try again later.","status":"UNAVAILABLE"}}`, llm.KindServer, true, "overloaded"},
		{"array body", 500, `[{"error":{"code":500,"message":"Internal error encountered.","status":"INTERNAL"}}]`, llm.KindServer, true, "INTERNAL: Internal error"},
		{"proxy page", 502, `<html><body>Bad Gateway</body></html>`, llm.KindServer, true, "Bad Gateway"},
		{"empty", 504, ``, llm.KindServer, true, "504 Gateway Timeout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := http.Header{}
			if strings.HasPrefix(tc.body, "<") {
				h.Set("Content-Type", "text/html")
			}
			s := newServer(t, reply{status: tc.status, header: h, body: tc.body})
			r := collect(t, t.Context(), newProvider(t, s), simpleRequest())
			e := wantKind(t, r.err, tc.kind, tc.retryable)
			if e.StatusCode != tc.status || e.RetryAfter != 0 {
				t.Errorf("status %d, RetryAfter %v", e.StatusCode, e.RetryAfter)
			}
			if !strings.Contains(e.Error(), tc.msg) {
				t.Errorf("error text %q lacks %q", e.Error(), tc.msg)
			}
		})
	}
}

func TestSafetyBlock(t *testing.T) {
	t.Run("response", func(t *testing.T) {
		s := newServer(t, reply{body: fixture(t, "safety.sse")})
		r := collect(t, t.Context(), newProvider(t, s), simpleRequest())
		e := wantKind(t, r.err, llm.KindSafety, false)
		if msg := e.Error(); !strings.Contains(msg, "SAFETY") || !strings.Contains(msg, "HARM_CATEGORY_DANGEROUS_CONTENT") || strings.Contains(msg, "HARASSMENT") {
			t.Errorf("error text %q", msg)
		}
		if r.text != "Here is how you" || r.finish != nil {
			t.Errorf("text %q finish %+v", r.text, r.finish)
		}
	})
	t.Run("prompt", func(t *testing.T) {
		s := newServer(t, reply{body: fixture(t, "prompt_blocked.sse")})
		r := collect(t, t.Context(), newProvider(t, s), simpleRequest())
		e := wantKind(t, r.err, llm.KindSafety, false)
		if msg := e.Error(); !strings.Contains(msg, "prompt") || !strings.Contains(msg, "PROHIBITED_CONTENT") {
			t.Errorf("error text %q", msg)
		}
		if r.events != 0 {
			t.Errorf("%d events", r.events)
		}
	})
	for _, fr := range []string{"RECITATION", "BLOCKLIST", "SPII"} {
		t.Run(fr, func(t *testing.T) {
			s := newServer(t, reply{body: chunk([]obj{text("a")}, fr, nil)})
			r := collect(t, t.Context(), newProvider(t, s), simpleRequest())
			wantKind(t, r.err, llm.KindSafety, false)
		})
	}
}

func TestFinishReasons(t *testing.T) {
	for fr, want := range map[string]string{
		"STOP": llm.FinishStop, "MAX_TOKENS": llm.FinishLength, "CONTINUATION": llm.FinishLength,
		"OTHER": llm.FinishOther, "LANGUAGE": llm.FinishOther, "SOMETHING_NEW": llm.FinishOther,
	} {
		s := newServer(t, reply{body: chunk([]obj{text("a")}, "", nil) + chunk([]obj{text("b")}, fr, nil)})
		r := collect(t, t.Context(), newProvider(t, s), simpleRequest())
		if r.err != nil || r.finish == nil || r.finish.Reason != want || r.text != "ab" {
			t.Errorf("%s: finish %+v err %v text %q, want %s", fr, r.finish, r.err, r.text, want)
		}
	}
	// FINISH_REASON_UNSPECIFIED is no finish.
	s := newServer(t, reply{body: chunk([]obj{text("a")}, "FINISH_REASON_UNSPECIFIED", nil)})
	wantKind(t, collect(t, t.Context(), newProvider(t, s), simpleRequest()).err, llm.KindStreamCut, true)
}

func TestMalformedFunctionCall(t *testing.T) {
	body := sse(`{"candidates":[{"content":{"parts":[{"text":""}],"role":"model"},"finishReason":"MALFORMED_FUNCTION_CALL","finishMessage":"Malformed function call: print(default_api.ls(path=))","index":0}]}`)
	s := newServer(t, reply{body: body})
	r := collect(t, t.Context(), newProvider(t, s), simpleRequest())
	e := wantKind(t, r.err, llm.KindMalformed, true)
	if !strings.Contains(e.Error(), "Malformed function call") {
		t.Errorf("error text %q", e.Error())
	}
}

func TestMalformedEvent(t *testing.T) {
	for name, bad := range map[string]string{
		"broken JSON": `{"candidates": [{"content": {"parts": [{"text": "x"}`,
		"wrong type":  `{"candidates": {"content": 1}}`,
		"broken args": `{"candidates": [{"content": {"parts": [{"functionCall": {"name": "f", "args": [}}]}}]}`,
		"not JSON":    `<html>`,
	} {
		t.Run(name, func(t *testing.T) {
			body := chunk([]obj{text("before")}, "", nil) + sse(bad) + chunk([]obj{text("after")}, "STOP", nil)
			s := newServer(t, reply{body: body})
			r := collect(t, t.Context(), newProvider(t, s), simpleRequest())
			wantKind(t, r.err, llm.KindMalformed, false)
			if r.text != "before" {
				t.Errorf("text = %q", r.text)
			}
		})
	}
}

func TestErrorInStream(t *testing.T) {
	for _, tc := range []struct {
		data      string
		kind      string
		retryable bool
	}{
		{`{"error": {"code": 503, "message": "The model is overloaded. Please try again later.", "status": "UNAVAILABLE"}}`, llm.KindServer, true},
		{`{"error": {"message": "Resource has been exhausted", "status": "RESOURCE_EXHAUSTED", "details": [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "1.5s"}]}}`, llm.KindRateLimited, true},
		{`{"error": {"code": 400, "message": "Request contains an invalid argument.", "status": "INVALID_ARGUMENT"}}`, llm.KindBadRequest, false},
		{`{"error": {"message": "?"}}`, llm.KindServer, true},
	} {
		s := newServer(t, reply{body: chunk([]obj{text("a")}, "", nil) + sse(tc.data)})
		r := collect(t, t.Context(), newProvider(t, s), simpleRequest())
		e := wantKind(t, r.err, tc.kind, tc.retryable)
		if tc.kind == llm.KindRateLimited && e.RetryAfter != 1500*time.Millisecond {
			t.Errorf("RetryAfter = %v", e.RetryAfter)
		}
		if r.text != "a" {
			t.Errorf("text = %q", r.text)
		}
	}
}

func TestEventStreamSyntax(t *testing.T) {
	// Comments, other fields, and data split over lines, as proxies send
	// them.
	body := ": keep-alive\n\n" +
		"event: message\nid: 1\ndata: " + strings.TrimSuffix(strings.TrimPrefix(chunk([]obj{text("one")}, "", nil), "data: "), "\n\n") + "\n\n" +
		"data: {\"candidates\": [{\"content\": {\"parts\": [{\"text\": \" two\"}]},\n" +
		"data: \"finishReason\": \"STOP\"}]}\n\n" +
		": bye\n"
	s := newServer(t, reply{body: body, chunk: 3})
	r := collect(t, t.Context(), newProvider(t, s), simpleRequest())
	if r.err != nil || r.text != "one two" || r.finish == nil {
		t.Fatalf("text %q finish %+v err %v", r.text, r.finish, r.err)
	}
}

func TestJSONInsteadOfEventStream(t *testing.T) {
	s := newServer(t, reply{header: http.Header{"Content-Type": {"application/json; charset=UTF-8"}},
		body: `[{"candidates": [{"content": {"parts": [{"text": "hi"}]}, "finishReason": "STOP"}]}]`})
	r := collect(t, t.Context(), newProvider(t, s), simpleRequest())
	wantKind(t, r.err, llm.KindMalformed, false)
}

func TestConnectionError(t *testing.T) {
	s := newServer(t, reply{})
	p := newProvider(t, s)
	s.Close()
	r := collect(t, t.Context(), p, simpleRequest())
	wantKind(t, r.err, llm.KindConnection, true)
}

func TestContextCancel(t *testing.T) {
	s := newServer(t, reply{body: chunk([]obj{text("waiting")}, "", nil), hold: true})
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

func TestCancelBeforeResponse(t *testing.T) {
	s := newServer(t, reply{hold: true})
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	r := collect(t, ctx, newProvider(t, s), simpleRequest())
	if !errors.Is(r.err, context.Canceled) {
		t.Fatalf("err = %v", r.err)
	}
}

func TestBreakClosesStream(t *testing.T) {
	s := newServer(t, reply{body: chunk([]obj{text("a")}, "", nil) + chunk([]obj{text("b")}, "", nil), hold: true})
	for ev, err := range newProvider(t, s).Stream(t.Context(), simpleRequest()) {
		if err != nil {
			t.Fatal(err)
		}
		if ev.Text != "" {
			break // the handler returns only once the body is closed
		}
	}
}

func TestRequestBody(t *testing.T) {
	// The SDK's environment must change nothing.
	t.Setenv("GOOGLE_GEMINI_BASE_URL", "http://127.0.0.1:1")
	t.Setenv("GEMINI_API_KEY", "key-from-env")
	t.Setenv("GOOGLE_GENAI_USE_VERTEXAI", "true")
	t.Setenv("GOOGLE_CLOUD_PROJECT", "p")
	t.Setenv("GOOGLE_CLOUD_LOCATION", "us-central1")

	s := newServer(t, reply{body: fixture(t, "text.sse")})
	p := newProvider(t, s, func(c *gemini.Config) {
		c.Headers = http.Header{"X-Proxy-Tag": {"weft"}}
	})
	temp := 0.25
	req := &llm.Request{
		Model:       "gemini-2.5-flash",
		System:      "You are terse.",
		MaxTokens:   512,
		Temperature: &temp,
		Tools: []llm.ToolSpec{{
			Name: "read_file", Description: "Read a file.",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string","minLength":1},"lines":{"type":["integer","null"]}},"required":["path"],"additionalProperties":false,"$defs":{"x":{"type":"string"}}}`),
		}, {Name: "now"}},
		Messages: []llm.Message{
			{Role: llm.RoleUser, Content: "read a and b"},
			{Role: llm.RoleAssistant, Content: "Reading.", ToolCalls: []event.ToolCall{
				{ID: "call_1_0", Name: "read_file", Arguments: `{"path":"a"}`},
				{ID: "toolu_01", Name: "read_file", Arguments: `{"path": "b"`}, // another provider's ID, broken JSON
			}},
			{Role: llm.RoleTool, ToolCallID: "call_1_0", ToolName: "read_file", Content: "A"},
			{Role: llm.RoleTool, ToolCallID: "toolu_01", ToolName: "read_file", Content: "invalid arguments", IsError: true},
			{Role: llm.RoleUser, Content: "also: hurry"},
			{Role: llm.RoleAssistant},                  // empty: sends nothing
			{Role: llm.RoleUser, Content: "and then?"}, // merged with the previous user content
		},
	}
	if r := collect(t, t.Context(), p, req); r.err != nil {
		t.Fatal(r.err)
	}
	rec := s.request(t, 0)
	if rec.method != "POST" || rec.path != "/v1beta/models/gemini-2.5-flash:streamGenerateContent" || rec.query != "alt=sse" {
		t.Errorf("request %s %s?%s", rec.method, rec.path, rec.query)
	}
	if h := rec.header; h.Get("X-Goog-Api-Key") != "test-key" || h.Get("X-Proxy-Tag") != "weft" || h.Get("Authorization") != "" {
		t.Errorf("headers = %v", h)
	}
	got := mustJSON(t, rec.json(t))
	want := `{"contents":[` +
		`{"parts":[{"text":"read a and b"}],"role":"user"},` +
		`{"parts":[{"text":"Reading."},` +
		`{"functionCall":{"args":{"path":"a"},"name":"read_file"}},` +
		`{"functionCall":{"args":{"_raw":"{\"path\": \"b\""},"id":"toolu_01","name":"read_file"}}],"role":"model"},` +
		`{"parts":[{"functionResponse":{"name":"read_file","response":{"output":"A"}}},` +
		`{"functionResponse":{"id":"toolu_01","name":"read_file","response":{"error":"invalid arguments"}}},` +
		`{"text":"also: hurry"},{"text":"and then?"}],"role":"user"}],` +
		`"generationConfig":{"maxOutputTokens":512,"temperature":0.25},` +
		`"systemInstruction":{"parts":[{"text":"You are terse."}],"role":"user"},` +
		`"tools":[{"functionDeclarations":[` +
		`{"description":"Read a file.","name":"read_file","parametersJsonSchema":{"$defs":{"x":{"type":"string"}},"additionalProperties":false,"properties":{"lines":{"type":["integer","null"]},"path":{"minLength":1,"type":"string"}},"required":["path"],"type":"object"}},` +
		`{"name":"now"}]}]}`
	if got != want {
		t.Errorf("request body =\n%s\nwant\n%s", got, want)
	}
}

func TestBaseURLAndVersion(t *testing.T) {
	s := newServer(t, reply{body: fixture(t, "text.sse")})
	p := newProvider(t, s, func(c *gemini.Config) { c.BaseURL, c.APIVersion = s.URL+"/proxy/gemini/", "v1" })
	if r := collect(t, t.Context(), p, simpleRequest()); r.err != nil {
		t.Fatal(r.err)
	}
	if path := s.request(t, 0).path; path != "/proxy/gemini/v1/models/gemini-2.5-flash:streamGenerateContent" {
		t.Errorf("path = %s", path)
	}
}

func TestBadRequestBeforeSending(t *testing.T) {
	s := newServer(t, reply{})
	p := newProvider(t, s)
	for name, req := range map[string]*llm.Request{
		"nil":            nil,
		"no model":       {Messages: []llm.Message{{Role: llm.RoleUser, Content: "x"}}},
		"unknown role":   {Model: "m", Messages: []llm.Message{{Role: "system", Content: "x"}}},
		"bad schema":     {Model: "m", Tools: []llm.ToolSpec{{Name: "t", InputSchema: json.RawMessage(`{`)}}},
		"schema no obj":  {Model: "m", Tools: []llm.ToolSpec{{Name: "t", InputSchema: json.RawMessage(`[]`)}}},
		"tool no name":   {Model: "m", Tools: []llm.ToolSpec{{}}},
		"result no name": {Model: "m", Messages: []llm.Message{{Role: llm.RoleTool, ToolCallID: "x", Content: "r"}}},
		"model with ?":   {Model: "m?key=x", Messages: []llm.Message{{Role: llm.RoleUser, Content: "x"}}},
		"model with ../": {Model: "../files", Messages: []llm.Message{{Role: llm.RoleUser, Content: "x"}}},
	} {
		r := collect(t, t.Context(), p, req)
		if e, ok := llm.AsError(r.err); !ok || e.Kind != llm.KindBadRequest || e.Retryable {
			t.Errorf("%s: err = %v", name, r.err)
		}
	}
	if n := s.count(); n != 0 {
		t.Errorf("sent %d requests", n)
	}
}

func TestNewValidates(t *testing.T) {
	budget := -2
	for name, cfg := range map[string]gemini.Config{
		"no key":          {},
		"bad base URL":    {APIKey: "k", BaseURL: "localhost:8080"},
		"client timeout":  {APIKey: "k", HTTPClient: &http.Client{Timeout: time.Minute}},
		"bad level":       {APIKey: "k", ThinkingLevel: "extreme"},
		"negative budget": {APIKey: "k", ThinkingBudget: &budget},
	} {
		if _, err := gemini.New(cfg); err == nil {
			t.Errorf("%s: New succeeded", name)
		}
	}
	if _, err := gemini.New(gemini.Config{APIKey: "k"}); err != nil {
		t.Errorf("defaults: %v", err)
	}
}
