package agent_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"weft.dev/weft/agent"
	"weft.dev/weft/env"
	"weft.dev/weft/event"
	"weft.dev/weft/llm"
	"weft.dev/weft/store"
	"weft.dev/weft/tool"
)

// ownBudget is a BudgetCheck over the run's own spend: b's limits, with
// the wall time counted from start; with b.OnBudget ask it opens a
// question for each budget reached.
type ownBudget struct {
	b     event.Budget
	start time.Time
	asked int
}

func (o *ownBudget) Check(steps int, u event.TokenUsage) agent.BudgetVerdict {
	spent := event.SpentOf(u, steps, time.Since(o.start))
	name := o.b.Reached(spent)
	if name == "" {
		return agent.BudgetVerdict{}
	}
	r := &event.BudgetExceeded{Scope: event.ScopeRun, Budget: name, Limit: o.b.Limit(name), Spent: spent.Of(name)}
	if o.b.OnBudget != event.OnBudgetAsk {
		return agent.BudgetVerdict{Reached: r}
	}
	o.asked++
	id := fmt.Sprintf("inp_budget%d", o.asked)
	e, _ := event.New("", event.InputRequested, event.InputRequestedData{RequestID: id, Question: "raise?", Budget: r})
	return agent.BudgetVerdict{Reached: r, Request: &e, RequestID: id}
}

func (o *ownBudget) Deadline() (time.Time, event.BudgetExceeded) {
	if o.b.WallTimeMs == 0 || o.b.OnBudget == event.OnBudgetAsk {
		return time.Time{}, event.BudgetExceeded{}
	}
	return o.start.Add(time.Duration(o.b.WallTimeMs) * time.Millisecond),
		event.BudgetExceeded{Scope: event.ScopeRun, Budget: event.BudgetWallTime, Limit: float64(o.b.WallTimeMs), Spent: float64(o.b.WallTimeMs)}
}

// loopScript calls list_dir forever, 1,000 input and 100 output tokens a
// step.
const loopScript = `{"loop":true,"steps":[{"toolCalls":[{"name":"list_dir","arguments":{"path":"."}}],"usage":{"inputTokens":1000,"outputTokens":100}}]}`

// TestBudgetStopsRun: a run that reaches its token, cost or step budget
// ends at the next step boundary, before the model call, as failed with
// kind budget_exceeded naming the budget, its limit and what was spent;
// every call of its steps has its result.
func TestBudgetStopsRun(t *testing.T) {
	price := &llm.Price{InputPerMTok: 100, OutputPerMTok: 1000} // $0.2 a step
	for _, c := range []struct {
		b           event.Budget
		name        string
		steps       int
		limit, kept float64
	}{
		{event.Budget{Tokens: 3000}, event.BudgetTokens, 3, 3000, 3300},
		{event.Budget{CostUSD: 0.5}, event.BudgetCost, 3, 0.5, 0.6},
		{event.Budget{Steps: 2}, event.BudgetSteps, 2, 2, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t)
			f.budget = &ownBudget{b: c.b, start: time.Now()}
			out, evs := f.run(context.Background(), agent.Config{Provider: script(t, loopScript), Price: price}, "go", nil)
			if out.Type != event.RunFailed || out.Error == nil || out.Error.Kind != event.KindBudgetExceeded || out.Steps != c.steps {
				t.Fatalf("outcome %+v, error %+v", out, out.Error)
			}
			got := out.Error.Budget
			if got == nil || got.Scope != event.ScopeRun || got.Budget != c.name || got.Limit != c.limit ||
				fmt.Sprintf("%.6f", got.Spent) != fmt.Sprintf("%.6f", c.kept) {
				t.Fatalf("budget %+v, want %s limit %g spent %g", got, c.name, c.limit, c.kept)
			}
			if !strings.Contains(out.Error.Message, "budget") {
				t.Errorf("message %q", out.Error.Message)
			}
			ended := find[event.RunEndedData](t, evs, event.RunFailed)
			if len(ended) != 1 || ended[0].Error.Budget == nil || *ended[0].Error.Budget != *got {
				t.Fatalf("run.failed %+v", ended)
			}
			assertValidTranscript(t, f.transcript())
		})
	}
}

// blockTool blocks until its call is cancelled.
type blockTool struct{}

func (blockTool) Spec() tool.Spec {
	return tool.Spec{Name: "block", Description: "blocks", InputSchema: []byte(`{"type":"object"}`)}
}

func (blockTool) Call(ctx context.Context, _ *tool.Call) (tool.Result, error) {
	<-ctx.Done()
	return tool.Result{Output: "error: cancelled", IsError: true}, nil
}

// TestBudgetWallTimeCutsStep: a wall-time budget with the stop policy
// ends the run by a timer in the middle of a step: the running tool is
// cancelled and its call closed, and the run fails budget_exceeded (not
// cancelled).
func TestBudgetWallTimeCutsStep(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t)
		reg := tool.NewRegistry()
		if err := reg.Add(blockTool{}); err != nil {
			t.Fatal(err)
		}
		f.budget = &ownBudget{b: event.Budget{WallTimeMs: 90_000}, start: time.Now()}
		src := `{"steps":[{"toolCalls":[{"name":"block","arguments":{}}]},{"text":"never"}]}`
		t0 := time.Now()
		out, evs := f.run(context.Background(), agent.Config{Provider: script(t, src), Tools: reg}, "go", nil)
		if out.Type != event.RunFailed || out.Error == nil || out.Error.Kind != event.KindBudgetExceeded ||
			out.Error.Budget == nil || out.Error.Budget.Budget != event.BudgetWallTime {
			t.Fatalf("outcome %+v, error %+v", out, out.Error)
		}
		if d := time.Since(t0); d != 90*time.Second {
			t.Errorf("the run ended after %v, want 1m30s", d)
		}
		res := find[event.ToolCallCompletedData](t, evs, event.ToolCallCompleted)
		if len(res) != 1 || !res[0].IsError {
			t.Fatalf("results %+v", res)
		}
		assertValidTranscript(t, f.transcript())
	})
}

// TestBudgetAskParksAndResumes: with the ask policy a run that reaches
// its budget appends the question and parks at the step boundary, no
// call open; resumed with a raised limit it goes on from there (the
// resume state read back from the log is the one it parked with) and
// completes.
func TestBudgetAskParksAndResumes(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	src := `{"steps":[
		{"toolCalls":[{"name":"list_dir","arguments":{"path":"."}}]},
		{"toolCalls":[{"name":"list_dir","arguments":{"path":"."}}]},
		{"text":"done"}]}`
	p := script(t, src)
	bc := &ownBudget{b: event.Budget{Steps: 1, OnBudget: event.OnBudgetAsk}, start: time.Now()}
	q, _ := event.New("run_x", event.RunQueued, event.RunQueuedData{Model: "scripted:test"})
	if _, err := f.j.Append(ctx, q); err != nil {
		t.Fatal(err)
	}
	run := agent.Run{ID: "run_x", SessionID: "ses_t", ModelName: "scripted:test", Input: event.TextParts("go"),
		Env: func() *env.Binding { return f.b }, Budget: bc}
	cfg := agent.Config{Provider: p, Model: "m", Tools: f.reg}
	out, err := agent.Execute(ctx, cfg, f.j, run)
	if err != nil {
		t.Fatal(err)
	}
	if !out.Waiting || out.Steps != 1 || out.Resume == nil || out.Resume.Budget != "inp_budget1" || len(out.Resume.Calls) != 0 {
		t.Fatalf("outcome %+v, resume %+v", out, out.Resume)
	}
	if err := f.j.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	evs, err := f.st.Read(ctx, store.ReadParams{SessionID: "ses_t", Limit: 1000, Types: agent.ResumeTypes()})
	if err != nil {
		t.Fatal(err)
	}
	history, rs, err := agent.ResumeState(evs, "run_x")
	if err != nil {
		t.Fatal(err)
	}
	if rs.Budget != "inp_budget1" || rs.Steps != 1 || len(rs.Calls) != 0 || len(history) != len(out.History) {
		t.Fatalf("resume state from the log %+v with %d messages; parked with %+v and %d", rs, len(history), out.Resume, len(out.History))
	}
	assertValidTranscript(t, history)

	bc.b.Steps = 5
	run.History, run.Resume = history, rs
	out, err = agent.Execute(ctx, cfg, f.j, run)
	if err != nil {
		t.Fatal(err)
	}
	if out.Type != event.RunCompleted || out.Text != "done" || out.Steps != 3 {
		t.Fatalf("resumed outcome %+v", out)
	}
	assertValidTranscript(t, f.transcript())
}
