package host_test

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"weft.dev/weft/api"
	"weft.dev/weft/event"
	"weft.dev/weft/host"
	"weft.dev/weft/llm/scripted"
	"weft.dev/weft/store/postgres"
)

// clusterHost is a host of a PostgreSQL store as `weft serve` makes one:
// its own store (pool), leases, notifier of the other hosts' commits and
// dispatcher of queued runs.
type clusterHost struct {
	h        *host.Host
	st       *postgres.Store
	leases   *postgres.Leases
	notices  *postgres.Notifier
	dispatch *postgres.Dispatcher
	closed   bool
}

func newClusterHost(tb testing.TB, url, holder string, ttl time.Duration) *clusterHost {
	tb.Helper()
	ctx := context.Background()
	st, err := postgres.Open(ctx, postgres.Config{URL: url, Migrate: true})
	if err != nil {
		tb.Fatal(err)
	}
	logger := slog.New(slog.DiscardHandler)
	ls, err := postgres.NewLeases(st, postgres.LeaseConfig{Holder: holder, TTL: ttl, Logger: logger})
	if err != nil {
		tb.Fatal(err)
	}
	n := postgres.NewNotifier(st, postgres.NotifierConfig{Logger: logger})
	h, err := host.New(ctx, host.Config{
		Store: st, Leases: ls, Notices: n, DefaultModel: "scripted:fast", CoalesceWindow: 2 * time.Millisecond,
		Logger: logger,
		ResolveModel: func(name string) (*host.Model, error) {
			key := strings.TrimPrefix(name, "scripted:")
			src, ok := scripts[key]
			if key == "hang" {
				src, ok = `{"steps":[{"text":"never","delayMs":3600000}]}`, true
			}
			if !ok {
				return nil, fmt.Errorf("unknown model %q", name)
			}
			p, err := scripted.Parse(key+".json", []byte(src))
			return &host.Model{Name: name, Provider: p, Model: key}, err
		},
	})
	if err != nil {
		tb.Fatal(err)
	}
	d, err := postgres.NewDispatcher(st, postgres.DispatchConfig{Waker: h, ID: holder, Recheck: ttl / 2, PollInterval: 50 * time.Millisecond, Logger: logger})
	if err != nil {
		tb.Fatal(err)
	}
	if err := d.Start(ctx); err != nil {
		tb.Fatal(err)
	}
	c := &clusterHost{h: h, st: st, leases: ls, notices: n, dispatch: d}
	tb.Cleanup(c.close)
	return c
}

// close shuts the host down as `weft serve` does: no more jobs, the
// sessions closed and their leases released, their queues handed over.
func (c *clusterHost) close() {
	if c.closed {
		return
	}
	c.closed = true
	c.dispatch.Close()
	c.h.Close()
	c.dispatch.Handover(context.Background(), c.leases.Holder())
	c.notices.Close()
	c.leases.Close()
	c.st.Close()
}

// percentile returns the p-th percentile of ds (sorted in place).
func percentile(ds []time.Duration, p float64) time.Duration {
	slices.Sort(ds)
	return ds[min(len(ds)-1, int(float64(len(ds))*p))]
}

// BenchmarkCrossHostDelivery measures how long an event committed by the
// session's owner (host A) takes to reach a subscriber on another host
// (B), which follows the session through LISTEN/NOTIFY and reads the
// events from the store: for each event, the time B's subscriber
// receives it minus the time A's own subscriber does (at its commit).
// Reports the median and p99 over every event of every run.
func BenchmarkCrossHostDelivery(b *testing.B) {
	url := pg.Database(b)
	a, o := newClusterHost(b, url, "A", 10*time.Second), newClusterHost(b, url, "B", 10*time.Second)
	ctx := context.Background()
	s, err := a.h.CreateSession(ctx, api.CreateSessionParams{Model: "scripted:slow"})
	if err != nil {
		b.Fatal(err)
	}
	local, err := a.h.Subscribe(ctx, api.SubscribeParams{SessionID: s.ID})
	if err != nil {
		b.Fatal(err)
	}
	remote, err := o.h.Subscribe(ctx, api.SubscribeParams{SessionID: s.ID})
	if err != nil {
		b.Fatal(err)
	}
	type seen struct {
		seq int64
		at  time.Time
	}
	collect := func(seq func(func(event.Event, error) bool), out chan<- seen) {
		for ev, err := range seq {
			if err != nil {
				close(out)
				return
			}
			out <- seen{ev.Seq, time.Now()}
		}
	}
	lc, rc := make(chan seen, 1<<16), make(chan seen, 1<<16)
	go collect(local, lc)
	go collect(remote, rc)
	at, rat := map[int64]time.Time{}, map[int64]time.Time{}
	first, err := a.st.LastSeq(ctx, s.ID) // replayed, not delivered live
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		r, err := a.h.StartRun(ctx, api.StartRunParams{SessionID: s.ID, Input: api.Input(event.TextParts("go"))})
		if err != nil {
			b.Fatal(err)
		}
		w, err := a.h.WaitRun(ctx, api.WaitRunParams{RunID: r.ID, TimeoutMs: 60_000})
		if err != nil || w.TimedOut {
			b.Fatalf("run: %+v %v", w, err)
		}
		last, err := a.st.LastSeq(ctx, s.ID)
		if err != nil {
			b.Fatal(err)
		}
		for got := int64(0); got < last; {
			select {
			case e := <-lc:
				at[e.seq] = e.at
			case e := <-rc:
				got = e.seq
				rat[e.seq] = e.at
			case <-time.After(10 * time.Second):
				b.Fatalf("the subscriber on host B stopped at seq %d of %d", got, last)
			}
		}
	}
	b.StopTimer()
	var lat []time.Duration
	for seq, t := range rat {
		if l, ok := at[seq]; ok && seq > first {
			lat = append(lat, t.Sub(l))
		}
	}
	if len(lat) > 0 {
		b.ReportMetric(float64(percentile(lat, 0.5).Microseconds())/1000, "p50-ms")
		b.ReportMetric(float64(percentile(lat, 0.99).Microseconds())/1000, "p99-ms")
		b.ReportMetric(float64(len(lat))/float64(b.N), "events/op")
	}
}

// BenchmarkDispatchHandover measures River dispatch across hosts: host A
// owns a session with a run mid-flight and one queued behind it, and
// shuts down (its sessions close, their leases are released and their
// jobs handed over); the time from the start of A's shutdown until the
// queued run starts on host B, woken by its River job. Reports the
// median and the worst case.
func BenchmarkDispatchHandover(b *testing.B) {
	url := pg.Database(b)
	const ttl = 10 * time.Second
	o := newClusterHost(b, url, "B", ttl)
	ctx := context.Background()
	var lat []time.Duration
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		a := newClusterHost(b, url, fmt.Sprintf("A%d", i), ttl)
		s, err := a.h.CreateSession(ctx, api.CreateSessionParams{Model: "scripted:fast"})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := a.h.StartRun(ctx, api.StartRunParams{SessionID: s.ID, Input: api.Input(event.TextParts("first")), Model: "scripted:hang"}); err != nil {
			b.Fatal(err)
		}
		q, err := a.h.StartRun(ctx, api.StartRunParams{SessionID: s.ID, Input: api.Input(event.TextParts("next")), Busy: api.BusyQueue})
		if err != nil {
			b.Fatal(err)
		}
		// Let the jobs' first looks pass: they snooze for TTL/2.
		time.Sleep(200 * time.Millisecond)
		b.StartTimer()
		start := time.Now()
		a.close()
		for {
			r, err := o.st.Run(ctx, q.ID)
			if err == nil && r.Status != "queued" {
				break
			}
			if time.Since(start) > ttl {
				b.Fatalf("the queued run did not start on host B within %v", ttl)
			}
			time.Sleep(2 * time.Millisecond)
		}
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	b.ReportMetric(float64(percentile(lat, 0.5).Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(slices.Max(lat).Microseconds())/1000, "max-ms")
}
