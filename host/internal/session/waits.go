package session

import "sync"

// runWaits are the done channels of the runs a session has admitted and
// not yet settled: run/wait and run/cancel wait on a run's channel, and
// the session closes it once the run has ended and the session is done
// with it (see [Session.settle]). The zero value is empty and ready.
//
// Its methods are safe for concurrent use and may be called with the
// session's lock held: its own lock is a leaf.
type runWaits struct {
	mu   sync.Mutex // leaf
	done map[string]chan struct{}
}

// track makes the done channel of run id; a run that has one keeps it,
// with whoever waits on it.
func (w *runWaits) track(id string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.done == nil {
		w.done = map[string]chan struct{}{}
	}
	if w.done[id] == nil {
		w.done[id] = make(chan struct{})
	}
}

// untrack forgets run id's channel without closing it: the run was
// never admitted (its run.queued did not commit), so no one waits on it.
func (w *runWaits) untrack(id string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.done, id)
}

// settle closes run id's done channel, if it has one, and forgets it.
func (w *runWaits) settle(id string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if ch, ok := w.done[id]; ok {
		close(ch)
		delete(w.done, id)
	}
}

// settleAllBut settles every tracked run that held does not name.
func (w *runWaits) settleAllBut(held map[string]bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for id, ch := range w.done {
		if !held[id] {
			close(ch)
			delete(w.done, id)
		}
	}
}

// chanOf returns run id's done channel, or nil when the run is not tracked
// (it was settled, or never admitted here).
func (w *runWaits) chanOf(id string) <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	if ch, ok := w.done[id]; ok {
		return ch
	}
	return nil
}
