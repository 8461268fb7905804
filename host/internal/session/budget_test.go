package session

import (
	"errors"
	"testing"

	"weft.dev/weft/api"
	"weft.dev/weft/event"
	"weft.dev/weft/store/record"
)

// TestParseRaise: the answers a budget question takes — a raise in the
// budget's unit, yes or the first choice (the suggested raise), no or the
// last choice — and the ones it refuses, naming the budget: neither, or
// a raise to no more than was spent.
func TestParseRaise(t *testing.T) {
	question := func(name string, limit, spent float64) record.Request {
		r := event.BudgetExceeded{Scope: event.ScopeRun, Budget: name, Limit: limit, Spent: spent}
		return record.Request{ID: "inp_1", Kind: event.RequestInput, Budget: &r, Choices: budgetChoices(r)}
	}
	cost := question(event.BudgetCost, 1, 1.2)
	tokens := question(event.BudgetTokens, 100_000, 100_500)
	wall := question(event.BudgetWallTime, 60_000, 60_000)
	for _, tc := range []struct {
		q     record.Request
		text  string
		limit float64
		stop  bool
	}{
		{cost, "raise to $5", 5, false},
		{cost, "Raise to 2.50 dollars", 2.5, false},
		{cost, "3", 3, false},
		{cost, "yes", 2.2, false},
		{cost, cost.Choices[0], 2.2, false},
		{cost, "no", 0, true},
		{cost, "No, stop.", 0, true},
		{cost, cost.Choices[1], 0, true},
		{tokens, "raise to 250k", 250_000, false},
		{tokens, "raise to 300,000 tokens", 300_000, false},
		{wall, "raise to 30m", 1_800_000, false},
		{wall, wall.Choices[0], 120_000, false},
	} {
		limit, stop, err := parseRaise(tc.q, tc.text)
		if err != nil || stop != tc.stop || (!stop && (limit < tc.limit-1e-9 || limit > tc.limit+1e-9)) {
			t.Errorf("%s %q: %g, stop %v, %v; want %g, stop %v", tc.q.Budget.Budget, tc.text, limit, stop, err, tc.limit, tc.stop)
		}
	}
	for _, tc := range []struct {
		q    record.Request
		text string
	}{{cost, "raise to $1.10"}, {cost, "maybe"}, {tokens, "raise to lots"}, {cost, "raise to -5"}, {wall, "raise to 0s"}} {
		_, _, err := parseRaise(tc.q, tc.text)
		var ae *api.Error
		if !errors.As(err, &ae) || ae.Kind != api.KindInvalidParams || ae.Data["budget"] != tc.q.Budget.Budget {
			t.Errorf("%q: %v; want invalid_params naming the budget", tc.text, err)
		}
	}
}
