package api

import (
	"encoding/json"

	"weft.dev/weft/event"
)

// ReadEventsParams are the params of events/read.
type ReadEventsParams struct {
	SessionID string `json:"sessionId"`
	After     int64  `json:"after,omitempty"`
	// Limit caps the page (default 200, at most 1000); a page is also cut
	// when its encoding would exceed about 1 MiB (at least one event is
	// returned).
	Limit int    `json:"limit,omitempty"`
	RunID string `json:"runId,omitempty"`
}

// ReadEventsResult is a page of events.
type ReadEventsResult struct {
	Events     []event.Event `json:"events"`
	NextCursor int64         `json:"nextCursor"`
	HasMore    bool          `json:"hasMore"`
}

// SubscribeParams are the params of events/subscribe.
type SubscribeParams struct {
	SessionID string `json:"sessionId"`
	// After is the cursor: the first event delivered is After+1.
	After int64 `json:"after,omitempty"`
	// RunID, if set, keeps only that run's events.
	RunID string `json:"runId,omitempty"`
}

// SubscribeResult names a subscription.
type SubscribeResult struct {
	SubscriptionID string `json:"subscriptionId"`
}

// UnsubscribeParams are the params of events/unsubscribe.
type UnsubscribeParams struct {
	SubscriptionID string `json:"subscriptionId"`
}

// UnsubscribeResult acknowledges events/unsubscribe.
type UnsubscribeResult struct {
	Unsubscribed bool `json:"unsubscribed"`
}

// EventNotification is the params of events/event.
type EventNotification struct {
	SubscriptionID string      `json:"subscriptionId"`
	Event          event.Event `json:"event"`
}

// Reasons a subscription ends, in [ClosedNotification.Reason].
const (
	// ReasonOverflow: the subscriber fell behind (its buffer filled or its
	// connection stalled past the write deadline); resume after Cursor.
	ReasonOverflow = "overflow"
	// ReasonClosed: the host is shutting down or unloaded the session.
	ReasonClosed = "closed"
	// ReasonUnsubscribed: the client asked.
	ReasonUnsubscribed = "unsubscribed"
	// ReasonError: something else failed; Message says what.
	ReasonError = "error"
)

// ClosedNotification is the params of events/closed: the subscription
// ended; a client resumes with events/subscribe after Cursor.
type ClosedNotification struct {
	SubscriptionID string `json:"subscriptionId"`
	Reason         string `json:"reason"`
	// Cursor is the seq of the last event delivered (or the subscription's
	// starting cursor).
	Cursor  int64  `json:"cursor"`
	Message string `json:"message,omitempty"`
}

// ToolsListParams are the params of tools/list.
type ToolsListParams struct{}

// ToolSpec describes a tool as the model sees it.
type ToolSpec struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"inputSchema"`
}

// ToolsListResult lists the tools runs are offered.
type ToolsListResult struct {
	Tools []ToolSpec `json:"tools"`
}

// Info names a program on either end of a connection, as exchanged by
// initialize.
type Info struct {
	Name    string `json:"name"`
	Version string `json:"version,omitempty"`
	// Cwd is a server's working directory: where a host runs, which
	// resolves the relative paths of its own configuration (a scripted
	// model's script, say) and is where the key of a missing API key must
	// be set. Empty from clients, and from a server that does not say.
	Cwd string `json:"cwd,omitempty"`
}
