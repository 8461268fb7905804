package host_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"weft.dev/weft/api"
	"weft.dev/weft/event"
	"weft.dev/weft/host"
	"weft.dev/weft/store"
)

// prefillTurns writes a session of about n events directly to st, as
// completed turns of the shape a tool-using agent leaves: run.queued,
// run.started, message.user, then a step that calls a tool (step.started,
// message.delta, message.completed, usage, tool.call.started,
// tool.call.completed) and a final text step (step.started,
// message.delta, message.completed, usage), then run.completed: 15 events
// a turn, 4 of them in the transcript.
func prefillTurns(b *testing.B, st store.Store, id string, n int64) {
	b.Helper()
	w := newLogWriter(b, st, id)
	mk, text := w.event, prefillText
	pending := []event.Event{mk("", event.SessionCreated, event.SessionCreatedData{Title: "bench", Model: "scripted:text"})}
	for turn := 0; w.last()+int64(len(pending))+15 <= n; turn++ {
		run := fmt.Sprintf("run_hist_%s_%d", id, turn)
		call := event.ToolCall{ID: fmt.Sprintf("call_%d", turn), Name: "noop", Arguments: `{"n":1}`}
		pending = append(pending,
			mk(run, event.RunQueued, event.RunQueuedData{Model: "scripted:text", Input: event.TextParts("question " + text[:40])}),
			mk(run, event.RunStarted, event.RunStartedData{Model: "scripted:text"}),
			mk(run, event.MessageUser, event.MessageUserData{Content: event.TextParts("question " + text[:40])}),
			mk(run, event.StepStarted, event.StepData{Step: 1}),
			mk(run, event.MessageDelta, event.DeltaData{Step: 1, Text: "Calling the tool."}),
			mk(run, event.MessageCompleted, event.MessageCompletedData{Step: 1, Text: "Calling the tool.", ToolCalls: []event.ToolCall{call}}),
			mk(run, event.Usage, event.UsageData{Step: 1, Usage: event.TokenUsage{InputTokens: 100, OutputTokens: 10}}),
			mk(run, event.ToolCallStarted, event.ToolCallStartedData{Step: 1, ToolCall: call}),
			mk(run, event.ToolCallCompleted, event.ToolCallCompletedData{ID: call.ID, Name: call.Name, Output: "ok"}),
			mk(run, event.StepStarted, event.StepData{Step: 2}),
			mk(run, event.MessageDelta, event.DeltaData{Step: 2, Text: text}),
			mk(run, event.MessageCompleted, event.MessageCompletedData{Step: 2, Text: text}),
			mk(run, event.Usage, event.UsageData{Step: 2, Usage: event.TokenUsage{InputTokens: 120, OutputTokens: 40}}),
			mk(run, event.RunCompleted, event.RunEndedData{Steps: 2}),
		)
		if len(pending) >= 500 {
			w.append(pending)
			pending = nil
		}
	}
	if len(pending) > 0 {
		w.append(pending)
	}
}

// BenchmarkRunStart measures the start of a run in a session with a long
// history: from the StartRun call to the commit stamp of the run's first
// step.started (the run is admitted, its transcript is ready and the
// model is about to be asked). The session holds 0 or about 100,000
// events of completed tool-using turns (see prefillTurns).
//
//   - warm-ms: in a loaded session that has run before (the transcript is
//     kept by the session owner).
//   - cold (per iteration, on a new host over the same store): the first
//     run after the session is loaded. The first iteration finds no
//     transcript snapshot (the prefill writes none) and reads the whole
//     log: log-ms; its run stores one, which the later iterations read
//     with the log after it: p50-ms.
func BenchmarkRunStart(b *testing.B) {
	for _, n := range []int64{0, 100_000} {
		b.Run(fmt.Sprintf("events=%d/warm", n), func(b *testing.B) {
			h, st := newBenchHost(b, host.Config{})
			id := createOrPrefill(b, h, st, n)
			startRun(b, h, id) // load and warm
			b.ResetTimer()
			var ds []time.Duration
			for b.Loop() {
				ds = append(ds, startRun(b, h, id))
			}
			b.ReportMetric(median(ds), "p50-ms")
			b.ReportMetric(quantile(ds, 0.99), "p99-ms")
		})
		b.Run(fmt.Sprintf("events=%d/cold", n), func(b *testing.B) {
			h, st := newBenchHost(b, host.Config{})
			id := createOrPrefill(b, h, st, n)
			h.Close()
			var ds []time.Duration
			for b.Loop() {
				b.StopTimer()
				h, err := host.New(context.Background(), benchHostConfig(b, st))
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				ds = append(ds, startRun(b, h, id))
				b.StopTimer()
				h.Close()
				b.StartTimer()
			}
			b.ReportMetric(float64(ds[0])/float64(time.Millisecond), "log-ms")
			if len(ds) > 1 {
				ds = ds[1:]
			}
			b.ReportMetric(median(ds), "p50-ms")
		})
	}
}

// createOrPrefill returns a session of the "text" script holding about n
// events.
func createOrPrefill(b *testing.B, h *host.Host, st store.Store, n int64) string {
	b.Helper()
	if n == 0 {
		s, err := h.CreateSession(context.Background(), api.CreateSessionParams{Model: "scripted:text"})
		if err != nil {
			b.Fatal(err)
		}
		return s.ID
	}
	id := fmt.Sprintf("ses_hist%d", n)
	prefillTurns(b, st, id, n)
	return id
}

// startRun starts a run on session id, waits for it to complete, and
// returns the time from the call to its first step.started's commit.
func startRun(b *testing.B, h *host.Host, id string) time.Duration {
	b.Helper()
	ctx := context.Background()
	cur, err := h.GetSession(ctx, api.SessionGetParams{SessionID: id})
	if err != nil {
		b.Fatal(err)
	}
	t0 := time.Now()
	r, err := h.StartRun(ctx, api.StartRunParams{SessionID: id, Input: input("go on")})
	if err != nil {
		b.Fatal(err)
	}
	seq, err := h.Subscribe(ctx, api.SubscribeParams{SessionID: id, After: cur.LastSeq, RunID: r.ID})
	if err != nil {
		b.Fatal(err)
	}
	var d time.Duration
	for e, err := range seq {
		if err != nil {
			b.Fatal(err)
		}
		if e.Type == event.StepStarted && d == 0 {
			d = e.Time.Sub(t0)
		}
		if event.IsTerminalRun(e.Type) {
			if e.Type != event.RunCompleted {
				b.Fatalf("run ended %s: %s", e.Type, e.Data)
			}
			break
		}
	}
	return d
}
