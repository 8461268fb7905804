package session

import (
	"context"
	"errors"
	"fmt"
	"time"

	"weft.dev/weft/agent"
	"weft.dev/weft/event"
	"weft.dev/weft/host/internal/journal"
	"weft.dev/weft/host/internal/reconcile"
	"weft.dev/weft/store"
	"weft.dev/weft/store/record"
)

// retry is the schedule of a session's recovery from a write failure:
// the first attempt at once, then waits of first, doubling up to 32 times
// first, until an attempt succeeds, fails with an error stop says ends
// it, or ctx is done. It holds no state between runs and starts no
// goroutine; run blocks in its caller's.
type retry struct {
	first time.Duration // the first wait; zero retries at once
	// stop reports whether an attempt's error ends the loop rather than
	// being tried again; nil tries every error again.
	stop func(error) bool
}

// maxBackoff is how many times retry.first a wait grows to at most.
const maxBackoff = 32

// run calls attempt (with its number, from 0) until it returns a nil
// error, and returns what it returned then; an error stop accepts is
// returned at once. When ctx is done while it waits, run returns false
// and no error.
func (r retry) run(ctx context.Context, attempt func(n int) (bool, error)) (bool, error) {
	wait := r.first
	for n := 0; ; n++ {
		if n > 0 {
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return false, nil
			}
			wait = min(2*wait, maxBackoff*r.first)
		}
		ok, err := attempt(n)
		if err == nil {
			return ok, nil
		}
		if r.stop != nil && r.stop(err) {
			return false, err
		}
	}
}

// watch arranges for a write failure of j, which has just become the
// session's journal, to be recovered from: no goroutine waits for it
// (see journal.AfterFailure). If a recovery is under way, it finds the
// failure itself once it is done. Called with mu held.
func (s *Session) watch(j *journal.Journal) {
	j.AfterFailure(func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.state == stateClosed || s.j != j || s.recovering {
			return
		}
		s.recovering = true
		s.wg.Go(s.recoverFailed)
	})
}

// recoverFailed recovers from the failure of the session's journal, and
// of each journal that replaced it and failed in turn, until the
// session's journal has not failed or the session closes.
func (s *Session) recoverFailed() {
	for {
		s.mu.Lock()
		j := s.j
		select {
		case <-j.Failed():
		default:
			s.recovering = false
			s.mu.Unlock()
			return
		}
		s.mu.Unlock()
		if err := j.Err(); errors.Is(err, store.ErrFenced) {
			s.lose(err)
			return
		}
		if !s.recover(j) {
			return
		}
	}
}

// recover ends the active run and brings the session back once the store
// takes writes again: it opens a new journal from what the store holds
// and fails the runs the failure cut short (run.failed, kind storage),
// so that nothing committed is lost and no seq is skipped. Queued runs
// stay queued, and a run that waits for answers goes on waiting. The log
// is the truth from then on: a failed write may have committed though
// its writer heard an error (the answer was lost), so the queue, the
// steers of the waiting run, and which runs have ended are read back
// from it, and whoever waits for a run the log shows ended is woken. It
// reports false when the session closed meanwhile.
func (s *Session) recover(failed *journal.Journal) bool {
	s.mu.Lock()
	if s.state == stateClosed {
		s.mu.Unlock()
		return false
	}
	cause := failed.Err()
	s.state, s.failure = stateFailed, cause
	a, orphan := s.active, s.orphan
	s.orphan = ""
	s.mu.Unlock()
	defer func() {
		// Once a new journal has replaced it, the failed one is done;
		// until then it is the session's, and Close releases it.
		s.mu.Lock()
		replaced := s.j != failed
		s.mu.Unlock()
		if replaced {
			failed.Close()
		}
	}()
	s.cfg.Logger.Error("session write failed; recovering", "session", s.id, "err", cause)
	// cut is the run the failure cut short: it was running (or its loop
	// has just ended on the failed journal), and ends as failed even if
	// its run.started never committed.
	cut := orphan
	if a != nil && !a.parked {
		cut = a.id
		a.cancel(fmt.Errorf("the store refused a write: %w", cause))
		select {
		case <-a.finished:
		case <-s.ctx.Done():
			return false
		}
		s.mu.Lock()
		if s.orphan == a.id { // its loop ended after the failure: cut here
			s.orphan = ""
		}
		s.mu.Unlock()
	}
	failure := &event.Error{Kind: "storage", Message: fmt.Sprintf("the store refused a write: %v", cause)}
	r := retry{first: s.cfg.RetryBackoff, stop: func(err error) bool { return errors.Is(err, store.ErrFenced) }}
	ok, err := r.run(s.ctx, func(attempt int) (bool, error) {
		ok, err := s.reopen(failed, cut, failure)
		if err != nil && !r.stop(err) {
			s.cfg.Logger.Warn("session recovery", "session", s.id, "attempt", attempt, "err", err)
		}
		return ok, err
	})
	if err != nil {
		s.lose(err)
		return false
	}
	if ok {
		s.cfg.Logger.Info("session recovered from a write failure", "session", s.id)
	}
	return ok
}

// reopen is one attempt of recover: a new journal from what the store
// holds, run.failed (failure) for the runs that neither wait for answers
// nor are queued (run cut is not queued, whatever its record says), then
// the queue and the waiting run's steers from the log, and the session
// open again. It reports false when the session closed meanwhile.
func (s *Session) reopen(failed *journal.Journal, cut string, failure *event.Error) (bool, error) {
	j, err := journal.Open(s.ctx, s.journalConfig(), s.id)
	if err != nil {
		return false, fmt.Errorf("reload: %w", err)
	}
	if j.Session().Deleted {
		// A session/delete whose answer was lost: the session is gone,
		// and nothing may follow session.deleted.
		j.Close()
		s.stop("recovery found the session deleted (a session/delete whose answer was lost)")
		return false, nil
	}
	// The new journal is the session's from now on (commands still
	// refused), so that whoever wakes on a run's terminal event reads the
	// projection that holds it.
	s.mu.Lock()
	if s.state == stateClosed {
		s.mu.Unlock()
		j.Close()
		return false, nil
	}
	if s.j != failed {
		s.j.Close() // an earlier attempt's
	}
	s.j = j
	s.watch(j)
	// The failed write may have committed without the hook seeing it:
	// the next run start reads the log.
	s.conv.Drop()
	parked := ""
	if a := s.active; a != nil && a.parked {
		// A run that waits for answers had no step for the failure to
		// cut short: it goes on waiting, resumed from the log (a write
		// that failed may have committed an answer).
		parked = a.id
		a.resume, a.history = nil, nil
	}
	s.mu.Unlock()
	keep := func(r record.Run) bool { return r.ID == parked || r.Status == record.RunQueued && r.ID != cut }
	if _, err := reconcile.Session(s.ctx, s.cfg.Store, j, s.id, reconcile.Options{Keep: keep, Failure: failure}); err != nil {
		return false, fmt.Errorf("close runs: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state == stateClosed {
		return false, nil
	}
	queue, err := s.queueFromLog(s.ctx, cut)
	if err != nil {
		return false, err
	}
	if a := s.active; a != nil {
		if r, ok := s.j.Run(a.id); !ok || record.IsTerminal(r.Status) {
			// Its end committed though the writer heard an error (a
			// cancel of the waiting run whose answer was lost): the
			// session is done with it.
			s.active = nil
			s.closeRetired()
		}
	}
	if a := s.active; a != nil && a.parked {
		q, err := s.parkedFromLog(s.ctx, a.id)
		if err != nil {
			return false, err
		}
		a.inbox = &agent.Steers{}
		for _, st := range q.steers {
			a.inbox.Add(nil, st)
		}
	}
	s.queue = queue
	s.state, s.failure = stateOpen, nil
	if s.active == nil {
		s.startNext()
	} else if s.active.parked {
		s.resumeIfAnswered(s.active.id)
	}
	s.settleEnded()
	return true, nil
}
