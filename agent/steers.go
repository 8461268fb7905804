package agent

import (
	"errors"
	"sync"
)

// ErrSteersClosed reports a steer offered to a run that takes no more: it
// gave its final answer or ended.
var ErrSteersClosed = errors.New("the run takes no more steering")

// Steers is the in-memory [Inbox]: a run's queue of steering. The zero
// value is ready to use and safe for concurrent use.
type Steers struct {
	mu     sync.Mutex
	steers []Steer
	closed bool
}

// Add queues s. accept, if not nil, runs first under the queue's lock (the
// host commits steer.accepted there), so the loop can never take a steer
// whose acceptance is not durable; if accept fails, s is not queued. Add
// returns ErrSteersClosed once the inbox is closed.
func (b *Steers) Add(accept func() error, s Steer) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return ErrSteersClosed
	}
	if accept != nil {
		if err := accept(); err != nil {
			return err
		}
	}
	b.steers = append(b.steers, s)
	return nil
}

// Take implements [Inbox].
func (b *Steers) Take() []Steer {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := b.steers
	b.steers = nil
	return out
}

// TakeOrClose implements [Inbox].
func (b *Steers) TakeOrClose() []Steer {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := b.steers
	b.steers = nil
	if len(out) == 0 {
		b.closed = true
	}
	return out
}

// Close implements [Inbox].
func (b *Steers) Close() []Steer {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := b.steers
	b.steers, b.closed = nil, true
	return out
}
