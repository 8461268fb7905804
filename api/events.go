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

// Validate checks that the session is named and the limit is not
// negative; the cursor is checked against the log by the host.
func (p ReadEventsParams) Validate() error {
	return firstError(
		required("sessionId", p.SessionID),
		checkID("runId", p.RunID),
		nonNegative("limit", int64(p.Limit)),
	)
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

// Validate checks that the session is named; the cursor is checked
// against the log by the host.
func (p SubscribeParams) Validate() error {
	return firstError(required("sessionId", p.SessionID), checkID("runId", p.RunID))
}

// SubscribeResult names a subscription.
type SubscribeResult struct {
	SubscriptionID string `json:"subscriptionId"`
}

// UnsubscribeParams are the params of events/unsubscribe.
type UnsubscribeParams struct {
	SubscriptionID string `json:"subscriptionId"`
}

// Validate checks that the subscription is named.
func (p UnsubscribeParams) Validate() error {
	return required("subscriptionId", p.SubscriptionID)
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
type ToolsListParams struct {
	// SessionID, if set, adds the tools of the session's own MCP
	// servers to the host's and its configured servers'.
	SessionID string `json:"sessionId,omitempty"`
}

// Validate checks the session ID's size.
func (p ToolsListParams) Validate() error { return checkID("sessionId", p.SessionID) }

// ToolSpec describes a tool as the model sees it.
type ToolSpec struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"inputSchema"`
}

// ToolsListResult lists the tools runs are offered.
type ToolsListResult struct {
	Tools []ToolSpec `json:"tools"`
	// Failed are the MCP servers whose tools could not be listed (their
	// tools are left out, but for those they listed last).
	Failed []MCPServerFailure `json:"failed,omitempty"`
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

// InitializeParams are the params of initialize.
type InitializeParams struct {
	ClientInfo      Info   `json:"clientInfo" jsonschema:"the connecting program"`
	ProtocolVersion string `json:"protocolVersion" jsonschema:"the protocol version the client speaks"`
}

// Validate bounds what a client says of itself: its name and version
// at most [MaxTitleBytes] (the name is recorded as who answered each
// request), its cwd at most [MaxReasonBytes], the protocol version at
// most [MaxIDBytes].
func (p InitializeParams) Validate() error {
	return firstError(
		checkSize("clientInfo.name", len(p.ClientInfo.Name), MaxTitleBytes),
		checkSize("clientInfo.version", len(p.ClientInfo.Version), MaxTitleBytes),
		checkSize("clientInfo.cwd", len(p.ClientInfo.Cwd), MaxReasonBytes),
		checkSize("protocolVersion", len(p.ProtocolVersion), MaxIDBytes),
	)
}

// Capabilities tells a client what the connection supports.
type Capabilities struct {
	// Notifications is true when the server can push notifications on
	// this connection (WebSocket, stdio), false on HTTP POST.
	Notifications bool `json:"notifications"`
	// Batch is true: JSON-RPC batches are accepted.
	Batch bool `json:"batch"`
	// Discover is true: rpc.discover serves an OpenRPC document.
	Discover bool `json:"discover"`
}

// InitializeResult is the result of initialize. The server answers with
// its own protocolVersion; a client that cannot speak it should
// disconnect.
type InitializeResult struct {
	ServerInfo      Info         `json:"serverInfo"`
	ProtocolVersion string       `json:"protocolVersion"`
	Capabilities    Capabilities `json:"capabilities"`
}

// DiscoverParams are the (empty) params of rpc.discover.
type DiscoverParams struct{}

// Validate checks nothing.
func (p DiscoverParams) Validate() error { return nil }

// DiscoverResult is the result of rpc.discover: an OpenRPC 1.3 document
// describing every method, notification, event type and error code, as
// JSON. It encodes as the document itself.
type DiscoverResult json.RawMessage

// MarshalJSON returns the document.
func (d DiscoverResult) MarshalJSON() ([]byte, error) {
	if d == nil {
		return []byte("null"), nil
	}
	return d, nil
}

// UnmarshalJSON keeps a copy of the document.
func (d *DiscoverResult) UnmarshalJSON(b []byte) error {
	*d = append((*d)[:0], b...)
	return nil
}

// ModelCheckParams are the params of model/check: the model a run would
// name, or none for the one it would use by default.
type ModelCheckParams struct {
	// Model is the model a run would name; empty for the session's, else
	// the host's default.
	Model string `json:"model,omitempty" jsonschema:"the model a run would name; empty for the session's or the host's default"`
	// SessionID is the session whose model a run naming none would use;
	// empty for a new session's (the host's default).
	SessionID string `json:"sessionId,omitempty" jsonschema:"the session whose model applies when model is empty"`
}

// Validate checks the session ID's and the model name's sizes.
func (p ModelCheckParams) Validate() error {
	return firstError(checkID("sessionId", p.SessionID), checkSize("model", len(p.Model), MaxModelBytes))
}

// The sources of the model a run would use, in ModelCheckResult.Source.
const (
	ModelFromParams  = "params"
	ModelFromSession = "session"
	ModelFromDefault = "default"
)

// ModelCheckResult is the model a run would use, which the host can use.
// A model the host cannot use is an error instead: the one run/start
// would return (invalid_params naming the field model, with data.env
// when an API key is missing), so that a client can say so when it
// starts rather than at the first prompt.
type ModelCheckResult struct {
	Model string `json:"model" jsonschema:"the model a run would use"`
	// Source is where Model comes from: params, session or default.
	Source string `json:"source" jsonschema:"where the model comes from: params, session or default"`
}
