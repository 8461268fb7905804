package session

import (
	"context"
	"sync"
	"sync/atomic"

	"weft.dev/weft/agent"
	"weft.dev/weft/event"
	"weft.dev/weft/llm"
)

// A Budget is the memory, in bytes, that the loaded sessions of one host
// may keep their transcripts in. A session whose transcript does not fit
// keeps none and reads it from the log at each run start instead: slower,
// never wrong. The zero Budget admits nothing; it is safe for concurrent
// use.
type Budget struct {
	limit int64
	used  atomic.Int64
}

// NewBudget returns a budget of limit bytes.
func NewBudget(limit int64) *Budget { return &Budget{limit: limit} }

// Used returns the bytes reserved now.
func (b *Budget) Used() int64 {
	if b == nil {
		return 0
	}
	return b.used.Load()
}

// reserve takes n bytes, or reports false when they do not fit.
func (b *Budget) reserve(n int64) bool {
	if b == nil {
		return false
	}
	for {
		u := b.used.Load()
		if u+n > b.limit {
			return false
		}
		if b.used.CompareAndSwap(u, u+n) {
			return true
		}
	}
}

func (b *Budget) release(n int64) {
	if b != nil && n != 0 {
		b.used.Add(-n)
	}
}

// transcript is a session's conversation as its next run sends it to the
// model, kept current from the events the session's journal commits, so
// that a run starts without reading the log again: the first run start
// after the session is loaded reads the log's transcript events once, and
// every commit after that folds its own into the cache. Whatever may
// have made the cache disagree with the log (a failed write that might
// have committed) drops it, and the next run start reads the log again.
type transcript struct {
	budget *Budget

	build sync.Mutex // serializes messages; taken before mu

	mu       sync.Mutex
	kept     kept
	building bool          // a build reads the log; commits collect in pending
	pending  []event.Event // transcript events committed during a build
}

// kept is the cached transcript and the budget it holds. It is not safe
// for concurrent use: it lives under its transcript's mu.
type kept struct {
	b    *agent.TranscriptBuilder // nil: none
	held int64                    // bytes reserved from the budget
	gen  int                      // bumped by forget, so that a build in flight is not kept
}

// fit reserves budget for the cache's current size, and forgets the cache
// when it does not fit.
func (k *kept) fit(budget *Budget) {
	need := k.b.Size() - k.held
	if need <= 0 {
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
	k.held = 0
}

// observe folds a committed batch into the cache (the journal's
// Committed hook calls it, in commit order).
func (t *transcript) observe(batch []event.Event) {
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
		}
	}
	if t.kept.b != nil {
		t.kept.fit(t.budget)
	}
}

// messages returns the transcript as of the last commit, reading the log
// with read (every transcript event, in seq order) when the cache holds
// none. The caller may append to the slice but not modify its elements.
func (t *transcript) messages(ctx context.Context, read func(context.Context) ([]event.Event, error)) ([]llm.Message, error) {
	t.build.Lock()
	defer t.build.Unlock()
	t.mu.Lock()
	if t.kept.b != nil {
		defer t.mu.Unlock()
		return t.kept.b.Messages(), nil
	}
	t.building, t.pending = true, nil
	gen := t.kept.gen
	t.mu.Unlock()

	// Every event committed from here on is in pending; every event
	// committed before is in what read returns (it reads after this
	// point), and some may be in both: those are told apart by seq.
	evs, err := read(ctx)
	b := &agent.TranscriptBuilder{}
	var last int64
	for _, e := range evs {
		if err != nil {
			break
		}
		err = b.Add(e)
		last = e.Seq
	}

	t.mu.Lock()
	defer t.mu.Unlock()
	pending := t.pending
	t.building, t.pending = false, nil
	if err != nil {
		return nil, err
	}
	for _, e := range pending {
		if e.Seq <= last {
			continue
		}
		if err := b.Add(e); err != nil {
			return nil, err
		}
	}
	if gen == t.kept.gen {
		t.kept.b = b
		t.kept.fit(t.budget)
	}
	return b.Messages(), nil
}

// drop forgets the cache; the next run start reads the log.
func (t *transcript) drop() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.kept.forget(t.budget)
}
