package transcript

import "sync/atomic"

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
