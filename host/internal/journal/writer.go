package journal

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"weft.dev/weft/event"
	"weft.dev/weft/store"
	"weft.dev/weft/store/record"
)

// maxHold is how long the end of a delta that may begin a secret waits
// for the text after it before it is committed as it is.
const maxHold = time.Second

// waiter is an Append or Flush waiting for the commit of its events,
// batch[start:end], and its receipts.
type waiter struct {
	done       chan result
	start, end int
	receipts   []record.Receipt
}

// refused reports whether the store (or the projection) refused a batch
// on its own merits, committing nothing of it: a receipt whose key is
// taken, a record the store cannot hold, an event the projection cannot
// apply. Such a refusal fails the appends in that batch and no other;
// every other failure (I/O, a seq conflict, a fenced lease) says the
// store or the log is not what the journal believes, and fails the
// journal.
func refused(err error) bool {
	return errors.Is(err, store.ErrReceiptExists) || errors.Is(err, store.ErrInvalid)
}

// loop is the journal's writer goroutine: it owns the pending delta and the
// batch being built, and is the only caller of Store.Append for the session.
// It runs until Close, or until Park finds it with nothing pending; then
// the next write starts it again (see Journal.enter), with nothing carried
// over.
func (j *Journal) loop() {
	var (
		pend    *delta
		timer   = time.NewTimer(time.Hour)
		batch   []event.Event
		waiters []waiter
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
		waiters = append(waiters, waiter{done: r.done, start: start, end: len(batch), receipts: r.receipts})
	}
	commit := func() {
		if len(batch) == 0 && len(waiters) == 0 {
			return
		}
		if wakeIn := j.commitGroup(batch, waiters); wakeIn > 0 && !armed {
			wake.Reset(wakeIn)
			armed = true
		}
		batch, waiters = nil, nil
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
			close(j.done)
			return
		case <-j.park:
			if pend == nil && !armed && j.parked() {
				timer.Stop()
				wake.Stop()
				return
			}
			continue
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

// commitGroup commits the appends of one group commit, batch with the
// waiters' receipts, in one transaction, and answers every waiter. When
// the store refuses the batch on its own merits (see refused) and more
// than one append shares it, each append (and each run of sealed deltas
// between them) is committed again on its own, in order: only the
// appends the store refuses again fail, and the others are committed
// with the seqs that follow. The normal case stays one transaction; a
// refusal costs one transaction per append of its group. It returns when
// the subscribers are to be woken if not at once.
func (j *Journal) commitGroup(batch []event.Event, waiters []waiter) time.Duration {
	var receipts []record.Receipt
	for _, w := range waiters {
		receipts = append(receipts, w.receipts...)
	}
	wakeIn, err := j.commit(batch, receipts)
	var segs []segment
	if err != nil && refused(err) && j.Err() == nil {
		segs = segments(batch, waiters)
	}
	if len(segs) < 2 {
		for _, w := range waiters {
			if err != nil {
				w.done <- result{err: err}
			} else {
				w.done <- result{events: batch[w.start:w.end:w.end]}
			}
		}
		return wakeIn
	}
	for _, sg := range segs {
		var rc []record.Receipt
		if sg.w != nil {
			rc = sg.w.receipts
		}
		events := batch[sg.start:sg.end:sg.end]
		in, err := j.commit(events, rc)
		if in > 0 && (wakeIn == 0 || in < wakeIn) {
			wakeIn = in
		}
		if err != nil && sg.w == nil {
			j.cfg.Logger.Error("journal: deltas refused by the store", "session", j.sessionID, "events", len(events), "err", err)
		}
		if sg.w == nil {
			continue
		}
		if err != nil {
			sg.w.done <- result{err: err}
		} else {
			sg.w.done <- result{events: events}
		}
	}
	return wakeIn
}

// segment is a part of a group commit's batch: one waiter's events, or
// (w nil) sealed deltas between them.
type segment struct {
	start, end int
	w          *waiter
}

// segments splits batch into its waiters' parts and the deltas between
// them, in order.
func segments(batch []event.Event, waiters []waiter) []segment {
	var out []segment
	at := 0
	for i := range waiters {
		w := &waiters[i]
		if w.start > at {
			out = append(out, segment{start: at, end: w.start})
		}
		out = append(out, segment{start: w.start, end: w.end, w: w})
		at = w.end
	}
	if at < len(batch) {
		out = append(out, segment{start: at, end: len(batch)})
	}
	return out
}

// commit sequences, projects and stores batch, then publishes it, and
// returns when the subscribers are to be woken if not at once. A batch
// the store refuses on its own merits (see refused) leaves the journal
// as it was: its projection is reloaded from the store, which holds
// nothing of the batch, and the error is the caller's. Any other failure
// is sticky: the journal refuses further writes, and the projection is
// reloaded from the store so that it matches what is durable.
func (j *Journal) commit(batch []event.Event, receipts []record.Receipt) (wakeIn time.Duration, err error) {
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
	b.SetRecords(j.proj.Flush())
	j.proj.Trim(keepEnded)
	j.mu.Unlock()

	if applyErr != nil {
		// The caller's events do not fit the log (an event of an unknown
		// run, data that does not decode): the store never sees them.
		err = fmt.Errorf("%w: %w", store.ErrInvalid, applyErr)
	} else {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		began := time.Now()
		err = j.cfg.Store.Append(ctx, b)
		if j.cfg.AppendTook != nil {
			j.cfg.AppendTook(time.Since(began))
		}
		cancel()
	}
	if err != nil && refused(err) {
		// Nothing of the batch is stored: back to the projection of what is.
		proj, lerr := load(context.Background(), j.cfg.Store, j.sessionID)
		if lerr == nil {
			j.mu.Lock()
			j.proj = proj
			j.mu.Unlock()
			j.cfg.Logger.Warn("journal: the store refused a batch", "session", j.sessionID, "seq", j.last+1, "err", err)
			return 0, err
		}
		// The projection cannot be brought back: the journal is done.
		err = errors.Join(err, lerr)
	}
	if err != nil {
		j.cfg.Logger.Error("journal commit failed", "session", j.sessionID, "seq", j.last+1, "err", err)
		var proj *record.Projection
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
		j.fail()
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
