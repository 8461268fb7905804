package agent

import (
	"context"
	"errors"
	"sync"

	"weft.dev/weft/event"
)

// Handover asks a run to stop at its next step boundary so that another
// host (or this one, restarted) continues it from its log: a host that
// drains hands its active runs over rather than ending them. The zero
// value is ready to use and safe for concurrent use; a run's owner makes
// one per execution ([Run.Handover]).
//
// Once requested, the loop stops before its next step: it writes
// run.suspended and returns an [Outcome] with Suspended set. A model call
// under way is cut at once (model calls are safe to make again: the cut
// step's deltas are left out of the transcript, and the next owner asks
// the model again in a new step, recorded as
// [event.RunSuspendedData].CutStep). Tool calls under way are let finish,
// since they may have effects and never run twice: the run stops once
// their results are committed. To bound that wait, cancel the run's
// context with an [Interrupt] cause: it ends as interrupted.
type Handover struct {
	mu   sync.Mutex
	done chan struct{} // made on first use
	why  event.RunSuspendedData
}

// Request asks the run to stop at its next step boundary; why is what
// run.suspended will record (its Step and CutStep are the loop's). Only
// the first request counts.
func (h *Handover) Request(why event.RunSuspendedData) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.init()
	select {
	case <-h.done:
		return
	default:
	}
	h.why = why
	close(h.done)
}

// Requested returns a channel closed once Request was called.
func (h *Handover) Requested() <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.init()
	return h.done
}

// requested reports whether Request was called, and with what.
func (h *Handover) requested() (event.RunSuspendedData, bool) {
	if h == nil {
		return event.RunSuspendedData{}, false
	}
	select {
	case <-h.Requested():
		h.mu.Lock()
		defer h.mu.Unlock()
		return h.why, true
	default:
		return event.RunSuspendedData{}, false
	}
}

// init makes done. Called with mu held.
func (h *Handover) init() {
	if h.done == nil {
		h.done = make(chan struct{})
	}
}

// errHandedOver is the cause with which a requested handover cuts a
// model call.
var errHandedOver = errors.New("the run is being handed over")

// Interrupt is a cancel cause (context.WithCancelCause) that ends a run
// as interrupted (run.interrupted, with an error of Kind and Message)
// rather than cancelled: a draining host whose grace ended while a tool
// call of the run still ran. It wraps [ErrHostStopped].
type Interrupt struct {
	Kind    string
	Message string
}

// Error returns the interrupt's message.
func (e *Interrupt) Error() string { return e.Message }

// Unwrap returns ErrHostStopped.
func (e *Interrupt) Unwrap() error { return ErrHostStopped }

// KindDrainTimeout is the error kind of a run that a draining host
// interrupted because a tool call outlasted its drain grace.
const KindDrainTimeout = "drain_timeout"

// cutOnHandover returns a context derived from ctx that is cancelled
// (cause errHandedOver) when the run's handover is requested, and the
// function that releases it, which must be called.
func (l *loop) cutOnHandover(ctx context.Context) (context.Context, func()) {
	if l.run.Handover == nil {
		return ctx, func() {}
	}
	cctx, cancel := context.WithCancelCause(ctx)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		select {
		case <-l.run.Handover.Requested():
			cancel(errHandedOver)
		case <-stop:
		case <-cctx.Done():
		}
	})
	return cctx, func() {
		close(stop)
		wg.Wait()
		cancel(nil)
	}
}

// suspend writes run.suspended for a requested handover and returns the
// Suspended outcome; cut names the step whose model call it cut, if any.
func (l *loop) suspend(ctx context.Context, why event.RunSuspendedData, cut int) (Outcome, error) {
	why.Step, why.CutStep = l.steps, cut
	if err := l.emit(ctx, event.RunSuspended, why); err != nil {
		return l.end(ctx, err)
	}
	return Outcome{Suspended: true, Steps: l.steps, Usage: l.usage}, nil
}
