package session

import (
	"context"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"weft.dev/weft/agent"
	"weft.dev/weft/api"
	"weft.dev/weft/event"
	"weft.dev/weft/host/internal/idem"
	"weft.dev/weft/store/record"
)

// budgetCheck is the agent.BudgetCheck of a session's run: the run's own
// budget (its record's, with the raises a person gave), then the
// session's, over what the projection says they have spent.
type budgetCheck struct {
	s  *Session
	a  *activeRun
	id string
}

// budgets returns the run's and the session's budgets and what each has
// spent at now, the run's from the loop's own count. Called with mu held.
func (b budgetCheck) budgets(steps int, usage event.TokenUsage, now time.Time) (run, ses event.Budget, runSpent, sesSpent event.Spent) {
	r, _ := b.s.j.Run(b.id)
	rec := b.s.j.Session()
	var wall time.Duration
	if r.StartedAt != nil {
		wall = now.Sub(*r.StartedAt)
	}
	runSpent = event.SpentOf(usage, steps, wall)
	sesSpent = rec.Spent(steps, wall)
	if r.Budget != nil {
		run = *r.Budget
	}
	if rec.Budget != nil {
		ses = *rec.Budget
	}
	return run, ses, runSpent, sesSpent
}

func (b budgetCheck) Check(steps int, usage event.TokenUsage) agent.BudgetVerdict {
	s := b.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if h := s.cfg.HostSpend; h != nil {
		h.add(&b.a.hostSeen, usage, steps)
		if r := h.reached(); r != nil {
			return agent.BudgetVerdict{Reached: r}
		}
	}
	run, ses, runSpent, sesSpent := b.budgets(steps, usage, time.Now())
	for _, x := range []struct {
		scope string
		b     event.Budget
		spent event.Spent
	}{{event.ScopeRun, run, runSpent}, {event.ScopeSession, ses, sesSpent}} {
		name := x.b.Reached(x.spent)
		if name == "" {
			continue
		}
		r := &event.BudgetExceeded{Scope: x.scope, Budget: name, Limit: x.b.Limit(name), Spent: x.spent.Of(name)}
		if x.b.OnBudget != event.OnBudgetAsk {
			return agent.BudgetVerdict{Reached: r}
		}
		id := s.cfg.NewID("inp")
		e, err := event.New("", event.InputRequested, event.InputRequestedData{RequestID: id, Step: steps,
			Question: budgetQuestion(*r), Choices: budgetChoices(*r), Budget: r})
		if err != nil {
			return agent.BudgetVerdict{Reached: r}
		}
		return agent.BudgetVerdict{Reached: r, Request: &e, RequestID: id}
	}
	return agent.BudgetVerdict{}
}

func (b budgetCheck) Deadline() (time.Time, event.BudgetExceeded) {
	s := b.s
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	r, _ := s.j.Run(b.id)
	start := now
	if r.StartedAt != nil {
		start = *r.StartedAt
	}
	run, ses, _, sesSpent := b.budgets(r.Steps, r.Usage, now)
	var at time.Time
	var reached event.BudgetExceeded
	if run.WallTimeMs > 0 && run.OnBudget != event.OnBudgetAsk {
		at = start.Add(time.Duration(run.WallTimeMs) * time.Millisecond)
		reached = event.BudgetExceeded{Scope: event.ScopeRun, Budget: event.BudgetWallTime, Limit: float64(run.WallTimeMs), Spent: float64(run.WallTimeMs)}
	}
	if ses.WallTimeMs > 0 && ses.OnBudget != event.OnBudgetAsk {
		sesAt := now.Add(time.Duration(ses.WallTimeMs-sesSpent.WallTimeMs) * time.Millisecond)
		if at.IsZero() || sesAt.Before(at) {
			at = sesAt
			reached = event.BudgetExceeded{Scope: event.ScopeSession, Budget: event.BudgetWallTime, Limit: float64(ses.WallTimeMs), Spent: float64(ses.WallTimeMs)}
		}
	}
	return at, reached
}

// budgetQuestion is the question a run asks when it reaches budget r.
func budgetQuestion(r event.BudgetExceeded) string {
	return fmt.Sprintf("The run reached %s. Raise the limit? Answer \"raise to X\" (%s), or \"no\" to end the run.",
		r.String(), budgetUnitHint(r.Budget))
}

// budgetChoices are the answers a budget question offers: a raise to
// twice the limit (beyond what was spent), or no.
func budgetChoices(r event.BudgetExceeded) []string {
	return []string{"raise to " + event.FormatBudget(r.Budget, suggestedRaise(r)), "no"}
}

// suggestedRaise is the limit the first choice of a budget question
// offers: twice the limit, and at least what was spent and the limit
// again.
func suggestedRaise(r event.BudgetExceeded) float64 {
	return max(2*r.Limit, r.Spent+r.Limit)
}

// budgetUnitHint says how an answer gives a new limit of budget name.
func budgetUnitHint(name string) string {
	switch name {
	case event.BudgetCost:
		return "US dollars, e.g. 2.50"
	case event.BudgetWallTime:
		return "a duration, e.g. 30m"
	default:
		return "a number of " + event.BudgetNoun(name) + "s"
	}
}

// The answers parseRaise reads compile on first use: every weft command
// links this package and most never read an answer.
var (
	noAnswer   = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^(no|n|stop|deny|end|cancel)\b`) })
	yesAnswer  = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^(yes|y|ok|raise)$`) })
	raiseValue = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`^(?:raise(?:\s+(?:it|the\s+limit))?(?:\s+to)?\s+)?(.+)$`)
	})
)

// parseRaise reads an answer to budget question q: stop, or the new
// limit. An answer that is neither, or a limit no more than what was
// spent, is a typed invalid_params naming the budget.
func parseRaise(q record.Request, text string) (limit float64, stop bool, err error) {
	r := *q.Budget
	t := strings.ToLower(strings.TrimSpace(text))
	switch {
	case len(q.Choices) > 0 && t == strings.ToLower(q.Choices[len(q.Choices)-1]):
		return 0, true, nil
	case noAnswer().MatchString(t):
		return 0, true, nil
	case yesAnswer().MatchString(t), len(q.Choices) > 0 && t == strings.ToLower(q.Choices[0]):
		return suggestedRaise(r), false, nil
	}
	m := raiseValue().FindStringSubmatch(t)
	bad := func(msg string) error {
		return api.Errorf(api.KindInvalidParams, "answer %q to the %s budget question: %s", clipAnswer(text), event.BudgetNoun(r.Budget), msg).
			With("field", "text").With("requestId", q.ID).With("scope", r.Scope).With("budget", r.Budget).
			With("limit", r.Limit).With("spent", r.Spent)
	}
	if m == nil {
		return 0, false, bad(`want "raise to X" or "no"`)
	}
	v, ok := parseAmount(r.Budget, strings.TrimSpace(m[1]))
	if !ok {
		return 0, false, bad(fmt.Sprintf(`want "raise to X" with X in %s, or "no"`, budgetUnitHint(r.Budget)))
	}
	if v <= r.Spent {
		return 0, false, bad(fmt.Sprintf("%s is not above what the %s has already spent (%s)",
			event.FormatBudget(r.Budget, v), r.Scope, event.FormatBudget(r.Budget, r.Spent)))
	}
	return v, false, nil
}

// parseAmount reads an amount of budget name: dollars ("$2.50", "2.5"),
// a count ("20000", "20k", "1.5m" tokens), or a duration ("45m", "1h30m";
// a bare number is milliseconds).
func parseAmount(name, s string) (float64, bool) {
	s = strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(s, "."), " tokens"), " steps")
	if name == event.BudgetWallTime {
		if d, err := time.ParseDuration(s); err == nil {
			return float64(d.Milliseconds()), d > 0
		}
	}
	mult := 1.0
	switch {
	case name == event.BudgetCost:
		s = strings.TrimPrefix(strings.TrimSuffix(strings.TrimSuffix(s, " usd"), " dollars"), "$")
	case name == event.BudgetTokens && strings.HasSuffix(s, "k"):
		s, mult = strings.TrimSuffix(s, "k"), 1e3
	case name == event.BudgetTokens && strings.HasSuffix(s, "m"):
		s, mult = strings.TrimSuffix(s, "m"), 1e6
	}
	v, err := strconv.ParseFloat(strings.ReplaceAll(s, ",", ""), 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) || v <= 0 {
		return 0, false
	}
	return v * mult, true
}

// clipAnswer clips an answer quoted in an error.
func clipAnswer(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}

// answerBudget answers budget question q with text: a raise commits
// input.resolved and budget.raised together and resumes the run at its
// step boundary; "no" commits input.resolved and ends the run as failed
// with kind budget_exceeded, in one batch. Called by commands.
func (s *Session) answerBudget(ctx context.Context, q record.Request, text string, choice *int, by event.By, rc *idem.Claim) error {
	limit, stop, err := parseRaise(q, text)
	if err != nil {
		return err
	}
	resolved, err := event.New(q.RunID, event.InputResolved, event.InputResolvedData{RequestID: q.ID, Status: event.InputAnswered, Text: text, Choice: choice, By: by})
	if err != nil {
		return err
	}
	if stop {
		r := *q.Budget
		failure := &event.Error{Kind: event.KindBudgetExceeded, Message: "the run reached " + r.String() + " and the limit was not raised", Budget: &r}
		a := s.active
		if a == nil || a.id != q.RunID || !a.parked {
			// The run is parking: it ends as it parks.
			if _, err := s.append(ctx, rc, idem.Ref{ID: q.ID}, resolved); err != nil {
				return err
			}
			if a != nil && a.id == q.RunID {
				a.declined = failure
			}
			return nil
		}
		return s.endParked(ctx, a, parkedEnd{pre: []event.Event{resolved}, answered: q.ID, failure: failure,
			reason: "the run ended", ref: idem.Ref{ID: q.ID}}, rc)
	}
	raised, err := event.New(q.RunID, event.BudgetRaised, event.BudgetRaisedData{RequestID: q.ID, Scope: q.Budget.Scope,
		Budget: q.Budget.Budget, Limit: limit, By: by})
	if err != nil {
		return err
	}
	if _, err := s.append(ctx, rc, idem.Ref{ID: q.ID}, resolved, raised); err != nil {
		return err
	}
	s.resumeIfAnswered(q.RunID)
	return nil
}

// checkBudgetUpdate refuses a session budget whose limits are at or
// below what the session has already spent: typed invalid_params naming
// the budget. Called by commands.
func (s *Session) checkBudgetUpdate(b event.Budget) error {
	rec := s.j.Session()
	var running time.Duration
	if id := s.activeID(); id != "" {
		if r, ok := s.j.Run(id); ok && r.StartedAt != nil {
			running = time.Since(*r.StartedAt)
		}
	}
	var steps int
	if id := s.activeID(); id != "" {
		if r, ok := s.j.Run(id); ok {
			steps = r.Steps
		}
	}
	spent := rec.Spent(steps, running)
	for _, name := range []string{event.BudgetTokens, event.BudgetCost, event.BudgetSteps, event.BudgetWallTime} {
		if l := b.Limit(name); l > 0 && l <= spent.Of(name) {
			return api.Errorf(api.KindInvalidParams, "budget.%s %s: the session has already spent %s; give more, or 0 for no limit",
				name, event.FormatBudget(name, l), event.FormatBudget(name, spent.Of(name))).
				With("field", "budget."+name).With("limit", l).With("spent", spent.Of(name))
		}
	}
	return nil
}
