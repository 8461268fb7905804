package transcript

import (
	"sync"
	"testing"

	"go.uber.org/goleak"

	"weft.dev/weft/event"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// A budget never hands out more than its limit, however many reserve at
// once, and what is released can be reserved again.
func TestBudgetNeverOverspends(t *testing.T) {
	const limit, n = 1000, 7
	b := NewBudget(limit)
	var (
		wg  sync.WaitGroup
		mu  sync.Mutex
		got int64
	)
	for range 8 {
		wg.Go(func() {
			for range 100 {
				if b.reserve(n) {
					mu.Lock()
					got += n
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	if got != limit/n*n || b.Used() != got {
		t.Fatalf("reserved %d, used %d; want %d of a %d-byte budget", got, b.Used(), limit/n*n, limit)
	}
	if b.reserve(limit - got + 1) {
		t.Fatal("reserved past the limit")
	}
	b.release(got)
	if b.Used() != 0 || !b.reserve(limit) {
		t.Fatalf("after release: used %d, and the whole budget is not free", b.Used())
	}
}

// A nil budget keeps nothing, and the zero Budget admits nothing.
func TestBudgetNilAndZero(t *testing.T) {
	var nb *Budget
	if nb.reserve(1) || nb.Used() != 0 {
		t.Fatal("a nil budget reserved")
	}
	nb.release(5) // no panic
	var zb Budget
	if zb.reserve(1) || !zb.reserve(0) {
		t.Fatal("the zero budget admits more than nothing")
	}
}

// A cache whose transcript outgrows its budget forgets it and returns the
// bytes: the next Messages reads the log again, and the budget is whole.
func TestCacheForgetsWhatDoesNotFit(t *testing.T) {
	b := NewBudget(64 << 10)
	tr := NewCache(b)
	if _, _, err := tr.Messages(t.Context(), emptyLog{}); err != nil {
		t.Fatal(err)
	}
	seq := commit(t, tr, 0, 4, "short")
	if b.Used() == 0 {
		t.Fatal("a kept transcript reserves nothing")
	}
	commit(t, tr, seq, 1, string(make([]byte, 128<<10)))
	if b.Used() != 0 {
		t.Fatalf("a forgotten transcript still holds %d bytes", b.Used())
	}
	tr.mu.Lock()
	kept := tr.kept.b != nil
	tr.mu.Unlock()
	if kept {
		t.Fatal("a transcript over the budget is kept")
	}
}

// Drop returns the budget a kept transcript held.
func TestCacheDropReleases(t *testing.T) {
	b := NewBudget(1 << 20)
	tr := NewCache(b)
	if _, _, err := tr.Messages(t.Context(), emptyLog{}); err != nil {
		t.Fatal(err)
	}
	commit(t, tr, 0, 3, "hello")
	if b.Used() == 0 {
		t.Fatal("a kept transcript reserves nothing")
	}
	tr.Drop()
	if b.Used() != 0 {
		t.Fatalf("a dropped transcript still holds %d bytes", b.Used())
	}
}

// A compaction shrinks a kept transcript: the cache gives back the
// budget it no longer needs, and keeps the compacted conversation.
func TestCompactionReturnsBudget(t *testing.T) {
	b := NewBudget(1 << 30)
	tr := NewCache(b)
	if _, _, err := tr.Messages(t.Context(), emptyLog{}); err != nil {
		t.Fatal(err)
	}
	seq := commit(t, tr, 0, 200, string(make([]byte, 2<<10)))
	before := b.Used()
	e, err := event.New("run", event.ContextCompacted, event.ContextCompactedData{Summary: "short", UpToSeq: seq})
	if err != nil {
		t.Fatal(err)
	}
	e.Seq = seq + 1
	tr.Observe([]event.Event{e})
	if after := b.Used(); after*4 > before {
		t.Fatalf("the budget held %d before the compaction and %d after", before, after)
	}
	msgs, _, err := tr.Messages(t.Context(), emptyLog{})
	if err != nil || len(msgs) != 1 {
		t.Fatalf("after the compaction: %d messages, %v", len(msgs), err)
	}
}
