package telemetry

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// batchConfig bounds a batcher; zero durations take the defaults.
type batchConfig struct {
	delay   time.Duration // the longest a span waits for its batch; 5 s
	timeout time.Duration // the longest one export may take; 30 s
	queue   int           // spans waiting to be exported, at most
	batch   int           // spans of one export, at most
	logger  *slog.Logger
}

// batcher is a span processor that exports ended spans in batches from
// one goroutine. Unlike the SDK's batch processor, it counts every span
// it could not deliver: those that found the queue full (OnEnd never
// waits, so a run is never slowed by an exporter that is down or slow)
// and those of an export that failed. Export failures are logged once
// per outage, and the recovery once.
type batcher struct {
	exp   sdktrace.SpanExporter
	cfg   batchConfig
	log   *slog.Logger
	queue chan sdktrace.ReadOnlySpan

	dropped  atomic.Uint64
	exported atomic.Uint64
	failing  bool // owned by run's goroutine

	flush    chan chan struct{}
	stop     chan struct{}
	done     chan struct{}
	stopOnce sync.Once
	stopped  atomic.Bool
}

func newBatcher(exp sdktrace.SpanExporter, c batchConfig) *batcher {
	if c.delay <= 0 {
		c.delay = 5 * time.Second
	}
	if c.timeout <= 0 {
		c.timeout = 30 * time.Second
	}
	if c.queue <= 0 {
		c.queue = 2048
	}
	if c.batch <= 0 || c.batch > c.queue {
		c.batch = min(512, c.queue)
	}
	log := c.logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	b := &batcher{exp: exp, cfg: c, log: log, queue: make(chan sdktrace.ReadOnlySpan, c.queue),
		flush: make(chan chan struct{}), stop: make(chan struct{}), done: make(chan struct{})}
	go b.run()
	return b
}

// OnStart does nothing: spans are exported when they end.
func (b *batcher) OnStart(context.Context, sdktrace.ReadWriteSpan) {}

// OnEnd queues s for export, or counts it dropped when the queue is full.
// It never blocks.
func (b *batcher) OnEnd(s sdktrace.ReadOnlySpan) {
	if b.stopped.Load() || !s.SpanContext().IsSampled() {
		return
	}
	select {
	case b.queue <- s:
	default:
		b.dropped.Add(1)
	}
}

// ForceFlush exports what is queued and returns when it is delivered or
// dropped, or ctx is done.
func (b *batcher) ForceFlush(ctx context.Context) error {
	ack := make(chan struct{})
	select {
	case b.flush <- ack:
	case <-b.done:
		return errStopped
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-ack:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Shutdown exports what is queued, stops the goroutine and shuts the
// exporter down. When ctx ends first the goroutine still stops (after
// its export in flight, bounded by the export timeout).
func (b *batcher) Shutdown(ctx context.Context) error {
	first := false
	b.stopOnce.Do(func() {
		first = true
		b.stopped.Store(true)
		close(b.stop)
	})
	if !first {
		return nil
	}
	select {
	case <-b.done:
	case <-ctx.Done():
		return ctx.Err()
	}
	if n := b.dropped.Load(); n > 0 {
		b.log.Warn("trace spans dropped since start", "dropped", n, "exported", b.exported.Load())
	}
	return b.exp.Shutdown(ctx)
}

// run collects spans into batches and exports each when it is full, when
// its oldest span has waited cfg.delay, on a flush and at the stop.
func (b *batcher) run() {
	defer close(b.done)
	batch := make([]sdktrace.ReadOnlySpan, 0, b.cfg.batch)
	t := time.NewTimer(b.cfg.delay)
	defer t.Stop()
	send := func() {
		if len(batch) > 0 {
			b.export(batch)
			clear(batch)
			batch = batch[:0]
		}
	}
	// drain moves what is queued now into batches and exports them.
	drain := func() {
		for {
			select {
			case s := <-b.queue:
				if batch = append(batch, s); len(batch) == b.cfg.batch {
					send()
				}
			default:
				send()
				return
			}
		}
	}
	for {
		select {
		case s := <-b.queue:
			if len(batch) == 0 {
				t.Reset(b.cfg.delay)
			}
			if batch = append(batch, s); len(batch) == b.cfg.batch {
				send()
			}
		case <-t.C:
			send()
		case ack := <-b.flush:
			drain()
			close(ack)
		case <-b.stop:
			drain()
			return
		}
	}
}

// export sends one batch, counting it exported or dropped.
func (b *batcher) export(batch []sdktrace.ReadOnlySpan) {
	ctx, cancel := context.WithTimeout(context.Background(), b.cfg.timeout)
	defer cancel()
	if err := b.exp.ExportSpans(ctx, batch); err != nil {
		n := b.dropped.Add(uint64(len(batch)))
		if !b.failing {
			b.failing = true
			b.log.Warn("trace export failed; spans are dropped until it works again (runs go on)", "spans", len(batch), "dropped", n, "err", err)
		}
		return
	}
	b.exported.Add(uint64(len(batch)))
	if b.failing {
		b.failing = false
		b.log.Info("trace export works again", "dropped", b.dropped.Load())
	}
}
