package process

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"weft.dev/weft/api"
	"weft.dev/weft/store"
	"weft.dev/weft/store/record"
)

// storeTimeout bounds one write to the store, so that a store that hangs
// is retried like one that refuses.
const storeTimeout = 10 * time.Second

// The backoff between tries of a write the store refused.
const (
	minBackoff = 50 * time.Millisecond
	maxBackoff = 2 * time.Second
)

// span is a range of output offsets [start, end).
type span struct{ start, end int64 }

// outbox is the output state of a live process: the offsets it has
// reserved and the output the store has not taken yet. While the store
// refuses writes, output is held here, in offset order, and written with
// the next write that succeeds (retried with backoff); what does not fit
// the memory bound is dropped oldest first and becomes one lost range in
// front of what is held, so that the range is contiguous and is written
// as one process.output_lost mark in its place. Offsets of held and lost
// output stay reserved: later output continues after them. The outbox is
// owned by its proc and guarded by proc.mu.
type outbox struct {
	next   int64                 // the next output offset to reserve
	lostAt int64                 // the lost range [lostAt, lostAt+lost)
	lost   int64                 //
	held   []record.ProcessEvent // unsequenced output chunks after the lost range
	bytes  int64                 // the encoded size of held, counted in Manager.held

	// gaps are the committed lost ranges that end after the record's trim
	// point, so that DroppedBytes stays exact when the cap trims.
	gaps []span

	refused error // the last write error while writes fail, else nil
	backoff time.Duration
	retryAt time.Time // no write of held output is tried before, unless output would be lost
	tried   time.Time // the last refused write
}

// pending reports whether output waits for the store.
func (b *outbox) pending() bool { return b.lost > 0 || len(b.held) > 0 }

// reserve cuts data into output chunks of at most size bytes at the next
// offsets, read at now.
func (b *outbox) reserve(stream string, data []byte, size int, now time.Time) []record.ProcessEvent {
	evs := make([]record.ProcessEvent, 0, (len(data)+size-1)/size)
	for len(data) > 0 {
		n := min(len(data), size)
		evs = append(evs, record.ProcessEvent{Type: EventOutput, Time: now, Data: encodeOutput(stream, b.next, data[:n]), Offset: b.next, Size: int64(n)})
		b.next += int64(n)
		data = data[n:]
	}
	return evs
}

// hold keeps evs, new chunks the store refused, within m's bounds: the
// process's oldest held chunks make room first, and a chunk that still
// does not fit is lost. Chunks before committed (taken by a write that
// reported failure) are not kept. It reports whether output was lost.
func (b *outbox) hold(m *Manager, evs []record.ProcessEvent, committed int64) bool {
	lost := false
	for _, e := range evs {
		if e.Offset+e.Size <= committed {
			continue
		}
		n := int64(len(e.Data))
		ok := b.take(m, n)
		for !ok && len(b.held) > 0 {
			b.loseOldest(m)
			lost = true
			ok = b.take(m, n)
		}
		if ok {
			b.held = append(b.held, e)
			continue
		}
		// Nothing is held: e follows the lost range, or starts it.
		b.lose(e)
		lost = true
	}
	return lost
}

// take counts n more held bytes against the process's share and the
// Manager's bound, or reports that they do not fit.
func (b *outbox) take(m *Manager, n int64) bool {
	if b.bytes+n > m.perProcHeld {
		return false
	}
	if m.held.Add(n) > m.cfg.OutageBuffer {
		m.held.Add(-n)
		return false
	}
	b.bytes += n
	return true
}

// loseOldest drops the oldest held chunk into the lost range.
func (b *outbox) loseOldest(m *Manager) {
	e := b.held[0]
	b.held[0] = record.ProcessEvent{} // let the data go
	b.held = b.held[1:]
	n := int64(len(e.Data))
	b.bytes -= n
	m.held.Add(-n)
	b.lose(e)
}

// lose adds chunk e, which follows the lost range or starts it, to the
// lost range.
func (b *outbox) lose(e record.ProcessEvent) {
	if b.lost == 0 {
		b.lostAt = e.Offset
	}
	b.lost = e.Offset + e.Size - b.lostAt
}

// release forgets what is held and lost, giving the held bytes back.
func (b *outbox) release(m *Manager) {
	m.held.Add(-b.bytes)
	clear(b.held)
	b.held, b.bytes, b.lostAt, b.lost = b.held[:0], 0, 0, 0
}

// refusedAt records a refused write at now and returns how long to wait
// before the next try; first is set for the first refusal of an outage.
func (b *outbox) refusedAt(err error, now time.Time) (wait time.Duration, first bool) {
	first = b.refused == nil
	b.refused, b.tried = err, now
	b.backoff = min(max(2*b.backoff, minBackoff), maxBackoff)
	b.retryAt = now.Add(b.backoff)
	return b.backoff, first
}

// due reports whether held output should be tried again at now, before
// evs are held: when its backoff has passed, or when holding evs would
// lose output and the last try is at least minBackoff old (losing output
// is worse than one more refused write).
func (b *outbox) due(m *Manager, evs []record.ProcessEvent, now time.Time) bool {
	if !now.Before(b.retryAt) {
		return true
	}
	if now.Sub(b.tried) < minBackoff {
		return false
	}
	var n int64
	for _, e := range evs {
		n += int64(len(e.Data))
	}
	return b.bytes+n > m.perProcHeld || m.held.Load()+n > m.cfg.OutageBuffer
}

// retryIn returns how long until held output is due to be tried again;
// ok is false when nothing is held.
func (b *outbox) retryIn(now time.Time) (d time.Duration, ok bool) {
	if !b.pending() {
		return 0, false
	}
	return max(b.retryAt.Sub(now), 0), true
}

// lostAfter sums the lost bytes of gaps at or after offset at.
func lostAfter(gaps []span, at int64) int64 {
	var n int64
	for _, g := range gaps {
		n += max(g.end-max(g.start, at), 0)
	}
	return n
}

// commitLocked appends, in one batch, the output the outbox holds (its
// lost range first), then out (new output chunks), then evs, with the
// record as changed by mutate and by the output accounting; with p.mu
// held. by's receipt, if any, is for the last event of evs. On success
// the outbox is empty and p.rec is the new record; on failure nothing
// changed, and out is not held (the caller decides). A conflict of seqs
// (a write reported failed that was committed) makes the outbox catch up
// with the stored record.
func (p *proc) commitLocked(ctx context.Context, out, evs []record.ProcessEvent, mutate func(*record.Process), by Caller) error {
	m, b := p.m, &p.box
	if p.fenced != nil {
		return p.fenced
	}
	now := time.Now().UTC()
	rec := p.rec
	rec.Grants = slices.Clone(rec.Grants)
	if mutate != nil {
		mutate(&rec)
	}
	batch := out // the common case: new output, nothing held, nothing else
	gaps := b.gaps
	if b.pending() || len(evs) > 0 {
		batch = make([]record.ProcessEvent, 0, 2+len(b.held)+len(out)+len(evs))
		if b.lost > 0 {
			e := newEvent(EventOutputLost, OutputLostData{Offset: b.lostAt, Bytes: b.lost, Reason: api.LostStoreUnavailable})
			e.Offset, e.Size = b.lostAt, b.lost
			batch = append(batch, e)
			rec.LostBytes += b.lost
			gaps = append(slices.Clip(gaps), span{b.lostAt, b.lostAt + b.lost})
		}
		batch = append(batch, b.held...)
		batch = append(batch, out...)
	}
	var drop int64
	if len(batch) > 0 {
		rec.OutputBytes = b.next
		if rec.OutputBytes-rec.TrimmedBefore-lostAfter(gaps, rec.TrimmedBefore) > m.cfg.OutputCap {
			drop = rec.OutputBytes - m.cfg.OutputCap*3/4
			rec.TrimmedBefore = drop
			gaps = slices.DeleteFunc(slices.Clone(gaps), func(g span) bool { return g.end <= drop })
			batch = append(batch, newEvent(EventOutputDropped, OutputDroppedData{Before: drop, Cap: m.cfg.OutputCap}))
		}
		rec.DroppedBytes = rec.TrimmedBefore + lostAfter(gaps, rec.TrimmedBefore)
	}
	for i := range evs {
		if evs[i].Type != EventOutput { // output is masked before it is cut (writeOutput)
			evs[i].Data = m.cfg.Redactor.JSON(evs[i].Data)
		}
	}
	first := len(batch)
	batch = append(batch, evs...)
	for i := range batch {
		rec.LastSeq++
		batch[i].Seq, batch[i].ProcessID = rec.LastSeq, p.id
		if batch[i].Time.IsZero() {
			batch[i].Time = now
		}
	}
	copy(evs, batch[first:])
	var receipts []record.Receipt
	if len(evs) > 0 {
		receipts = by.receipts(evs)
	}
	err := m.st.AppendProcess(ctx, store.ProcessBatch{ProcessID: p.id, Events: batch, Record: &rec, DropOutputBefore: drop, Receipts: receipts, Epoch: rec.Epoch})
	if err != nil {
		if errors.Is(err, store.ErrSeqConflict) {
			p.catchUpLocked(ctx)
		}
		err = fmt.Errorf("process %s: %w", p.id, err)
		if errors.Is(err, store.ErrFenced) {
			p.fenceLocked(err)
		}
		return err
	}
	if b.refused != nil && (b.bytes > 0 || b.lost > 0) {
		m.log.Info("process output written after the store refused writes", "process", p.id,
			"heldBytes", b.bytes, "lostBytes", b.lost, "refusedBy", b.refused)
	}
	b.release(m)
	b.gaps, b.refused, b.backoff = gaps, nil, 0
	p.rec = rec
	close(p.changed)
	p.changed = make(chan struct{})
	return nil
}

// catchUpLocked adopts the stored record after a seq conflict, when a
// write that was reported failed was committed after all (a connection
// lost after the commit): what the outbox held below the stored output
// offset was written by it.
func (p *proc) catchUpLocked(ctx context.Context) {
	stored, err := p.m.st.Process(ctx, p.id)
	if err != nil || stored.LastSeq <= p.rec.LastSeq || stored.OutputBytes > p.box.next {
		return
	}
	b := &p.box
	if b.lost > 0 && b.lostAt < stored.OutputBytes {
		b.gaps = append(b.gaps, span{b.lostAt, b.lostAt + b.lost})
		b.lostAt, b.lost = 0, 0
	}
	var keep []record.ProcessEvent
	for _, e := range b.held {
		if e.Offset >= stored.OutputBytes {
			keep = append(keep, e)
		} else {
			b.bytes -= int64(len(e.Data))
			p.m.held.Add(-int64(len(e.Data)))
		}
	}
	b.held = keep
	p.rec = stored
	close(p.changed)
	p.changed = make(chan struct{})
}

// fenceLocked stops a process whose writes the store fenced: another
// host holds a later lease of its session, so this host no longer owns
// the process and may never write for it again (it would race the new
// owner's writes, which reconcile the process). The process is killed (a
// tool process's context cancelled), what the outbox holds is dropped,
// and every later write fails with err at once; its supervisor then
// ends without a terminal event, which the new owner writes. With p.mu
// held.
func (p *proc) fenceLocked(err error) {
	if p.fenced != nil {
		return
	}
	p.fenced = err
	p.m.log.Warn("process stopped: another host owns its session now", "process", p.id, "session", p.rec.SessionID,
		"epoch", p.rec.Epoch, "err", err)
	p.box.release(p.m)
	if p.cmd != nil && p.cmd.Process != nil {
		p.kill()
	}
	if p.stopTool != nil {
		p.stopTool(err) // not a cancel: the new owner follows a subagent again
	}
}

// refusedLocked notes a refused write of output and returns how long to
// wait before the next try; with p.mu held.
func (p *proc) refusedLocked(err error) time.Duration {
	wait, first := p.box.refusedAt(err, time.Now())
	if first {
		p.m.log.Warn("process output held in memory: the store refuses writes", "process", p.id, "err", err)
	}
	return wait
}

// writeOutput appends data as output chunks of at most ChunkBytes, after
// what the outbox holds. When the store refuses (or held output waits for
// its backoff), the chunks are held, within the memory bound.
func (p *proc) writeOutput(stream string, data []byte) {
	data = p.m.cfg.Redactor.Bytes(data)
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now().UTC()
	out := p.box.reserve(stream, data, p.m.cfg.ChunkBytes, now)
	if p.box.pending() && !p.box.due(p.m, out, now) {
		p.holdLocked(out)
		return
	}
	p.tryLocked(out)
}

// tryLocked writes what the outbox holds and out; what the store refuses
// is held. With p.mu held.
func (p *proc) tryLocked(out []record.ProcessEvent) {
	// No timeout of its own: the stores bound their writes (SQLite's busy
	// timeout, PostgreSQL's statement timeout), and a store that blocks
	// slows the process down through its pipe, as it always has.
	if err := p.commitLocked(context.Background(), out, nil, nil, Caller{}); err != nil {
		if p.fenced != nil {
			return // nothing is written for it any more
		}
		p.refusedLocked(err)
		p.holdLocked(out)
	}
}

func (p *proc) holdLocked(out []record.ProcessEvent) {
	wasLost := p.box.lost > 0
	if p.box.hold(p.m, out, p.rec.OutputBytes) && !wasLost {
		p.m.log.Warn("process output lost: the store refused writes for longer than it could be held",
			"process", p.id, "offset", p.box.lostAt, "bound", p.m.cfg.OutageBuffer)
	}
}

// retry tries to write held output again if its backoff has passed, and
// returns how long until the next try (ok is false when nothing is held).
func (p *proc) retry() (time.Duration, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	if d, ok := p.box.retryIn(now); ok && d == 0 {
		p.tryLocked(nil)
	}
	return p.box.retryIn(time.Now())
}
