package host

import (
	"context"

	"weft.dev/weft/env"
	"weft.dev/weft/event"
)

// Checkpoint runs h's checkpoint hook around a step of calls in binding b
// of session sid, with between run between its two halves, and returns
// the events it recorded.
func Checkpoint(h *Host, ctx context.Context, sid string, b *env.Binding, calls []event.ToolCall, between func()) []event.Event {
	after := h.checkpoint(ctx, sid, b, calls)
	between()
	if after == nil {
		return nil
	}
	return after(ctx)
}
