package main

import (
	"strings"
	"testing"
	"time"

	"weft.dev/weft/event"
	"weft.dev/weft/store/record"
)

// TestSessionSpend: weft sessions shows what a session's runs spent, and
// its cost budget; nothing for a session that spent nothing.
func TestSessionSpend(t *testing.T) {
	for _, tc := range []struct {
		s    record.Session
		want string
	}{
		{record.Session{}, ""},
		{record.Session{Usage: event.TokenUsage{InputTokens: 12000, OutputTokens: 345}}, "12.3k tok"},
		{record.Session{Usage: event.TokenUsage{InputTokens: 900, OutputTokens: 100, CostUSD: 1.5}, Budget: &event.Budget{CostUSD: 5}}, "1.0k tok $1.50 of $5.00"},
	} {
		if got := sessionSpend(tc.s); got != tc.want {
			t.Errorf("sessionSpend(%+v) = %q, want %q", tc.s.Usage, got, tc.want)
		}
	}
}

// TestBudgetFlags: weft run's budget flags make the run's budget; none
// makes none; a negative one is a usage error naming the flag.
func TestBudgetFlags(t *testing.T) {
	b, err := budgetFlags{BudgetUSD: 2.5, BudgetTime: 30 * time.Minute, OnBudget: "ask"}.budget()
	if err != nil || b == nil || b.CostUSD != 2.5 || b.WallTimeMs != 1_800_000 || b.OnBudget != event.OnBudgetAsk {
		t.Fatalf("budget %+v, %v", b, err)
	}
	if b, err := (budgetFlags{}).budget(); b != nil || err != nil {
		t.Fatalf("no flags: %+v, %v", b, err)
	}
	if _, err := (budgetFlags{BudgetSteps: -1}).budget(); err == nil || !strings.Contains(err.Error(), "--budget-steps -1") {
		t.Fatalf("negative steps: %v", err)
	}
}
