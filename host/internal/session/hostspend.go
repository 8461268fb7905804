package session

import (
	"sync"

	"weft.dev/weft/event"
)

// HostSpend is what a host's runs have spent, held against the host's
// budget: every session owner of the host adds its runs' spend at their
// step boundaries and ends, and a run that finds the host's budget
// reached stops (a host's budget never asks: raising it is the
// operator's, not a client's). Tokens, cost and steps count; a host has
// no wall-time budget. Safe for concurrent use.
type HostSpend struct {
	budget event.Budget

	mu    sync.Mutex
	spent event.Spent
}

// NewHostSpend returns the spend of a host whose budget is b and whose
// runs had spent spent when it started.
func NewHostSpend(b event.Budget, spent event.Spent) *HostSpend {
	b.WallTimeMs, b.OnBudget = 0, event.OnBudgetStop
	spent.WallTimeMs = 0
	return &HostSpend{budget: b, spent: spent}
}

// Spent returns what the host's runs have spent.
func (h *HostSpend) Spent() event.Spent {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.spent
}

// add adds what a run spent since it last added (seen), and moves seen.
func (h *HostSpend) add(seen *hostSeen, usage event.TokenUsage, steps int) {
	if steps < seen.steps {
		return // a run that failed before its loop reports nothing
	}
	d := event.SpentOf(usage, steps, 0)
	prev := event.SpentOf(seen.usage, seen.steps, 0)
	seen.usage, seen.steps = usage, steps
	h.mu.Lock()
	defer h.mu.Unlock()
	h.spent.Tokens += d.Tokens - prev.Tokens
	h.spent.CostUSD += d.CostUSD - prev.CostUSD
	h.spent.Steps += d.Steps - prev.Steps
}

// reached returns the host's budget that is reached, or nil.
func (h *HostSpend) reached() *event.BudgetExceeded {
	h.mu.Lock()
	defer h.mu.Unlock()
	name := h.budget.Reached(h.spent)
	if name == "" {
		return nil
	}
	return &event.BudgetExceeded{Scope: event.ScopeHost, Budget: name, Limit: h.budget.Limit(name), Spent: h.spent.Of(name)}
}

// hostSeen is what of a run's spend its session has added to the host's.
type hostSeen struct {
	seeded bool
	usage  event.TokenUsage
	steps  int
}
