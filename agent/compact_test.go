package agent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"reflect"
	"strings"
	"sync"
	"testing"

	"weft.dev/weft/agent"
	"weft.dev/weft/event"
	"weft.dev/weft/llm"
	"weft.dev/weft/store"
)

// recorder wraps a provider and keeps every request it is sent.
type recorder struct {
	llm.Provider
	mu   sync.Mutex
	reqs []llm.Request
}

func (r *recorder) Stream(ctx context.Context, req *llm.Request) iter.Seq2[llm.StreamEvent, error] {
	r.mu.Lock()
	c := *req
	c.Messages = append([]llm.Message(nil), req.Messages...)
	r.reqs = append(r.reqs, c)
	r.mu.Unlock()
	return r.Provider.Stream(ctx, req)
}

// steps returns the requests of ordinary steps (not summaries).
func (r *recorder) steps() []llm.Request {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []llm.Request
	for _, q := range r.reqs {
		if q.Purpose == "" {
			out = append(out, q)
		}
	}
	return out
}

// chars is what the scripted provider counts of a request.
func chars(req llm.Request) int {
	n := len(req.System)
	for _, m := range req.Messages {
		n += len(m.Content) + len(m.Reasoning)
		for _, c := range m.ToolCalls {
			n += len(c.Name) + len(c.Arguments)
		}
	}
	for _, t := range req.Tools {
		n += len(t.Name) + len(t.Description) + len(t.InputSchema)
	}
	return n
}

// longScript writes a 3,000-byte file at each of n steps, then answers.
func longScript(n int, extra string) string {
	var steps []string
	for i := range n {
		steps = append(steps, fmt.Sprintf(`{"text":"step %d","toolCalls":[{"name":"write_file","arguments":{"path":"f%d.txt","content":%q}}]}`,
			i, i, strings.Repeat("x", 3000)))
	}
	steps = append(steps, `{"text":"all written"}`)
	return `{` + extra + `"steps":[` + strings.Join(steps, ",") + `]}`
}

// TestCompactionKeepsALongRunGoing: a run that writes far more than its
// model's window compacts between steps, keeps every request within the
// window, follows the script to its end, and the log rebuilds the
// conversation the loop had.
func TestCompactionKeepsALongRunGoing(t *testing.T) {
	f := newFixture(t)
	f.state = func(context.Context) string {
		return "Live background processes:\n- proc_bg: running; handle {\"__handle__\":\"process\",\"id\":\"proc_bg\"}"
	}
	rec := &recorder{Provider: script(t, longScript(40, `"summary":"Wrote files so far.",`))}
	const window = 8000
	out, evs := f.run(context.Background(), agent.Config{Provider: rec, ContextWindow: window, MaxSteps: 60}, "write forty files", nil)
	if out.Type != event.RunCompleted || out.Text != "all written" || out.Steps != 41 {
		t.Fatalf("outcome %+v", out)
	}
	cs := find[event.ContextCompactedData](t, evs, event.ContextCompacted)
	if len(cs) < 3 {
		t.Fatalf("%d compactions; want several", len(cs))
	}
	for i, c := range cs {
		if c.Reason != event.CompactThreshold || c.TokensBefore <= c.TokensAfter || c.TokensBefore < window*8/10 ||
			!strings.Contains(c.Summary, "Wrote files so far.") || !strings.Contains(c.State, "proc_bg") || c.UpToSeq == 0 || c.Usage.InputTokens == 0 {
			t.Errorf("compaction %d: %+v", i, c)
		}
	}
	for i, q := range rec.steps() {
		if tokens := (chars(q) + 3) / 4; tokens > window {
			t.Errorf("step request %d is %d tokens, over the window of %d", i, tokens, window)
		}
	}
	// The summary request carries the handles.
	var sum *llm.Request
	for _, q := range rec.reqs {
		if q.Purpose == llm.PurposeSummary {
			sum = &q
			break
		}
	}
	if sum == nil || !strings.Contains(sum.Messages[len(sum.Messages)-1].Content, `"id":"proc_bg"`) {
		t.Fatalf("summary request without the state: %+v", sum)
	}
	// What the log rebuilds is the conversation the loop went on with:
	// the last step's request plus its answer.
	steps := rec.steps()
	last := steps[len(steps)-1]
	want := append(append([]llm.Message(nil), last.Messages...), llm.Message{Role: llm.RoleAssistant, Content: "all written"})
	got, _ := f.transcriptBasis()
	if !sameMessages(got, want) {
		t.Fatalf("the log rebuilds\n%s\nthe loop had\n%s", dump(got), dump(want))
	}
	if !strings.HasPrefix(got[0].Content, "[The conversation before this point was compacted") || !strings.Contains(got[0].Content, "proc_bg") {
		t.Fatalf("compacted transcript starts with %q", got[0].Content)
	}
	// The full view keeps every message.
	all, err := f.st.Read(context.Background(), store.ReadParams{SessionID: "ses_t", Limit: 1 << 20, Types: agent.TranscriptTypes()})
	if err != nil {
		t.Fatal(err)
	}
	full, err := agent.FullTranscript(all)
	if err != nil || len(full) != 1+41+40 {
		t.Fatalf("full transcript: %d messages, %v", len(full), err)
	}
}

// TestCompactedTranscriptSnapshot: a builder's snapshot after a
// compaction decodes to the same conversation and basis.
func TestCompactedTranscriptSnapshot(t *testing.T) {
	f := newFixture(t)
	rec := &recorder{Provider: script(t, longScript(12, ""))}
	out, _ := f.run(context.Background(), agent.Config{Provider: rec, ContextWindow: 4000}, "go", nil)
	if out.Type != event.RunCompleted {
		t.Fatalf("outcome %+v", out)
	}
	evs, err := f.st.Read(context.Background(), store.ReadParams{SessionID: "ses_t", Limit: 1 << 20, Types: agent.TranscriptTypes()})
	if err != nil {
		t.Fatal(err)
	}
	var b agent.TranscriptBuilder
	for _, e := range evs {
		if err := b.Add(e); err != nil {
			t.Fatal(err)
		}
	}
	if b.Compactions() == 0 {
		t.Fatal("no compaction")
	}
	data, err := b.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	var c agent.TranscriptBuilder
	if err := c.UnmarshalBinary(data); err != nil {
		t.Fatal(err)
	}
	if !sameMessages(b.Messages(), c.Messages()) || b.Basis() != c.Basis() || c.Compactions() != b.Compactions() {
		t.Fatalf("decoded snapshot differs: basis %+v vs %+v", c.Basis(), b.Basis())
	}
	if b.Basis().Tokens == 0 {
		t.Fatalf("basis %+v: the last usage is not in it", b.Basis())
	}
}

// TestProviderOverflowCompactsAndRetries: a provider that refuses a
// step as too long gets one compaction and the step again.
func TestProviderOverflowCompactsAndRetries(t *testing.T) {
	f := newFixture(t)
	rec := &recorder{Provider: script(t, `{"steps":[
		{"text":"reading","toolCalls":[{"name":"list_dir","arguments":{"path":"."}}]},
		{"text":"done","error":{"kind":"context_overflow","status":400,"message":"prompt is too long: 250000 tokens > 200000 maximum","times":1}}]}`)}
	out, evs := f.run(context.Background(), agent.Config{Provider: rec}, "go", nil)
	if out.Type != event.RunCompleted || out.Text != "done" {
		t.Fatalf("outcome %+v", out)
	}
	cs := find[event.ContextCompactedData](t, evs, event.ContextCompacted)
	if len(cs) != 1 || cs[0].Reason != event.CompactOverflow || cs[0].Step != 2 {
		t.Fatalf("compactions %+v", cs)
	}
	if n := len(find[event.StepData](t, evs, event.StepStarted)); n != 2 {
		t.Fatalf("%d steps started; the retry is the same step", n)
	}
}

// TestOverflowAfterCompactionFails: a provider that still refuses the
// request after the compaction fails the run with context_overflow, and
// so does a window that the compacted conversation still exceeds.
func TestOverflowAfterCompactionFails(t *testing.T) {
	t.Run("provider", func(t *testing.T) {
		f := newFixture(t)
		p := script(t, `{"steps":[{"error":{"kind":"context_overflow","status":400,"message":"context_length_exceeded: too long"}}]}`)
		out, evs := f.run(context.Background(), agent.Config{Provider: p}, "go", nil)
		if out.Type != event.RunFailed || out.Error == nil || out.Error.Kind != agent.KindContextOverflow {
			t.Fatalf("outcome %+v", out)
		}
		if n := len(find[event.ContextCompactedData](t, evs, event.ContextCompacted)); n != 1 {
			t.Fatalf("%d compactions; want one", n)
		}
	})
	t.Run("window", func(t *testing.T) {
		f := newFixture(t)
		// The state alone is bigger than the window.
		f.state = func(context.Context) string { return strings.Repeat("state ", 2000) }
		p := script(t, longScript(10, ""))
		out, _ := f.run(context.Background(), agent.Config{Provider: p, ContextWindow: 2500}, "go", nil)
		if out.Type != event.RunFailed || out.Error == nil || out.Error.Kind != agent.KindContextOverflow ||
			!strings.Contains(out.Error.Message, "context window of 2500") {
			t.Fatalf("outcome %+v", out.Error)
		}
	})
}

// TestNoCompactionBelowThreshold: a run that stays below the threshold
// sends the conversation whole and writes no compaction.
func TestNoCompactionBelowThreshold(t *testing.T) {
	f := newFixture(t)
	out, evs := f.run(context.Background(), agent.Config{Provider: script(t, longScript(3, "")), ContextWindow: 1 << 20}, "go", nil)
	if out.Type != event.RunCompleted {
		t.Fatalf("outcome %+v", out)
	}
	if n := len(find[event.ContextCompactedData](t, evs, event.ContextCompacted)); n != 0 {
		t.Fatalf("%d compactions", n)
	}
}

func sameMessages(a, b []llm.Message) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i], b[i]
		if len(x.ProviderState) == 0 && len(y.ProviderState) == 0 {
			x.ProviderState, y.ProviderState = nil, nil
		}
		if len(x.ToolCalls) == 0 && len(y.ToolCalls) == 0 {
			x.ToolCalls, y.ToolCalls = nil, nil
		}
		if !reflect.DeepEqual(x, y) {
			return false
		}
	}
	return true
}

func dump(ms []llm.Message) string {
	b, _ := json.MarshalIndent(ms, "", " ")
	if len(b) > 4000 {
		b = b[:4000]
	}
	return string(b)
}

// TestContextTokens: cached input counts once whether the provider
// includes it in the input (OpenAI, Gemini) or reports it apart
// (Anthropic).
func TestContextTokens(t *testing.T) {
	for _, tc := range []struct {
		name string
		u    event.TokenUsage
		want int64
	}{
		{"plain", event.TokenUsage{InputTokens: 1000, OutputTokens: 50}, 1050},
		{"openai cached inside the input", event.TokenUsage{InputTokens: 1000, OutputTokens: 50, CacheReadTokens: 800}, 1050},
		{"anthropic cache read apart", event.TokenUsage{InputTokens: 20, OutputTokens: 50, CacheReadTokens: 980}, 1050},
		{"anthropic cache write apart", event.TokenUsage{InputTokens: 20, OutputTokens: 50, CacheWriteTokens: 980}, 1050},
	} {
		if got := agent.ContextTokens(tc.u); got != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, got, tc.want)
		}
	}
}

// toolCaller answers a summary request that offers tools with a tool
// call, and one that offers none with text.
type toolCaller struct{ seen []llm.Request }

func (p *toolCaller) Stream(_ context.Context, req *llm.Request) iter.Seq2[llm.StreamEvent, error] {
	p.seen = append(p.seen, *req)
	return func(yield func(llm.StreamEvent, error) bool) {
		if len(req.Tools) > 0 {
			if !yield(llm.StreamEvent{ToolCall: &llm.ToolCallDelta{ID: "c", Name: "list_dir", Arguments: "{}"}}, nil) {
				return
			}
			yield(llm.StreamEvent{Finish: &llm.Finish{Reason: llm.FinishToolCalls}}, nil)
			return
		}
		if yield(llm.StreamEvent{Text: "summary as text"}, nil) {
			yield(llm.StreamEvent{Finish: &llm.Finish{Reason: llm.FinishStop}}, nil)
		}
	}
}

// TestCompactModelCallsATool: a summariser that calls a tool instead of
// answering is asked again with the conversation as text and no tools.
func TestCompactModelCallsATool(t *testing.T) {
	p := &toolCaller{}
	d, err := agent.Compact(context.Background(), agent.CompactParams{
		Model: &agent.Model{Name: "x:y", Provider: p, Model: "y"},
		History: []llm.Message{{Role: llm.RoleUser, Content: "hi"},
			{Role: llm.RoleAssistant, ToolCalls: []event.ToolCall{{ID: "c1", Name: "list_dir", Arguments: "{}"}}},
			{Role: llm.RoleTool, ToolCallID: "c1", ToolName: "list_dir", Content: "a.txt"}},
		Tools: []llm.ToolSpec{{Name: "list_dir"}},
	})
	if err != nil || d.Summary != "summary as text" || len(p.seen) != 2 {
		t.Fatalf("summary %q, %v after %d requests", d.Summary, err, len(p.seen))
	}
	if m := p.seen[1].Messages[0].Content; !strings.Contains(m, "[result of list_dir (c1)]") || !strings.Contains(m, "[call list_dir (c1): {}]") {
		t.Fatalf("the conversation as text: %q", m)
	}
}

// TestTranscriptSnapshotV1: a snapshot stored before rewind and
// compaction existed (format WTX1: no seqs, no basis) is refused rather
// than decoded into a transcript a rewind could not cut; its owner reads
// the log instead.
func TestTranscriptSnapshotV1(t *testing.T) {
	var b agent.TranscriptBuilder
	e, _ := event.New("run", event.MessageUser, event.MessageUserData{Content: event.TextParts("hello")})
	if err := b.Add(e); err != nil {
		t.Fatal(err)
	}
	v2, err := b.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	v1 := append([]byte("WTX1"), v2[4:]...)
	var c agent.TranscriptBuilder
	if err := c.UnmarshalBinary(v1); err == nil {
		t.Fatalf("a WTX1 snapshot decoded to %+v", c.Messages())
	}
}

// TestCompactCost: a summary written by a priced model carries its cost
// in the context.compacted usage.
func TestCompactCost(t *testing.T) {
	p := script(t, `{"steps":[{"text":"x"}]}`)
	price := &llm.Price{InputPerMTok: 1e6, OutputPerMTok: 1e6}
	d, err := agent.Compact(context.Background(), agent.CompactParams{
		Model:   &agent.Model{Name: "scripted:x", Provider: p, Model: "x", Price: price},
		History: []llm.Message{{Role: llm.RoleUser, Content: "hello there"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := float64(d.Usage.InputTokens + d.Usage.OutputTokens); d.Usage.InputTokens == 0 || d.Usage.CostUSD != want {
		t.Fatalf("usage %+v, want cost %g", d.Usage, want)
	}
}
