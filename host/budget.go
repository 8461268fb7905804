package host

import (
	"context"
	"fmt"
	"time"

	"weft.dev/weft/host/internal/session"
	"weft.dev/weft/store"

	"weft.dev/weft/event"
	"weft.dev/weft/store/record"
)

// Budgets are a host's default budgets, from its configuration: a run's
// own budget (run/start budget) is laid over Run field by field, and a
// session's (session/create budget) over Session, so that a client may
// tighten, loosen or add a limit, and a run or session that names none
// has the operator's. A run is held to its own budget and to its
// session's at once.
//
// Host, if it sets a limit, caps what all the host's runs spend together
// (tokens, cost, steps; counted from the sessions in the store when the
// host starts, deleted ones included): a run that finds it reached at a
// step boundary ends failed with budget_exceeded of scope host. It never
// asks, since raising it is the operator's; it has no wall time.
type Budgets struct {
	Run     event.Budget
	Session event.Budget
	Host    event.Budget
}

// check refuses a malformed budget, naming the field
// (budgets.host.wallTimeMs).
func (b Budgets) check() error {
	if err := b.Run.Check("budgets.run"); err != nil {
		return err
	}
	if err := b.Session.Check("budgets.session"); err != nil {
		return err
	}
	return b.Host.CheckHost("budgets.host")
}

// hostSpend returns the spend of a host whose budget is b.Host, counted
// from the store's sessions, or nil when b.Host sets no limit.
func hostSpend(ctx context.Context, st store.Store, b Budgets) (*session.HostSpend, error) {
	if !b.Host.Limits() {
		return nil, nil
	}
	var spent event.Spent
	before := ""
	for {
		page, err := st.Sessions(ctx, store.ListSessionsParams{Before: before, Limit: 1000, IncludeDeleted: true})
		if err != nil {
			return nil, fmt.Errorf("count the host's spend: %w", err)
		}
		for _, s := range page {
			spent.Add(event.SpentOf(s.Usage, s.Steps, 0))
		}
		if len(page) < 1000 {
			return session.NewHostSpend(b.Host, spent), nil
		}
		before = page[len(page)-1].ID
	}
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
		steps := 0
		if r.StartedAt != nil && r.EndedAt == nil {
			running, steps = now.Sub(*r.StartedAt), r.Steps
		}
		ses = rec.Budget.Remaining(rec.Spent(steps, running))
	}
	return run.Tighter(ses)
}
