package journal

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"weft.dev/weft/event"
	"weft.dev/weft/store"
)

// maxHold is how long the end of a delta that may begin a secret waits
// for the text after it before it is committed as it is.
const maxHold = time.Second

// waiter is an Append or Flush waiting for the commit of its events,
// batch[start:end].
type waiter struct {
	done       chan result
	start, end int
}

// loop is the journal's writer goroutine: it owns the pending delta and the
// batch being built, and is the only caller of Store.Append for the session.
func (j *Journal) loop() {
	defer close(j.done)
	var (
		pend     *delta
		timer    = time.NewTimer(time.Hour)
		batch    []event.Event
		receipts []store.Receipt
		waiters  []waiter
		// wake is armed while a wake of the subscribers is owed.
		wake  = time.NewTimer(time.Hour)
		armed bool
	)
	timer.Stop()
	wake.Stop()
	// seal turns the pending delta into an event. Unless final, the end
	// of its text that may begin a secret stays pending (see
	// Config.Redactor).
	seal := func(final bool) {
		if pend == nil {
			return
		}
		timer.Stop()
		text, keep := pend.text, 0
		if !final {
			keep = j.cfg.Redactor.Hold(text)
		}
		if keep < len(text) {
			b, _ := json.Marshal(event.DeltaData{Step: pend.step, Text: string(text[:len(text)-keep])})
			batch = append(batch, event.Event{RunID: pend.runID, Type: pend.typ, Data: b})
		}
		if keep == 0 {
			pend = nil
			return
		}
		heldAt := pend.heldAt
		if heldAt.IsZero() {
			heldAt = time.Now()
		}
		pend = &delta{runID: pend.runID, typ: pend.typ, step: pend.step, text: append([]byte(nil), text[len(text)-keep:]...), heldAt: heldAt}
		timer.Reset(j.cfg.CoalesceWindow)
	}
	handle := func(r request) {
		if d := r.delta; d != nil {
			if pend != nil && (pend.runID != d.runID || pend.typ != d.typ || pend.step != d.step) {
				seal(true)
			}
			if pend != nil && len(pend.text)+len(d.text) > j.cfg.CoalesceBytes {
				seal(false)
			}
			if pend == nil {
				pend = d
				timer.Reset(j.cfg.CoalesceWindow)
			} else {
				pend.text = append(pend.text, d.text...)
				pend.heldAt = time.Time{}
			}
			if len(pend.text) >= j.cfg.CoalesceBytes {
				seal(false)
			}
			return
		}
		seal(true)
		start := len(batch)
		batch = append(batch, r.events...)
		receipts = append(receipts, r.receipts...)
		waiters = append(waiters, waiter{done: r.done, start: start, end: len(batch)})
	}
	commit := func() {
		if len(batch) == 0 && len(waiters) == 0 {
			return
		}
		wakeIn, err := j.commit(batch, receipts)
		if wakeIn > 0 && !armed {
			wake.Reset(wakeIn)
			armed = true
		}
		for _, w := range waiters {
			if err != nil {
				w.done <- result{err: err}
			} else {
				w.done <- result{events: batch[w.start:w.end:w.end]}
			}
		}
		batch, receipts, waiters = nil, nil, nil
	}
	for {
		select {
		case r := <-j.reqs:
			handle(r)
		case <-timer.C:
			// Text held back for maxHold with nothing after it goes out
			// as it is.
			seal(pend != nil && !pend.heldAt.IsZero() && time.Since(pend.heldAt) >= maxHold)
		case <-wake.C:
			armed = false
			j.feed.wakeOwed(time.Now())
			continue
		case <-j.quit:
			for {
				select {
				case r := <-j.reqs:
					handle(r)
					continue
				default:
				}
				break
			}
			seal(true)
			commit()
			wake.Stop()
			j.feed.close(ErrClosed)
			return
		}
		// Group commit: take whatever else is already waiting.
	drain:
		for len(batch) < j.cfg.MaxBatch {
			select {
			case r := <-j.reqs:
				handle(r)
			default:
				break drain
			}
		}
		commit()
	}
}

// commit sequences, projects and stores batch, then publishes it, and
// returns when the subscribers are to be woken if not at once. A failure
// is sticky: the journal refuses further writes, and the projection is
// reloaded from the store so that it matches what is durable.
func (j *Journal) commit(batch []event.Event, receipts []store.Receipt) (wakeIn time.Duration, err error) {
	if err := j.Err(); err != nil {
		return 0, err
	}
	if len(batch) == 0 {
		return 0, nil
	}
	now := j.cfg.Now().UTC()
	j.mu.Lock()
	seq := j.last
	var applyErr error
	for i := range batch {
		seq++
		batch[i].Seq, batch[i].SessionID, batch[i].Time = seq, j.sessionID, now
		if batch[i].Data == nil {
			batch[i].Data = json.RawMessage("{}")
		}
		batch[i].Data = j.cfg.Redactor.JSON(batch[i].Data)
		if applyErr = j.proj.Apply(batch[i]); applyErr != nil {
			break
		}
	}
	b := store.Batch{SessionID: j.sessionID, Events: batch, Receipts: receipts, Epoch: j.cfg.Epoch}
	j.proj.Flush(&b)
	j.proj.Trim(keepEnded)
	j.mu.Unlock()

	err = applyErr
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err = j.cfg.Store.Append(ctx, b)
		cancel()
	}
	if err != nil {
		j.cfg.Logger.Error("journal commit failed", "session", j.sessionID, "seq", j.last+1, "err", err)
		var proj *store.Projection
		lerr := err // a fenced journal is done: its owner drops it unread
		if !errors.Is(err, store.ErrFenced) {
			proj, lerr = load(context.Background(), j.cfg.Store, j.sessionID)
		}
		j.mu.Lock()
		if lerr == nil {
			j.proj = proj
		}
		j.err = err
		j.mu.Unlock()
		close(j.failed)
		j.feed.close(err)
		return 0, err
	}
	j.mu.Lock()
	j.last = seq
	j.mu.Unlock()
	wakeIn = j.feed.publish(batch, time.Now())
	if j.cfg.Committed != nil {
		j.cfg.Committed(batch)
	}
	return wakeIn, nil
}
