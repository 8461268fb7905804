package process_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"weft.dev/weft/event"
	"weft.dev/weft/process"
	"weft.dev/weft/store/memory"
	"weft.dev/weft/store/record"
	"weft.dev/weft/tool"
)

// agentRunner is an in-memory AgentRunner: it streams words, then
// answers, or waits for its ctx when block is set.
type agentRunner struct {
	block bool
	mu    sync.Mutex
	runs  []process.AgentRun
	cause error
	steer []string
}

func (r *agentRunner) RunTool(ctx context.Context, run process.ToolRun) tool.Result {
	return tool.Result{Output: "tool"}
}

func (r *agentRunner) RunAgent(ctx context.Context, run process.AgentRun) process.AgentResult {
	r.mu.Lock()
	r.runs = append(r.runs, run)
	r.mu.Unlock()
	if err := run.Started(ctx, "run_child"); err != nil {
		return process.AgentResult{Failure: &event.ToolFailure{Kind: event.FailureSubagentFailed, Message: err.Error()}}
	}
	run.Output("hello ")
	run.Output("world")
	if r.block {
		<-ctx.Done()
		r.mu.Lock()
		r.cause = context.Cause(ctx)
		r.mu.Unlock()
		if errors.Is(context.Cause(ctx), process.ErrCancelled) {
			return process.AgentResult{Failure: &event.ToolFailure{Kind: event.FailureSubagentCancelled}}
		}
		return process.AgentResult{}
	}
	return process.AgentResult{Answer: "hello world"}
}

func (r *agentRunner) SteerAgent(ctx context.Context, p record.Process, text string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.steer = append(r.steer, p.Spec.Agent.RunID+":"+text)
	return nil
}

func startAgent(t *testing.T, m *process.Manager) record.Process {
	t.Helper()
	p, err := m.Start(context.Background(), process.StartParams{SessionID: "s1", RunID: "r1", Kind: record.ProcessAgent,
		Disposition: record.Rerunnable, Agent: &record.AgentSpec{SessionID: "child", ParentSessionID: "s1", Depth: 1, Prompt: "p"}})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// waitStreaming waits until agent process id has written its output.
func waitStreaming(t *testing.T, m *process.Manager, id string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		g, _ := m.Get(context.Background(), id, process.Caller{Host: true})
		if g.OutputBytes == int64(len("hello world")) && g.Spec.Agent.RunID != "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the agent did not start: %+v", g)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestAgentProcess(t *testing.T) {
	ctx := context.Background()
	m, err := process.New(process.Config{Store: memory.New(), Tools: &agentRunner{}, FlushInterval: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	p := startAgent(t, m)
	r, err := m.Await(ctx, p.ID, 10*time.Second, process.Caller{Host: true})
	if err != nil || r.Process.Status != record.ProcessCompleted || r.Process.Result != "hello world" || r.Tail != "hello world" {
		t.Fatalf("await: %+v %v", r, err)
	}
	if r.Process.Spec.Agent.RunID != "run_child" || r.Process.Kind != record.ProcessAgent {
		t.Fatalf("record: %+v", r.Process)
	}
	// Without an AgentRunner, subagents are refused.
	m2, _ := process.New(process.Config{Store: memory.New()})
	defer m2.Close()
	if _, err := m2.Start(ctx, process.StartParams{SessionID: "s1", Kind: record.ProcessAgent, Disposition: record.Rerunnable,
		Agent: &record.AgentSpec{SessionID: "c"}}); !errors.Is(err, process.ErrInvalid) {
		t.Fatalf("no runner: %v", err)
	}
}

func TestAgentProcessCancelAndSteer(t *testing.T) {
	ctx := context.Background()
	run := &agentRunner{block: true}
	m, err := process.New(process.Config{Store: memory.New(), Tools: run, FlushInterval: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	p := startAgent(t, m)
	waitStreaming(t, m, p.ID)
	if err := m.Write(ctx, p.ID, []byte("faster"), process.Caller{SessionID: "s1"}); err != nil {
		t.Fatal(err)
	}
	c, err := m.Cancel(ctx, p.ID, "stop", process.Caller{SessionID: "s1"})
	if err != nil || c.Status != record.ProcessCancelled || c.Failure == nil || c.Failure.Kind != event.FailureSubagentCancelled {
		t.Fatalf("cancel: %+v %v", c, err)
	}
	run.mu.Lock()
	defer run.mu.Unlock()
	if !errors.Is(run.cause, process.ErrCancelled) || len(run.steer) != 1 || run.steer[0] != "run_child:faster" {
		t.Fatalf("cause %v, steers %q", run.cause, run.steer)
	}
}

// A Manager that closes leaves its subagents running; the next one's
// Recover follows them again, whatever their disposition.
func TestAgentProcessRecover(t *testing.T) {
	ctx := context.Background()
	st := memory.New()
	run := &agentRunner{block: true}
	m, err := process.New(process.Config{Store: st, Tools: run, FlushInterval: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	p := startAgent(t, m)
	waitStreaming(t, m, p.ID)
	m.Close()
	run.mu.Lock()
	if !errors.Is(run.cause, process.ErrClosed) {
		t.Fatalf("cause at close: %v", run.cause)
	}
	run.mu.Unlock()
	if g, _ := st.Process(ctx, p.ID); g.Status != record.ProcessRunning {
		t.Fatalf("after close: %+v", g)
	}
	again := &agentRunner{}
	m2, err := process.New(process.Config{Store: st, Tools: again})
	if err != nil {
		t.Fatal(err)
	}
	defer m2.Close()
	rep, err := m2.Recover(ctx)
	if err != nil || len(rep.Rerun) != 1 {
		t.Fatalf("recover: %+v %v", rep, err)
	}
	r, err := m2.Await(ctx, p.ID, 10*time.Second, process.Caller{Host: true})
	if err != nil || r.Process.Status != record.ProcessCompleted {
		t.Fatalf("after recover: %+v %v", r, err)
	}
	again.mu.Lock()
	defer again.mu.Unlock()
	if len(again.runs) != 1 || !again.runs[0].Restarted || again.runs[0].Process.Spec.Agent.RunID != "run_child" {
		t.Fatalf("the rerun: %+v", again.runs)
	}
}
