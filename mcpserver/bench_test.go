package mcpserver_test

import (
	"context"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"weft.dev/weft/mcpserver"
	"weft.dev/weft/store"
	"weft.dev/weft/store/memory"
	"weft.dev/weft/store/sqlite"
)

// BenchmarkStartRun measures the MCP call that hands work to weft: a
// tools/call of start_run over the SDK's in-memory transport, from the
// client's call to its answer (the run is queued, not done). Cases: in a
// new session (the call creates it); in an existing session (busy=queue;
// the runs run beside the calls, as they would); and behind an active run
// that never ends (busy=queue; nothing runs, so this is the call alone).
// Over the memory store and over SQLite (the default store, WAL,
// synchronous=NORMAL, as `weft` opens it).
func BenchmarkStartRun(b *testing.B) {
	stores := map[string]func(b *testing.B) store.Store{
		"memory": func(*testing.B) store.Store { return memory.New() },
		"sqlite": func(b *testing.B) store.Store {
			st, err := sqlite.Open(context.Background(), sqlite.Config{Path: filepath.Join(b.TempDir(), "weft.db")})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { st.Close() })
			return st
		},
	}
	for _, name := range []string{"memory", "sqlite"} {
		for _, where := range []string{"new-session", "existing-session", "behind-active-run"} {
			b.Run(name+"/"+where, func(b *testing.B) {
				cs := connect(b, hostOn(b, stores[name](b)), nil)
				ctx := context.Background()
				args := map[string]any{"prompt": "bench", "busy": "queue"}
				switch where {
				case "existing-session":
					var r mcpserver.RunOutput
					call(b, cs, "start_run", args, &r)
					args["sessionId"] = r.SessionID
				case "behind-active-run":
					var r mcpserver.RunOutput
					call(b, cs, "start_run", map[string]any{"prompt": "block", "model": "slow"}, &r)
					args["sessionId"] = r.SessionID
					b.Cleanup(func() { call(b, cs, "cancel_run", map[string]any{"runId": r.RunID}, &r) })
				}
				b.ReportAllocs()
				var took []time.Duration
				for b.Loop() {
					t0 := time.Now()
					res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "start_run", Arguments: args})
					took = append(took, time.Since(t0))
					if err != nil || res.IsError {
						b.Fatalf("start_run: %v %v", err, res)
					}
				}
				reportPercentiles(b, took)
			})
		}
	}
}

// reportPercentiles reports the median and the 99th percentile of took
// in milliseconds.
func reportPercentiles(b *testing.B, took []time.Duration) {
	if len(took) == 0 {
		return
	}
	slices.Sort(took)
	ms := func(q float64) float64 { return float64(took[int(q*float64(len(took)-1))].Microseconds()) / 1000 }
	b.ReportMetric(ms(0.5), "p50-ms")
	b.ReportMetric(ms(0.99), "p99-ms")
}
