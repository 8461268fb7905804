package host_test

import (
	"context"
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

	"weft.dev/weft/api"
	"weft.dev/weft/event"
	"weft.dev/weft/host"
	"weft.dev/weft/llm"
	"weft.dev/weft/llm/scripted"
	"weft.dev/weft/store"
	"weft.dev/weft/store/memory"
	"weft.dev/weft/store/record"
	"weft.dev/weft/store/sqlite"
	"weft.dev/weft/tool"
	"weft.dev/weft/tool/builtin"
)

// askScript makes three calls that each need an answer: a write the
// ask-writes policy asks about, a question, and a call of a client tool;
// then it lists the directory (which runs) and ends.
const askScript = `{"loop":true,"steps":[
	{"toolCalls":[
		{"name":"write_file","arguments":{"path":"a.txt","content":"A"}},
		{"name":"ask_user","arguments":{"question":"which colour?","choices":["red","blue"]}},
		{"name":"pick","arguments":{"n":1}},
		{"name":"list_dir","arguments":{}}]},
	{"text":"done"}]}`

var pickTool = api.ToolSpec{Name: "pick", Description: "pick a number", InputSchema: []byte(`{"type":"object","properties":{"n":{"type":"integer"}}}`)}

func newRequestHost(t *testing.T, st store.Store, scriptSrc string) *host.Host {
	t.Helper()
	reg := tool.NewRegistry()
	if err := builtin.Register(reg, builtin.Options{}); err != nil {
		t.Fatal(err)
	}
	h, err := host.New(context.Background(), host.Config{
		Store: st, Tools: reg, DefaultModel: "ask", CoalesceWindow: 2 * time.Millisecond,
		ResolveModel: func(name string) (*host.Model, error) {
			p, err := scripted.Parse(name, []byte(scriptSrc))
			return &host.Model{Name: name, Provider: p, Model: name}, err
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// waitingOn waits until run runID waits on n open requests and returns them.
func waitingOn(t *testing.T, h *host.Host, sid, runID string, n int) []record.Request {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	seq, err := h.Subscribe(ctx, api.SubscribeParams{SessionID: sid, RunID: runID})
	if err != nil {
		t.Fatal(err)
	}
	opened := 0
	for e, err := range seq {
		if err != nil {
			t.Fatalf("waiting for %d requests: %v", n, err)
		}
		switch e.Type {
		case event.ApprovalRequested, event.InputRequested, event.ToolCallRequested:
			opened++
		}
		if event.IsTerminalRun(e.Type) {
			t.Fatalf("run ended (%s) before it waited", e.Type)
		}
		if opened == n {
			break
		}
	}
	l, err := h.ListRequests(ctx, api.ListRequestsParams{SessionID: sid})
	if err != nil || len(l.Requests) != n {
		t.Fatalf("open requests: %+v, %v", l, err)
	}
	r, _ := h.GetRun(ctx, api.RunIDParams{RunID: runID})
	if r.Status != record.RunWaiting {
		t.Fatalf("run is %s while requests are open", r.Status)
	}
	return l.Requests
}

func byKind(qs []record.Request) map[string]record.Request {
	m := map[string]record.Request{}
	for _, q := range qs {
		m[q.Kind] = q
	}
	return m
}

func mountedSession(t *testing.T, h *host.Host, dir string, pol *api.Policy) string {
	t.Helper()
	s, err := h.CreateSession(context.Background(), api.CreateSessionParams{
		Mounts: []event.Mount{{ID: "work", Path: dir, Default: true, DefaultForShell: true}},
		Policy: pol, Tools: []api.ToolSpec{pickTool},
	})
	if err != nil {
		t.Fatal(err)
	}
	return s.ID
}

// A run asks before it writes, asks the user, and hands a call to its
// client; it waits (status waiting, no goroutine) until all three are
// answered, the first answer of each wins, and the approved call runs
// once.
func TestRequestsAnsweredResumeTheRun(t *testing.T) {
	h := newRequestHost(t, memory.New(), askScript)
	defer h.Close()
	ctx := context.Background()
	dir := t.TempDir()
	sid := mountedSession(t, h, dir, &api.Policy{Preset: api.PresetAskWrites})
	r := start(t, h, api.StartRunParams{SessionID: sid, Input: input("go")})
	qs := byKind(waitingOn(t, h, sid, r.ID, 3))
	apr, inp, tcr := qs[event.RequestApproval], qs[event.RequestInput], qs[event.RequestTool]
	if apr.ToolCall.Name != "write_file" || apr.Rule == nil || apr.Rule.Source != "preset:ask-writes" || inp.Question != "which colour?" || tcr.ToolCall.Name != "pick" {
		t.Fatalf("requests: %+v", qs)
	}
	if _, err := os.Stat(filepath.Join(dir, "a.txt")); err == nil {
		t.Fatal("the write ran before its approval")
	}

	// Bad answers: not an option, another session, unknown.
	if _, err := h.DecideApproval(ctx, api.DecideParams{ApprovalID: apr.ID, Decision: "maybe"}); !errors.Is(err, api.ErrInvalidParams) {
		t.Fatalf("a decision that is no option: %v", err)
	}
	other := session(t, h, "ask")
	if _, err := h.DecideApproval(ctx, api.DecideParams{ApprovalID: apr.ID, Decision: event.DecisionAllowOnce, SessionID: other}); !errors.Is(err, api.ErrNotFound) {
		t.Fatalf("an answer from a session that does not own the approval: %v", err)
	}
	if _, err := h.DecideApproval(ctx, api.DecideParams{ApprovalID: "apr_nope", Decision: event.DecisionAllowOnce}); !errors.Is(err, api.ErrNotFound) {
		t.Fatalf("an unknown approval: %v", err)
	}
	if _, err := h.AnswerInput(ctx, api.AnswerParams{RequestID: inp.ID, Choice: ptr(5)}); !errors.Is(err, api.ErrInvalidParams) {
		t.Fatalf("a choice out of range: %v", err)
	}
	if _, err := h.ToolResult(ctx, api.ToolResultParams{CallID: "nope", Output: "x"}); !errors.Is(err, api.ErrNotFound) {
		t.Fatalf("a result for an unknown call: %v", err)
	}

	ans, err := h.DecideApproval(ctx, api.DecideParams{ApprovalID: apr.ID, Decision: event.DecisionAllowOnce, IdempotencyKey: "k1"})
	if err != nil || ans.Status != record.RequestResolved || ans.Decision != event.DecisionAllowOnce {
		t.Fatalf("decide: %+v, %v", ans, err)
	}
	// An exact retry replays; another answer is already resolved.
	if again, err := h.DecideApproval(ctx, api.DecideParams{ApprovalID: apr.ID, Decision: event.DecisionAllowOnce, IdempotencyKey: "k1"}); err != nil || !again.Replayed {
		t.Fatalf("retry: %+v, %v", again, err)
	}
	_, err = h.DecideApproval(ctx, api.DecideParams{ApprovalID: apr.ID, Decision: event.DecisionDeny})
	var ae *api.Error
	if !errors.Is(err, api.ErrAlreadyResolved) || !errors.As(err, &ae) || ae.Data["decision"] != event.DecisionAllowOnce {
		t.Fatalf("a second answer: %v", err)
	}
	if w, _ := h.WaitRun(ctx, api.WaitRunParams{RunID: r.ID, TimeoutMs: 50}); w.Run.Status != record.RunWaiting {
		t.Fatalf("run with two open requests is %s", w.Run.Status)
	}
	if _, err := h.AnswerInput(ctx, api.AnswerParams{RequestID: inp.ID, Choice: ptr(1)}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.ToolResult(ctx, api.ToolResultParams{CallID: tcr.ToolCall.ID, SessionID: sid, Output: "7"}); err != nil {
		t.Fatal(err)
	}
	if got := wait(t, h, r.ID); got.Status != record.RunCompleted {
		t.Fatalf("run after its answers: %+v", got)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "a.txt")); err != nil || string(b) != "A" {
		t.Fatalf("the approved write: %q, %v", b, err)
	}
	// Each call has one result, in the model's order, with the answers.
	page, _ := h.ReadEvents(ctx, api.ReadEventsParams{SessionID: sid, RunID: r.ID, Limit: 1000})
	results := map[string]string{}
	started := 0
	for _, e := range page.Events {
		switch e.Type {
		case event.ToolCallCompleted:
			var d event.ToolCallCompletedData
			e.Decode(&d)
			if _, dup := results[d.Name]; dup {
				t.Fatalf("two results for %s", d.Name)
			}
			results[d.Name] = d.Output
		case event.ToolCallStarted:
			var d event.ToolCallStartedData
			e.Decode(&d)
			if d.Name == "write_file" {
				started++
			}
		}
	}
	if started != 1 || results["ask_user"] != "blue" || results["pick"] != "7" || !strings.Contains(results["write_file"], "a.txt") {
		t.Fatalf("write_file started %d times; results %v", started, results)
	}
}

func ptr[T any](v T) *T { return &v }

// A deny's message reaches the model; cancelling a waiting run closes its
// requests and their calls.
func TestDenyAndCancelWaitingRun(t *testing.T) {
	h := newRequestHost(t, memory.New(), askScript)
	defer h.Close()
	ctx := context.Background()
	dir := t.TempDir()
	sid := mountedSession(t, h, dir, &api.Policy{Preset: api.PresetAskWrites})
	r := start(t, h, api.StartRunParams{SessionID: sid, Input: input("go")})
	qs := byKind(waitingOn(t, h, sid, r.ID, 3))
	if _, err := h.DecideApproval(ctx, api.DecideParams{ApprovalID: qs[event.RequestApproval].ID, Decision: event.DecisionDeny, Message: "not there"}); err != nil {
		t.Fatal(err)
	}
	c, err := h.CancelRun(ctx, api.CancelParams{RunID: r.ID, Reason: "enough"})
	if err != nil || c.Status != record.RunCancelled {
		t.Fatalf("cancel a waiting run: %+v, %v", c, err)
	}
	for _, q := range []record.Request{qs[event.RequestInput], qs[event.RequestTool]} {
		got, _ := h.GetRequest(ctx, api.RequestIDParams{RequestID: q.ID})
		if got.Status != record.RequestCancelled {
			t.Fatalf("request %s after the cancel: %s", q.ID, got.Status)
		}
	}
	page, _ := h.ReadEvents(ctx, api.ReadEventsParams{SessionID: sid, RunID: r.ID, Limit: 1000})
	results := map[string]bool{}
	for _, e := range page.Events {
		var d event.ToolCallCompletedData
		if e.Type == event.ToolCallCompleted && e.Decode(&d) == nil {
			results[d.Name] = true
		}
	}
	for _, name := range []string{"write_file", "ask_user", "pick", "list_dir"} {
		if !results[name] {
			t.Fatalf("%s has no result after the cancel: %v", name, results)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "a.txt")); err == nil {
		t.Fatal("a denied write ran")
	}
	// The session takes a new run.
	s2 := start(t, h, api.StartRunParams{SessionID: sid, Input: input("again"), Policy: &api.Policy{Preset: api.PresetNeverAsk}, Tools: nil})
	if s2.Status == "" {
		t.Fatal("no run")
	}
}

// An approval with a deadline expires with its rule's default decision,
// and the run goes on.
func TestApprovalDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := `{"steps":[{"toolCalls":[{"name":"write_file","arguments":{"path":"b.txt","content":"B"}}]},{"text":"done"}]}`
		h := newRequestHost(t, memory.New(), src)
		defer h.Close()
		ctx := context.Background()
		dir := t.TempDir()
		sid := mountedSession(t, h, dir, &api.Policy{Rules: []api.Rule{{Tool: "write_file", Action: api.ActionAsk, TimeoutMs: 60_000, Default: api.ActionDeny}}})
		r := start(t, h, api.StartRunParams{SessionID: sid, Input: input("go")})
		time.Sleep(time.Second)
		l, _ := h.ListRequests(ctx, api.ListRequestsParams{SessionID: sid})
		if len(l.Requests) != 1 || l.Requests[0].Deadline == nil {
			t.Fatalf("requests: %+v", l.Requests)
		}
		time.Sleep(time.Minute)
		got := wait(t, h, r.ID)
		if got.Status != record.RunCompleted {
			t.Fatalf("run after the deadline: %+v", got)
		}
		q, _ := h.GetRequest(ctx, api.RequestIDParams{RequestID: l.Requests[0].ID})
		if q.Status != record.RequestExpired || q.Decision != event.DecisionDeny {
			t.Fatalf("request after its deadline: %+v", q)
		}
		if _, err := os.Stat(filepath.Join(dir, "b.txt")); err == nil {
			t.Fatal("an expired approval's call ran")
		}
	})
}

// allow_session adds a session rule: the same kind of call no longer asks.
func TestAllowSession(t *testing.T) {
	src := `{"loop":true,"steps":[{"toolCalls":[{"name":"write_file","arguments":{"path":"{{input}}.txt","content":"x"}}]},{"text":"done"}]}`
	h := newRequestHost(t, memory.New(), src)
	defer h.Close()
	ctx := context.Background()
	dir := t.TempDir()
	sid := mountedSession(t, h, dir, &api.Policy{Preset: api.PresetAskWrites})
	r := start(t, h, api.StartRunParams{SessionID: sid, Input: input("one")})
	q := waitingOn(t, h, sid, r.ID, 1)[0]
	if _, err := h.DecideApproval(ctx, api.DecideParams{ApprovalID: q.ID, Decision: event.DecisionAllowSession}); err != nil {
		t.Fatal(err)
	}
	if got := wait(t, h, r.ID); got.Status != record.RunCompleted {
		t.Fatalf("first run: %+v", got)
	}
	r2 := start(t, h, api.StartRunParams{SessionID: sid, Input: input("two")})
	if got := wait(t, h, r2.ID); got.Status != record.RunCompleted {
		t.Fatalf("second run: %+v", got)
	}
	if _, err := os.Stat(filepath.Join(dir, "two.txt")); err != nil {
		t.Fatalf("the second write, allowed for the session: %v", err)
	}
}

// A host that stops while a run waits comes back with the run still
// waiting and its requests open; the answers resume it, and the approved
// call runs exactly once.
func TestWaitingRunSurvivesRestart(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "weft.db")
	dir := t.TempDir()
	open := func() (*sqlite.Store, *host.Host) {
		st, err := sqlite.Open(ctx, sqlite.Config{Path: path})
		if err != nil {
			t.Fatal(err)
		}
		return st, newRequestHost(t, st, askScript)
	}
	st, h := open()
	sid := mountedSession(t, h, dir, &api.Policy{Preset: api.PresetAskWrites})
	r := start(t, h, api.StartRunParams{SessionID: sid, Input: input("go")})
	qs := byKind(waitingOn(t, h, sid, r.ID, 3))
	if _, err := h.AnswerInput(ctx, api.AnswerParams{RequestID: qs[event.RequestInput].ID, Text: "green"}); err != nil {
		t.Fatal(err)
	}
	h.Close()
	st.Close()

	st, h = open()
	defer st.Close()
	defer h.Close()
	got, err := h.GetRun(ctx, api.RunIDParams{RunID: r.ID})
	if err != nil || got.Status != record.RunWaiting || len(got.Requests) != 2 {
		t.Fatalf("run after the restart: %+v, %v; want still waiting on two requests", got, err)
	}
	if _, err := h.DecideApproval(ctx, api.DecideParams{ApprovalID: qs[event.RequestApproval].ID, Decision: event.DecisionAllowOnce}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.ToolResult(ctx, api.ToolResultParams{RequestID: qs[event.RequestTool].ID, Output: "3"}); err != nil {
		t.Fatal(err)
	}
	if got := wait(t, h, r.ID); got.Status != record.RunCompleted {
		t.Fatalf("run after its answers: %+v", got)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "a.txt")); err != nil || string(b) != "A" {
		t.Fatalf("the approved write: %q, %v", b, err)
	}
	page, _ := h.ReadEvents(ctx, api.ReadEventsParams{SessionID: sid, RunID: r.ID, Limit: 1000})
	n := 0
	for _, e := range page.Events {
		var d event.ToolCallStartedData
		if e.Type == event.ToolCallStarted && e.Decode(&d) == nil && d.Name == "write_file" {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("the approved write started %d times", n)
	}
	_ = fmt.Sprint
}

// systemRecorder is a model that answers "ok" and records the system
// prompts it was sent.
type systemRecorder struct {
	mu      sync.Mutex
	systems []string
}

func (r *systemRecorder) Stream(_ context.Context, req *llm.Request) iter.Seq2[llm.StreamEvent, error] {
	r.mu.Lock()
	r.systems = append(r.systems, req.System)
	r.mu.Unlock()
	return func(yield func(llm.StreamEvent, error) bool) {
		if yield(llm.StreamEvent{Text: "ok"}, nil) {
			yield(llm.StreamEvent{Finish: &llm.Finish{Reason: llm.FinishStop}}, nil)
		}
	}
}

// AGENTS.md at the root of the default mount joins the system prompt (up
// to a cap) and mount.info says so; shells and file tools name the mounts
// alike ($WEFT_MOUNT_<ID>).
func TestProjectInstructions(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "AGENTS.md"), []byte("Use tabs.\n"+strings.Repeat("x", 40<<10)), 0o644); err != nil {
		t.Fatal(err)
	}
	rec := &systemRecorder{}
	h, err := host.New(context.Background(), host.Config{Store: memory.New(), DefaultModel: "rec",
		ResolveModel: func(name string) (*host.Model, error) {
			return &host.Model{Name: name, Provider: rec, Model: name}, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	sid := mountedSession(t, h, dir, nil)
	r := start(t, h, api.StartRunParams{SessionID: sid, Input: input("hi")})
	if got := wait(t, h, r.ID); got.Status != record.RunCompleted {
		t.Fatalf("run: %+v", got)
	}
	rec.mu.Lock()
	system := rec.systems[0]
	rec.mu.Unlock()
	if !strings.Contains(system, "Use tabs.") || !strings.Contains(system, "/environment/work/AGENTS.md") || !strings.Contains(system, "$WEFT_MOUNT_WORK") {
		t.Fatalf("system prompt lacks the instructions or the mount variable:\n%.600s", system)
	}
	if len(system) > 40<<10 {
		t.Fatalf("system prompt of %d bytes: the instructions were not capped", len(system))
	}
	page, _ := h.ReadEvents(context.Background(), api.ReadEventsParams{SessionID: sid, RunID: r.ID})
	for _, e := range page.Events {
		if e.Type != event.MountInfo {
			continue
		}
		var d event.MountInfoData
		if err := e.Decode(&d); err != nil || d.Instructions == nil || !d.Instructions.Truncated || d.Instructions.Bytes != 10+40<<10 {
			t.Fatalf("mount.info: %s", e.Data)
		}
		return
	}
	t.Fatal("no mount.info")
}

// A cancel that comes as a run parks (its request committed, the loop
// past its last look at the cancel) still ends the run: run/cancel never
// waits for a terminal event that nothing will write.
func TestCancelAsTheRunParks(t *testing.T) {
	h := newRequestHost(t, memory.New(), `{"loop":true,"steps":[
		{"toolCalls":[{"name":"write_file","arguments":{"path":"a.txt","content":"A"}}]}]}`)
	defer h.Close()
	sid := mountedSession(t, h, t.TempDir(), &api.Policy{Preset: api.PresetAskAll})
	for i := range 100 {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		r := start(t, h, api.StartRunParams{SessionID: sid, Input: input("go")})
		seq, err := h.Subscribe(ctx, api.SubscribeParams{SessionID: sid, RunID: r.ID})
		if err != nil {
			t.Fatal(err)
		}
		for e, err := range seq {
			if err != nil {
				t.Fatal(err)
			}
			if e.Type == event.ApprovalRequested {
				break
			}
		}
		got, err := h.CancelRun(ctx, api.CancelParams{RunID: r.ID, Reason: "stop"})
		cancel()
		if err != nil || got.Status != record.RunCancelled {
			t.Fatalf("cancel %d: %+v, %v", i, got, err)
		}
	}
}
