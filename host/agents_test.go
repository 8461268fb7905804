package host_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"weft.dev/weft/api"
	"weft.dev/weft/event"
	"weft.dev/weft/host"
	idgen "weft.dev/weft/internal/ids"
	"weft.dev/weft/llm/scripted"
	"weft.dev/weft/process"
	"weft.dev/weft/store"
	"weft.dev/weft/store/memory"
	"weft.dev/weft/store/record"
	"weft.dev/weft/store/sqlite"
	"weft.dev/weft/tool"
	"weft.dev/weft/tool/builtin"
)

// agentScripts are the models of the subagent tests, by name.
var agentScripts = map[string]string{
	// child answers its prompt at once.
	"child": `{"steps":[{"text":"answer to {{input}}"}]}`,
	// slowchild streams its answer slowly.
	"slowchild": `{"steps":[{"text":"a b c d e f g h i j k l m n o p q r s t u v w x y z","delayMs":200}]}`,
	// failchild's model fails.
	"failchild": `{"steps":[{"error":{"kind":"auth","message":"no such model"}}]}`,
	// twokids spawns two children in parallel, awaits both, and answers.
	"twokids": `{"steps":[
		{"toolCalls":[
			{"name":"spawn_agent","arguments":{"prompt":"alpha","model":"scripted:child"}},
			{"name":"spawn_agent","arguments":{"prompt":"beta","model":"scripted:child"}}]},
		{"toolCalls":[
			{"name":"process_await","arguments":{"handle":{"__handle__":"process","id":"proc_1"},"timeoutMs":10000}},
			{"name":"process_await","arguments":{"handle":{"__handle__":"process","id":"proc_2"},"timeoutMs":10000}}]},
		{"text":"both answered"}]}`,
	// spawnslow spawns a slow child and awaits it.
	"spawnslow": `{"steps":[
		{"toolCalls":[{"name":"spawn_agent","arguments":{"prompt":"take your time","model":"scripted:slowchild"}}]},
		{"toolCalls":[{"name":"process_await","arguments":{"handle":{"__handle__":"process","id":"proc_1"},"timeoutMs":60000}}]},
		{"text":"done"}]}`,
	// spawnfail spawns a child whose model fails, and awaits it.
	"spawnfail": `{"steps":[
		{"toolCalls":[{"name":"spawn_agent","arguments":{"prompt":"fail","model":"scripted:failchild"}}]},
		{"toolCalls":[{"name":"process_await","arguments":{"handle":{"__handle__":"process","id":"proc_1"},"timeoutMs":10000}}]},
		{"text":"done"}]}`,
	// spawndeep asks for a child that may spawn: past a depth limit of 1.
	"spawndeep": `{"steps":[
		{"toolCalls":[{"name":"spawn_agent","arguments":{"prompt":"x","model":"scripted:child","tools":["spawn_agent"]}}]},
		{"text":"done"}]}`,
	// spawnthree spawns three slow children in one step.
	"spawnthree": `{"steps":[
		{"toolCalls":[
			{"name":"spawn_agent","arguments":{"prompt":"1","model":"scripted:slowchild"}},
			{"name":"spawn_agent","arguments":{"prompt":"2","model":"scripted:slowchild"}},
			{"name":"spawn_agent","arguments":{"prompt":"3","model":"scripted:slowchild"}}]},
		{"text":"done"}]}`,
	// spawnwide asks for tools and mounts it does not have.
	"spawnwide": `{"steps":[
		{"toolCalls":[
			{"name":"spawn_agent","arguments":{"prompt":"x","model":"scripted:child","tools":["no_such_tool"]}},
			{"name":"spawn_agent","arguments":{"prompt":"x","model":"scripted:child","mounts":[{"id":"ro","mode":"rw"}]}},
			{"name":"spawn_agent","arguments":{"prompt":"x","model":"scripted:child","tools":["read_file"],"mounts":[{"id":"ro"}]}}]},
		{"text":"done"}]}`,
}

// newAgentHost is a host over st with a process manager, the process
// tools and spawn_agent, whose process IDs are proc_1, proc_2, … in the
// order they are made.
func newAgentHost(t testing.TB, st store.Store, mod func(*host.Config)) *host.Host {
	t.Helper()
	m, err := process.New(process.Config{Store: st, KillGrace: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	reg := tool.NewRegistry()
	if err := builtin.Register(reg, builtin.Options{Background: process.BackgroundShell{}}); err != nil {
		t.Fatal(err)
	}
	if err := process.RegisterTools(reg, m); err != nil {
		t.Fatal(err)
	}
	var n atomic.Int64
	cfg := host.Config{
		Store: st, Tools: reg, DefaultModel: "scripted:child", CoalesceWindow: 2 * time.Millisecond, Processes: m,
		NewID: func(prefix string) string {
			if prefix == "proc" {
				return fmt.Sprintf("proc_%d", n.Add(1))
			}
			return idgen.New(prefix)
		},
		ResolveModel: func(name string) (*host.Model, error) {
			key := strings.TrimPrefix(name, "scripted:")
			src, ok := agentScripts[key]
			if !ok {
				return nil, fmt.Errorf("unknown model %q", name)
			}
			p, err := scripted.Parse(key+".json", []byte(src))
			if err != nil {
				return nil, err
			}
			return &host.Model{Name: name, Provider: p, Model: key}, nil
		},
	}
	if mod != nil {
		mod(&cfg)
	}
	h, err := host.New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

// toolResults are the outputs of the completed tool calls of a session.
func toolResults(t *testing.T, h *host.Host, sid string) []event.ToolCallCompletedData {
	t.Helper()
	var out []event.ToolCallCompletedData
	for _, e := range sessionEvents(t, h, sid, event.ToolCallCompleted) {
		var d event.ToolCallCompletedData
		if err := e.Decode(&d); err != nil {
			t.Fatal(err)
		}
		out = append(out, d)
	}
	return out
}

func awaitProc(t *testing.T, h *host.Host, id string) api.AwaitResult {
	t.Helper()
	r, err := h.AwaitProcess(context.Background(), api.ProcessAwaitParams{ID: id, TimeoutMs: 20000})
	if err != nil || r.TimedOut {
		t.Fatalf("await %s: %+v %v", id, r, err)
	}
	return *r
}

func TestSpawnTwoSubagentsInParallel(t *testing.T) {
	h := newAgentHost(t, memory.New(), nil)
	sid := session(t, h, "scripted:twokids")
	r := start(t, h, api.StartRunParams{SessionID: sid, Input: input("go")})
	if got := wait(t, h, r.ID); got.Status != record.RunCompleted {
		t.Fatalf("parent run: %+v", got)
	}
	// The parent saw both answers as the results of its awaits.
	var answers []string
	for _, d := range toolResults(t, h, sid) {
		if strings.Contains(d.Output, `"result"`) {
			var out struct {
				Status string `json:"status"`
				Result string `json:"result"`
			}
			if err := json.Unmarshal([]byte(d.Output), &out); err != nil {
				t.Fatalf("await result %q: %v", d.Output, err)
			}
			if out.Status != record.ProcessCompleted {
				t.Fatalf("await result: %+v", out)
			}
			answers = append(answers, out.Result)
		}
	}
	if len(answers) != 2 || !(answers[0] == "answer to alpha" && answers[1] == "answer to beta" || answers[0] == "answer to beta" && answers[1] == "answer to alpha") {
		t.Fatalf("the parent's awaits returned %q", answers)
	}
	// Each child is a process of the parent's run, with its own session
	// linked to the parent, its streamed answer as its output.
	for _, id := range []string{"proc_1", "proc_2"} {
		a := awaitProc(t, h, id)
		p := a.Process
		if p.Kind != record.ProcessAgent || p.SessionID != sid || p.RunID != r.ID || p.Spec.Agent == nil || p.Spec.Agent.RunID == "" {
			t.Fatalf("process %s: %+v", id, p)
		}
		if a.Tail != p.Result || !strings.HasPrefix(p.Result, "answer to ") {
			t.Fatalf("process %s: output %q, result %q", id, a.Tail, p.Result)
		}
		child, err := h.GetSession(context.Background(), api.SessionGetParams{SessionID: p.Spec.Agent.SessionID})
		if err != nil {
			t.Fatal(err)
		}
		par := child.Parent
		if par == nil || par.SessionID != sid || par.RunID != r.ID || par.ProcessID != id || par.Depth != 1 || par.ToolCallID == "" {
			t.Fatalf("child session %+v: parent %+v", child.Session, par)
		}
		evs := sessionEvents(t, h, child.ID, event.SessionCreated)
		var cd event.SessionCreatedData
		if len(evs) != 1 || evs[0].Decode(&cd) != nil || cd.Parent == nil || cd.Parent.ProcessID != id {
			t.Fatalf("child's session.created: %+v", evs)
		}
	}
}

func TestSubagentLimits(t *testing.T) {
	t.Run("depth", func(t *testing.T) {
		h := newAgentHost(t, memory.New(), func(c *host.Config) { c.Subagents.MaxDepth = 1 })
		sid := session(t, h, "scripted:spawndeep")
		r := start(t, h, api.StartRunParams{SessionID: sid, Input: input("go")})
		wait(t, h, r.ID)
		res := toolResults(t, h, sid)
		if len(res) != 1 || !res[0].IsError || res[0].Failure == nil || res[0].Failure.Kind != event.FailureSubagentLimit || res[0].Failure.Limit != "depth" {
			t.Fatalf("spawn past the depth limit: %+v", res)
		}
		if ps, _ := h.ListProcesses(context.Background(), api.ProcessListParams{SessionID: sid}); len(ps.Processes) != 0 {
			t.Fatalf("a process was started: %+v", ps.Processes)
		}
	})
	t.Run("children", func(t *testing.T) {
		h := newAgentHost(t, memory.New(), func(c *host.Config) { c.Subagents.MaxChildren = 2 })
		sid := session(t, h, "scripted:spawnthree")
		r := start(t, h, api.StartRunParams{SessionID: sid, Input: input("go")})
		wait(t, h, r.ID)
		var refused, started int
		for _, d := range toolResults(t, h, sid) {
			switch {
			case d.IsError && d.Failure != nil && d.Failure.Kind == event.FailureSubagentLimit && d.Failure.Limit == "children":
				refused++
			case !d.IsError:
				started++
			default:
				t.Fatalf("spawn: %+v", d)
			}
		}
		if refused != 1 || started != 2 {
			t.Fatalf("three spawns past a limit of two: %d refused, %d started", refused, started)
		}
	})
	t.Run("no wider than the parent", func(t *testing.T) {
		h := newAgentHost(t, memory.New(), nil)
		ctx := context.Background()
		dir := t.TempDir()
		s, err := h.CreateSession(ctx, api.CreateSessionParams{Model: "scripted:spawnwide",
			Mounts: []event.Mount{{ID: "ro", Kind: event.KindLocal, Path: dir, Mode: event.ModeReadOnly, Default: true}}})
		if err != nil {
			t.Fatal(err)
		}
		r := start(t, h, api.StartRunParams{SessionID: s.ID, Input: input("go")})
		wait(t, h, r.ID)
		res := toolResults(t, h, s.ID)
		if len(res) != 3 {
			t.Fatalf("results: %+v", res)
		}
		byID := map[string]event.ToolCallCompletedData{}
		for _, d := range res {
			byID[d.ID] = d
		}
		if d := byID["call_0_0"]; !d.IsError || !strings.Contains(d.Output, "not one of yours") {
			t.Fatalf("a tool the parent lacks: %+v", d)
		}
		if d := byID["call_0_1"]; !d.IsError || !strings.Contains(d.Output, "read-only") {
			t.Fatalf("a read-write mount of a read-only one: %+v", d)
		}
		ok := byID["call_0_2"]
		if ok.IsError {
			t.Fatalf("an allowed spawn: %+v", ok)
		}
		var out struct {
			Session string `json:"childSessionId"`
		}
		json.Unmarshal([]byte(ok.Output), &out)
		child, err := h.GetSession(ctx, api.SessionGetParams{SessionID: out.Session})
		if err != nil {
			t.Fatal(err)
		}
		if ms := child.Binding.Mounts; len(ms) != 1 || ms[0].Mode != event.ModeReadOnly || ms[0].Path != dir || len(child.Parent.Tools) != 1 || child.Parent.Tools[0] != "read_file" {
			t.Fatalf("child: mounts %+v tools %v", ms, child.Parent.Tools)
		}
		// Its runs are offered only that tool.
		tl, err := h.ListTools(ctx, api.ToolsListParams{SessionID: out.Session})
		if err == nil && len(tl.Tools) > 1 {
			t.Logf("tools/list of the child: %d tools (the session's filter applies to its runs)", len(tl.Tools))
		}
	})
}

func TestSubagentFails(t *testing.T) {
	h := newAgentHost(t, memory.New(), nil)
	sid := session(t, h, "scripted:spawnfail")
	r := start(t, h, api.StartRunParams{SessionID: sid, Input: input("go")})
	wait(t, h, r.ID)
	a := awaitProc(t, h, "proc_1")
	if a.Process.Status != record.ProcessFailed || a.Process.Failure == nil || a.Process.Failure.Kind != event.FailureSubagentFailed || !strings.Contains(a.Process.Failure.Message, "no such model") {
		t.Fatalf("a failed child: %+v", a.Process)
	}
	// The parent's await told it, typed.
	found := false
	for _, d := range toolResults(t, h, sid) {
		found = found || strings.Contains(d.Output, event.FailureSubagentFailed)
	}
	if !found {
		t.Fatalf("the parent was not told: %+v", toolResults(t, h, sid))
	}
}

func TestSubagentCancelled(t *testing.T) {
	h := newAgentHost(t, memory.New(), nil)
	ctx := context.Background()
	sid := session(t, h, "scripted:spawnslow")
	start(t, h, api.StartRunParams{SessionID: sid, Input: input("go")})
	p := waitAgentRunning(t, h, "proc_1")
	// Steering it through process/write reaches the child's run.
	if _, err := h.WriteProcess(ctx, api.ProcessWriteParams{ID: "proc_1", SessionID: sid, Data: "hurry"}); err != nil {
		t.Fatalf("write to a subagent: %v", err)
	}
	waitFor(t, h, p.Spec.Agent.SessionID, p.Spec.Agent.RunID, ofType(event.SteerAccepted))
	c, err := h.CancelProcess(ctx, api.ProcessCancelParams{ID: "proc_1", SessionID: sid, Reason: "enough"})
	if err != nil {
		t.Fatal(err)
	}
	if c.Status != record.ProcessCancelled || c.Failure == nil || c.Failure.Kind != event.FailureSubagentCancelled {
		t.Fatalf("cancelled child: %+v", c.Process)
	}
	if cr := wait(t, h, p.Spec.Agent.RunID); cr.Status != record.RunCancelled {
		t.Fatalf("the child's run: %+v", cr)
	}
}

func TestCancelParentCascades(t *testing.T) {
	h := newAgentHost(t, memory.New(), nil)
	ctx := context.Background()
	sid := session(t, h, "scripted:spawnslow")
	r := start(t, h, api.StartRunParams{SessionID: sid, Input: input("go")})
	p := waitAgentRunning(t, h, "proc_1")
	if _, err := h.CancelRun(ctx, api.CancelParams{RunID: r.ID}); err != nil {
		t.Fatal(err)
	}
	a := awaitProc(t, h, "proc_1")
	if a.Process.Status != record.ProcessCancelled {
		t.Fatalf("the child of a cancelled run: %+v", a.Process)
	}
	if cr := wait(t, h, p.Spec.Agent.RunID); cr.Status != record.RunCancelled {
		t.Fatalf("the child's run: %+v", cr)
	}
}

// waitAgentRunning waits until subagent process id's child run has
// streamed some of its answer.
func waitAgentRunning(t *testing.T, h *host.Host, id string) record.Process {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		r, err := h.GetProcess(context.Background(), api.ProcessIDParams{ID: id})
		if err == nil && r.Spec.Agent != nil && r.Spec.Agent.RunID != "" && r.OutputBytes > 0 {
			return r.Process
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("subagent %s did not start", id)
	return record.Process{}
}

func TestSubagentApprovalsReachParent(t *testing.T) {
	// The parent's policy is its session's, or its run's own layer (a
	// client's approval mode): the child asks either way.
	t.Run("session policy", func(t *testing.T) { testSubagentApprovals(t, true) })
	t.Run("run preset", func(t *testing.T) { testSubagentApprovals(t, false) })
}

func testSubagentApprovals(t *testing.T, sessionPolicy bool) {
	st := memory.New()
	h := newAgentHost(t, st, nil)
	ctx := context.Background()
	agentScripts["askchild"] = `{"steps":[{"toolCalls":[{"name":"write_file","arguments":{"path":"a.txt","content":"x"}}]},{"text":"written"}]}`
	agentScripts["spawnask"] = `{"steps":[
		{"toolCalls":[{"name":"spawn_agent","arguments":{"prompt":"write","model":"scripted:askchild","mounts":[{"id":"w","mode":"rw"}]}}]},
		{"toolCalls":[{"name":"process_await","arguments":{"handle":{"__handle__":"process","id":"proc_1"},"timeoutMs":20000}}]},
		{"text":"done"}]}`
	t.Cleanup(func() { delete(agentScripts, "askchild"); delete(agentScripts, "spawnask") })
	dir := t.TempDir()
	cp := api.CreateSessionParams{Model: "scripted:spawnask",
		Mounts: []event.Mount{{ID: "w", Kind: event.KindLocal, Path: dir, Mode: event.ModeReadWrite, Default: true, DefaultForShell: true}}}
	rp := api.StartRunParams{Input: input("go")}
	if sessionPolicy {
		cp.Policy = &api.Policy{Preset: api.PresetAskWrites}
	} else {
		rp.DefaultPreset = api.PresetAskWrites
	}
	s, err := h.CreateSession(ctx, cp)
	if err != nil {
		t.Fatal(err)
	}
	rp.SessionID = s.ID
	r := start(t, h, rp)
	// Every approval, the child's too, is answered through the parent's
	// list.
	fromChild := 0
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if rr, _ := h.GetRun(ctx, api.RunIDParams{RunID: r.ID}); record.IsTerminal(rr.Status) {
			break
		}
		l, err := h.ListApprovals(ctx, api.ListRequestsParams{SessionID: s.ID})
		if err != nil {
			t.Fatal(err)
		}
		for _, q := range l.Requests {
			if q.SessionID != s.ID {
				fromChild++
			}
			if _, err := h.DecideApproval(ctx, api.DecideParams{ApprovalID: q.ID, SessionID: s.ID, Decision: event.DecisionAllowOnce}); err != nil {
				t.Fatalf("answer approval %+v as the parent's client: %v", q, err)
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	if fromChild == 0 {
		t.Fatal("no approval of the child reached the parent's list")
	}
	if got := wait(t, h, r.ID); got.Status != record.RunCompleted {
		t.Fatalf("parent: %+v", got)
	}
	a := awaitProc(t, h, "proc_1")
	if a.Process.Result != "written" {
		t.Fatalf("child: %+v", a.Process)
	}
	// The parent's log mirrors the child's request and its answer, for
	// the clients that follow the parent's events.
	var mirrored []event.Type
	for _, e := range sessionEvents(t, h, s.ID, event.SubagentRequest) {
		var d event.SubagentRequestData
		if err := e.Decode(&d); err != nil || d.ProcessID != "proc_1" || d.SessionID != a.Process.Spec.Agent.SessionID {
			t.Fatalf("subagent.request %+v: %v", d, err)
		}
		if d.Event == event.ApprovalRequested && e.RunID != r.ID {
			t.Fatalf("the mirror of an open request is not under the parent's run: %+v", e)
		}
		mirrored = append(mirrored, d.Event)
	}
	if len(mirrored) != 2 || mirrored[0] != event.ApprovalRequested || mirrored[1] != event.ApprovalResolved {
		t.Fatalf("mirrored in the parent's log: %v", mirrored)
	}
}

// A host that shuts down leaves its subagents to the next: the child
// that was mid-run ends (typed) when the next host follows it, and the
// finished one keeps its answer.
func TestSubagentsAcrossARestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "weft.db")
	open := func() store.Store {
		st, err := sqlite.Open(context.Background(), sqlite.Config{Path: path})
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	st := open()
	h := newAgentHost(t, st, nil)
	sid := session(t, h, "scripted:spawnslow")
	start(t, h, api.StartRunParams{SessionID: sid, Input: input("go")})
	p := waitAgentRunning(t, h, "proc_1")
	h.Close()
	st.Close()

	st = open()
	defer st.Close()
	h = newAgentHost(t, st, nil)
	a := awaitProc(t, h, "proc_1")
	if !record.IsProcessTerminal(a.Process.Status) || a.Process.Failure == nil {
		t.Fatalf("the mid-run child after the restart: %+v", a.Process)
	}
	r, err := h.GetRun(context.Background(), api.RunIDParams{RunID: p.Spec.Agent.RunID})
	if err != nil || !record.IsTerminal(r.Status) {
		t.Fatalf("the child's run: %+v %v", r, err)
	}
	t.Logf("child run %s, process %s %s", r.Status, a.Process.Status, a.Process.Failure.Kind)
}

// Deleting the parent session cancels the subagents it left running.
func TestDeleteParentCancelsSubagents(t *testing.T) {
	agentScripts["spawnleave"] = `{"steps":[{"toolCalls":[{"name":"spawn_agent","arguments":{"prompt":"x","model":"scripted:slowchild"}}]},{"text":"left it running"},{"text":"still"}]}`
	t.Cleanup(func() { delete(agentScripts, "spawnleave") })
	h := newAgentHost(t, memory.New(), nil)
	ctx := context.Background()
	sid := session(t, h, "scripted:spawnleave")
	r := start(t, h, api.StartRunParams{SessionID: sid, Input: input("go")})
	wait(t, h, r.ID)
	p := waitAgentRunning(t, h, "proc_1")
	if _, err := h.DeleteSession(ctx, api.SessionIDParams{SessionID: sid}); err != nil {
		t.Fatal(err)
	}
	g, err := h.GetProcess(ctx, api.ProcessIDParams{ID: "proc_1"})
	if err != nil || g.Status != record.ProcessCancelled {
		t.Fatalf("the subagent of a deleted session: %+v %v", g, err)
	}
	if cr := wait(t, h, p.Spec.Agent.RunID); cr.Status != record.RunCancelled {
		t.Fatalf("its run: %+v", cr)
	}
}

// A child's budget is what its parent run had left of its own budget
// and its session's when it spawned it: never more.
func TestSubagentInheritsBudget(t *testing.T) {
	h := newAgentHost(t, memory.New(), nil)
	sid := session(t, h, "scripted:twokids")
	if _, err := h.UpdateSession(context.Background(), api.UpdateSessionParams{SessionID: sid, Budget: &event.Budget{CostUSD: 2}}); err != nil {
		t.Fatal(err)
	}
	r := start(t, h, api.StartRunParams{SessionID: sid, Input: input("go"), Budget: &event.Budget{Steps: 20, OnBudget: "ask"}})
	if got := wait(t, h, r.ID); got.Status != record.RunCompleted {
		t.Fatalf("parent run: %+v", got)
	}
	for _, id := range []string{"proc_1", "proc_2"} {
		p := awaitProc(t, h, id).Process
		child, err := h.GetRun(context.Background(), api.RunIDParams{RunID: p.Spec.Agent.RunID})
		if err != nil {
			t.Fatal(err)
		}
		b := child.Budget
		if b == nil || b.Steps < 1 || b.Steps >= 20 || b.CostUSD != 2 || b.OnBudget != "ask" || b.Tokens != 0 {
			t.Fatalf("child %s's budget %+v; want the parent's steps less those taken, the session's cost, ask", id, b)
		}
	}
}
