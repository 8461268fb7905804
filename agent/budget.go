package agent

import (
	"context"
	"errors"
	"slices"
	"time"

	"weft.dev/weft/event"
	"weft.dev/weft/llm"
)

// BudgetCheck decides whether a run is within its budgets (tokens, cost,
// steps, wall time; the run's, its session's, its host's). The loop asks
// Check at each step boundary, before the model call, from the run's
// goroutine; Deadline once per [Execute]. The session owner implements
// it over the records its log projects, so that a raise a person gave
// holds at the next check.
type BudgetCheck interface {
	// Check returns what becomes of the run about to take step steps+1,
	// having spent usage in steps steps so far (a resumed run's included).
	Check(steps int, usage event.TokenUsage) BudgetVerdict
	// Deadline returns when the run reaches a wall-time budget whose
	// policy is to stop, and that budget as it will then be reached; the
	// zero time means none. A timer cuts the step under way then: a
	// wall-time budget whose policy is to ask waits for a step boundary,
	// so that no call is left dangling while a person decides.
	Deadline() (time.Time, event.BudgetExceeded)
}

// BudgetVerdict is what a [BudgetCheck] says at a step boundary. The zero
// BudgetVerdict lets the step run.
type BudgetVerdict struct {
	// Reached, if set, is the budget the run reached: the run ends as
	// failed with an error of kind [KindBudgetExceeded], unless Request
	// is set.
	Reached *event.BudgetExceeded
	// Request, if set, is the event that asks whether to raise the
	// budget (input.requested with its Budget set; its run ID is filled
	// in): the loop appends it and parks at the step boundary
	// ([Outcome.Waiting]); resumed, it checks again.
	Request *event.Event
	// RequestID is the ID of that request.
	RequestID string
}

// budgetError ends a run that reached a budget.
type budgetError struct{ reached event.BudgetExceeded }

func (e *budgetError) Error() string { return "the run reached " + e.reached.String() }

// checkBudget asks the run's BudgetCheck about the step about to start.
// done reports that the run ends (o, err are then end's) or parks with a
// budget question (o is its Waiting outcome); otherwise the step runs.
func (l *loop) checkBudget(ctx context.Context, msgs []llm.Message) (o Outcome, done bool, err error) {
	v := l.run.Budget.Check(l.steps, l.usage)
	switch {
	case v.Reached == nil:
		return Outcome{}, false, nil
	case v.Request == nil:
		o, err = l.end(ctx, &budgetError{reached: *v.Reached})
		return o, true, err
	case ctx.Err() != nil && !errors.Is(context.Cause(ctx), ErrHostStopped):
		o, err = l.end(ctx, ctx.Err())
		return o, true, err
	}
	e := *v.Request
	e.RunID = l.run.ID
	if err := l.emitMany(ctx, []event.Event{e}); err != nil {
		o, err = l.end(ctx, err)
		return o, true, err
	}
	rs := &Resume{Steps: l.steps, Usage: l.usage, Budget: v.RequestID}
	return Outcome{Waiting: true, Steps: l.steps, Usage: l.usage, Resume: rs, History: slices.Clip(msgs)}, true, nil
}
