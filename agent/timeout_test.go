package agent_test

import (
	"context"
	"iter"
	"strings"
	"sync"
	"testing"
	"time"

	"weft.dev/weft/agent"
	"weft.dev/weft/event"
	"weft.dev/weft/llm"
)

// hangingModel is a provider whose first fails requests hit a limit of
// llm.Timeouts (after streaming text, if set); later ones answer "done".
type hangingModel struct {
	limit string
	fails int
	text  string

	mu    sync.Mutex
	calls int
}

func (m *hangingModel) Stream(ctx context.Context, req *llm.Request) iter.Seq2[llm.StreamEvent, error] {
	return func(yield func(llm.StreamEvent, error) bool) {
		m.mu.Lock()
		m.calls++
		n := m.calls
		m.mu.Unlock()
		if n > m.fails {
			if yield(llm.StreamEvent{Text: "done"}, nil) {
				yield(llm.StreamEvent{Finish: &llm.Finish{Reason: llm.FinishStop}}, nil)
			}
			return
		}
		if m.text != "" && !yield(llm.StreamEvent{Text: m.text}, nil) {
			return
		}
		yield(llm.StreamEvent{}, llm.TimeoutFrom("fake", &llm.TimeoutError{Limit: m.limit, After: 5 * time.Minute}))
	}
}

// TestTimeoutRetriedThenTyped: a model request that hits a timeout is
// retried as other transient failures are; when the retries run out, or
// the stream had begun, the run fails with kind "timeout", naming the
// limit.
func TestTimeoutRetriedThenTyped(t *testing.T) {
	t.Run("retried", func(t *testing.T) {
		f := newFixture(t)
		out, evs := f.run(context.Background(), agent.Config{Provider: &hangingModel{limit: llm.LimitFirstByte, fails: 2}}, "go", nil)
		if out.Type != event.RunCompleted || out.Text != "done" {
			t.Fatalf("outcome %+v", out)
		}
		retries := find[event.ModelRetryData](t, evs, event.ModelRetry)
		if len(retries) != 2 || !strings.Contains(retries[0].Error, "first-byte timeout") {
			t.Fatalf("retries %+v", retries)
		}
	})
	t.Run("retries run out", func(t *testing.T) {
		f := newFixture(t)
		m := &hangingModel{limit: llm.LimitConnect, fails: 100}
		out, _ := f.run(context.Background(), agent.Config{Provider: m}, "go", nil)
		if out.Type != event.RunFailed || out.Error.Kind != agent.KindTimeout || !out.Error.Retryable ||
			!strings.Contains(out.Error.Message, "(connect timeout)") {
			t.Fatalf("outcome %+v, error %+v", out, out.Error)
		}
		if m.calls != 5 {
			t.Errorf("%d attempts, want 5", m.calls)
		}
	})
	t.Run("after output began", func(t *testing.T) {
		f := newFixture(t)
		m := &hangingModel{limit: llm.LimitIdle, fails: 1, text: "partial"}
		out, _ := f.run(context.Background(), agent.Config{Provider: m}, "go", nil)
		if out.Type != event.RunFailed || out.Error.Kind != agent.KindTimeout || !out.Error.Retryable ||
			!strings.Contains(out.Error.Message, "(idle timeout)") || !strings.Contains(out.Error.Message, "after output began") {
			t.Fatalf("outcome %+v, error %+v", out, out.Error)
		}
	})
}
