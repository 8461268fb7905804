// Package pace holds a run to an event rate for benchmarks: a Provider
// waits, before each model call, until the events the session committed
// since Reset are due at the rate.
package pace

import (
	"context"
	"iter"
	"sync"
	"time"

	"weft.dev/weft/llm"
)

// A Pacer holds a session's run to Rate events per second. Set Rate
// before use; it is safe for concurrent use once Reset.
type Pacer struct {
	Rate float64

	mu   sync.Mutex
	seq  func() int64 // the session's last seq
	t0   time.Time
	seq0 int64
}

// Reset starts pacing from now and from the seq seq returns, which the
// pacer reads again at each wait.
func (p *Pacer) Reset(seq func() int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.seq, p.t0, p.seq0 = seq, time.Now(), seq()
}

// Wait waits until the events committed since Reset are due, or ctx ends.
func (p *Pacer) Wait(ctx context.Context) {
	p.mu.Lock()
	due := p.t0.Add(time.Duration(float64(p.seq()-p.seq0) / p.Rate * float64(time.Second)))
	p.mu.Unlock()
	if d := time.Until(due); d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
		}
	}
}

// Provider is a provider whose every stream first waits for its pacer.
type Provider struct {
	llm.Provider
	Pacer *Pacer
}

// Stream implements [llm.Provider].
func (pp Provider) Stream(ctx context.Context, req *llm.Request) iter.Seq2[llm.StreamEvent, error] {
	pp.Pacer.Wait(ctx)
	return pp.Provider.Stream(ctx, req)
}
