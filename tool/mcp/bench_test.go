package mcp

import (
	"context"
	"slices"
	"testing"
	"time"

	"weft.dev/weft/event"
	"weft.dev/weft/tool"
)

// BenchmarkStdioCall is a tool call's round trip through the registry
// (argument validation, budget) and the manager to a local stdio server
// (the Go SDK's, in the test binary) whose echo does no work: all of it
// is overhead over the server's own time. It reports the median
// (p50-µs) beside the mean.
func BenchmarkStdioCall(b *testing.B) {
	m := newManager(b, Config{Servers: map[string]event.MCPServer{"fake": fake(b, "tools")}})
	reg := tools(b, m, nil)
	c := &tool.Call{ID: "c", Arguments: []byte(`{"text":"ping"}`)}
	ctx := context.Background()
	if res := reg.Call(ctx, "mcp__fake__echo", c, tool.CallOptions{}); res.Output != "ping" {
		b.Fatalf("echo: %+v", res)
	}
	var d []time.Duration
	b.ReportAllocs()
	for b.Loop() {
		t0 := time.Now()
		res := reg.Call(ctx, "mcp__fake__echo", c, tool.CallOptions{})
		d = append(d, time.Since(t0))
		if res.IsError {
			b.Fatal(res.Output)
		}
	}
	slices.Sort(d)
	b.ReportMetric(float64(d[len(d)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(d[len(d)*99/100].Microseconds()), "p99-µs")
}
