package host_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"weft.dev/weft/api"
	"weft.dev/weft/host"
	"weft.dev/weft/internal/telemetry"
	"weft.dev/weft/llm/scripted"
	"weft.dev/weft/store"
	"weft.dev/weft/store/memory"
)

// stepsScript is 19 steps of a short text and one no-op tool call, then
// a final answer: 20 steps a run, as in the agent's step-overhead
// benchmark.
var stepsScript = func() string {
	step := `{"text":"Calling the tool.","toolCalls":[{"name":"noop","arguments":{"n":1}}],"usage":{"inputTokens":100,"outputTokens":10}}`
	return `{"loop":true,"steps":[` + strings.Repeat(step+",", 19) + `{"text":"done"}]}`
}()

// BenchmarkStepTracing is the host's step overhead (a whole run of 20
// steps through host.StartRun and run/wait, divided by 20) with tracing
// off and on. On, every span goes through the batching processor to an
// OTLP/HTTP receiver in this process that reads and discards the
// requests, so the figure holds the spans' making, encoding and sending.
func BenchmarkStepTracing(b *testing.B) {
	for _, stName := range []string{"memory", "sqlite"} {
		for _, mode := range []string{"off", "on"} {
			b.Run(stName+"/"+mode, func(b *testing.B) {
				var st store.Store
				if stName == "memory" {
					st = memory.New()
				} else {
					st = openBenchStore(b)
				}
				cfg := benchHostConfig(b, st)
				cfg.ResolveModel = func(name string) (*host.Model, error) {
					p, err := scripted.Parse("steps.json", []byte(stepsScript))
					if err != nil {
						return nil, err
					}
					return &host.Model{Name: name, Provider: p, Model: "steps"}, nil
				}
				var tr *telemetry.Tracing
				if mode == "on" {
					rc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
						io.Copy(io.Discard, r.Body)
						w.Header().Set("Content-Type", "application/x-protobuf")
					}))
					b.Cleanup(rc.Close)
					var err error
					tr, err = telemetry.FromEnv(context.Background(), telemetry.Config{Getenv: func(k string) string {
						return map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": rc.URL, "OTEL_BSP_SCHEDULE_DELAY": "200"}[k]
					}})
					if err != nil {
						b.Fatal(err)
					}
					b.Cleanup(func() {
						ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
						defer cancel()
						tr.Shutdown(ctx)
					})
					cfg.TracerProvider = tr.TracerProvider()
				}
				h, err := host.New(context.Background(), cfg)
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { h.Close() })
				s, err := h.CreateSession(context.Background(), api.CreateSessionParams{Model: "scripted:steps"})
				if err != nil {
					b.Fatal(err)
				}
				b.ReportAllocs()
				runs := 0
				for b.Loop() {
					r, err := h.StartRun(context.Background(), api.StartRunParams{SessionID: s.ID, Input: input("go")})
					if err != nil {
						b.Fatal(err)
					}
					w, err := h.WaitRun(context.Background(), api.WaitRunParams{RunID: r.ID, TimeoutMs: 60000})
					if err != nil || w.Run.Status != "completed" {
						b.Fatalf("run: %v %v", err, w)
					}
					runs++
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(runs*20)/1e3, "µs/step")
				if tr != nil {
					if d := tr.Dropped(); d > 0 {
						b.Logf("%d spans dropped", d)
					}
				}
			})
		}
	}
}
