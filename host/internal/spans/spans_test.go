package spans_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.uber.org/goleak"

	"weft.dev/weft/event"
	"weft.dev/weft/host/internal/spans"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type discard struct{}

func (discard) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discard) Shutdown(context.Context) error                             { return nil }

func ev(t testing.TB, seq int64, typ event.Type, v any) event.Event {
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return event.Event{Seq: seq, SessionID: "ses", RunID: "run", Type: typ, Time: time.Now(), Data: data}
}

// BenchmarkObserveStep is the tracing work of one step (step.started,
// message.completed with usage, a tool call started and completed: three
// spans) through the SDK's batch processor, whose exporter discards them:
// what tracing adds to a step besides exporting.
func BenchmarkObserveStep(b *testing.B) {
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(discard{}))
	defer tp.Shutdown(context.Background())
	s := spans.New(tp, spans.Options{}).Session("ses")
	s.StartRun("run", "scripted:steps", spans.Parent{})
	call := event.ToolCall{ID: "call_1", Name: "noop", Arguments: `{"n":1}`}
	batches := [][]event.Event{
		{ev(b, 1, event.StepStarted, event.StepData{Step: 1})},
		{ev(b, 2, event.MessageCompleted, event.MessageCompletedData{Step: 1, Text: "Calling the tool.", ToolCalls: []event.ToolCall{call}}),
			ev(b, 3, event.Usage, event.UsageData{Step: 1, Usage: event.TokenUsage{InputTokens: 100, OutputTokens: 10}})},
		{ev(b, 4, event.ToolCallStarted, event.ToolCallStartedData{Step: 1, ToolCall: call})},
		{ev(b, 5, event.ToolCallCompleted, event.ToolCallCompletedData{ID: "call_1", Name: "noop", Output: "ok"})},
	}
	b.ReportAllocs()
	for b.Loop() {
		for _, batch := range batches {
			s.Observe(batch)
		}
	}
	s.EndRun("run", event.RunCompleted)
}
