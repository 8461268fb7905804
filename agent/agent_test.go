package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"weft.dev/weft/agent"
	"weft.dev/weft/env"
	"weft.dev/weft/event"
	"weft.dev/weft/internal/proctest"
	"weft.dev/weft/llm"
	"weft.dev/weft/llm/scripted"
	"weft.dev/weft/store"
	"weft.dev/weft/store/memory"
	"weft.dev/weft/store/record"
	"weft.dev/weft/tool"
	"weft.dev/weft/tool/builtin"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fixture is a session with a journal, a mounted temp dir and the builtin tools.
type fixture struct {
	t    *testing.T
	st   store.Store
	j    *storeLog
	dir  string
	b    *env.Binding
	reg  *tool.Registry
	runs int
	// stepTools, if set, is the runs' Run.Tools.
	stepTools func(context.Context) *tool.Registry
	// state, if set, is the runs' Run.State.
	state func(context.Context) string
	// budget, if set, is the runs' Run.Budget.
	budget agent.BudgetCheck
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	dir := t.TempDir()
	st := memory.New()
	mounts := []event.Mount{{ID: "work", Kind: event.KindLocal, Path: dir, Mode: event.ModeReadWrite, Default: true, DefaultForShell: true}}
	j, err := createLog(context.Background(), st, "ses_t", event.SessionCreatedData{Mounts: mounts})
	if err != nil {
		t.Fatal(err)
	}
	b, err := env.NewBinding(1, mounts)
	if err != nil {
		t.Fatal(err)
	}
	reg := tool.NewRegistry()
	if err := builtin.Register(reg, builtin.Options{}); err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, st: st, j: j, dir: dir, b: b, reg: reg}
	t.Cleanup(func() { b.Close() })
	return f
}

func script(t *testing.T, s string) *scripted.Provider {
	t.Helper()
	p, err := scripted.Parse("test.json", []byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// run executes one run with cfg (Provider must be set) and returns its outcome and events.
func (f *fixture) run(ctx context.Context, cfg agent.Config, input string, inbox agent.Inbox) (agent.Outcome, []event.Event) {
	f.t.Helper()
	f.runs++
	runID := "run_" + string(rune('a'+f.runs))
	if cfg.Tools == nil {
		cfg.Tools = f.reg
	}
	if cfg.Model == "" {
		cfg.Model = "m"
	}
	cfg.Retry.BaseDelay = time.Millisecond
	q, _ := event.New(runID, event.RunQueued, event.RunQueuedData{Model: "scripted:test"})
	if _, err := f.j.Append(ctx, q); err != nil {
		f.t.Fatal(err)
	}
	history, basis := f.transcriptBasis()
	out, err := agent.Execute(ctx, cfg, f.j, agent.Run{
		ID: runID, SessionID: "ses_t", ModelName: "scripted:test", Input: event.TextParts(input),
		History: history, Env: func() *env.Binding { return f.b }, Inbox: inbox, Tools: f.stepTools,
		Basis: basis, State: f.state, Budget: f.budget,
	})
	if err != nil {
		f.t.Fatal(err)
	}
	if err := f.j.Flush(context.Background()); err != nil {
		f.t.Fatal(err)
	}
	evs, err := f.st.Read(context.Background(), store.ReadParams{SessionID: "ses_t", RunID: runID, Limit: 1000})
	if err != nil {
		f.t.Fatal(err)
	}
	if last := evs[len(evs)-1]; !event.IsTerminalRun(last.Type) {
		f.t.Fatalf("last event of the run is %s, not terminal", last.Type)
	}
	return out, evs
}

func (f *fixture) transcript() []llm.Message {
	evs, err := f.st.Read(context.Background(), store.ReadParams{SessionID: "ses_t", Limit: 1000, Types: agent.TranscriptTypes()})
	if err != nil {
		f.t.Fatal(err)
	}
	msgs, err := agent.Transcript(evs)
	if err != nil {
		f.t.Fatal(err)
	}
	return msgs
}

// transcriptBasis is the session's transcript and its Basis, as a host
// hands them to a run.
func (f *fixture) transcriptBasis() ([]llm.Message, agent.Basis) {
	evs, err := f.st.Read(context.Background(), store.ReadParams{SessionID: "ses_t", Limit: 1 << 20, Types: agent.TranscriptTypes()})
	if err != nil {
		f.t.Fatal(err)
	}
	var b agent.TranscriptBuilder
	for _, e := range evs {
		if err := b.Add(e); err != nil {
			f.t.Fatal(err)
		}
	}
	return b.Messages(), b.Basis()
}

func types(evs []event.Event) []event.Type {
	var out []event.Type
	for _, e := range evs {
		if e.Type != event.MessageDelta {
			out = append(out, e.Type)
		}
	}
	return out
}

func find[T any](t *testing.T, evs []event.Event, typ event.Type) []T {
	t.Helper()
	var out []T
	for _, e := range evs {
		if e.Type == typ {
			var v T
			if err := e.Decode(&v); err != nil {
				t.Fatal(err)
			}
			out = append(out, v)
		}
	}
	return out
}

func TestTextAndToolRun(t *testing.T) {
	f := newFixture(t)
	p := script(t, `{"steps":[
		{"text":"writing","toolCalls":[{"name":"write_file","arguments":{"path":"a.txt","content":"{{input}}"}}]},
		{"text":"done: {{input}}"}]}`)
	out, evs := f.run(context.Background(), agent.Config{Provider: p}, "hello world", nil)
	if out.Type != event.RunCompleted || out.Steps != 2 {
		t.Fatalf("outcome %+v", out)
	}
	b, err := os.ReadFile(filepath.Join(f.dir, "a.txt"))
	if err != nil || string(b) != "hello world" {
		t.Fatalf("file: %q %v", b, err)
	}
	var text strings.Builder
	for _, d := range find[event.DeltaData](t, evs, event.MessageDelta) {
		if d.Step == 2 {
			text.WriteString(d.Text)
		}
	}
	if text.String() != "done: hello world" || out.Text != "done: hello world" {
		t.Fatalf("streamed %q, final %q", text.String(), out.Text)
	}
	want := []event.Type{event.RunStarted, event.MessageUser, event.MountInfo, event.StepStarted, event.MessageCompleted, event.Usage,
		event.ToolCallStarted, event.ToolCallCompleted, event.StepStarted, event.MessageCompleted, event.Usage, event.RunCompleted}
	if got := types(evs[1:]); !equalTypes(got, want) {
		t.Fatalf("events\n got %v\nwant %v", got, want)
	}
	if out.Usage.InputTokens == 0 || out.Usage.OutputTokens == 0 {
		t.Fatalf("usage not accounted: %+v", out.Usage)
	}
	r, _ := f.j.Run(evs[0].RunID)
	if r.Status != record.RunCompleted || r.Usage != out.Usage || r.Steps != 2 {
		t.Fatalf("run record %+v", r)
	}
}

func equalTypes(a, b []event.Type) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// barrierTool blocks until n calls are running at once, proving parallelism.
func barrierTool(t *testing.T, n int) tool.Tool {
	var mu sync.Mutex
	arrived := 0
	all := make(chan struct{})
	tl, err := tool.Func("barrier", "waits for its siblings", func(ctx context.Context, c *tool.Call, in struct {
		Name string `json:"name"`
	}) (tool.Result, error) {
		mu.Lock()
		arrived++
		if arrived == n {
			close(all)
		}
		mu.Unlock()
		select {
		case <-all:
			return tool.Result{Output: "hi " + in.Name}, nil
		case <-time.After(5 * time.Second):
			return tool.Result{}, errors.New("siblings never arrived: calls are not parallel")
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	return tl
}

func TestParallelToolsResultsInModelOrder(t *testing.T) {
	f := newFixture(t)
	reg := tool.NewRegistry()
	reg.Add(barrierTool(t, 3))
	p := script(t, `{"steps":[
		{"toolCalls":[{"name":"barrier","arguments":{"name":"a"}},{"name":"barrier","arguments":{"name":"b"}},{"name":"barrier","arguments":{"name":"c"}}]},
		{"text":"ok"}]}`)
	out, _ := f.run(context.Background(), agent.Config{Provider: p, Tools: reg}, "go", nil)
	if out.Type != event.RunCompleted {
		t.Fatalf("outcome %+v", out)
	}
	msgs := f.transcript()
	var got []string
	for _, m := range msgs {
		if m.Role == llm.RoleTool {
			if m.IsError {
				t.Fatalf("tool error: %s", m.Content)
			}
			got = append(got, m.Content)
		}
	}
	if strings.Join(got, ",") != "hi a,hi b,hi c" {
		t.Fatalf("results %v are not in the model's order", got)
	}
}

func TestBadToolCallsBecomeErrorResults(t *testing.T) {
	f := newFixture(t)
	p := script(t, `{"steps":[
		{"toolCalls":[{"name":"no_such_tool","arguments":{}},{"name":"read_file","arguments":"{\"path\": broken"},{"name":"read_file","arguments":{"nope":1}}]},
		{"text":"recovered"}]}`)
	out, evs := f.run(context.Background(), agent.Config{Provider: p}, "go", nil)
	if out.Type != event.RunCompleted {
		t.Fatalf("outcome %+v", out)
	}
	res := find[event.ToolCallCompletedData](t, evs, event.ToolCallCompleted)
	if len(res) != 3 {
		t.Fatalf("%d results", len(res))
	}
	for _, r := range res {
		if !r.IsError {
			t.Errorf("%s: not an error result: %s", r.Name, r.Output)
		}
	}
	if !strings.Contains(res[0].Output, "read_file") {
		t.Errorf("unknown-tool result does not list the tools: %s", res[0].Output)
	}
}

func TestMaxSteps(t *testing.T) {
	f := newFixture(t)
	p := script(t, `{"loop":true,"steps":[{"toolCalls":[{"name":"list_dir","arguments":{"path":"."}}]}]}`)
	out, _ := f.run(context.Background(), agent.Config{Provider: p, MaxSteps: 3}, "loop forever", nil)
	if out.Type != event.RunFailed || out.Error.Kind != agent.KindMaxSteps || out.Steps != 3 {
		t.Fatalf("outcome %+v", out)
	}
	// The transcript stays valid: every call answered.
	assertValidTranscript(t, f.transcript())
}

func assertValidTranscript(t *testing.T, msgs []llm.Message) {
	t.Helper()
	open := map[string]bool{}
	for _, m := range msgs {
		switch m.Role {
		case llm.RoleAssistant:
			if len(open) > 0 {
				t.Fatalf("assistant message while calls %v are unanswered", open)
			}
			for _, c := range m.ToolCalls {
				open[c.ID] = true
			}
		case llm.RoleTool:
			if !open[m.ToolCallID] {
				t.Fatalf("result for unknown call %s", m.ToolCallID)
			}
			delete(open, m.ToolCallID)
		case llm.RoleUser:
			if len(open) > 0 {
				t.Fatalf("user message while calls %v are unanswered", open)
			}
		}
	}
	if len(open) > 0 {
		t.Fatalf("calls %v never answered", open)
	}
}

func TestCancelDuringToolKillsItAndClosesCalls(t *testing.T) {
	f := newFixture(t)
	pidFile := filepath.Join(f.dir, "pids")
	p := script(t, `{"steps":[{"toolCalls":[
		{"name":"shell","arguments":{"command":"sh -c 'sleep 300 & echo $! > pids; sleep 300'"}},
		{"name":"write_file","arguments":{"path":"x.txt","content":"x"}}]},{"text":"never"}]}`)
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	go func() {
		// The shell is a real process: poll for the pid it writes once its
		// background child runs, then press stop. (f.run holds the test
		// goroutine, so the deadline ends the run with another reason.)
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		deadline := time.After(10 * time.Second)
		for {
			select {
			case <-ctx.Done():
				return
			case <-deadline:
				cancel(errors.New("the shell never wrote " + pidFile))
				return
			case <-tick.C:
			}
			if b, err := os.ReadFile(pidFile); err == nil && len(b) > 0 {
				cancel(errors.New("user pressed stop"))
				return
			}
		}
	}()
	out, evs := f.run(ctx, agent.Config{Provider: p}, "go", nil)
	if out.Type != event.RunCancelled {
		t.Fatalf("outcome %+v", out)
	}
	ended := find[event.RunEndedData](t, evs, event.RunCancelled)
	if ended[0].Reason != "user pressed stop" {
		t.Fatalf("reason %q", ended[0].Reason)
	}
	res := find[event.ToolCallCompletedData](t, evs, event.ToolCallCompleted)
	if len(res) != 2 {
		t.Fatalf("%d results for 2 started calls", len(res))
	}
	b, _ := os.ReadFile(pidFile)
	var pid int
	json.Unmarshal([]byte(strings.TrimSpace(string(b))), &pid)
	if pid <= 0 {
		t.Fatalf("pid file %q", b)
	}
	// SIGKILL is delivered asynchronously; give the kernel a moment.
	proctest.Eventually(t, 2*time.Second, func() string {
		return "background child " + itoa(pid) + " of the cancelled shell survived"
	}, func() bool { return !alive(pid) })
	// The next run's request is valid.
	p2 := script(t, `{"loop":true,"steps":[{"text":"fine"}]}`)
	out2, _ := f.run(context.Background(), agent.Config{Provider: p2}, "again", nil)
	if out2.Type != event.RunCompleted {
		t.Fatalf("next run: %+v", out2)
	}
	assertValidTranscript(t, f.transcript())
}

func alive(pid int) bool {
	b, err := os.ReadFile(filepath.Join("/proc", itoa(pid), "stat"))
	if err != nil {
		return false
	}
	// State is the field after the parenthesised command; Z is a zombie.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}

func TestCancelDuringStream(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t)
		p := script(t, `{"steps":[{"text":"`+strings.Repeat("word ", 200)+`","delayMs":5}]}`)
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		start := time.Now()
		out, evs := f.run(ctx, agent.Config{Provider: p}, "go", nil)
		if out.Type != event.RunCancelled {
			t.Fatalf("outcome %+v", out)
		}
		if d := time.Since(start); d != 100*time.Millisecond {
			t.Errorf("the run ended %v after it started, want at its 100ms deadline", d)
		}
		if len(find[event.DeltaData](t, evs, event.MessageDelta)) == 0 {
			t.Fatal("no text streamed before the cancel")
		}
	})
}

func TestRetriesBeforeOutput(t *testing.T) {
	f := newFixture(t)
	p := script(t, `{"steps":[{"error":{"kind":"rate_limited","status":429,"times":2,"retryAfterMs":2},"text":"finally"}]}`)
	out, evs := f.run(context.Background(), agent.Config{Provider: p}, "go", nil)
	if out.Type != event.RunCompleted || out.Text != "finally" {
		t.Fatalf("outcome %+v", out)
	}
	retries := find[event.ModelRetryData](t, evs, event.ModelRetry)
	if len(retries) != 2 || retries[0].DelayMs != 2 {
		t.Fatalf("retries %+v", retries)
	}
}

func TestNoRetryAfterOutputBegan(t *testing.T) {
	f := newFixture(t)
	p := script(t, `{"steps":[{"error":{"kind":"stream_cut","afterTokens":2,"times":1},"text":"one two three four"}]}`)
	out, _ := f.run(context.Background(), agent.Config{Provider: p}, "go", nil)
	if out.Type != event.RunFailed || out.Error.Kind != agent.KindModel || !out.Error.Retryable {
		t.Fatalf("outcome %+v", out)
	}
}

func TestNonRetryableModelErrorFails(t *testing.T) {
	f := newFixture(t)
	p := script(t, `{"steps":[{"error":{"kind":"auth","status":401}}]}`)
	out, _ := f.run(context.Background(), agent.Config{Provider: p}, "go", nil)
	if out.Type != event.RunFailed || out.Error.Kind != agent.KindModel || out.Error.Retryable {
		t.Fatalf("outcome %+v", out)
	}
}

func TestSteerConsumedAtStepBoundary(t *testing.T) {
	f := newFixture(t)
	p := script(t, `{"steps":[
		{"toolCalls":[{"name":"list_dir","arguments":{"path":"."}}]},
		{"text":"echo: {{input}}"}]}`)
	calls := 0
	// Inject a steer after the first step's tools by wrapping Take.
	wrapped := &steerAfter{Steers: &agent.Steers{}, after: 2, steer: agent.Steer{ID: "steer_1", Input: event.TextParts("use tabs")}, calls: &calls}
	out, evs := f.run(context.Background(), agent.Config{Provider: p}, "start", wrapped)
	if out.Type != event.RunCompleted || out.Text != "echo: use tabs" {
		t.Fatalf("outcome %+v", out)
	}
	c := find[event.SteerData](t, evs, event.SteerConsumed)
	if len(c) != 1 || c[0].SteerID != "steer_1" || c[0].Step != 2 {
		t.Fatalf("consumed %+v", c)
	}
}

// steerAfter adds a steer on the after-th Take.
type steerAfter struct {
	*agent.Steers
	after int
	steer agent.Steer
	calls *int
}

func (s *steerAfter) Take() []agent.Steer {
	*s.calls++
	if *s.calls == s.after {
		s.Add(nil, s.steer)
	}
	return s.Steers.Take()
}

func TestSteerDuringFinalAnswerGetsOneMoreStep(t *testing.T) {
	f := newFixture(t)
	p := script(t, `{"loop":true,"steps":[{"text":"answer to {{input}}"}]}`)
	var once sync.Once
	si := &finalSteer{Steers: &agent.Steers{}, once: &once}
	out, evs := f.run(context.Background(), agent.Config{Provider: p}, "first", si)
	if out.Type != event.RunCompleted || out.Steps != 2 || out.Text != "answer to late input" {
		t.Fatalf("outcome %+v", out)
	}
	if len(find[event.SteerData](t, evs, event.SteerDropped)) != 0 {
		t.Fatal("steer dropped")
	}
}

// finalSteer adds a steer just before the loop's TakeOrClose.
type finalSteer struct {
	*agent.Steers
	once *sync.Once
}

func (s *finalSteer) TakeOrClose() []agent.Steer {
	s.once.Do(func() { s.Add(nil, agent.Steer{ID: "late", Input: event.TextParts("late input")}) })
	return s.Steers.TakeOrClose()
}

func TestSteerDroppedOnCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t)
		p := script(t, `{"steps":[{"text":"`+strings.Repeat("slow ", 100)+`","delayMs":5}]}`)
		in := &agent.Steers{}
		in.Add(nil, agent.Steer{ID: "s1", Input: event.TextParts("x")})
		// The first Take happens before step 1, so add a second steer
		// while step 1 streams (it takes 500ms), then cancel.
		ctx, cancel := context.WithCancel(context.Background())
		go func() {
			time.Sleep(30 * time.Millisecond)
			in.Add(nil, agent.Steer{ID: "s2", Input: event.TextParts("y")})
			cancel()
		}()
		out, evs := f.run(ctx, agent.Config{Provider: p}, "go", in)
		if out.Type != event.RunCancelled {
			t.Fatalf("outcome %+v", out)
		}
		if c := find[event.SteerData](t, evs, event.SteerConsumed); len(c) != 1 || c[0].SteerID != "s1" {
			t.Fatalf("consumed %+v", c)
		}
		d := find[event.SteerData](t, evs, event.SteerDropped)
		if len(d) != 1 || d[0].SteerID != "s2" || d[0].Reason == "" {
			t.Fatalf("dropped %+v", d)
		}
		if evs[len(evs)-1].Type != event.RunCancelled {
			t.Fatal("run.cancelled is not the last event")
		}
	})
}

// TestToolsChangeBetweenSteps: Run.Tools is asked before every step, so
// a tool that appears during a run (an MCP server's list_changed) can be
// called at the next step.
func TestToolsChangeBetweenSteps(t *testing.T) {
	f := newFixture(t)
	mk := func(name string) tool.Tool {
		tl, err := tool.Func(name, name, func(context.Context, *tool.Call, struct{}) (tool.Result, error) {
			return tool.Result{Output: "ran " + name}, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return tl
	}
	before, after := tool.NewRegistry(), tool.NewRegistry()
	before.Add(mk("first"))
	after.Add(mk("first"))
	after.Add(mk("second"))
	var mu sync.Mutex
	asked, changed := 0, false
	f.stepTools = func(context.Context) *tool.Registry {
		mu.Lock()
		defer mu.Unlock()
		asked++
		if changed {
			return after
		}
		changed = true // the first step's call changes the set
		return before
	}
	p := script(t, `{"steps":[
		{"toolCalls":[{"name":"first","arguments":{}}]},
		{"toolCalls":[{"name":"second","arguments":{}}]},
		{"text":"done"}]}`)
	out, evs := f.run(context.Background(), agent.Config{Provider: p}, "go", nil)
	if out.Type != event.RunCompleted || asked != 3 {
		t.Fatalf("outcome %+v, tools asked %d times", out, asked)
	}
	res := find[event.ToolCallCompletedData](t, evs, event.ToolCallCompleted)
	if len(res) != 2 || res[1].Output != "ran second" || res[1].IsError {
		t.Fatalf("results %+v", res)
	}
}

// TestUsageCost: with a price, each usage event carries its step's cost
// and the outcome and run record the run's total; without one, none.
func TestUsageCost(t *testing.T) {
	f := newFixture(t)
	src := `{"steps":[
		{"text":"a","toolCalls":[{"name":"write_file","arguments":{"path":"a.txt","content":"x"}}],"usage":{"inputTokens":1000000,"outputTokens":100000}},
		{"text":"b","usage":{"inputTokens":2000000,"outputTokens":0}}]}`
	price := &llm.Price{InputPerMTok: 2, OutputPerMTok: 10}
	out, evs := f.run(context.Background(), agent.Config{Provider: script(t, src), Price: price}, "go", nil)
	var steps []float64
	for _, d := range find[event.UsageData](t, evs, event.Usage) {
		steps = append(steps, d.Usage.CostUSD)
	}
	if len(steps) != 2 || steps[0] != 3 || steps[1] != 4 {
		t.Fatalf("step costs %v, want [3 4]", steps)
	}
	if out.Usage.CostUSD != 7 {
		t.Fatalf("outcome cost %g, want 7", out.Usage.CostUSD)
	}
	if r, _ := f.j.Run(evs[0].RunID); r.Usage.CostUSD != 7 {
		t.Fatalf("run record usage %+v, want cost 7", r.Usage)
	}

	out, evs = f.run(context.Background(), agent.Config{Provider: script(t, src)}, "go", nil)
	for _, e := range evs {
		if e.Type == event.Usage && strings.Contains(string(e.Data), "costUsd") {
			t.Fatalf("usage without a price carries a cost: %s", e.Data)
		}
	}
	if out.Usage.CostUSD != 0 {
		t.Fatalf("outcome cost %g without a price", out.Usage.CostUSD)
	}
}

// cancellingLog is the journal's behaviour under a cancel: an append
// whose context ended before the writer took it is refused with the
// context's error. It cancels the run once the model's tool calls are
// stored, so that the calls' start is refused.
type cancellingLog struct {
	*storeLog
	cancel context.CancelFunc
}

func (l *cancellingLog) Append(ctx context.Context, evs ...event.Event) ([]event.Event, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	out, err := l.storeLog.Append(ctx, evs...)
	for _, e := range evs {
		var d event.MessageCompletedData
		if e.Type == event.MessageCompleted && e.Decode(&d) == nil && len(d.ToolCalls) > 0 {
			l.cancel()
		}
	}
	return out, err
}

// A cancel between the model's answer and the start of the tool calls
// it asked for (the append of tool.call.started refused) still closes
// every call: each gets an error result before run.cancelled, so the
// transcript needs no repair.
func TestCancelBeforeCallsStartClosesThem(t *testing.T) {
	f := newFixture(t)
	p := script(t, `{"steps":[
		{"text":"two calls","toolCalls":[
			{"name":"write_file","arguments":{"path":"a.txt","content":"a"}},
			{"name":"write_file","arguments":{"path":"b.txt","content":"b"}}]},
		{"text":"never"}]}`)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	log := &cancellingLog{storeLog: f.j, cancel: cancel}
	q, _ := event.New("run_x", event.RunQueued, event.RunQueuedData{Model: "scripted:test"})
	if _, err := f.j.Append(ctx, q); err != nil {
		t.Fatal(err)
	}
	out, err := agent.Execute(ctx, agent.Config{Provider: p, Tools: f.reg, Model: "m"}, log, agent.Run{
		ID: "run_x", SessionID: "ses_t", ModelName: "scripted:test", Input: event.TextParts("go"),
		Env: func() *env.Binding { return f.b },
	})
	if err != nil {
		t.Fatal(err)
	}
	if out.Type != event.RunCancelled {
		t.Fatalf("outcome %+v, want cancelled", out)
	}
	evs, err := f.st.Read(context.Background(), store.ReadParams{SessionID: "ses_t", RunID: "run_x", Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if last := evs[len(evs)-1]; last.Type != event.RunCancelled {
		t.Fatalf("last event %s, want run.cancelled", last.Type)
	}
	results := find[event.ToolCallCompletedData](t, evs, event.ToolCallCompleted)
	if len(results) != 2 {
		t.Fatalf("tool results %+v; want one for each of the two calls", results)
	}
	for _, r := range results {
		if !r.IsError || r.Output == "" {
			t.Errorf("result %+v; want an error saying the call never started", r)
		}
	}
	if _, err := os.Stat(filepath.Join(f.dir, "a.txt")); err == nil {
		t.Error("a call ran after the run was cancelled")
	}
	if _, err := agent.Transcript(evs); err != nil {
		t.Fatalf("transcript: %v", err)
	}
}

// sharing is a model that records, for each request, whether its
// messages live in the array of the run's History.
type sharing struct {
	llm.Provider
	history []llm.Message
	shared  []bool
}

func (s *sharing) Stream(ctx context.Context, req *llm.Request) iter.Seq2[llm.StreamEvent, error] {
	s.shared = append(s.shared, &req.Messages[0] == &s.history[:1][0])
	return s.Provider.Stream(ctx, req)
}

// TestOwnHistory: a run given its History's array (Run.OwnHistory)
// appends its messages there instead of copying the history first, so
// that a run start costs nothing in proportion to the history; without
// it, the run leaves History's array alone even when it has room.
func TestOwnHistory(t *testing.T) {
	for _, own := range []bool{false, true} {
		t.Run(fmt.Sprint("own=", own), func(t *testing.T) {
			f := newFixture(t)
			ctx := context.Background()
			history := make([]llm.Message, 2, 16)
			history[0] = llm.Message{Role: llm.RoleUser, Content: "before"}
			history[1] = llm.Message{Role: llm.RoleAssistant, Content: "earlier"}
			spare := history[:cap(history)]
			p := &sharing{Provider: script(t, `{"loop":true,"steps":[{"text":"hello"}]}`), history: history}
			q, _ := event.New("run_own", event.RunQueued, event.RunQueuedData{Model: "scripted:test"})
			if _, err := f.j.Append(ctx, q); err != nil {
				t.Fatal(err)
			}
			out, err := agent.Execute(ctx, agent.Config{Provider: p, Model: "m", Tools: f.reg}, f.j, agent.Run{
				ID: "run_own", SessionID: "ses_t", ModelName: "scripted:test", Input: event.TextParts("now"),
				History: history, OwnHistory: own,
			})
			if err != nil || out.Type != event.RunCompleted {
				t.Fatalf("run: %s %+v, %v", out.Type, out.Error, err)
			}
			if len(p.shared) != 1 || p.shared[0] != own {
				t.Fatalf("the model's messages in History's array: %v, want [%v]", p.shared, own)
			}
			if history[0].Content != "before" || history[1].Content != "earlier" {
				t.Fatalf("History changed: %+v", history)
			}
			if got := spare[2].Content; (got == "now") != own {
				t.Fatalf("History's array past its length holds %q (own %v)", got, own)
			}
		})
	}
}
