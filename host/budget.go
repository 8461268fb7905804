package host

import (
	"time"

	"weft.dev/weft/event"
	"weft.dev/weft/store/record"
)

// Budgets are a host's default budgets, from its configuration: a run's
// own budget (run/start budget) is laid over Run field by field, and a
// session's (session/create budget) over Session, so that a client may
// tighten, loosen or add a limit, and a run or session that names none
// has the operator's. A run is held to its own budget and to its
// session's at once.
type Budgets struct {
	Run     event.Budget
	Session event.Budget
}

// check refuses a malformed default.
func (b Budgets) check() error {
	if err := b.Run.Check("budgets.run"); err != nil {
		return err
	}
	return b.Session.Check("budgets.session")
}

// session returns the budget of a new session whose params gave own.
func (b Budgets) session(own *event.Budget) *event.Budget {
	var o event.Budget
	if own != nil {
		o = *own
	}
	if s := o.Over(b.Session); !s.IsZero() {
		return &s
	}
	return nil
}

// RemainingBudget returns what run r may still spend at now, bounded by
// its own budget and its session's (rec): limit by limit, the tighter of
// what is left of each, with the run's policy (else the session's). The
// zero Budget means neither sets a limit. It is what a run hands to a
// child run it starts (a subagent's run/start budget), so that the
// child cannot spend more than its parent has left.
func RemainingBudget(r record.Run, rec record.Session, now time.Time) event.Budget {
	var run, ses event.Budget
	if r.Budget != nil {
		run = r.Budget.Remaining(r.Spent(now))
	}
	if rec.Budget != nil {
		var running time.Duration
		if r.StartedAt != nil && r.EndedAt == nil {
			running = now.Sub(*r.StartedAt)
		}
		ses = rec.Budget.Remaining(rec.Spent(running))
	}
	return run.Tighter(ses)
}
