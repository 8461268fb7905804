package agent

import (
	"context"
	"sync"
	"time"

	"weft.dev/weft/env"
	"weft.dev/weft/event"
	"weft.dev/weft/llm"
	"weft.dev/weft/tool"
)

// callTools records every call as started, runs them in parallel, records
// each result as it finishes, and returns the results in the model's
// order. When ctx is cancelled the tools are cancelled with it and their
// closing results are still written, so that no call is left open.
func (l *loop) callTools(ctx context.Context, calls []event.ToolCall) ([]llm.Message, error) {
	started := make([]event.Event, 0, len(calls))
	for _, c := range calls {
		e, err := event.New(l.run.ID, event.ToolCallStarted, event.ToolCallStartedData{Step: l.steps, ToolCall: c})
		if err != nil {
			return nil, err
		}
		started = append(started, e)
	}
	if err := l.emitMany(ctx, started); err != nil {
		return nil, err
	}
	var b = l.binding()
	results := make([]llm.Message, len(calls))
	errs := make([]error, len(calls))
	var wg sync.WaitGroup
	// Results are written even when ctx is cancelled: the calls must close.
	wctx := context.WithoutCancel(ctx)
	for i, c := range calls {
		wg.Go(func() {
			t0 := time.Now()
			var res tool.Result
			if l.cfg.Tools == nil {
				res = tool.Result{Output: "error: no tools are available", IsError: true}
			} else {
				res = l.cfg.Tools.Call(ctx, c.Name, &tool.Call{
					ID: c.ID, SessionID: l.run.SessionID, RunID: l.run.ID,
					Arguments: []byte(c.Arguments), Env: b, Background: l.run.Background,
				}, tool.CallOptions{Timeout: l.cfg.ToolTimeout, ResultBudget: l.cfg.ResultBudget})
			}
			results[i] = llm.Message{Role: llm.RoleTool, ToolCallID: c.ID, ToolName: c.Name, Content: res.Output, IsError: res.IsError}
			errs[i] = l.emit(wctx, event.ToolCallCompleted, event.ToolCallCompletedData{
				ID: c.ID, Name: c.Name, Output: res.Output, IsError: res.IsError, Truncated: res.Truncated,
				DurationMs: time.Since(t0).Milliseconds(),
			})
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return results, err
		}
	}
	return results, nil
}

func (l *loop) binding() *env.Binding {
	if l.run.Env == nil {
		return nil
	}
	return l.run.Env()
}
