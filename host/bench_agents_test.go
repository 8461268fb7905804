package host_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"weft.dev/weft/api"
	"weft.dev/weft/event"
	"weft.dev/weft/host"
	"weft.dev/weft/store/record"
)

// BenchmarkSpawnToFirstEvent measures how long a subagent takes to get
// going, beside a plain run (issue 25: at most 5 ms more), on a SQLite
// store: "plain" from run/start to the run's run.started, "subagent" from
// the parent's spawn_agent call (its tool.call.started) to the child's
// run.started, both by the host's event times. Each iteration is one
// fresh session (and, for subagent, one parent run that spawns one
// child); the metric is the mean of that interval, ms/first-event.
func BenchmarkSpawnToFirstEvent(b *testing.B) {
	agentScripts["spawnone"] = `{"steps":[{"toolCalls":[{"name":"spawn_agent","arguments":{"prompt":"p","model":"scripted:child"}}]},{"text":"ok"},{"text":"ok"}]}`
	b.Cleanup(func() { delete(agentScripts, "spawnone") })
	ctx := context.Background()
	startedAt := func(b *testing.B, h *host.Host, sid, runID string) time.Time {
		evs, err := h.ReadEvents(ctx, api.ReadEventsParams{SessionID: sid, Limit: 1000})
		if err != nil {
			b.Fatal(err)
		}
		i := slices.IndexFunc(evs.Events, func(e event.Event) bool { return e.Type == event.RunStarted && (runID == "" || e.RunID == runID) })
		if i < 0 {
			b.Fatalf("no run.started in session %s", sid)
		}
		return evs.Events[i].Time
	}
	waitRun := func(b *testing.B, h *host.Host, id string) {
		r, err := h.WaitRun(ctx, api.WaitRunParams{RunID: id, TimeoutMs: 30000})
		if err != nil || r.Run.Status != record.RunCompleted {
			b.Fatalf("run %s: %+v %v", id, r, err)
		}
	}
	b.Run("plain", func(b *testing.B) {
		h := newAgentHost(b, openBenchStore(b), nil)
		var total time.Duration
		for b.Loop() {
			s, err := h.CreateSession(ctx, api.CreateSessionParams{Model: "scripted:child"})
			if err != nil {
				b.Fatal(err)
			}
			t0 := time.Now()
			r, err := h.StartRun(ctx, api.StartRunParams{SessionID: s.ID, Input: input("go")})
			if err != nil {
				b.Fatal(err)
			}
			waitRun(b, h, r.ID)
			total += startedAt(b, h, s.ID, r.ID).Sub(t0)
		}
		b.ReportMetric(float64(total.Microseconds())/1000/float64(b.N), "ms/first-event")
	})
	b.Run("subagent", func(b *testing.B) {
		h := newAgentHost(b, openBenchStore(b), nil)
		var total time.Duration
		for b.Loop() {
			s, err := h.CreateSession(ctx, api.CreateSessionParams{Model: "scripted:spawnone"})
			if err != nil {
				b.Fatal(err)
			}
			r, err := h.StartRun(ctx, api.StartRunParams{SessionID: s.ID, Input: input("go")})
			if err != nil {
				b.Fatal(err)
			}
			waitRun(b, h, r.ID)
			evs, err := h.ReadEvents(ctx, api.ReadEventsParams{SessionID: s.ID, Limit: 1000})
			if err != nil {
				b.Fatal(err)
			}
			i := slices.IndexFunc(evs.Events, func(e event.Event) bool { return e.Type == event.ToolCallStarted })
			if i < 0 {
				b.Fatal("no spawn_agent call")
			}
			called := evs.Events[i].Time
			ps, err := h.ListProcesses(ctx, api.ProcessListParams{SessionID: s.ID})
			if err != nil || len(ps.Processes) != 1 {
				b.Fatalf("processes: %+v %v", ps, err)
			}
			a := ps.Processes[0].Spec.Agent
			if _, err := h.AwaitProcess(ctx, api.ProcessAwaitParams{ID: ps.Processes[0].ID, TimeoutMs: 30000}); err != nil {
				b.Fatal(err)
			}
			total += startedAt(b, h, a.SessionID, "").Sub(called)
		}
		b.ReportMetric(float64(total.Microseconds())/1000/float64(b.N), "ms/first-event")
	})
}
