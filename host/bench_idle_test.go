package host_test

import (
	"context"
	"runtime"
	"testing"

	"weft.dev/weft/api"
	"weft.dev/weft/host"
)

// BenchmarkIdleSessions creates 10,000 sessions on one host, each with one
// completed turn, and reports what the host holds for them once they are
// idle: live heap per session and goroutines per session (after a GC).
// The host keeps at most MaxLoadedSessions loaded (the default); the rest
// are in the store only.
func BenchmarkIdleSessions(b *testing.B) {
	const n = 10_000
	for b.Loop() {
		b.StopTimer()
		runtime.GC()
		var before runtime.MemStats
		runtime.ReadMemStats(&before)
		g0 := runtime.NumGoroutine()
		b.StartTimer()
		h, _ := newBenchHost(b, host.Config{})
		ctx := context.Background()
		for range n {
			s, err := h.CreateSession(ctx, api.CreateSessionParams{Model: "scripted:text"})
			if err != nil {
				b.Fatal(err)
			}
			r, err := h.StartRun(ctx, api.StartRunParams{SessionID: s.ID, Input: input("hi")})
			if err != nil {
				b.Fatal(err)
			}
			if _, err := h.WaitRun(ctx, api.WaitRunParams{RunID: r.ID, TimeoutMs: 10_000}); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		runtime.GC()
		var after runtime.MemStats
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapInuse-before.HeapInuse)/n, "heap-B/session")
		b.ReportMetric(float64(after.HeapInuse-before.HeapInuse)/(1<<20), "heap-MiB")
		b.ReportMetric(float64(runtime.NumGoroutine()-g0)/n, "goroutines/session")
		h.Close()
		b.StartTimer()
	}
}
