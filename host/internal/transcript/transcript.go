// Package transcript keeps a session's conversation in memory between
// runs, as its next run sends it to the model, within a byte budget the
// host's sessions share, and decides when a snapshot of it is stored.
// The session's owner feeds it every commit ([Cache.Observe]), asks it at
// each run start ([Cache.Messages]), stores the snapshots it says are due
// ([Cache.Due], [Cache.Saved]) and drops it whenever the cache may
// disagree with the log ([Cache.Drop]).
//
// Lock order: a Cache's build lock, then its state lock; neither is held
// while calling out, but for [Log] during a build, which holds the build
// lock only. The budget is lock-free.
package transcript

import (
	"context"
	"sync"

	"weft.dev/weft/agent"
	"weft.dev/weft/event"
	"weft.dev/weft/llm"
)

// snapshotEvery is how many transcript events a session folds before it
// stores a snapshot of its transcript, at the least; a long transcript
// waits for a sixteenth of its length, so that writing snapshots costs
// O(1) per event and a cold load folds at most that many after one.
const snapshotEvery = 256

// maxSnapshotBytes bounds the transcripts a session stores snapshots of:
// encoding one allocates its whole size, and a load reads it back whole.
// A longer transcript (far beyond any model's context) is read from the
// log when the session loads.
const maxSnapshotBytes = 64 << 20

// Cache is a session's conversation as its next run sends it to the
// model, kept current from the events the session's journal commits, so
// that a run starts without reading the log again: the first run start
// after the session is loaded reads the latest snapshot and the log's
// transcript events after it once, and every commit after that folds its
// own into the cache. Whatever may have made the cache disagree with the
// log (a failed write that might have committed) drops it, and the next
// run start reads the log again. Every so many events the session stores
// a snapshot of it (see [Cache.Due]).
//
// Its methods are safe for concurrent use. Make one with NewCache.
type Cache struct {
	budget *Budget

	build sync.Mutex // serializes Messages; taken before mu

	mu       sync.Mutex
	kept     kept
	building bool          // a build reads the log; commits collect in pending
	pending  []event.Event // transcript events committed during a build
	writing  bool          // a snapshot is being stored
	// unkept is the last build that did not fit the budget, while its
	// snapshot is due: stored once, then forgotten.
	unkept *Snapshot
}

// NewCache returns an empty cache that keeps the transcript within budget
// (nil keeps none: every Messages reads the log).
func NewCache(budget *Budget) *Cache { return &Cache{budget: budget} }

// kept is the cached transcript and the budget it holds. It is not safe
// for concurrent use: it lives under its Cache's mu.
type kept struct {
	b    *agent.TranscriptBuilder // nil: none
	held int64                    // bytes reserved from the budget
	gen  int                      // bumped by forget, so that a build in flight is not kept
	// through is the seq of the last event b reflects, and fresh how many
	// transcript events it folded since the last stored snapshot.
	through int64
	fresh   int
	// retry, after a snapshot failed to be stored, is how many fresh
	// events the next attempt waits for, so that a store refusing writes
	// (a full disk) does not cost an encoding of the transcript at every
	// run's end.
	retry int
}

// Snapshot is a transcript to store as a snapshot through [Snapshot.Seq],
// handed out by [Cache.Due]; it shares nothing with the cache.
type Snapshot struct {
	b     *agent.TranscriptBuilder // not shared with the cache
	seq   int64
	fresh int // the events it covers that the last snapshot did not
	gen   int // the cache's generation, or -1 for an unkept build
}

// Seq returns the seq of the last event the snapshot reflects.
func (j Snapshot) Seq() int64 { return j.seq }

// MarshalBinary encodes the snapshot's transcript for the store (see
// agent.TranscriptBuilder.MarshalBinary).
func (j Snapshot) MarshalBinary() ([]byte, error) { return j.b.MarshalBinary() }

// Log is what a transcript is built from when the cache holds none: the
// session's latest snapshot and its log. Messages calls it with the
// cache's build lock held, so its methods must not call the cache.
type Log interface {
	// Snapshot returns the latest stored transcript and the seq it is
	// through, or ok false when there is none (or it cannot be used).
	Snapshot(ctx context.Context) (b *agent.TranscriptBuilder, seq int64, ok bool)
	// Events returns the log's transcript events after seq, in order.
	Events(ctx context.Context, after int64) ([]event.Event, error)
}

// fit reserves budget for the cache's current size, and forgets the cache
// when it does not fit.
func (k *kept) fit(budget *Budget) {
	need := k.b.Size() - k.held
	if need <= 0 {
		if k.held > 8<<10 && -need > k.held/2 {
			// A compaction shrank the transcript: give back what it
			// no longer needs, keeping the same headroom as a reserve.
			if keep := k.b.Size() + k.b.Size()/2 + 4<<10; keep < k.held {
				budget.release(k.held - keep)
				k.held = keep
			}
		}
		return
	}
	// Reserve ahead, so that a growing transcript does not take the
	// budget's atomic at every commit.
	extra := need + need/2 + 4<<10
	if !budget.reserve(extra) {
		k.forget(budget)
		return
	}
	k.held += extra
}

// forget drops the cache and returns its budget.
func (k *kept) forget(budget *Budget) {
	k.gen++
	k.b = nil
	budget.release(k.held)
	k.held, k.through, k.fresh, k.retry = 0, 0, 0, 0
}

// Observe folds a committed batch into the cache (the journal's
// Committed hook calls it, in commit order).
func (t *Cache) Observe(batch []event.Event) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, e := range batch {
		if !agent.IsTranscriptType(e.Type) {
			continue
		}
		switch {
		case t.building:
			t.pending = append(t.pending, e)
		case t.kept.b != nil:
			if err := t.kept.b.Add(e); err != nil {
				t.kept.forget(t.budget)
				return
			}
			t.kept.through = e.Seq
			t.kept.fresh++
		}
	}
	if t.kept.b != nil {
		t.kept.fit(t.budget)
	}
}

// Messages returns the transcript as of the last commit, and what is
// known of its size in tokens (agent.TranscriptBuilder.Basis), building
// it from log when the cache holds none. The caller may append to the
// slice but not modify its elements.
func (t *Cache) Messages(ctx context.Context, log Log) ([]llm.Message, agent.Basis, error) {
	t.build.Lock()
	defer t.build.Unlock()
	t.mu.Lock()
	if t.kept.b != nil {
		defer t.mu.Unlock()
		return t.kept.b.Messages(), t.kept.b.Basis(), nil
	}
	t.building, t.pending = true, nil
	gen := t.kept.gen
	t.mu.Unlock()

	// Every event committed from here on is in pending; every event
	// committed before is in the snapshot or in what events returns (it
	// reads after this point), and some may also be in pending: those are
	// told apart by seq.
	b, last, ok := log.Snapshot(ctx)
	if !ok {
		b, last = &agent.TranscriptBuilder{}, 0
	}
	evs, err := log.Events(ctx, last)
	fresh := 0
	for _, e := range evs {
		if err != nil {
			break
		}
		err = b.Add(e)
		last = e.Seq
		fresh++
	}

	t.mu.Lock()
	defer t.mu.Unlock()
	pending := t.pending
	t.building, t.pending = false, nil
	if err != nil {
		return nil, agent.Basis{}, err
	}
	for _, e := range pending {
		if e.Seq <= last {
			continue
		}
		if err := b.Add(e); err != nil {
			return nil, agent.Basis{}, err
		}
		last = e.Seq
		fresh++
	}
	if gen == t.kept.gen {
		t.kept.b, t.kept.through, t.kept.fresh = b, last, fresh
		t.kept.fit(t.budget)
	}
	if t.kept.b == nil && dueAfter(fresh, b) {
		t.unkept = &Snapshot{b: b, seq: last, fresh: fresh, gen: -1}
	}
	return b.Messages(), b.Basis(), nil
}

// dueAfter reports whether transcript b, which folded fresh events since
// its last snapshot, should store a new one.
func dueAfter(fresh int, b *agent.TranscriptBuilder) bool {
	return fresh >= snapshotEvery && fresh*16 >= b.Len() && b.Size() <= maxSnapshotBytes
}

// Due returns the snapshot to store now, if one is due and none is being
// stored; the caller stores it and then calls Saved, whatever happened.
func (t *Cache) Due() (Snapshot, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.writing {
		return Snapshot{}, false
	}
	var j Snapshot
	switch {
	case t.kept.b != nil && t.kept.fresh >= t.kept.retry && dueAfter(t.kept.fresh, t.kept.b):
		j = Snapshot{b: t.kept.b.Clone(), seq: t.kept.through, fresh: t.kept.fresh, gen: t.kept.gen}
	case t.unkept != nil:
		j, t.unkept = *t.unkept, nil
	default:
		return Snapshot{}, false
	}
	t.writing = true
	return j, true
}

// Saved records that j was stored (err nil) or not.
func (t *Cache) Saved(j Snapshot, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.writing = false
	if j.gen != t.kept.gen || t.kept.b == nil {
		return
	}
	if err != nil {
		t.kept.retry = t.kept.fresh + snapshotEvery
		return
	}
	t.kept.fresh, t.kept.retry = max(t.kept.fresh-j.fresh, 0), 0
}

// Release forgets the cache, to save its memory while its session is
// idle, unless a snapshot of it is due or being stored (forgetting it
// then would make the next load read all the events the snapshot was to
// cover), and reports whether it forgot one. The next run start reads the
// latest snapshot and the log after it.
func (t *Cache) Release() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	k := &t.kept
	if k.b == nil || t.building || t.writing || t.unkept != nil || (k.fresh >= k.retry && dueAfter(k.fresh, k.b)) {
		return false
	}
	k.forget(t.budget)
	return true
}

// Drop forgets the cache; the next run start reads the log.
func (t *Cache) Drop() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.kept.forget(t.budget)
	t.unkept = nil
}
