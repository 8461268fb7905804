package agent_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"weft.dev/weft/agent"
	"weft.dev/weft/env"
	"weft.dev/weft/event"
	"weft.dev/weft/store"
	"weft.dev/weft/store/record"
	"weft.dev/weft/tool"
)

// askWrites asks about write_file and refuses shell; everything else runs.
type askWrites struct{ n int }

func (g *askWrites) Check(step int, c event.ToolCall) agent.Verdict {
	switch c.Name {
	case "write_file":
		g.n++
		id := "apr_" + string(rune('0'+g.n))
		e, _ := event.New("", event.ApprovalRequested, event.ApprovalRequestedData{ApprovalID: id, Step: step, ToolCall: c,
			Rule: event.Rule{Tool: "write_file", Action: "ask"}, Options: []string{event.DecisionAllowOnce, event.DecisionDeny}})
		return agent.Verdict{Request: &e, RequestID: id, Kind: event.RequestApproval}
	case "shell":
		return agent.Verdict{Refuse: "error: denied by policy: no shells here"}
	}
	return agent.Verdict{}
}

// exec runs r on the fixture's journal and returns the outcome.
func (f *fixture) exec(ctx context.Context, p string, r agent.Run) agent.Outcome {
	f.t.Helper()
	r.SessionID, r.ModelName = "ses_t", "scripted:test"
	r.Env = func() *env.Binding { return f.b }
	out, err := agent.Execute(ctx, agent.Config{Provider: script(f.t, p), Model: "m", Tools: f.reg}, f.j, r)
	if err != nil {
		f.t.Fatal(err)
	}
	if err := f.j.Flush(ctx); err != nil {
		f.t.Fatal(err)
	}
	return out
}

func (f *fixture) all() []event.Event {
	f.t.Helper()
	evs, err := f.st.Read(context.Background(), store.ReadParams{SessionID: "ses_t", Limit: 1000})
	if err != nil {
		f.t.Fatal(err)
	}
	return evs
}

const gateScript = `{"steps":[
	{"toolCalls":[
		{"name":"write_file","arguments":{"path":"a.txt","content":"A"}},
		{"name":"list_dir","arguments":{}},
		{"name":"shell","arguments":{"command":"echo hi"}}]},
	{"text":"done"}]}`

// A step whose calls need an approval parks the run once the calls that
// need none are done; the approval's answer resumes it from the log: the
// allowed call runs once, in the model's order, and the run goes on.
func TestGatedCallParksAndResumes(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	q, _ := event.New("run_1", event.RunQueued, event.RunQueuedData{Model: "scripted:test"})
	if _, err := f.j.Append(ctx, q); err != nil {
		t.Fatal(err)
	}
	out := f.exec(ctx, gateScript, agent.Run{ID: "run_1", Input: event.TextParts("go"), Gate: &askWrites{}})
	if !out.Waiting || out.Type != "" {
		t.Fatalf("outcome %+v; want the run to wait", out)
	}
	if r, _ := f.j.Run("run_1"); r.Status != record.RunWaiting || len(r.Requests) != 1 {
		t.Fatalf("run %+v; want waiting on one request", r)
	}
	if _, err := os.Stat(filepath.Join(f.dir, "a.txt")); err == nil {
		t.Fatal("the gated call ran before its approval")
	}
	var sawList, sawShell bool
	for _, e := range f.all() {
		var d event.ToolCallCompletedData
		if e.Type == event.ToolCallCompleted && e.Decode(&d) == nil {
			sawList = sawList || d.Name == "list_dir" && !d.IsError
			sawShell = sawShell || d.Name == "shell" && d.IsError && strings.Contains(d.Output, "no shells")
		}
	}
	if !sawList || !sawShell {
		t.Fatalf("the ungated call ran: %v, the refused one was answered: %v", sawList, sawShell)
	}

	e, _ := event.New("run_1", event.ApprovalResolved, event.ApprovalResolvedData{ApprovalID: "apr_1", Decision: event.DecisionAllowOnce})
	if _, err := f.j.Append(ctx, e); err != nil {
		t.Fatal(err)
	}
	history, rs, err := agent.ResumeState(f.all(), "run_1")
	if err != nil {
		t.Fatal(err)
	}
	// What the run parked with, plus the answer, is what the log says.
	if err := out.Resume.Apply(e); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(rs, out.Resume, cmpopts.IgnoreUnexported(agent.Resume{})); diff != "" {
		t.Fatalf("parked state differs from the log's (-log +parked):\n%s", diff)
	}
	if diff := cmp.Diff(history, out.History); diff != "" {
		t.Fatalf("parked history differs from the log's (-log +parked):\n%s", diff)
	}
	if len(rs.Calls) != 3 || !rs.Calls[0].Run || rs.Calls[1].Result == nil || rs.Calls[2].Result == nil {
		t.Fatalf("resume state %+v", rs)
	}
	out = f.exec(ctx, gateScript, agent.Run{ID: "run_1", History: history, Resume: rs, Gate: &askWrites{}})
	if out.Type != event.RunCompleted || out.Steps != 2 {
		t.Fatalf("resumed outcome %+v", out)
	}
	if b, err := os.ReadFile(filepath.Join(f.dir, "a.txt")); err != nil || string(b) != "A" {
		t.Fatalf("the approved call: %q, %v", b, err)
	}
	// Every call has exactly one result; the approved one started once.
	starts, results := map[string]int{}, map[string]int{}
	for _, e := range f.all() {
		switch e.Type {
		case event.ToolCallStarted:
			var d event.ToolCallStartedData
			e.Decode(&d)
			starts[d.Name]++
		case event.ToolCallCompleted:
			var d event.ToolCallCompletedData
			e.Decode(&d)
			results[d.Name]++
		}
	}
	if starts["write_file"] != 1 || results["write_file"] != 1 || results["list_dir"] != 1 || results["shell"] != 1 || starts["shell"] != 0 {
		t.Fatalf("starts %v, results %v", starts, results)
	}
	// The next model request saw the results in the model's order.
	msgs := f.transcript()
	var order []string
	for _, m := range msgs {
		if m.ToolCallID != "" {
			order = append(order, m.ToolName)
		}
	}
	if strings.Join(order, ",") != "write_file,list_dir,shell" {
		t.Fatalf("tool results in the transcript: %v", order)
	}
}

// A denied approval's message reaches the model as the call's result.
func TestDeniedCallTellsTheModel(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	q, _ := event.New("run_1", event.RunQueued, event.RunQueuedData{Model: "scripted:test"})
	f.j.Append(ctx, q)
	f.exec(ctx, gateScript, agent.Run{ID: "run_1", Input: event.TextParts("go"), Gate: &askWrites{}})
	e, _ := event.New("run_1", event.ApprovalResolved, event.ApprovalResolvedData{ApprovalID: "apr_1", Decision: event.DecisionDeny, Message: "not that file"})
	f.j.Append(ctx, e)
	history, rs, err := agent.ResumeState(f.all(), "run_1")
	if err != nil {
		t.Fatal(err)
	}
	if rs.Calls[0].Run || !strings.Contains(rs.Calls[0].Refuse, "not that file") {
		t.Fatalf("denied call: %+v", rs.Calls[0])
	}
	if out := f.exec(ctx, gateScript, agent.Run{ID: "run_1", History: history, Resume: rs}); out.Type != event.RunCompleted {
		t.Fatalf("outcome %+v", out)
	}
	if _, err := os.Stat(filepath.Join(f.dir, "a.txt")); err == nil {
		t.Fatal("a denied call ran")
	}
}

// A run cancelled before it parks (while the step's other calls run)
// closes the requests it opened and their calls: none is left open.
func TestCancelBeforeParkingClosesRequests(t *testing.T) {
	f := newFixture(t)
	entered := make(chan struct{})
	block, err := tool.Func("block", "blocks until cancelled", func(ctx context.Context, _ *tool.Call, _ struct{}) (tool.Result, error) {
		close(entered)
		<-ctx.Done()
		return tool.Result{}, ctx.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.reg.Add(block); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	q, _ := event.New("run_1", event.RunQueued, event.RunQueuedData{Model: "scripted:test"})
	f.j.Append(ctx, q)
	go func() {
		<-entered
		cancel()
	}()
	p := `{"steps":[{"toolCalls":[{"name":"write_file","arguments":{"path":"a.txt","content":"A"}},{"name":"block","arguments":{}}]},{"text":"done"}]}`
	out, err := agent.Execute(ctx, agent.Config{Provider: script(t, p), Model: "m", Tools: f.reg}, f.j,
		agent.Run{ID: "run_1", SessionID: "ses_t", Input: event.TextParts("go"), Gate: &askWrites{}, Env: func() *env.Binding { return f.b }})
	if err != nil || out.Type != event.RunCancelled {
		t.Fatalf("outcome %+v, %v; want cancelled", out, err)
	}
	r, _ := f.j.Run("run_1")
	if len(r.Requests) != 0 || r.Status != record.RunCancelled {
		t.Fatalf("run %+v; want cancelled with no request open", r)
	}
	results := map[string]bool{}
	var resolved bool
	for _, e := range f.all() {
		var d event.ToolCallCompletedData
		if e.Type == event.ToolCallCompleted && e.Decode(&d) == nil {
			results[d.Name] = true
		}
		resolved = resolved || e.Type == event.ApprovalResolved
	}
	if !results["write_file"] || !results["block"] || !resolved {
		t.Fatalf("results %v, approval resolved %v; want both calls closed and the approval cancelled", results, resolved)
	}
}

// answeredLog is a Log whose AppendEnd finds every gated request already
// answered (as when a client answered while another call of the step
// ran), and records what it was given.
type answeredLog struct {
	agent.Log
	gated []record.Request
}

func (l *answeredLog) AppendEnd(ctx context.Context, runID string, gated []record.Request, reason string, last ...event.Event) ([]event.Event, error) {
	l.gated = gated
	evs, err := agent.CloseGated(runID, gated, func(string) bool { return false }, reason)
	if err != nil {
		return nil, err
	}
	return l.Append(ctx, append(evs, last...)...)
}

// A run that ends before it parks leaves the closing of its step's
// requests to a Log that implements EndLog, which decides it against
// the requests still open: an approval already answered is not resolved
// again, and its call, which never ran, gets its one result.
func TestEndLogClosesOnlyWhatIsOpen(t *testing.T) {
	f := newFixture(t)
	entered := make(chan struct{})
	block, err := tool.Func("block", "blocks until cancelled", func(ctx context.Context, _ *tool.Call, _ struct{}) (tool.Result, error) {
		close(entered)
		<-ctx.Done()
		return tool.Result{}, ctx.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.reg.Add(block); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	q, _ := event.New("run_1", event.RunQueued, event.RunQueuedData{Model: "scripted:test"})
	f.j.Append(ctx, q)
	go func() {
		<-entered
		cancel()
	}()
	log := &answeredLog{Log: f.j}
	p := `{"steps":[{"toolCalls":[{"name":"write_file","arguments":{"path":"a.txt","content":"A"}},{"name":"block","arguments":{}}]},{"text":"done"}]}`
	out, err := agent.Execute(ctx, agent.Config{Provider: script(t, p), Model: "m", Tools: f.reg}, log,
		agent.Run{ID: "run_1", SessionID: "ses_t", Input: event.TextParts("go"), Gate: &askWrites{}, Env: func() *env.Binding { return f.b }})
	if err != nil || out.Type != event.RunCancelled {
		t.Fatalf("outcome %+v, %v; want cancelled", out, err)
	}
	if len(log.gated) != 1 || log.gated[0].ID != "apr_1" || log.gated[0].Kind != event.RequestApproval || log.gated[0].ToolCall.Name != "write_file" {
		t.Fatalf("AppendEnd was given %+v; want the write's approval", log.gated)
	}
	var outputs []string
	for _, e := range f.all() {
		var d event.ToolCallCompletedData
		if e.Type == event.ToolCallCompleted && e.Decode(&d) == nil && d.Name == "write_file" {
			outputs = append(outputs, d.Output)
		}
		if e.Type == event.ApprovalResolved {
			t.Fatalf("the answered approval was resolved again: %s", e.Data)
		}
	}
	if len(outputs) != 1 || outputs[0] != "error: the run was cancelled before this call ran" {
		t.Fatalf("the write's results: %q; want one, saying it never ran", outputs)
	}
}

// CloseGated closes an open request as CloseRequests does, gives an
// answered approval's call its result, and adds nothing for a question
// or a client tool call already answered (their answer is their result).
func TestCloseGated(t *testing.T) {
	call := func(id string) event.ToolCall { return event.ToolCall{ID: id, Name: "t"} }
	gated := []record.Request{
		{ID: "apr_open", Kind: event.RequestApproval, ToolCall: call("c1")},
		{ID: "apr_done", Kind: event.RequestApproval, ToolCall: call("c2")},
		{ID: "inp_done", Kind: event.RequestInput, ToolCall: call("c3")},
		{ID: "tcr_done", Kind: event.RequestTool, ToolCall: call("c4")},
		{ID: "tcr_open", Kind: event.RequestTool, ToolCall: call("c5")},
	}
	open := func(id string) bool { return strings.HasSuffix(id, "_open") }
	evs, err := agent.CloseGated("run_1", gated, open, "the run ended")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range evs {
		var d struct {
			ID, ApprovalID string
		}
		e.Decode(&d)
		got = append(got, string(e.Type)+" "+d.ApprovalID+d.ID)
	}
	want := []string{"approval.resolved apr_open", "tool.call.completed c1", "tool.call.completed c5", "tool.call.completed c2"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("CloseGated (-want +got):\n%s", diff)
	}
}
