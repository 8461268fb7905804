package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"weft.dev/weft/event"
	"weft.dev/weft/llm"
)

// response is one step's assembled model output.
type response struct {
	Text          string
	Reasoning     string
	ToolCalls     []event.ToolCall
	Finish        string
	ProviderState json.RawMessage
	Usage         event.TokenUsage
}

// stream calls the model for one step, retrying failures that happened
// before any output, and writes message.completed and usage.
//
// A handover requested meanwhile ([Run.Handover]) cuts the call: stream
// then returns errHandedOver, having written no message.completed.
func (l *loop) stream(ctx context.Context, req *llm.Request) (*response, error) {
	p := l.cfg.Retry
	p.defaults()
	// The model call and its retries run under sctx, which the handover
	// cuts; the step's message is written under ctx, whole or not at all.
	sctx, release := l.cutOnHandover(ctx)
	defer release()
	for attempt := 1; ; attempt++ {
		out, started, err := l.streamOnce(sctx, req)
		if err == nil {
			if err := l.complete(ctx, out); err != nil {
				return nil, err
			}
			return out, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if sctx.Err() != nil {
			return nil, errHandedOver
		}
		le, ok := llm.AsError(err)
		if !ok {
			return nil, err
		}
		if started || !le.Retryable || attempt >= p.MaxAttempts {
			if started && le.Retryable {
				// The output already streamed cannot be taken back, so the
				// step fails; a caller may start a new run.
				return nil, &runError{kind: modelErrorKind(le), retryable: true,
					msg: fmt.Sprintf("step %d: the model stream failed after output began: %v", l.steps, le)}
			}
			return nil, err
		}
		delay := p.backoff(attempt, le.RetryAfter)
		if err := l.emit(ctx, event.ModelRetry, event.ModelRetryData{Step: l.steps, Attempt: attempt, DelayMs: delay.Milliseconds(), Error: le.Error()}); err != nil {
			return nil, err
		}
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-sctx.Done():
			t.Stop()
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, errHandedOver
		}
	}
}

// streamOnce makes one model request, handing text to the log as it
// arrives. started reports whether any output arrived.
func (l *loop) streamOnce(ctx context.Context, req *llm.Request) (out *response, started bool, err error) {
	out = &response{}
	var text, reasoning []byte
	type partial struct {
		id, name string
		args     []byte
	}
	var calls []*partial
	for ev, err := range l.cfg.Provider.Stream(ctx, req) {
		if err != nil {
			return nil, started, err
		}
		switch {
		case ev.Text != "":
			started = true
			text = append(text, ev.Text...)
			if err := l.log.Delta(ctx, l.run.ID, event.MessageDelta, l.steps, ev.Text); err != nil {
				return nil, started, err
			}
		case ev.Reasoning != "":
			started = true
			reasoning = append(reasoning, ev.Reasoning...)
			if err := l.log.Delta(ctx, l.run.ID, event.ReasoningDelta, l.steps, ev.Reasoning); err != nil {
				return nil, started, err
			}
		case ev.ToolCall != nil:
			started = true
			d := ev.ToolCall
			if d.Index < 0 || d.Index > 1024 {
				return nil, started, &llm.Error{Provider: "agent", Kind: llm.KindMalformed, Err: fmt.Errorf("tool call index %d out of range", d.Index)}
			}
			for len(calls) <= d.Index {
				calls = append(calls, &partial{})
			}
			c := calls[d.Index]
			if d.ID != "" {
				c.id = d.ID
			}
			if d.Name != "" {
				c.name = d.Name
			}
			c.args = append(c.args, d.Arguments...)
		case ev.Usage != nil:
			mergeUsage(&out.Usage, *ev.Usage)
		case ev.Finish != nil:
			out.Finish = ev.Finish.Reason
			out.ProviderState = ev.Finish.ProviderState
		}
	}
	if out.Finish == "" {
		return nil, started, &llm.Error{Provider: "agent", Kind: llm.KindStreamCut, Retryable: true, Err: fmt.Errorf("the model stream ended without a finish")}
	}
	out.Text, out.Reasoning = string(text), string(reasoning)
	for i, c := range calls {
		if c.id == "" {
			c.id = fmt.Sprintf("%s_s%d_c%d", l.run.ID, l.steps, i)
		}
		out.ToolCalls = append(out.ToolCalls, event.ToolCall{ID: c.id, Name: c.name, Arguments: string(c.args)})
	}
	return out, started, nil
}

// mergeUsage keeps the latest non-zero report of each counter: providers
// send cumulative counts, sometimes split over several events.
func mergeUsage(u *event.TokenUsage, n event.TokenUsage) {
	set := func(dst *int64, v int64) {
		if v != 0 {
			*dst = v
		}
	}
	set(&u.InputTokens, n.InputTokens)
	set(&u.OutputTokens, n.OutputTokens)
	set(&u.CacheReadTokens, n.CacheReadTokens)
	set(&u.CacheWriteTokens, n.CacheWriteTokens)
	set(&u.ReasoningTokens, n.ReasoningTokens)
}

// complete writes the step's assistant message and usage in one batch.
func (l *loop) complete(ctx context.Context, out *response) error {
	msg, err := event.New(l.run.ID, event.MessageCompleted, event.MessageCompletedData{
		Step: l.steps, Text: out.Text, Reasoning: out.Reasoning, ToolCalls: out.ToolCalls,
		FinishReason: out.Finish, ProviderState: out.ProviderState,
	})
	if err != nil {
		return err
	}
	if p := l.cfg.Price; p != nil {
		out.Usage.CostUSD = p.Cost(out.Usage)
	}
	use, err := event.New(l.run.ID, event.Usage, event.UsageData{Step: l.steps, Usage: out.Usage})
	if err != nil {
		return err
	}
	l.usage.Add(out.Usage)
	return l.emitMany(ctx, []event.Event{msg, use})
}
