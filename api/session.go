package api

import (
	"encoding/base64"
	"encoding/json"
	"errors"

	"weft.dev/weft/event"
	"weft.dev/weft/store/record"
)

// Input is user input: a string or a list of content parts, text
// ({"type":"text","text":…}) and images ({"type":"image","mediaType":
// "image/png","data":<base64>}; see [event.Part]).
type Input []event.Part

// UnmarshalJSON accepts "text" or [{"type":"text","text":"…"}]; null is
// no input, as a nil Input encodes.
func (in *Input) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*in = nil
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		*in = event.TextParts(s)
		return nil
	}
	var parts []event.Part
	if err := json.Unmarshal(b, &parts); err != nil {
		var b64 base64.CorruptInputError
		if errors.As(err, &b64) {
			return Errorf(KindInvalidParams, "input: an image's data is not valid base64 (%v)", err).With("field", "input")
		}
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
	MCPServers map[string]event.MCPServer `json:"mcpServers,omitempty"`
	// Budget caps what the session's runs spend together (tokens, cost,
	// steps, wall time) and says what a run does on reaching a limit;
	// its fields are laid over the host's default session budget. Nil
	// means the host's default.
	Budget         *event.Budget `json:"budget,omitempty"`
	IdempotencyKey string        `json:"idempotencyKey,omitempty"`
}

// Validate checks the sizes and shapes of a session's params: title,
// metadata, network, the model's length, the mounts' IDs (slugs), the
// client's tools, the MCP servers' number and size, the idempotency key.
// The host checks the rest: that it can use the model, the policy over
// its own, the MCP servers' configuration and the mounts against its file
// system.
func (p CreateSessionParams) Validate() error {
	return firstError(
		checkKey(p.IdempotencyKey),
		checkSize("title", len(p.Title), MaxTitleBytes),
		checkMetadata(p.Metadata),
		oneOf("network", p.Network, "network %q: want allow or deny", "", "allow", "deny"),
		checkSize("model", len(p.Model), MaxModelBytes),
		checkMounts("mounts", p.Mounts),
		checkTools("tools", p.Tools),
		checkMCPServers(p.MCPServers),
		checkBudget("budget", p.Budget),
	)
}

// SessionResult is a session, as returned by session/create and session/get.
type SessionResult struct {
	record.Session
	Replayed bool `json:"replayed,omitempty"`
	// Transcript is the conversation, when session/get asked for it.
	Transcript *Transcript `json:"transcript,omitempty"`
}

// SessionGetParams are the params of session/get.
type SessionGetParams struct {
	SessionID string `json:"sessionId"`
	// Transcript, if set, adds the session's conversation to the result:
	// "compacted" is what the model is sent next (the latest compaction's
	// summary and what follows it), "full" every message of the log as if
	// it had never been compacted.
	Transcript string `json:"transcript,omitempty"`
}

// Transcript views of session/get.
const (
	TranscriptCompacted = "compacted"
	TranscriptFull      = "full"
)

// Validate checks that the session is named and the view known.
func (p SessionGetParams) Validate() error {
	return firstError(required("sessionId", p.SessionID),
		oneOf("transcript", p.Transcript, "transcript %q: want compacted or full", "", TranscriptCompacted, TranscriptFull))
}

// Transcript is a session's conversation, as session/get shows it.
type Transcript struct {
	// View is compacted or full.
	View     string              `json:"view"`
	Messages []TranscriptMessage `json:"messages"`
	// Compactions counts the compactions in the log.
	Compactions int `json:"compactions"`
	// Omitted counts the oldest messages left out to keep the reply
	// within its size cap.
	Omitted int `json:"omitted,omitempty"`
}

// TranscriptMessage is one message of a [Transcript].
type TranscriptMessage struct {
	// Role is user, assistant or tool.
	Role      string           `json:"role"`
	Content   string           `json:"content,omitempty"`
	Reasoning string           `json:"reasoning,omitempty"`
	ToolCalls []event.ToolCall `json:"toolCalls,omitempty"`
	// ToolCallID and ToolName identify the call a tool message answers.
	ToolCallID string `json:"toolCallId,omitempty"`
	ToolName   string `json:"toolName,omitempty"`
	IsError    bool   `json:"isError,omitempty"`
}

// CompactParams are the params of session/compact.
type CompactParams struct {
	SessionID      string `json:"sessionId"`
	IdempotencyKey string `json:"idempotencyKey,omitempty"`
}

// Validate checks the session id and the idempotency key.
func (p CompactParams) Validate() error {
	return firstError(checkKey(p.IdempotencyKey), required("sessionId", p.SessionID), checkID("sessionId", p.SessionID))
}

// CompactResult is the result of session/compact: the compaction the
// context.compacted event at Seq records.
type CompactResult struct {
	SessionID string `json:"sessionId"`
	Seq       int64  `json:"seq"`
	// UpToSeq, TokensBefore, TokensAfter and Summary are the event's.
	UpToSeq      int64  `json:"upToSeq"`
	TokensBefore int64  `json:"tokensBefore"`
	TokensAfter  int64  `json:"tokensAfter"`
	Summary      string `json:"summary"`
	Replayed     bool   `json:"replayed,omitempty"`
}

// SessionIDParams name a session for a mutation (session/delete).
type SessionIDParams struct {
	SessionID      string `json:"sessionId"`
	IdempotencyKey string `json:"idempotencyKey,omitempty"`
}

// Validate checks the idempotency key. (An unknown or empty session is
// the host's ErrNotFound.)
func (p SessionIDParams) Validate() error {
	return firstError(checkKey(p.IdempotencyKey), checkID("sessionId", p.SessionID))
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
	Model *string `json:"model,omitempty"`
	// Budget, if set, is the session's budget from now on, whole (a
	// limit it leaves zero is no limit; {} removes the budget). A limit
	// at or below what the session has already spent is refused
	// (invalid_params naming it). A run under way is held to it from its
	// next step.
	Budget         *event.Budget `json:"budget,omitempty"`
	IdempotencyKey string        `json:"idempotencyKey,omitempty"`
}

// Validate checks that the session is named and something changes, and
// the sizes of what does; the host checks that it can use the model.
func (p UpdateSessionParams) Validate() error {
	err := firstError(
		checkKey(p.IdempotencyKey),
		required("sessionId", p.SessionID),
	)
	switch {
	case err != nil:
		return err
	case p.Title == nil && p.Model == nil && p.Budget == nil:
		return InvalidParam("title", "nothing to change: give title, model or budget")
	case p.Budget != nil && checkBudget("budget", p.Budget) != nil:
		return checkBudget("budget", p.Budget)
	case p.Title != nil && len(*p.Title) > MaxTitleBytes:
		return checkSize("title", len(*p.Title), MaxTitleBytes)
	case p.Model != nil:
		return checkSize("model", len(*p.Model), MaxModelBytes)
	}
	return nil
}

// ListSessionsParams are the params of session/list.
type ListSessionsParams struct {
	// Cursor is the nextCursor of the previous page.
	Cursor string `json:"cursor,omitempty"`
	// Limit caps the page (default 100, at most 1000); a page is also cut
	// when its encoding would exceed about 1 MiB.
	Limit int `json:"limit,omitempty"`
}

// Validate checks the limit and the cursor's form; the host checks that
// the cursor names a session.
func (p ListSessionsParams) Validate() error {
	if err := nonNegative("limit", int64(p.Limit)); err != nil {
		return err
	}
	if len(p.Cursor) > MaxIDBytes {
		return Errorf(KindCursorInvalid, "cursor %q is not a session/list cursor (pass the nextCursor of the previous page)", clip(p.Cursor, 64)).
			With("cursor", clip(p.Cursor, 64))
	}
	return nil
}

// ListSessionsResult is a page of sessions.
type ListSessionsResult struct {
	Sessions   []record.Session `json:"sessions"`
	NextCursor string           `json:"nextCursor,omitempty"`
}

// DeleteResult acknowledges session/delete.
type DeleteResult struct {
	SessionID string `json:"sessionId"`
	Deleted   bool   `json:"deleted"`
	Replayed  bool   `json:"replayed,omitempty"`
}
