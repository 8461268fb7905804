package journal_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"weft.dev/weft/agent"
	"weft.dev/weft/event"
	"weft.dev/weft/host/internal/journal"
	"weft.dev/weft/llm/scripted"
	"weft.dev/weft/store"
	"weft.dev/weft/store/memory"
	"weft.dev/weft/store/sqlite"
	"weft.dev/weft/tool"
)

// benchStepsPerRun is the number of model calls in one benchmarked run:
// benchStepsPerRun-1 steps that call a no-op tool, then a final answer.
const benchStepsPerRun = 20

// stepClock is an agent.Log that stamps the time each step.started is
// committed, so the benchmark can measure step to step.
type stepClock struct {
	agent.Log
	mu     sync.Mutex
	starts []time.Time
}

func (c *stepClock) Append(ctx context.Context, evs ...event.Event) ([]event.Event, error) {
	out, err := c.Log.Append(ctx, evs...)
	for _, e := range evs {
		if e.Type == event.StepStarted {
			c.mu.Lock()
			c.starts = append(c.starts, time.Now())
			c.mu.Unlock()
		}
	}
	return out, err
}

// BenchmarkStepOverhead measures what weft adds to one step when the model
// costs nothing: the scripted provider at zero delay streams a short text
// and one call of a no-op tool; everything else (events, journal, store
// transactions, tool dispatch) is real. One iteration is one run of
// benchStepsPerRun steps on a journal over the named store. The step time
// is measured between consecutive step.started commits within a run;
// median and p99 are over every step of every iteration. With window=1M
// the model has a context window of a million tokens: the loop estimates
// every request but never needs to compact (issue 24: ≤ 5 % over
// window=none).
func BenchmarkStepOverhead(b *testing.B) {
	for _, backend := range []string{"sqlite", "memory"} {
		for _, window := range []int{0, 1 << 20} {
			name := "store=" + backend + "/window=none"
			if window > 0 {
				name = "store=" + backend + "/window=1M"
			}
			b.Run(name, func(b *testing.B) { benchStepOverhead(b, backend, window) })
		}
	}
}

func benchStepOverhead(b *testing.B, backend string, window int) {
	ctx := context.Background()
	var st store.Store
	if backend == "sqlite" {
		s, err := sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(b.TempDir(), "weft.db")})
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		st = s
	} else {
		st = memory.New()
	}
	j, err := journal.Create(ctx, journal.Config{Store: st}, "ses_bench", event.SessionCreatedData{Title: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	defer j.Close()
	steps := make([]string, 0, benchStepsPerRun)
	for range benchStepsPerRun - 1 {
		steps = append(steps, `{"text": "Calling the tool now.", "toolCalls": [{"name": "noop", "arguments": {"n": 1}}]}`)
	}
	steps = append(steps, `{"text": "All done, nothing left to do."}`)
	p, err := scripted.Parse("bench.json", []byte(`{"steps": [`+strings.Join(steps, ",")+`]}`))
	if err != nil {
		b.Fatal(err)
	}
	type noopIn struct {
		N int `json:"n"`
	}
	noop, err := tool.Func("noop", "Does nothing.", func(context.Context, *tool.Call, noopIn) (tool.Result, error) {
		return tool.Result{Output: "ok"}, nil
	})
	if err != nil {
		b.Fatal(err)
	}
	reg := tool.NewRegistry()
	if err := reg.Add(noop); err != nil {
		b.Fatal(err)
	}
	cfg := agent.Config{Provider: p, Model: "bench", Tools: reg, MaxSteps: benchStepsPerRun, System: "bench", ContextWindow: window}
	var perStep []time.Duration
	runs := 0
	b.ReportAllocs()
	for b.Loop() {
		runs++
		runID := fmt.Sprintf("run_%d", runs)
		b.StopTimer()
		q, _ := event.New(runID, event.RunQueued, event.RunQueuedData{Model: "scripted:bench", Input: event.TextParts("go")})
		if _, err := j.Append(ctx, q); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		clock := &stepClock{Log: j}
		out, err := agent.Execute(ctx, cfg, clock, agent.Run{
			ID: runID, SessionID: "ses_bench", ModelName: "scripted:bench",
			Input: event.TextParts("go"),
		})
		end := time.Now()
		if err != nil || out.Type != event.RunCompleted || out.Steps != benchStepsPerRun {
			b.Fatalf("run %d: %+v, %v", runs, out, err)
		}
		for i := 1; i < len(clock.starts); i++ {
			perStep = append(perStep, clock.starts[i].Sub(clock.starts[i-1]))
		}
		// The last step runs to the terminal event.
		perStep = append(perStep, end.Sub(clock.starts[len(clock.starts)-1]))
	}
	slices.Sort(perStep)
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*benchStepsPerRun), "ns/step")
	b.ReportMetric(perStep[len(perStep)/2].Seconds()*1e3, "p50-ms/step")
	b.ReportMetric(perStep[len(perStep)*99/100].Seconds()*1e3, "p99-ms/step")
}
