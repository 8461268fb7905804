package host_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
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

// budgetScripts are the models of the budget tests: each step costs
// $1 (100,000 input tokens at $10 per million).
var budgetScripts = map[string]string{
	// loop lists the mount forever.
	"loop": `{"loop":true,"steps":[{"toolCalls":[{"name":"list_dir","arguments":{"path":"."}}],"usage":{"inputTokens":100000}}]}`,
	// three takes two tool steps, then answers.
	"three": `{"loop":true,"steps":[
		{"toolCalls":[{"name":"list_dir","arguments":{"path":"."}}],"usage":{"inputTokens":100000}},
		{"toolCalls":[{"name":"list_dir","arguments":{"path":"."}}],"usage":{"inputTokens":100000}},
		{"text":"done","usage":{"inputTokens":100000}}]}`,
	// slow answers after a while, step after step.
	"slow": `{"loop":true,"steps":[{"toolCalls":[{"name":"list_dir","arguments":{"path":"."}}],"delayMs":30}]}`,
}

// newBudgetHost is a host over st whose models are budgetScripts, priced.
func newBudgetHost(t *testing.T, st store.Store, mod func(*host.Config)) *host.Host {
	t.Helper()
	reg := tool.NewRegistry()
	if err := builtin.Register(reg, builtin.Options{}); err != nil {
		t.Fatal(err)
	}
	cfg := host.Config{
		Store: st, Tools: reg, DefaultModel: "scripted:loop", CoalesceWindow: 2 * time.Millisecond,
		ResolveModel: func(name string) (*host.Model, error) {
			key := strings.TrimPrefix(name, "scripted:")
			p, err := scripted.Parse(key+".json", []byte(budgetScripts[key]))
			if err != nil {
				return nil, err
			}
			return &host.Model{Name: name, Provider: p, Model: key, Price: &llm.Price{InputPerMTok: 10, OutputPerMTok: 10}}, nil
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

func budgetSession(t *testing.T, h *host.Host, model string, b *event.Budget) string {
	t.Helper()
	s, err := h.CreateSession(context.Background(), api.CreateSessionParams{Model: model, Budget: b,
		Mounts: []event.Mount{{ID: "work", Path: t.TempDir(), Default: true}}})
	if err != nil {
		t.Fatal(err)
	}
	return s.ID
}

// wantBudgetFailure checks that run r failed with budget_exceeded naming
// scope and name, and that no tool call of it was left open.
func wantBudgetFailure(t *testing.T, h *host.Host, r record.Run, scope, name string) {
	t.Helper()
	if r.Status != record.RunFailed || r.Error == nil || r.Error.Kind != event.KindBudgetExceeded ||
		r.Error.Budget == nil || r.Error.Budget.Scope != scope || r.Error.Budget.Budget != name {
		t.Fatalf("run %+v, error %+v; want failed budget_exceeded on the %s's %s", r, r.Error, scope, name)
	}
	if b := r.Error.Budget; b.Spent < b.Limit {
		t.Fatalf("budget %+v: spent below the limit", b)
	}
	page, err := h.ReadEvents(context.Background(), api.ReadEventsParams{SessionID: r.SessionID, RunID: r.ID, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	open := map[string]bool{}
	for _, e := range page.Events {
		var d struct {
			ID string `json:"id"`
		}
		switch e.Type {
		case event.ToolCallStarted, event.ToolCallCompleted:
			if err := e.Decode(&d); err != nil {
				t.Fatal(err)
			}
			open[d.ID] = e.Type == event.ToolCallStarted
		}
	}
	for id, o := range open {
		if o {
			t.Fatalf("tool call %s left open", id)
		}
	}
}

// TestBudgetStopsRun: a run stops at the step boundary where it reaches
// its token, cost or step budget, or its session's cost budget; a
// wall-time budget stops it mid-step. Each ends failed with
// budget_exceeded naming the budget, as run/get shows.
func TestBudgetStopsRun(t *testing.T) {
	h := newBudgetHost(t, memory.New(), nil)
	for _, c := range []struct {
		name   string
		model  string
		run    *event.Budget
		ses    *event.Budget
		scope  string
		budget string
	}{
		{"tokens", "scripted:loop", &event.Budget{Tokens: 250_000}, nil, event.ScopeRun, event.BudgetTokens},
		{"cost", "scripted:loop", &event.Budget{CostUSD: 2}, nil, event.ScopeRun, event.BudgetCost},
		{"steps", "scripted:loop", &event.Budget{Steps: 4}, nil, event.ScopeRun, event.BudgetSteps},
		{"wall time", "scripted:slow", &event.Budget{WallTimeMs: 100}, nil, event.ScopeRun, event.BudgetWallTime},
		{"session cost", "scripted:loop", nil, &event.Budget{CostUSD: 3}, event.ScopeSession, event.BudgetCost},
		{"session steps", "scripted:loop", &event.Budget{Steps: 10}, &event.Budget{Steps: 2}, event.ScopeSession, event.BudgetSteps},
	} {
		t.Run(c.name, func(t *testing.T) {
			sid := budgetSession(t, h, c.model, c.ses)
			r := start(t, h, api.StartRunParams{SessionID: sid, Input: input("go"), Budget: c.run})
			got := wait(t, h, r.ID)
			wantBudgetFailure(t, h, got, c.scope, c.budget)
			g, err := h.GetRun(context.Background(), api.RunIDParams{RunID: r.ID})
			if err != nil || g.Error == nil || g.Error.Budget == nil {
				t.Fatalf("run/get %+v, %v", g, err)
			}
		})
	}
}

// TestSessionTotals: session/get carries what the session's runs spent
// together: steps, tokens, cost and wall time.
func TestSessionTotals(t *testing.T) {
	h := newBudgetHost(t, memory.New(), nil)
	sid := budgetSession(t, h, "scripted:three", nil)
	for range 2 {
		r := start(t, h, api.StartRunParams{SessionID: sid, Input: input("go"), Model: "scripted:three"})
		if got := wait(t, h, r.ID); got.Status != record.RunCompleted {
			t.Fatalf("run %+v, error %+v", got, got.Error)
		}
	}
	s, err := h.GetSession(context.Background(), api.SessionGetParams{SessionID: sid})
	if err != nil {
		t.Fatal(err)
	}
	if s.Steps != 6 || s.Usage.InputTokens != 600_000 || s.Usage.CostUSD != 6 {
		t.Fatalf("session totals: steps %d, usage %+v; want 6 steps, 600000 tokens, $6", s.Steps, s.Usage)
	}
}

// TestBudgetAskSurvivesRestart: a run whose budget policy is ask parks at
// the step boundary with a question any client answers; the host
// restarts (SQLite) and the run still waits; an answer at or below what
// was spent is refused naming the budget; "raise to 5" resumes the run
// from its step and it completes.
func TestBudgetAskSurvivesRestart(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "weft.db")
	open := func() (*sqlite.Store, *host.Host) {
		st, err := sqlite.Open(ctx, sqlite.Config{Path: path})
		if err != nil {
			t.Fatal(err)
		}
		return st, newBudgetHost(t, st, nil)
	}
	st, h := open()
	sid := budgetSession(t, h, "scripted:three", nil)
	r := start(t, h, api.StartRunParams{SessionID: sid, Input: input("go"), Budget: &event.Budget{Steps: 1, OnBudget: event.OnBudgetAsk}})
	qs := waitingOn(t, h, sid, r.ID, 1)
	q := qs[0]
	if q.Kind != event.RequestInput || q.Budget == nil || q.Budget.Budget != event.BudgetSteps || q.Budget.Limit != 1 ||
		!strings.Contains(q.Question, "step budget") || len(q.Choices) != 2 {
		t.Fatalf("budget question %+v", q)
	}
	h.Close()
	st.Close()

	st, h = open()
	defer st.Close()
	got, err := h.GetRun(ctx, api.RunIDParams{RunID: r.ID})
	if err != nil || got.Status != record.RunWaiting || len(got.Requests) != 1 {
		t.Fatalf("run after the restart: %+v, %v; want waiting on its budget question", got, err)
	}
	for _, bad := range []string{"raise to 1", "raise to lots", "maybe"} {
		_, err := h.AnswerInput(ctx, api.AnswerParams{RequestID: q.ID, Text: bad})
		var ae *api.Error
		if !errors.As(err, &ae) || ae.Kind != api.KindInvalidParams || ae.Data["budget"] != event.BudgetSteps {
			t.Fatalf("answer %q: %v; want invalid_params naming the budget", bad, err)
		}
	}
	if _, err := h.AnswerInput(ctx, api.AnswerParams{RequestID: q.ID, Text: "raise to 5"}); err != nil {
		t.Fatal(err)
	}
	done := wait(t, h, r.ID)
	if done.Status != record.RunCompleted || done.Steps != 3 || done.Budget == nil || done.Budget.Steps != 5 {
		t.Fatalf("run after the raise: %+v, budget %+v", done, done.Budget)
	}
	page, err := h.ReadEvents(ctx, api.ReadEventsParams{SessionID: sid, RunID: r.ID, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	var raised, steps int
	for _, e := range page.Events {
		switch e.Type {
		case event.BudgetRaised:
			raised++
		case event.StepStarted:
			steps++
		}
	}
	if raised != 1 || steps != 3 {
		t.Fatalf("%d budget.raised, %d steps; want 1 and 3 (no step run twice)", raised, steps)
	}
}

// TestBudgetAskNo: "no" to a budget question ends the run as failed
// budget_exceeded, with no call left open; a session budget's question
// raised by its first choice raises the session's limit.
func TestBudgetAskNo(t *testing.T) {
	ctx := context.Background()
	h := newBudgetHost(t, memory.New(), nil)
	sid := budgetSession(t, h, "scripted:loop", &event.Budget{CostUSD: 2, OnBudget: event.OnBudgetAsk})
	r := start(t, h, api.StartRunParams{SessionID: sid, Input: input("go")})
	q := waitingOn(t, h, sid, r.ID, 1)[0]
	if q.Budget == nil || q.Budget.Scope != event.ScopeSession || q.Budget.Budget != event.BudgetCost {
		t.Fatalf("question %+v", q)
	}
	zero := 0
	if _, err := h.AnswerInput(ctx, api.AnswerParams{RequestID: q.ID, Choice: &zero}); err != nil {
		t.Fatal(err)
	}
	q2 := waitFor(t, h, sid, r.ID, func(e event.Event) bool {
		var d event.InputRequestedData
		return e.Type == event.InputRequested && e.Decode(&d) == nil && d.RequestID != q.ID
	})
	var d event.InputRequestedData
	if err := q2.Decode(&d); err != nil {
		t.Fatal(err)
	}
	if d.Budget == nil || d.Budget.Limit != 4 {
		t.Fatalf("second question %+v; want the raised limit, $4", d.Budget)
	}
	s, err := h.GetSession(ctx, api.SessionGetParams{SessionID: sid})
	if err != nil || s.Budget == nil || s.Budget.CostUSD != 4 {
		t.Fatalf("session budget after the raise: %+v, %v", s, err)
	}
	if _, err := h.AnswerInput(ctx, api.AnswerParams{RequestID: d.RequestID, Text: "no"}); err != nil {
		t.Fatal(err)
	}
	wantBudgetFailure(t, h, wait(t, h, r.ID), event.ScopeSession, event.BudgetCost)
}

// TestBudgetBadInput: a negative limit or an unknown policy is
// invalid_params naming the field, at run/start, session/create and
// session/update; a session budget at or below what the session has
// already spent is invalid_params naming it.
func TestBudgetBadInput(t *testing.T) {
	ctx := context.Background()
	h := newBudgetHost(t, memory.New(), nil)
	sid := budgetSession(t, h, "scripted:three", nil)
	wantField := func(err error, field string) {
		t.Helper()
		var ae *api.Error
		if !errors.As(err, &ae) || ae.Kind != api.KindInvalidParams || ae.Data["field"] != field {
			t.Fatalf("%v; want invalid_params on %s", err, field)
		}
	}
	_, err := h.StartRun(ctx, api.StartRunParams{SessionID: sid, Input: input("go"), Budget: &event.Budget{CostUSD: -1}})
	wantField(err, "budget.costUsd")
	_, err = h.StartRun(ctx, api.StartRunParams{SessionID: sid, Input: input("go"), Budget: &event.Budget{Steps: 2, OnBudget: "pause"}})
	wantField(err, "budget.onBudget")
	_, err = h.CreateSession(ctx, api.CreateSessionParams{Budget: &event.Budget{Tokens: -5}})
	wantField(err, "budget.tokens")
	_, err = h.UpdateSession(ctx, api.UpdateSessionParams{SessionID: sid, Budget: &event.Budget{WallTimeMs: -1}})
	wantField(err, "budget.wallTimeMs")

	r := start(t, h, api.StartRunParams{SessionID: sid, Input: input("go"), Model: "scripted:three"})
	if got := wait(t, h, r.ID); got.Status != record.RunCompleted {
		t.Fatalf("run %+v, error %+v", got, got.Error)
	}
	_, err = h.UpdateSession(ctx, api.UpdateSessionParams{SessionID: sid, Budget: &event.Budget{CostUSD: 2}})
	wantField(err, "budget.costUsd")
	s, err := h.UpdateSession(ctx, api.UpdateSessionParams{SessionID: sid, Budget: &event.Budget{CostUSD: 10, Steps: 20}})
	if err != nil || s.Budget == nil || s.Budget.CostUSD != 10 || s.Budget.Steps != 20 {
		t.Fatalf("update to $10, 20 steps: %+v, %v", s, err)
	}
}

// TestBudgetDefaults: the host's default budgets hold for runs and
// sessions that name none, and a run's own fields are laid over them.
func TestBudgetDefaults(t *testing.T) {
	h := newBudgetHost(t, memory.New(), func(c *host.Config) {
		c.Budgets = host.Budgets{Run: event.Budget{Steps: 3}, Session: event.Budget{CostUSD: 100}}
	})
	sid := budgetSession(t, h, "scripted:loop", nil)
	s, err := h.GetSession(context.Background(), api.SessionGetParams{SessionID: sid})
	if err != nil || s.Budget == nil || s.Budget.CostUSD != 100 {
		t.Fatalf("session %+v, %v; want the default budget", s, err)
	}
	r := start(t, h, api.StartRunParams{SessionID: sid, Input: input("go")})
	wantBudgetFailure(t, h, wait(t, h, r.ID), event.ScopeRun, event.BudgetSteps)
	r = start(t, h, api.StartRunParams{SessionID: sid, Input: input("go"), Budget: &event.Budget{CostUSD: 1}})
	got := wait(t, h, r.ID)
	wantBudgetFailure(t, h, got, event.ScopeRun, event.BudgetCost)
	if got.Budget == nil || got.Budget.Steps != 3 || got.Budget.CostUSD != 1 {
		t.Fatalf("run budget %+v; want its own cost over the default steps", got.Budget)
	}
	rem := host.RemainingBudget(got, s.Session, time.Now())
	if rem.Steps != 2 || rem.CostUSD <= 0 || rem.CostUSD > 1e-5 || rem.Tokens != 0 {
		t.Fatalf("remaining budget %+v", rem)
	}
}

// TestHostBudget: the operator's host budget holds all sessions' runs
// together, counted again from the store when a host starts; a run that
// finds it reached fails budget_exceeded of scope host, and a host
// budget with wall time or ask is refused.
func TestHostBudget(t *testing.T) {
	st := memory.New()
	cfg := func(c *host.Config) { c.Budgets.Host = event.Budget{CostUSD: 3} }
	h := newBudgetHost(t, st, cfg)
	sid := budgetSession(t, h, "scripted:three", nil)
	r := start(t, h, api.StartRunParams{SessionID: sid, Input: input("go"), Model: "scripted:three"})
	if got := wait(t, h, r.ID); got.Status != record.RunCompleted {
		t.Fatalf("first run %+v, error %+v", got, got.Error)
	}
	r = start(t, h, api.StartRunParams{SessionID: budgetSession(t, h, "scripted:three", nil), Input: input("go")})
	wantBudgetFailure(t, h, wait(t, h, r.ID), event.ScopeHost, event.BudgetCost)
	h.Close()

	h = newBudgetHost(t, st, cfg)
	r = start(t, h, api.StartRunParams{SessionID: budgetSession(t, h, "scripted:three", nil), Input: input("go")})
	got := wait(t, h, r.ID)
	wantBudgetFailure(t, h, got, event.ScopeHost, event.BudgetCost)
	if got.Steps != 0 {
		t.Fatalf("a run over the host's budget took %d steps after a restart", got.Steps)
	}
	for _, b := range []event.Budget{{WallTimeMs: 1000}, {CostUSD: 1, OnBudget: event.OnBudgetAsk}} {
		_, err := host.New(context.Background(), host.Config{Store: memory.New(), ResolveModel: func(string) (*host.Model, error) { return nil, nil },
			Budgets: host.Budgets{Host: b}})
		if err == nil || !strings.Contains(err.Error(), "budgets.host.") {
			t.Fatalf("host budget %+v: %v; want an error naming the field", b, err)
		}
	}
}

// TestBudgetAskCancelled: cancelling a run that waits on its budget
// question cancels the question and ends the run, nothing left open; a
// fork keeps its source's budget (its spend starts afresh).
func TestBudgetAskCancelled(t *testing.T) {
	ctx := context.Background()
	h := newBudgetHost(t, memory.New(), nil)
	sid := budgetSession(t, h, "scripted:loop", &event.Budget{Steps: 2, OnBudget: event.OnBudgetAsk})
	r := start(t, h, api.StartRunParams{SessionID: sid, Input: input("go")})
	q := waitingOn(t, h, sid, r.ID, 1)[0]
	got, err := h.CancelRun(ctx, api.CancelParams{RunID: r.ID, Reason: "enough"})
	if err != nil || got.Status != record.RunCancelled {
		t.Fatalf("cancel: %+v, %v", got, err)
	}
	rq, err := h.GetRequest(ctx, api.RequestIDParams{RequestID: q.ID})
	if err != nil || rq.Status != record.RequestCancelled {
		t.Fatalf("the budget question after the cancel: %+v, %v", rq, err)
	}
	if _, err := h.AnswerInput(ctx, api.AnswerParams{RequestID: q.ID, Text: "raise to 9"}); !errors.Is(err, api.ErrAlreadyResolved) {
		t.Fatalf("answer after the cancel: %v; want already_resolved", err)
	}
	f, err := h.ForkSession(ctx, api.ForkSessionParams{SessionID: sid})
	if err != nil {
		t.Fatal(err)
	}
	if f.Session.Budget == nil || f.Session.Budget.Steps != 2 || f.Session.Steps != 0 {
		t.Fatalf("fork: budget %+v, steps %d", f.Session.Budget, f.Session.Steps)
	}
}

// TestBudgetWallTimeAsks: a wall-time budget whose policy is ask lets the
// step under way finish and asks at the next boundary; a raise to a
// duration resumes the run.
func TestBudgetWallTimeAsks(t *testing.T) {
	ctx := context.Background()
	h := newBudgetHost(t, memory.New(), nil)
	sid := budgetSession(t, h, "scripted:slow", nil)
	r := start(t, h, api.StartRunParams{SessionID: sid, Input: input("go"), Budget: &event.Budget{WallTimeMs: 50, OnBudget: event.OnBudgetAsk}})
	q := waitingOn(t, h, sid, r.ID, 1)[0]
	if q.Budget == nil || q.Budget.Budget != event.BudgetWallTime || q.Budget.Spent < 50 {
		t.Fatalf("question %+v", q.Budget)
	}
	if _, err := h.AnswerInput(ctx, api.AnswerParams{RequestID: q.ID, Text: "raise to 10m"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, h, sid, r.ID, func(e event.Event) bool { return e.Type == event.RunResumed })
	got, err := h.CancelRun(ctx, api.CancelParams{RunID: r.ID, Reason: "done"})
	if err != nil || got.Status != record.RunCancelled || got.Budget == nil || got.Budget.WallTimeMs != 600_000 {
		t.Fatalf("run %+v, %v", got, err)
	}
}
