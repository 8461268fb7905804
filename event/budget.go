package event

import (
	"fmt"
	"math"
	"time"
)

// BudgetRaised records that a person raised a budget a run had reached,
// by answering the run's budget question (input/answer): the run's or
// the session's limit of that budget is Limit from now on, and the run
// goes on from the step boundary where it stopped. Data:
// [BudgetRaisedData].
const BudgetRaised Type = "budget.raised"

// Budget policies: what a run does when it reaches a budget.
const (
	// OnBudgetStop ends the run as failed, with an error of kind
	// [KindBudgetExceeded].
	OnBudgetStop = "stop"
	// OnBudgetAsk parks the run at the step boundary with a question
	// (input.requested whose Budget is set) that any client answers:
	// "raise to X" goes on, "no" ends the run as OnBudgetStop does.
	OnBudgetAsk = "ask"
)

// KindBudgetExceeded is the error kind of a run that reached a budget
// (run.failed); the error's Budget says which.
const KindBudgetExceeded = "budget_exceeded"

// Budget names, as [BudgetExceeded.Budget] and the fields of [Budget]
// spell them.
const (
	BudgetTokens   = "tokens"
	BudgetCost     = "costUsd"
	BudgetSteps    = "steps"
	BudgetWallTime = "wallTimeMs"
)

// Budget scopes: whose budget a run reached.
const (
	ScopeRun     = "run"
	ScopeSession = "session"
	ScopeHost    = "host"
)

// Budget caps what runs may spend. A zero field is no limit. Tokens
// count each step's input and output tokens as the provider reports
// them; cost is in US dollars at the model's price (a model without a
// price costs nothing, so only its tokens can be capped); steps are
// model calls; wall time is from a run's start to now (for a session,
// the sum of its runs'), time spent waiting for answers included.
//
// Budgets are checked at step boundaries, before a model call; a run
// with a wall-time budget and the stop policy is also ended by a timer
// that cuts the step under way (its tool calls get error results).
type Budget struct {
	Tokens     int64   `json:"tokens,omitempty"`
	CostUSD    float64 `json:"costUsd,omitempty"`
	Steps      int     `json:"steps,omitempty"`
	WallTimeMs int64   `json:"wallTimeMs,omitempty"`
	// OnBudget is what a run does when it reaches one of these limits:
	// "stop" (the default) or "ask".
	OnBudget string `json:"onBudget,omitempty"`
}

// IsZero reports whether b sets nothing.
func (b Budget) IsZero() bool { return b == Budget{} }

// Limits reports whether b sets any limit (its policy aside).
func (b Budget) Limits() bool {
	return b.Tokens > 0 || b.CostUSD > 0 || b.Steps > 0 || b.WallTimeMs > 0
}

// Check reports the first field of b that is malformed: negative, not a
// finite number, or an unknown policy. field prefixes the names.
func (b Budget) Check(field string) error {
	switch {
	case b.Tokens < 0:
		return fmt.Errorf("%s.tokens %d: want 0 (no limit) or more", field, b.Tokens)
	case math.IsNaN(b.CostUSD) || math.IsInf(b.CostUSD, 0) || b.CostUSD < 0:
		return fmt.Errorf("%s.costUsd %g: want US dollars, 0 (no limit) or more", field, b.CostUSD)
	case b.Steps < 0:
		return fmt.Errorf("%s.steps %d: want 0 (no limit) or more", field, b.Steps)
	case b.WallTimeMs < 0:
		return fmt.Errorf("%s.wallTimeMs %d: want milliseconds, 0 (no limit) or more", field, b.WallTimeMs)
	case b.OnBudget != "" && b.OnBudget != OnBudgetStop && b.OnBudget != OnBudgetAsk:
		return fmt.Errorf("%s.onBudget %q: want stop or ask", field, b.OnBudget)
	}
	return nil
}

// CheckHost is Check for a host's budget, which has no wall time and
// never asks (raising it is the operator's).
func (b Budget) CheckHost(field string) error {
	if err := b.Check(field); err != nil {
		return err
	}
	switch {
	case b.WallTimeMs != 0:
		return fmt.Errorf("%s.wallTimeMs %d: a host has no wall-time budget (set one per run or session)", field, b.WallTimeMs)
	case b.OnBudget == OnBudgetAsk:
		return fmt.Errorf("%s.onBudget %q: a host's budget stops runs; raising it is the operator's", field, b.OnBudget)
	}
	return nil
}

// Over returns base with each field b sets in place of base's: a run's
// budget over the host's default, an update over the current budget.
func (b Budget) Over(base Budget) Budget {
	if b.Tokens != 0 {
		base.Tokens = b.Tokens
	}
	if b.CostUSD != 0 {
		base.CostUSD = b.CostUSD
	}
	if b.Steps != 0 {
		base.Steps = b.Steps
	}
	if b.WallTimeMs != 0 {
		base.WallTimeMs = b.WallTimeMs
	}
	if b.OnBudget != "" {
		base.OnBudget = b.OnBudget
	}
	return base
}

// Limit returns b's limit of budget name (one of the Budget* names),
// zero for none.
func (b Budget) Limit(name string) float64 {
	switch name {
	case BudgetTokens:
		return float64(b.Tokens)
	case BudgetCost:
		return b.CostUSD
	case BudgetSteps:
		return float64(b.Steps)
	case BudgetWallTime:
		return float64(b.WallTimeMs)
	}
	return 0
}

// WithLimit returns b with its limit of budget name set to v.
func (b Budget) WithLimit(name string, v float64) Budget {
	switch name {
	case BudgetTokens:
		b.Tokens = int64(math.Ceil(v))
	case BudgetCost:
		b.CostUSD = v
	case BudgetSteps:
		b.Steps = int(math.Ceil(v))
	case BudgetWallTime:
		b.WallTimeMs = int64(math.Ceil(v))
	}
	return b
}

// Spent is what a run or a session has spent, in the units of [Budget].
type Spent struct {
	Tokens     int64   `json:"tokens"`
	CostUSD    float64 `json:"costUsd,omitempty"`
	Steps      int     `json:"steps"`
	WallTimeMs int64   `json:"wallTimeMs"`
}

// SpentOf returns what usage, steps and wall time come to.
func SpentOf(u TokenUsage, steps int, wall time.Duration) Spent {
	return Spent{Tokens: u.InputTokens + u.OutputTokens, CostUSD: u.CostUSD, Steps: steps, WallTimeMs: wall.Milliseconds()}
}

// Of returns the amount spent of budget name (one of the Budget* names).
func (s Spent) Of(name string) float64 {
	return Budget{Tokens: s.Tokens, CostUSD: s.CostUSD, Steps: s.Steps, WallTimeMs: s.WallTimeMs}.Limit(name)
}

// Add adds o to s.
func (s *Spent) Add(o Spent) {
	s.Tokens += o.Tokens
	s.CostUSD += o.CostUSD
	s.Steps += o.Steps
	s.WallTimeMs += o.WallTimeMs
}

// Reached returns the first limit of b that spent has reached, in the
// order tokens, cost, steps, wall time, or "" when none is. A step
// limit is reached when that many steps have run: the next one would
// exceed it.
func (b Budget) Reached(spent Spent) string {
	switch {
	case b.Tokens > 0 && spent.Tokens >= b.Tokens:
		return BudgetTokens
	case b.CostUSD > 0 && spent.CostUSD >= b.CostUSD:
		return BudgetCost
	case b.Steps > 0 && spent.Steps >= b.Steps:
		return BudgetSteps
	case b.WallTimeMs > 0 && spent.WallTimeMs >= b.WallTimeMs:
		return BudgetWallTime
	}
	return ""
}

// Remaining returns what is left of b after spent: each limit b sets,
// less what was spent of it (at least the smallest amount that still
// means a limit: one token, step or millisecond, a millionth of a
// dollar), and b's policy. Limits b does not set stay unset. It is what
// a run hands a child run it starts, so that the child cannot spend
// more than its parent has left.
func (b Budget) Remaining(spent Spent) Budget {
	r := Budget{OnBudget: b.OnBudget}
	if b.Tokens > 0 {
		r.Tokens = max(b.Tokens-spent.Tokens, 1)
	}
	if b.CostUSD > 0 {
		r.CostUSD = max(b.CostUSD-spent.CostUSD, 1e-6)
	}
	if b.Steps > 0 {
		r.Steps = max(b.Steps-spent.Steps, 1)
	}
	if b.WallTimeMs > 0 {
		r.WallTimeMs = max(b.WallTimeMs-spent.WallTimeMs, 1)
	}
	return r
}

// Tighter returns, limit by limit, the smaller of b and o's limits (a
// zero limit being none), with b's policy unless b has none: the
// effective budget of a run bounded by two budgets.
func (b Budget) Tighter(o Budget) Budget {
	pick := func(x, y float64) float64 {
		switch {
		case x <= 0:
			return y
		case y <= 0:
			return x
		}
		return min(x, y)
	}
	out := Budget{OnBudget: b.OnBudget}
	if out.OnBudget == "" {
		out.OnBudget = o.OnBudget
	}
	for _, n := range []string{BudgetTokens, BudgetCost, BudgetSteps, BudgetWallTime} {
		out = out.WithLimit(n, pick(b.Limit(n), o.Limit(n)))
	}
	return out
}

// BudgetExceeded says which budget a run reached: on a run.failed's
// error (kind [KindBudgetExceeded]) and on the question that asks to
// raise it.
type BudgetExceeded struct {
	// Scope is run, session or host.
	Scope string `json:"scope"`
	// Budget is tokens, costUsd, steps or wallTimeMs.
	Budget string `json:"budget"`
	// Limit and Spent are in the budget's unit.
	Limit float64 `json:"limit"`
	Spent float64 `json:"spent"`
}

// String describes e for people: "the run's cost budget of $1.00 ($1.02
// spent)".
func (e BudgetExceeded) String() string {
	return fmt.Sprintf("the %s's %s budget of %s (%s spent)", e.Scope, BudgetNoun(e.Budget), FormatBudget(e.Budget, e.Limit), FormatBudget(e.Budget, e.Spent))
}

// BudgetNoun is budget name as people say it: "token", "cost", "step",
// "wall-time".
func BudgetNoun(name string) string {
	switch name {
	case BudgetTokens:
		return "token"
	case BudgetCost:
		return "cost"
	case BudgetSteps:
		return "step"
	case BudgetWallTime:
		return "wall-time"
	}
	return name
}

// FormatBudget formats an amount v of budget name: "$1.25", "12000
// tokens", "7 steps", "1m30s".
func FormatBudget(name string, v float64) string {
	switch name {
	case BudgetCost:
		if v != 0 && math.Abs(v) < 0.01 {
			return fmt.Sprintf("$%.4f", v)
		}
		return fmt.Sprintf("$%.2f", v)
	case BudgetTokens:
		return plural(int64(v), "token")
	case BudgetSteps:
		return plural(int64(v), "step")
	case BudgetWallTime:
		return (time.Duration(v) * time.Millisecond).Round(time.Millisecond).String()
	}
	return fmt.Sprint(v)
}

// BudgetRaisedData is the data of [BudgetRaised].
type BudgetRaisedData struct {
	// RequestID is the budget question the raise answers.
	RequestID string `json:"requestId"`
	// Scope is run or session: whose budget now has Limit.
	Scope string `json:"scope"`
	// Budget is the budget's name (tokens, costUsd, steps, wallTimeMs).
	Budget string  `json:"budget"`
	Limit  float64 `json:"limit"`
	By     By      `json:"by"`
}

// plural is "1 step", "2 steps".
func plural(n int64, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
