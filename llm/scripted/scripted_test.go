package scripted_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"weft.dev/weft/event"
	"weft.dev/weft/llm"
	"weft.dev/weft/llm/scripted"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func parse(t testing.TB, src string) *scripted.Provider {
	t.Helper()
	p, err := scripted.Parse("script.json", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// result is a stream collected.
type result struct {
	events    []llm.StreamEvent
	text      string
	reasoning string
	calls     []event.ToolCall
	usage     *event.TokenUsage
	finish    *llm.Finish
	err       error
}

func collect(ctx context.Context, p llm.Provider, req *llm.Request) result {
	var r result
	for ev, err := range p.Stream(ctx, req) {
		if err != nil {
			r.err = err
			break
		}
		r.events = append(r.events, ev)
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
			r.usage = ev.Usage
		case ev.Finish != nil:
			r.finish = ev.Finish
		}
	}
	return r
}

func user(s string) llm.Message      { return llm.Message{Role: llm.RoleUser, Content: s} }
func assistant(s string) llm.Message { return llm.Message{Role: llm.RoleAssistant, Content: s} }

func request(msgs ...llm.Message) *llm.Request { return &llm.Request{Messages: msgs} }

func wantKind(t *testing.T, err error, kind string, retryable bool) *llm.Error {
	t.Helper()
	e, ok := llm.AsError(err)
	if !ok {
		t.Fatalf("err = %v (%T), want *llm.Error of kind %s", err, err, kind)
	}
	if e.Kind != kind || e.Retryable != retryable || e.Provider != "scripted" {
		t.Fatalf("err = %+v, want kind %s, retryable %v, provider scripted", e, kind, retryable)
	}
	return e
}

func TestTextStreamsWords(t *testing.T) {
	const text = "Hello,  world!\n\tSecond line — ünïcode ok. "
	src, _ := json.Marshal(map[string]any{"steps": []any{map[string]any{"reasoning": "Think  first.", "text": text}}})
	r := collect(t.Context(), parse(t, string(src)), request(user("hi")))
	if r.err != nil {
		t.Fatal(r.err)
	}
	var texts, reasons []string
	for _, ev := range r.events {
		if ev.Text != "" {
			texts = append(texts, ev.Text)
		}
		if ev.Reasoning != "" {
			reasons = append(reasons, ev.Reasoning)
		}
	}
	wantTexts := []string{"Hello,", "  world!", "\n\tSecond", " line", " —", " ünïcode", " ok.", " "}
	if !reflect.DeepEqual(texts, wantTexts) {
		t.Errorf("text deltas = %q, want %q", texts, wantTexts)
	}
	if r.text != text {
		t.Errorf("text = %q", r.text)
	}
	if !reflect.DeepEqual(reasons, []string{"Think", "  first."}) {
		t.Errorf("reasoning deltas = %q", reasons)
	}
	// Reasoning streams before text; usage and finish come last.
	if r.events[0].Reasoning == "" {
		t.Errorf("first event = %+v, want reasoning", r.events[0])
	}
	n := len(r.events)
	if r.events[n-2].Usage == nil || r.events[n-1].Finish == nil || r.finish.Reason != llm.FinishStop {
		t.Errorf("last events = %+v, %+v", r.events[n-2], r.events[n-1])
	}
}

func TestToolCalls(t *testing.T) {
	p := parse(t, `{"steps": [
		{"text": "Writing two files.", "toolCalls": [
			{"name": "write_file", "arguments": {"path": "a.txt", "content": "ä\nb"}},
			{"id": "mine", "name": "write_file", "arguments": {"path": "b.txt"}},
			{"name": "broken", "arguments": "{\"path\": \"c.txt\""},
			{"name": "noargs"}
		]},
		{"toolCalls": [{"name": "ls", "arguments": {}}]}
	]}`)
	r := collect(t.Context(), p, request(user("go")))
	if r.err != nil {
		t.Fatal(r.err)
	}
	want := []event.ToolCall{
		{ID: "call_0_0", Name: "write_file", Arguments: `{"path":"a.txt","content":"ä\nb"}`},
		{ID: "mine", Name: "write_file", Arguments: `{"path":"b.txt"}`},
		{ID: "call_0_2", Name: "broken", Arguments: `{"path": "c.txt"`},
		{ID: "call_0_3", Name: "noargs", Arguments: `{}`},
	}
	if !reflect.DeepEqual(r.calls, want) {
		t.Errorf("calls =\n%+v\nwant\n%+v", r.calls, want)
	}
	if r.finish.Reason != llm.FinishToolCalls {
		t.Errorf("finish = %+v", r.finish)
	}
	// Arguments arrive in several fragments; the first fragment of a call
	// carries its id and name.
	frags := 0
	for _, ev := range r.events {
		if tc := ev.ToolCall; tc != nil && tc.Index == 0 {
			if frags == 0 && (tc.ID == "" || tc.Arguments != "") {
				t.Errorf("first fragment = %+v", tc)
			}
			frags++
		}
	}
	if frags != 4 {
		t.Errorf("call 0 came in %d fragments, want 1 header and 3 argument fragments", frags)
	}

	// The next turn's ids are derived from the turn, so they stay unique.
	r = collect(t.Context(), p, request(user("go"), assistant("Writing two files."), user("more")))
	if r.err != nil || len(r.calls) != 1 || r.calls[0].ID != "call_1_0" {
		t.Errorf("second turn: %+v, %v", r.calls, r.err)
	}
}

func TestStepSelection(t *testing.T) {
	const src = `{"steps": [{"text": "zero"}, {"text": "one"}, {"text": "two"}]}`
	p := parse(t, src)
	msgs := []llm.Message{user("a")}
	for i, want := range []string{"zero", "one", "two"} {
		r := collect(t.Context(), p, request(msgs...))
		if r.err != nil || r.text != want {
			t.Fatalf("request %d: %q, %v; want %q", i, r.text, r.err, want)
		}
		msgs = append(msgs, assistant(r.text), user("next"))
	}
	// Tool results and user messages do not advance the step; only
	// assistant messages do.
	r := collect(t.Context(), p, request(user("a"), assistant(""), llm.Message{Role: llm.RoleTool, ToolCallID: "x", Content: "r"}, user("b"), user("c")))
	if r.text != "one" {
		t.Errorf("text = %q, want one", r.text)
	}
	// A new Provider, as after a restart, answers the same request the same way.
	again := collect(t.Context(), parse(t, src), request(user("a"), assistant("zero"), user("next")))
	if again.text != "one" {
		t.Errorf("after restart: %q", again.text)
	}
}

func TestLoop(t *testing.T) {
	p := parse(t, `{"steps": [{"text": "ping {{step}}/{{turn}}"}, {"text": "pong {{step}}/{{turn}}"}], "loop": true}`)
	var msgs []llm.Message
	var got []string
	for range 5 {
		msgs = append(msgs, user("x"))
		r := collect(t.Context(), p, request(msgs...))
		if r.err != nil {
			t.Fatal(r.err)
		}
		got = append(got, r.text)
		msgs = append(msgs, assistant(r.text))
	}
	want := []string{"ping 0/0", "pong 1/1", "ping 0/2", "pong 1/3", "ping 0/4"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestRunsOut(t *testing.T) {
	p := parse(t, `{"steps": [{"text": "only"}]}`)
	r := collect(t.Context(), p, request(user("a"), assistant("only"), user("b")))
	e := wantKind(t, r.err, llm.KindScript, false)
	for _, s := range []string{"script.json", "steps[1]", "only 1 steps"} {
		if !strings.Contains(e.Error(), s) {
			t.Errorf("error %q does not mention %q", e.Error(), s)
		}
	}
	if len(r.events) != 0 {
		t.Errorf("events before the error: %+v", r.events)
	}
}

func TestEcho(t *testing.T) {
	p := parse(t, `{"steps": [
		{"text": "You said: {{input}}", "toolCalls": [
			{"name": "echo", "arguments": {"msg": "<{{input}}>", "step": "{{step}}"}},
			{"name": "raw", "arguments": "raw {{input}}"}
		]},
		{"text": "Now: {{input}}"}
	]}`)
	const tricky = "say \"hi\"\n<&>"
	r := collect(t.Context(), p, request(user(tricky)))
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.text != "You said: "+tricky {
		t.Errorf("text = %q", r.text)
	}
	var args map[string]string
	if err := json.Unmarshal([]byte(r.calls[0].Arguments), &args); err != nil {
		t.Fatalf("arguments %s: %v", r.calls[0].Arguments, err)
	}
	if args["msg"] != "<"+tricky+">" || args["step"] != "0" {
		t.Errorf("arguments = %v", args)
	}
	if r.calls[1].Arguments != "raw "+tricky {
		t.Errorf("raw arguments = %q", r.calls[1].Arguments)
	}

	// Steering arrives as a user message after the tool results; the
	// latest user message is echoed.
	r = collect(t.Context(), p, request(
		user("first"),
		llm.Message{Role: llm.RoleAssistant, ToolCalls: []event.ToolCall{{ID: "call_0_0", Name: "echo"}}},
		llm.Message{Role: llm.RoleTool, ToolCallID: "call_0_0", Content: "ok"},
		user("steer: stop"),
	))
	if r.text != "Now: steer: stop" {
		t.Errorf("text = %q", r.text)
	}
}

// {{images}} names the images the model was given since its last
// message: the user's and the tool results'.
func TestImagesPlaceholder(t *testing.T) {
	p := parse(t, `{"steps": [{"text": "I see {{images}}.", "toolCalls": [{"name": "shot"}]}, {"text": "Now {{images}}."}, {"text": "And {{images}}."}]}`)
	png := llm.Attachment{MediaType: "image/png", Data: make([]byte, 68)}
	r := collect(t.Context(), p, request(llm.Message{Role: llm.RoleUser, Content: "look", Attachments: []llm.Attachment{png}}))
	if r.text != "I see image/png 68 bytes." {
		t.Errorf("text = %q", r.text)
	}
	msgs := []llm.Message{
		{Role: llm.RoleUser, Content: "look", Attachments: []llm.Attachment{png}},
		{Role: llm.RoleAssistant, ToolCalls: []event.ToolCall{{ID: "call_0_0", Name: "shot"}}},
		{Role: llm.RoleTool, ToolCallID: "call_0_0", Content: "ok", Attachments: []llm.Attachment{{MediaType: "image/jpeg", Data: make([]byte, 5)}}},
	}
	if r = collect(t.Context(), p, request(msgs...)); r.text != "Now image/jpeg 5 bytes." {
		t.Errorf("text = %q", r.text)
	}
	msgs = append(msgs, assistant("hm"), user("and?"))
	if r = collect(t.Context(), p, request(msgs...)); r.text != "And no images." {
		t.Errorf("text = %q", r.text)
	}
}

func TestDelay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := parse(t, `{"steps": [{"text": "one two three", "delayMs": 5}]}`)
		start := time.Now()
		r := collect(t.Context(), p, request(user("x")))
		if r.err != nil || r.text != "one two three" {
			t.Fatalf("%q, %v", r.text, r.err)
		}
		if d := time.Since(start); d != 15*time.Millisecond {
			t.Errorf("took %v, want 3 tokens × 5ms", d)
		}
	})
}

func TestDelayHonoursCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := parse(t, `{"steps": [{"text": "one two three", "delayMs": 60000}]}`)
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		go func() {
			time.Sleep(90 * time.Second) // during the second token's delay
			cancel()
		}()
		start := time.Now()
		r := collect(ctx, p, request(user("x")))
		if !errors.Is(r.err, context.Canceled) {
			t.Fatalf("err = %v, want context.Canceled", r.err)
		}
		if _, ok := llm.AsError(r.err); ok {
			t.Errorf("cancellation is not a provider error: %v", r.err)
		}
		if r.text != "one" || time.Since(start) != 90*time.Second {
			t.Errorf("text %q after %v", r.text, time.Since(start))
		}
	})
	// A context that is already done yields its error at once.
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	r := collect(ctx, parse(t, `{"steps": [{"text": "x"}]}`), request())
	if !errors.Is(r.err, context.Canceled) || len(r.events) != 0 {
		t.Errorf("%+v", r)
	}
}

func TestErrorTimes(t *testing.T) {
	const src = `{"steps": [
		{"error": {"kind": "server", "status": 503, "times": 2, "retryAfterMs": 1500, "message": "overloaded"}, "text": "Recovered."}
	]}`
	p := parse(t, src)
	for attempt := 1; attempt <= 2; attempt++ {
		r := collect(t.Context(), p, request(user("x")))
		e := wantKind(t, r.err, llm.KindServer, true)
		if e.StatusCode != 503 || e.RetryAfter != 1500*time.Millisecond || !strings.Contains(e.Error(), "overloaded") {
			t.Errorf("attempt %d: %+v", attempt, e)
		}
		if len(r.events) != 0 {
			t.Errorf("attempt %d: events before the error", attempt)
		}
	}
	if r := collect(t.Context(), p, request(user("x"))); r.err != nil || r.text != "Recovered." {
		t.Fatalf("third attempt: %q, %v", r.text, r.err)
	}
	if r := collect(t.Context(), p, request(user("x"))); r.err != nil {
		t.Fatalf("fourth attempt: %v", r.err)
	}
	// The count belongs to the Provider value, not to the package.
	if r := collect(t.Context(), parse(t, src), request(user("x"))); r.err == nil {
		t.Error("a fresh Provider did not fail")
	}
}

func TestErrorAlways(t *testing.T) {
	p := parse(t, `{"steps": [{"error": {"kind": "auth", "status": 401}}]}`)
	for range 3 {
		r := collect(t.Context(), p, request(user("x")))
		if e := wantKind(t, r.err, llm.KindAuth, false); e.StatusCode != 401 {
			t.Errorf("%+v", e)
		}
	}
}

func TestErrorKinds(t *testing.T) {
	for kind, retryable := range map[string]bool{
		llm.KindRateLimited: true,
		llm.KindServer:      true,
		llm.KindConnection:  true,
		llm.KindStreamCut:   true,
		llm.KindAuth:        false,
		llm.KindBadRequest:  false,
		llm.KindMalformed:   false,
	} {
		r := collect(t.Context(), parse(t, `{"steps": [{"error": {"kind": "`+kind+`"}}]}`), request())
		wantKind(t, r.err, kind, retryable)
	}
	r := collect(t.Context(), parse(t, `{"steps": [{"error": {"kind": "bad_request", "retryable": true}}]}`), request())
	wantKind(t, r.err, llm.KindBadRequest, true)
}

func TestStreamCut(t *testing.T) {
	p := parse(t, `{"steps": [{"text": "a b c d e", "error": {"kind": "stream_cut", "afterTokens": 3, "times": 1}}]}`)
	r := collect(t.Context(), p, request(user("x")))
	wantKind(t, r.err, llm.KindStreamCut, true)
	if r.text != "a b c" || r.finish != nil {
		t.Errorf("text %q, finish %+v", r.text, r.finish)
	}
	r = collect(t.Context(), p, request(user("x")))
	if r.err != nil || r.text != "a b c d e" || r.finish == nil {
		t.Errorf("retry: %q, %v", r.text, r.err)
	}
	// afterTokens past the end: all output, then the error instead of finish.
	p = parse(t, `{"steps": [{"text": "a b", "error": {"kind": "stream_cut", "afterTokens": 99}}]}`)
	r = collect(t.Context(), p, request(user("x")))
	wantKind(t, r.err, llm.KindStreamCut, true)
	if r.text != "a b" || r.finish != nil || r.usage != nil {
		t.Errorf("%+v", r)
	}
}

func TestConcurrentAttempts(t *testing.T) {
	p := parse(t, `{"steps": [{"text": "ok", "error": {"kind": "server", "times": 5}}]}`)
	var mu sync.Mutex
	failed := 0
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			r := collect(context.Background(), p, request(user("x")))
			if r.err != nil {
				mu.Lock()
				failed++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if failed != 5 {
		t.Errorf("%d requests failed, want 5", failed)
	}
}

func TestUsage(t *testing.T) {
	p := parse(t, `{"steps": [{"reasoning": "12345678", "text": "abcd", "toolCalls": [{"name": "ab", "arguments": "xy"}]}]}`)
	req := &llm.Request{System: "sys", Messages: []llm.Message{user("hello")}, Tools: []llm.ToolSpec{{Name: "t", InputSchema: json.RawMessage(`{}`)}}}
	r := collect(t.Context(), p, req)
	if r.err != nil {
		t.Fatal(r.err)
	}
	// input: "sys" + "hello" + "t" + "{}" = 11 chars -> 3; output: 8+4+2+2 = 16 -> 4; reasoning 8 -> 2.
	want := event.TokenUsage{InputTokens: 3, OutputTokens: 4, ReasoningTokens: 2}
	if r.usage == nil || *r.usage != want {
		t.Errorf("usage = %+v, want %+v", r.usage, want)
	}
	r = collect(t.Context(), parse(t, `{"steps": [{"text": "x"}], "usage": false}`), req)
	if r.usage != nil {
		t.Errorf("usage %+v with usage: false", r.usage)
	}
}

func TestFinishAndProviderState(t *testing.T) {
	p := parse(t, `{"steps": [{"text": "cut sh", "finish": "length", "providerState": {"sig": "abc"}}]}`)
	r := collect(t.Context(), p, request(user("x")))
	if r.finish == nil || r.finish.Reason != llm.FinishLength || string(r.finish.ProviderState) != `{"sig":"abc"}` {
		t.Errorf("finish = %+v", r.finish)
	}
}

func TestDeterministic(t *testing.T) {
	const src = `{"steps": [{"reasoning": "hmm {{input}}", "text": "Hi {{input}}", "toolCalls": [{"name": "f", "arguments": {"a": [1, 2, {"b": "{{input}}"}]}}]}]}`
	req := request(user("there"))
	a := collect(t.Context(), parse(t, src), req)
	b := collect(t.Context(), parse(t, src), req)
	if a.err != nil || !reflect.DeepEqual(a.events, b.events) {
		t.Errorf("two runs differ or failed: %v\n%+v\n%+v", a.err, a.events, b.events)
	}
}

func TestBreakEarly(t *testing.T) {
	p := parse(t, `{"steps": [{"text": "a b c d", "delayMs": 1}]}`)
	n := 0
	for _, err := range p.Stream(t.Context(), request()) {
		if err != nil {
			t.Fatal(err)
		}
		n++
		break
	}
	if n != 1 {
		t.Errorf("n = %d", n)
	}
}

func TestLoad(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.json")
	if err := os.WriteFile(path, []byte(`{"steps": [{"text": "from file"}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	p, err := scripted.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if p.Name() != path || p.Steps() != 1 {
		t.Errorf("Name %q Steps %d", p.Name(), p.Steps())
	}
	if r := collect(t.Context(), p, request()); r.text != "from file" {
		t.Errorf("text %q", r.text)
	}
	if _, err := scripted.Load(filepath.Join(t.TempDir(), "missing.json")); err == nil || !strings.Contains(err.Error(), "missing.json") {
		t.Errorf("missing file: %v", err)
	}
	bad := filepath.Join(t.TempDir(), "bad.json")
	if err := os.WriteFile(bad, []byte(`{"steps": [{}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := scripted.Load(bad); err == nil || !strings.HasPrefix(err.Error(), bad+": steps[0]: empty step") {
		t.Errorf("bad file: %v", err)
	}
}

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct{ src, want string }{
		{``, "script.json: line 1, column 1: invalid JSON"},
		{"{\n  \"steps\": [\n    {\"text\": \"a\"},\n    {\"text\": \"b\",}\n  ]\n}", "script.json: line 4, column 18: invalid JSON"},
		{`{"steps": []} x`, "script.json: line 1, column 15: invalid JSON"},
		{`[]`, "script.json: top level: want an object, got an array"},
		{`{}`, "script.json: steps: required"},
		{`{"steps": {}}`, "script.json: steps: want an array, got an object"},
		{`{"steps": []}`, "script.json: steps: the script needs at least one step"},
		{`{"steps": [{"text": "a"}], "lop": true}`, `script.json: top level: unknown field "lop"`},
		{`{"steps": [{"text": "a"}], "loop": "yes"}`, "script.json: loop: want true or false, got a string"},
		{`{"steps": [{"text": "a"}], "usage": 1}`, "script.json: usage: want true or false, got the number 1"},
		{`{"steps": [{"text": "a"}], "steps": []}`, `script.json: steps: duplicate field "steps"`},
		{`{"steps": ["hi"]}`, "script.json: steps[0]: want an object, got a string"},
		{`{"steps": [{"text": "a"}, {}]}`, "script.json: steps[1]: empty step"},
		{`{"steps": [{"comment": "only a comment"}]}`, "script.json: steps[0]: empty step"},
		{`{"steps": [{"txt": "a"}]}`, `script.json: steps[0]: unknown field "txt"`},
		{`{"steps": [{"text": null}]}`, "script.json: steps[0].text: want a string, got null"},
		{`{"steps": [{"text": 5}]}`, "script.json: steps[0].text: want a string, got the number 5"},
		{`{"steps": [{"text": "a", "delayMs": -1}]}`, "script.json: steps[0].delayMs: must not be negative"},
		{`{"steps": [{"text": "a", "delayMs": 1.5}]}`, "script.json: steps[0].delayMs: want a whole number, got the number 1.5"},
		{`{"steps": [{"text": "a", "delayMs": "5"}]}`, "script.json: steps[0].delayMs: want a whole number, got a string"},
		{`{"steps": [{"text": "a", "finish": "done"}]}`, `script.json: steps[0].finish: "done" is not one of stop, tool_calls, length, other`},
		{`{"steps": [{"toolCalls": {}}]}`, "script.json: steps[0].toolCalls: want an array, got an object"},
		{`{"steps": [{"text": "a"}, {"text": "b"}, {"toolCalls": [{"arguments": {}}]}]}`, "script.json: steps[2].toolCalls[0].name: required"},
		{`{"steps": [{"toolCalls": [{"name": ""}]}]}`, "script.json: steps[0].toolCalls[0].name: required"},
		{`{"steps": [{"toolCalls": [{"name": "f", "args": {}}]}]}`, `script.json: steps[0].toolCalls[0]: unknown field "args"`},
		{`{"steps": [{"toolCalls": [{"name": "f", "id": 3}]}]}`, "script.json: steps[0].toolCalls[0].id: want a string, got the number 3"},
		{`{"steps": [{"error": {}}]}`, "script.json: steps[0].error.kind: required (one of rate_limited, server"},
		{`{"steps": [{"error": "server"}]}`, "script.json: steps[0].error: want an object, got a string"},
		{`{"steps": [{"error": {"kind": "boom"}}]}`, `script.json: steps[0].error.kind: "boom" is not one of`},
		{`{"steps": [{"error": {"kind": "script"}}]}`, `script.json: steps[0].error.kind: "script" is not one of`},
		{`{"steps": [{"error": {"kind": "server", "status": 42}}]}`, "script.json: steps[0].error.status: 42 is not an HTTP status"},
		{`{"steps": [{"error": {"kind": "server", "times": -2}}]}`, "script.json: steps[0].error.times: must not be negative"},
		{`{"steps": [{"error": {"kind": "server", "retryAfterMs": true}}]}`, "script.json: steps[0].error.retryAfterMs: want a whole number, got a boolean"},
		{`{"steps": [{"error": {"kind": "server", "retryable": "no"}}]}`, "script.json: steps[0].error.retryable: want true or false"},
		{`{"steps": [{"error": {"kind": "server", "afterTokens": -1}}]}`, "script.json: steps[0].error.afterTokens: must not be negative"},
		{`{"steps": [{"error": {"kind": "server", "tims": 1}}]}`, `script.json: steps[0].error: unknown field "tims"`},
	} {
		_, err := scripted.Parse("script.json", []byte(tc.src))
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("Parse(%s):\n got %v\nwant %s…", tc.src, err, tc.want)
		}
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{
		`{"steps": [{"text": "hi {{input}}", "reasoning": "r", "delayMs": 0}]}`,
		`{"steps": [{"toolCalls": [{"name": "f", "arguments": {"a": "{{input}}"}}, {"name": "g", "arguments": "{bad"}]}], "loop": true}`,
		`{"steps": [{"error": {"kind": "stream_cut", "afterTokens": 2, "times": 1}, "text": "a b c"}], "usage": false}`,
		`{"steps": [{"text": "x", "finish": "length", "providerState": [1, 2]}]}`,
		`{"steps": []}`,
		`{`,
	} {
		f.Add([]byte(s), "in\"put")
	}
	f.Fuzz(func(t *testing.T, data []byte, input string) {
		p, err := scripted.Parse("fuzz.json", data)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "fuzz.json: ") {
				t.Fatalf("error does not name the script: %v", err)
			}
			return
		}
		for turn := range 3 {
			msgs := []llm.Message{user(input)}
			for range turn {
				msgs = append(msgs, assistant("a"), user(input))
			}
			// A fuzzed delayMs may be huge; the deadline bounds it.
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
			r := collect(ctx, p, request(msgs...))
			cancel()
			if errors.Is(r.err, context.DeadlineExceeded) {
				continue
			}
			if r.err != nil {
				if _, ok := llm.AsError(r.err); !ok {
					t.Fatalf("error is not an *llm.Error: %v", r.err)
				}
				continue
			}
			if r.finish == nil {
				t.Fatal("successful stream without Finish")
			}
			for _, c := range r.calls {
				if c.ID == "" || c.Name == "" {
					t.Fatalf("tool call without id or name: %+v", c)
				}
			}
		}
	})
}
