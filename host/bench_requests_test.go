package host_test

import (
	"context"
	"fmt"
	"iter"
	"runtime"
	"testing"
	"time"

	"weft.dev/weft/api"
	"weft.dev/weft/event"
	"weft.dev/weft/host"
)

// BenchmarkApprovalRoundTrip measures an approval on a warm host (SQLite):
// from approval.requested being committed (its commit stamp) to the gated
// call's tool.call.started being committed, with the decision sent as soon
// as the request is seen. A session whose policy asks about every noop
// call runs the looped "gated" script; each iteration is one approval.
// Also reported: decide-ms, the approval/decide call alone.
func BenchmarkApprovalRoundTrip(b *testing.B) {
	h, _ := newBenchHost(b, host.Config{CoalesceWindow: time.Millisecond, MaxSteps: 1 << 20})
	ctx := context.Background()
	s, err := h.CreateSession(ctx, api.CreateSessionParams{Model: "scripted:gated", Policy: &api.Policy{Preset: api.PresetAskAll}})
	if err != nil {
		b.Fatal(err)
	}
	seq, err := h.Subscribe(ctx, api.SubscribeParams{SessionID: s.ID})
	if err != nil {
		b.Fatal(err)
	}
	next, stop := iter.Pull2(seq)
	defer stop()
	r, err := h.StartRun(ctx, api.StartRunParams{SessionID: s.ID, Input: api.Input(event.TextParts("go"))})
	if err != nil {
		b.Fatal(err)
	}
	var round, decide []time.Duration
	for b.Loop() {
		var d event.ApprovalRequestedData
		var asked time.Time
		for asked.IsZero() {
			e, err, _ := next()
			if err != nil {
				b.Fatal(err)
			}
			if e.Type == event.ApprovalRequested {
				e.Decode(&d)
				asked = e.Time
			}
		}
		t0 := time.Now()
		if _, err := h.DecideApproval(ctx, api.DecideParams{ApprovalID: d.ApprovalID, Decision: event.DecisionAllowOnce}); err != nil {
			b.Fatal(err)
		}
		decide = append(decide, time.Since(t0))
		for {
			e, err, _ := next()
			if err != nil {
				b.Fatal(err)
			}
			if e.Type == event.ToolCallStarted {
				round = append(round, e.Time.Sub(asked)-(t0.Sub(asked)))
				break
			}
		}
	}
	b.StopTimer()
	h.CancelRun(ctx, api.CancelParams{RunID: r.ID})
	b.ReportMetric(median(round), "decide-to-started-ms")
	b.ReportMetric(quantile(round, 0.99), "decide-to-started-p99-ms")
	b.ReportMetric(median(decide), "decide-ms")
}

// BenchmarkWaitingRuns measures what runs that wait for an approval cost
// a host: b.N sessions each with a run parked on an approval (SQLite).
// Reported: heap and goroutines per waiting run, after a GC, against the
// host before the sessions were made.
func BenchmarkWaitingRuns(b *testing.B) {
	h, _ := newBenchHost(b, host.Config{CoalesceWindow: time.Millisecond, MaxLoadedSessions: 1 << 20})
	ctx := context.Background()
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapInuse
	}
	n := b.N
	b.StopTimer()
	h0, g0 := heap(), runtime.NumGoroutine()
	b.StartTimer()
	var runs []string
	for i := range n {
		s, err := h.CreateSession(ctx, api.CreateSessionParams{Title: fmt.Sprint(i), Model: "scripted:gated", Policy: &api.Policy{Preset: api.PresetAskAll}})
		if err != nil {
			b.Fatal(err)
		}
		r, err := h.StartRun(ctx, api.StartRunParams{SessionID: s.ID, Input: api.Input(event.TextParts("go"))})
		if err != nil {
			b.Fatal(err)
		}
		runs = append(runs, r.ID)
	}
	for _, id := range runs {
		for {
			r, err := h.GetRun(ctx, api.RunIDParams{RunID: id})
			if err != nil {
				b.Fatal(err)
			}
			if len(r.Requests) > 0 {
				break
			}
			<-time.After(time.Millisecond) // the run streams its first step
		}
	}
	b.StopTimer()
	// Let every run park (its goroutine returns once its request is open).
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > g0+3*n && time.Now().Before(deadline) {
		<-time.After(10 * time.Millisecond)
	}
	h1, g1 := heap(), runtime.NumGoroutine()
	b.ReportMetric(float64(h1-h0)/float64(n)/1024, "heap-KiB/run")
	b.ReportMetric(float64(g1-g0)/float64(n), "goroutines/run")
	b.ReportMetric(float64(h1-h0)/float64(n)*1000/(1<<20), "MiB/1000-runs")
}
