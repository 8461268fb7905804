package api

import (
	"encoding/json"

	"weft.dev/weft/event"
	"weft.dev/weft/store"
)

// Input is user input: a string or a list of content parts.
type Input []event.Part

// UnmarshalJSON accepts "text" or [{"type":"text","text":"…"}].
func (in *Input) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		*in = event.TextParts(s)
		return nil
	}
	var parts []event.Part
	if err := json.Unmarshal(b, &parts); err != nil {
		return Errorf(KindInvalidParams, "input: want a string or a list of content parts").With("field", "input")
	}
	*in = parts
	return nil
}

// CreateSessionParams are the params of session/create.
type CreateSessionParams struct {
	// Title is at most MaxTitleBytes.
	Title string `json:"title,omitempty"`
	Model string `json:"model,omitempty"`
	// Metadata is the client's own labels: at most MaxMetadataKeys
	// entries and MaxMetadataBytes in all.
	Metadata map[string]string `json:"metadata,omitempty"`
	Mounts   []event.Mount     `json:"mounts,omitempty"`
	// Network is the shells' network policy, "allow" or "deny"; empty
	// means the host's default (deny unless configured).
	Network string `json:"network,omitempty"`
	// Limits are the limits of each command the session runs (shell
	// calls, background processes, its MCP servers), field by field over
	// the host's defaults, each at most the host's ceiling
	// (docs/sandbox.md); nil means the host's defaults.
	Limits *event.Limits `json:"limits,omitempty"`
	// Policy is the session's approval policy, layered over the host's
	// (see docs/policy.md); nil means the host's alone.
	Policy *Policy `json:"policy,omitempty"`
	// Tools are tools the client executes itself: the model may call
	// them, and each call becomes a tool.call.requested that the client
	// answers with tool/result.
	Tools []ToolSpec `json:"tools,omitempty"`
	// MCPServers are MCP tool servers of this session, by name (at most
	// MaxMCPServers; see docs/protocol.md). They are stored in the
	// session's log, so they must hold no secret: a token goes in an
	// environment variable of the host, named as ${VAR} in a header or
	// env value, and the host's configuration must allow the session to
	// use it (mcpSessionEnv). Trusted is refused.
	MCPServers     map[string]event.MCPServer `json:"mcpServers,omitempty"`
	IdempotencyKey string                     `json:"idempotencyKey,omitempty"`
}

// SessionResult is a session, as returned by session/create and session/get.
type SessionResult struct {
	store.Session
	Replayed bool `json:"replayed,omitempty"`
}

// SessionGetParams are the params of session/get.
type SessionGetParams struct {
	SessionID string `json:"sessionId"`
}

// SessionIDParams name a session for a mutation (session/delete).
type SessionIDParams struct {
	SessionID      string `json:"sessionId"`
	IdempotencyKey string `json:"idempotencyKey,omitempty"`
}

// UpdateSessionParams are the params of session/update: the fields to
// change. A nil field stays as it is; at least one must be set.
type UpdateSessionParams struct {
	SessionID string `json:"sessionId"`
	// Title, if set, is the new title, at most MaxTitleBytes; "" clears
	// it.
	Title *string `json:"title,omitempty"`
	// Model, if set, is the model of the session's runs that name none
	// and start from now on (queued ones included), at most MaxModelBytes
	// and one the host can use; "" means the host's default model. A run
	// that has started keeps its model.
	Model          *string `json:"model,omitempty"`
	IdempotencyKey string  `json:"idempotencyKey,omitempty"`
}

// ListSessionsParams are the params of session/list.
type ListSessionsParams struct {
	// Cursor is the nextCursor of the previous page.
	Cursor string `json:"cursor,omitempty"`
	// Limit caps the page (default 100, at most 1000); a page is also cut
	// when its encoding would exceed about 1 MiB.
	Limit int `json:"limit,omitempty"`
}

// ListSessionsResult is a page of sessions.
type ListSessionsResult struct {
	Sessions   []store.Session `json:"sessions"`
	NextCursor string          `json:"nextCursor,omitempty"`
}

// DeleteResult acknowledges session/delete.
type DeleteResult struct {
	SessionID string `json:"sessionId"`
	Deleted   bool   `json:"deleted"`
	Replayed  bool   `json:"replayed,omitempty"`
}
