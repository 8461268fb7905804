package event_test

import (
	"testing"
	"time"

	"weft.dev/weft/event"
)

// TestBudgetArithmetic: a budget reports the first limit reached, what
// is left after a spend (never less than the least limit), the tighter
// of two budgets, and people's words for them.
func TestBudgetArithmetic(t *testing.T) {
	b := event.Budget{Tokens: 1000, CostUSD: 2, Steps: 5, OnBudget: event.OnBudgetAsk}
	spent := event.SpentOf(event.TokenUsage{InputTokens: 900, OutputTokens: 50, CostUSD: 2.5}, 3, time.Second)
	if got := b.Reached(spent); got != event.BudgetCost {
		t.Fatalf("reached %q, want costUsd", got)
	}
	rem := b.Remaining(spent)
	if rem.Tokens != 50 || rem.CostUSD != 1e-6 || rem.Steps != 2 || rem.WallTimeMs != 0 || rem.OnBudget != event.OnBudgetAsk {
		t.Fatalf("remaining %+v", rem)
	}
	if got := b.Tighter(event.Budget{Tokens: 10, WallTimeMs: 60_000}); got.Tokens != 10 || got.CostUSD != 2 || got.WallTimeMs != 60_000 || got.OnBudget != event.OnBudgetAsk {
		t.Fatalf("tighter %+v", got)
	}
	if got := (event.Budget{Steps: 3}).Over(b); got.Steps != 3 || got.Tokens != 1000 {
		t.Fatalf("over %+v", got)
	}
	r := event.BudgetExceeded{Scope: event.ScopeRun, Budget: event.BudgetSteps, Limit: 1, Spent: 1}
	if got := r.String(); got != "the run's step budget of 1 step (1 step spent)" {
		t.Fatalf("%q", got)
	}
	if got := event.FormatBudget(event.BudgetWallTime, 90_000); got != "1m30s" {
		t.Fatalf("%q", got)
	}
	for _, bad := range []event.Budget{{Tokens: -1}, {CostUSD: -0.01}, {Steps: -1}, {WallTimeMs: -1}, {OnBudget: "later"}} {
		if bad.Check("budget") == nil {
			t.Errorf("%+v passed Check", bad)
		}
	}
}
