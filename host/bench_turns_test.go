package host_test

import (
	"context"
	"os"
	"runtime"
	"runtime/pprof"
	"testing"

	"weft.dev/weft/api"
	"weft.dev/weft/host"
)

// BenchmarkManyTurns runs 10,000 turns on one host, a new session every
// 100 (the shape of weft-bench's host-RSS figure), and reports the live
// heap after 100 turns and after all of them: what the host keeps grows
// with the sessions it keeps loaded (their projections and transcripts,
// bounded by MaxLoadedSessions and TranscriptBytes), not with turns.
// WEFT_HEAP_PROFILE names a file for the heap profile at the end.
func BenchmarkManyTurns(b *testing.B) {
	const turns, perSession = 10_000, 100
	for b.Loop() {
		h, _ := newBenchHost(b, host.Config{})
		ctx := context.Background()
		heap := func() float64 {
			runtime.GC()
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			return float64(m.HeapInuse)
		}
		var first float64
		var sid string
		for i := range turns {
			if i%perSession == 0 {
				s, err := h.CreateSession(ctx, api.CreateSessionParams{Model: "scripted:text"})
				if err != nil {
					b.Fatal(err)
				}
				sid = s.ID
			}
			r, err := h.StartRun(ctx, api.StartRunParams{SessionID: sid, Input: input("Say hello.")})
			if err != nil {
				b.Fatal(err)
			}
			if _, err := h.WaitRun(ctx, api.WaitRunParams{RunID: r.ID, TimeoutMs: 10_000}); err != nil {
				b.Fatal(err)
			}
			if i+1 == perSession {
				first = heap()
			}
		}
		last := heap()
		b.ReportMetric(first/(1<<20), "heap-MiB-100")
		b.ReportMetric(last/(1<<20), "heap-MiB-10000")
		b.ReportMetric((last-first)/float64(turns/perSession-1)/1024, "KiB/session")
		if p := os.Getenv("WEFT_HEAP_PROFILE"); p != "" {
			f, err := os.Create(p)
			if err != nil {
				b.Fatal(err)
			}
			pprof.Lookup("heap").WriteTo(f, 0)
			f.Close()
		}
		h.Close()
	}
}
