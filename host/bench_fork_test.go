package host_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"weft.dev/weft/api"
	"weft.dev/weft/host"
)

// BenchmarkFork measures session/fork of a session of 0 or about 100,000
// events (SQLite; the source's history is completed tool-using turns, see
// prefillTurns), at its last event and in its middle: the call, from
// the params to the fork's session.forked committed. The fork holds
// none of the source's events, so the time does not grow with them.
func BenchmarkFork(b *testing.B) {
	for _, n := range []int64{1_000, 100_000} {
		for _, where := range []string{"end", "middle"} {
			b.Run(fmt.Sprintf("events=%d/%s", n, where), func(b *testing.B) {
				h, st := newBenchHost(b, host.Config{})
				id := createOrPrefill(b, h, st, n)
				ctx := context.Background()
				var at int64
				if where == "middle" {
					at = n/2 + 7 // inside a turn: back to its step's start
				}
				var ds []time.Duration
				for b.Loop() {
					t0 := time.Now()
					if _, err := h.ForkSession(ctx, api.ForkSessionParams{SessionID: id, AtSeq: at}); err != nil {
						b.Fatal(err)
					}
					ds = append(ds, time.Since(t0))
				}
				b.ReportMetric(median(ds), "p50-ms")
			})
		}
	}
}
