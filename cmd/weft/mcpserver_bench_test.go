package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// BenchmarkMCPServerStdio measures the MCP call that hands work to weft
// through the real binary: a tools/call of start_run to a spawned `weft
// mcp-server --local` (its own host over the default SQLite store) on
// its stdin and stdout, from the call to its answer (the run queued), in
// a new session each time and in one session (busy=queue). The runs run
// beside the calls, as they would.
func BenchmarkMCPServerStdio(b *testing.B) {
	for _, where := range []string{"new-session", "existing-session"} {
		b.Run(where, func(b *testing.B) {
			dir := b.TempDir()
			script := filepath.Join(dir, "fast.json")
			if err := os.WriteFile(script, []byte(`{"loop":true,"steps":[{"text":"hi {{input}}"}]}`), 0o644); err != nil {
				b.Fatal(err)
			}
			c := exec.Command(weftBin, "mcp-server", "--local")
			c.Dir = filepath.Join(dir, "work") // not the home: the host keeps its state from sessions
			if err := os.Mkdir(c.Dir, 0o755); err != nil {
				b.Fatal(err)
			}
			c.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "XDG_CONFIG_HOME=" + filepath.Join(dir, "config"),
				"WEFT_STORE=" + filepath.Join(dir, "weft.db"), "WEFT_MODEL=scripted:" + script}
			c.Stderr = os.Stderr
			ctx := context.Background()
			cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench"}, nil).Connect(ctx, &mcp.CommandTransport{Command: c}, nil)
			if err != nil {
				b.Fatal(err)
			}
			defer cs.Close()
			args := map[string]any{"prompt": "bench", "busy": "queue"}
			if where == "existing-session" {
				res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "start_run", Arguments: args})
				if err != nil || res.IsError {
					b.Fatalf("start_run: %v %v", err, res)
				}
				args["sessionId"] = res.StructuredContent.(map[string]any)["sessionId"]
			}
			var took []time.Duration
			for b.Loop() {
				t0 := time.Now()
				res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "start_run", Arguments: args})
				took = append(took, time.Since(t0))
				if err != nil || res.IsError {
					b.Fatalf("start_run: %v %v", err, res)
				}
			}
			slices.Sort(took)
			ms := func(q float64) float64 { return float64(took[int(q*float64(len(took)-1))].Microseconds()) / 1000 }
			b.ReportMetric(ms(0.5), "p50-ms")
			b.ReportMetric(ms(0.99), "p99-ms")
		})
	}
}
