package record_test

import (
	"fmt"
	"testing"
	"time"

	"weft.dev/weft/event"
	"weft.dev/weft/store/record"
)

// TestProjectionTrim checks that Trim forgets ended runs beyond the kept
// ones, never a run that has not ended nor one changed since Flush, and
// that the projection goes on applying events after it.
func TestProjectionTrim(t *testing.T) {
	p := record.NewProjection(record.Session{}, nil)
	var seq int64
	apply := func(runID string, typ event.Type, v any) {
		t.Helper()
		e, err := event.New(runID, typ, v)
		if err != nil {
			t.Fatal(err)
		}
		seq++
		e.SessionID, e.Seq, e.Time = "s", seq, time.Unix(seq, 0)
		if err := p.Apply(e); err != nil {
			t.Fatal(err)
		}
	}
	apply("", event.SessionCreated, event.SessionCreatedData{})
	for i := range 10 {
		id := fmt.Sprint("r", i)
		apply(id, event.RunQueued, event.RunQueuedData{Model: "m"})
		apply(id, event.RunStarted, event.RunStartedData{Model: "m"})
		apply(id, event.RunCompleted, event.RunEndedData{Steps: 1})
	}
	apply("q1", event.RunQueued, event.RunQueuedData{Model: "m"})
	apply("q1", event.RunStarted, event.RunStartedData{Model: "m"})
	apply("q2", event.RunQueued, event.RunQueuedData{Model: "m"})

	p.Trim(2) // before Flush: every ended run is dirty, none goes
	if _, ok := p.Run("r0"); !ok {
		t.Fatal("Trim forgot a run changed since Flush")
	}
	p.Flush()
	p.Trim(2)
	for i := range 10 {
		_, ok := p.Run(fmt.Sprint("r", i))
		if want := i >= 8; ok != want {
			t.Errorf("run r%d kept = %v, want %v", i, ok, want)
		}
	}
	for _, id := range []string{"q1", "q2"} {
		if _, ok := p.Run(id); !ok {
			t.Errorf("Trim forgot live run %s", id)
		}
	}
	// The queued run becomes active when the running one ends.
	apply("q1", event.RunCompleted, event.RunEndedData{})
	if p.Session.ActiveRunID != "q2" {
		t.Fatalf("active run %q, want q2", p.Session.ActiveRunID)
	}
	p.Flush()
	p.Trim(0)
	if _, ok := p.Run("q1"); ok {
		t.Fatal("Trim(0) kept an ended run")
	}
	if _, ok := p.Run("q2"); !ok {
		t.Fatal("Trim(0) forgot the queued run")
	}
}

// TestProjectionRunUsageCountsCompactions checks that a run's record
// counts the tokens and cost of a compaction inside it as well as its
// steps', as its end event does.
func TestProjectionRunUsageCountsCompactions(t *testing.T) {
	p := record.NewProjection(record.Session{}, nil)
	var seq int64
	apply := func(runID string, typ event.Type, v any) {
		t.Helper()
		e, err := event.New(runID, typ, v)
		if err != nil {
			t.Fatal(err)
		}
		seq++
		e.SessionID, e.Seq, e.Time = "s", seq, time.Unix(seq, 0)
		if err := p.Apply(e); err != nil {
			t.Fatal(err)
		}
	}
	apply("", event.SessionCreated, event.SessionCreatedData{})
	apply("r", event.RunQueued, event.RunQueuedData{Model: "m"})
	apply("r", event.RunStarted, event.RunStartedData{Model: "m"})
	apply("r", event.Usage, event.UsageData{Usage: event.TokenUsage{InputTokens: 100, OutputTokens: 10, CostUSD: 1}})
	apply("r", event.ContextCompacted, event.ContextCompactedData{Summary: "s", Reason: "threshold",
		Usage: event.TokenUsage{InputTokens: 90, OutputTokens: 5, CostUSD: 0.5}})
	apply("r", event.Usage, event.UsageData{Usage: event.TokenUsage{InputTokens: 20, OutputTokens: 3, CostUSD: 0.25}})
	// A compaction on demand, outside any run, is no run's.
	apply("", event.ContextCompacted, event.ContextCompactedData{Summary: "t", Reason: "requested",
		Usage: event.TokenUsage{InputTokens: 1000, OutputTokens: 100, CostUSD: 9}})
	r, ok := p.Run("r")
	if !ok {
		t.Fatal("run r not found")
	}
	want := event.TokenUsage{InputTokens: 210, OutputTokens: 18, CostUSD: 1.75}
	if r.Usage != want {
		t.Fatalf("run usage %+v, want %+v", r.Usage, want)
	}
}

// TestProjectionSessionTotals checks that the session record sums what
// its runs spent — steps, usage events and every compaction's summary
// request, one on demand outside a run included — and the wall time of
// the runs that ended, and that a raised budget lands on the run's or the
// session's record.
func TestProjectionSessionTotals(t *testing.T) {
	p := record.NewProjection(record.Session{}, nil)
	var seq int64
	apply := func(runID string, typ event.Type, v any) {
		t.Helper()
		e, err := event.New(runID, typ, v)
		if err != nil {
			t.Fatal(err)
		}
		seq++
		e.SessionID, e.Seq, e.Time = "s", seq, time.Unix(seq, 0)
		if err := p.Apply(e); err != nil {
			t.Fatal(err)
		}
	}
	apply("", event.SessionCreated, event.SessionCreatedData{Budget: &event.Budget{CostUSD: 10}})
	for _, id := range []string{"r1", "r2"} {
		apply(id, event.RunQueued, event.RunQueuedData{Model: "m", Budget: &event.Budget{Steps: 5}})
		apply(id, event.RunStarted, event.RunStartedData{Model: "m"})
		apply(id, event.StepStarted, event.StepData{Step: 1})
		apply(id, event.Usage, event.UsageData{Usage: event.TokenUsage{InputTokens: 100, OutputTokens: 10, CostUSD: 1}})
		apply(id, event.StepStarted, event.StepData{Step: 2})
		apply(id, event.ContextCompacted, event.ContextCompactedData{Summary: "s", Reason: "threshold",
			Usage: event.TokenUsage{InputTokens: 90, OutputTokens: 5, CostUSD: 0.5}})
		apply(id, event.Usage, event.UsageData{Usage: event.TokenUsage{InputTokens: 20, OutputTokens: 3, CostUSD: 0.25}})
		apply(id, event.RunCompleted, event.RunEndedData{Steps: 2})
	}
	apply("", event.ContextCompacted, event.ContextCompactedData{Summary: "t", Reason: "requested",
		Usage: event.TokenUsage{InputTokens: 1000, OutputTokens: 100, CostUSD: 9}})
	s := p.Flush().Session
	if s == nil {
		t.Fatal("the session record did not change")
	}
	want := event.TokenUsage{InputTokens: 1420, OutputTokens: 136, CostUSD: 12.5}
	if s.Usage != want || s.Steps != 4 || s.WallTimeMs != 2*6000 {
		t.Fatalf("session usage %+v, steps %d, wall %d ms; want %+v, 4, 12000", s.Usage, s.Steps, s.WallTimeMs, want)
	}
	apply("r3", event.RunQueued, event.RunQueuedData{Model: "m", Budget: &event.Budget{Steps: 5}})
	apply("r3", event.BudgetRaised, event.BudgetRaisedData{Scope: event.ScopeRun, Budget: event.BudgetSteps, Limit: 8})
	apply("r3", event.BudgetRaised, event.BudgetRaisedData{Scope: event.ScopeSession, Budget: event.BudgetCost, Limit: 20})
	c := p.Flush()
	if c.Session == nil || c.Session.Budget == nil || c.Session.Budget.CostUSD != 20 {
		t.Fatalf("session budget %+v after a raise to $20", c.Session)
	}
	if r, _ := p.Run("r3"); r.Budget == nil || r.Budget.Steps != 8 {
		t.Fatalf("run budget %+v after a raise to 8 steps", r.Budget)
	}
}
