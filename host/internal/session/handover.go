package session

import (
	"context"

	"weft.dev/weft/event"
)

// Handed is what Handover did with the session's active run.
type Handed struct {
	// RunID is the run that was executing, if any.
	RunID string
	// Interrupted reports that the run did not reach a step boundary
	// before ctx ended: it was cancelled with the cut cause.
	Interrupted bool
}

// Handover prepares the session to be closed by a draining host and
// continued by its next owner: from now on no run starts or resumes
// here (queued runs, and a parked run whose answers come, wait in the
// log), and the executing run, if any, stops at its next step boundary
// (see agent.Handover) with run.suspended recording why (its Host, if
// empty, is the holder of the session's lease). Handover returns once
// that run has stopped, or, when ctx ends first, cancels it with cut (an
// agent.Interrupt: it ends as interrupted, its tool calls closed) and
// returns once it has ended. The caller closes the session next.
func (s *Session) Handover(ctx context.Context, why event.RunSuspendedData, cut error) Handed {
	s.mu.Lock()
	s.handingOver = true
	a := s.active
	if a == nil || a.parked || a.handover == nil || s.state != stateOpen {
		s.mu.Unlock()
		return Handed{}
	}
	if why.Host == "" {
		why.Host = s.Owner().Host
	}
	a.handover.Request(why)
	finished, cancel := a.finished, a.cancel
	s.mu.Unlock()
	select {
	case <-finished:
		return Handed{RunID: a.id}
	case <-ctx.Done():
	}
	select {
	case <-finished: // it stopped as the grace ended
		return Handed{RunID: a.id}
	default:
	}
	cancel(cut)
	<-finished
	return Handed{RunID: a.id, Interrupted: true}
}
