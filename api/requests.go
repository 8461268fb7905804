package api

import (
	"context"

	"weft.dev/weft/event"
	"weft.dev/weft/store/record"
)

// DecideParams are the params of approval/decide.
type DecideParams struct {
	ApprovalID string `json:"approvalId"`
	// Decision is one of the approval's options: allow_once,
	// allow_session (also adds a session rule that allows such calls from
	// now on) or deny.
	Decision string `json:"decision"`
	// Message is shown to the model with a deny's result (at most
	// MaxReasonBytes).
	Message string `json:"message,omitempty"`
	// SessionID, if set, must be the session the approval belongs to.
	SessionID      string `json:"sessionId,omitempty"`
	IdempotencyKey string `json:"idempotencyKey,omitempty"`
}

// Validate checks the decision, the message's size, that the approval is
// named, and the idempotency key.
func (p DecideParams) Validate() error {
	return firstError(
		checkKey(p.IdempotencyKey),
		required("approvalId", p.ApprovalID),
		checkID("sessionId", p.SessionID),
		checkSize("message", len(p.Message), MaxReasonBytes),
		oneOf("decision", p.Decision, "decision %q: want allow_once, allow_session or deny",
			event.DecisionAllowOnce, event.DecisionAllowSession, event.DecisionDeny),
	)
}

// AnswerParams are the params of input/answer: the answer to a question
// the model asked with ask_user. Give Text, or Choice (an index into the
// question's choices).
type AnswerParams struct {
	RequestID string `json:"requestId"`
	Text      string `json:"text,omitempty"`
	Choice    *int   `json:"choice,omitempty"`
	// SessionID, if set, must be the session the question belongs to.
	SessionID      string `json:"sessionId,omitempty"`
	IdempotencyKey string `json:"idempotencyKey,omitempty"`
}

// Validate checks that the answer is a text or a choice (not both), its
// size, that the question is named, and the idempotency key.
func (p AnswerParams) Validate() error {
	err := firstError(
		checkKey(p.IdempotencyKey),
		required("requestId", p.RequestID),
		checkID("sessionId", p.SessionID),
		checkSize("text", len(p.Text), MaxInputBytes),
	)
	if err == nil && (p.Text == "") == (p.Choice == nil) {
		err = InvalidParam("text", "give the answer's text or a choice")
	}
	return err
}

// ToolResultParams are the params of tool/result: the result of a call of
// a tool the client declared and executes. Name the call by RequestID (of
// its tool.call.requested), or by CallID (with SessionID when several
// sessions could have a call with that ID).
type ToolResultParams struct {
	RequestID string `json:"requestId,omitempty"`
	CallID    string `json:"callId,omitempty"`
	SessionID string `json:"sessionId,omitempty"`
	// Output is what the model reads (at most MaxInputBytes).
	Output         string `json:"output"`
	IsError        bool   `json:"isError,omitempty"`
	IdempotencyKey string `json:"idempotencyKey,omitempty"`
}

// Validate checks that the call is named (by its request, or its call
// ID), the output's size, and the idempotency key.
func (p ToolResultParams) Validate() error {
	err := firstError(
		checkKey(p.IdempotencyKey),
		checkID("requestId", p.RequestID),
		checkID("callId", p.CallID),
		checkID("sessionId", p.SessionID),
		checkSize("output", len(p.Output), MaxInputBytes),
	)
	if err == nil && p.RequestID == "" && p.CallID == "" {
		err = InvalidParam("requestId", "name the call: requestId, or callId (and sessionId)")
	}
	return err
}

// RequestResult is a request record, as answered by approval/decide,
// input/answer, tool/result and request/get.
type RequestResult struct {
	record.Request
	Replayed bool `json:"replayed,omitempty"`
}

// RequestIDParams name a request.
type RequestIDParams struct {
	RequestID string `json:"requestId"`
}

// Validate checks that the request is named.
func (p RequestIDParams) Validate() error {
	if p.RequestID == "" {
		return InvalidParam("requestId", "the request's ID is required")
	}
	return checkID("requestId", p.RequestID)
}

// ListRequestsParams are the params of request/list (and approval/list,
// which lists approvals only).
type ListRequestsParams struct {
	// SessionID, if set, lists one session's requests.
	SessionID string `json:"sessionId,omitempty"`
	// Status is open (the default), resolved, expired, cancelled or all.
	Status string `json:"status,omitempty"`
	// Kind is approval, input or tool; empty means all kinds.
	Kind string `json:"kind,omitempty"`
	// Limit caps the list (default 100, at most 1000).
	Limit int `json:"limit,omitempty"`
}

// Validate checks the limit, the status and the kind.
func (p ListRequestsParams) Validate() error {
	return firstError(
		checkID("sessionId", p.SessionID),
		nonNegative("limit", int64(p.Limit)),
		oneOf("status", p.Status, "status %q: want open, resolved, expired, cancelled or all",
			"", "all", record.RequestOpen, record.RequestResolved, record.RequestExpired, record.RequestCancelled),
		oneOf("kind", p.Kind, "kind %q: want approval, input or tool",
			"", event.RequestApproval, event.RequestInput, event.RequestTool),
	)
}

// ListRequestsResult lists requests, oldest first.
type ListRequestsResult struct {
	Requests []record.Request `json:"requests"`
}

// Request methods.
const (
	MethodApprovalDecide = "approval/decide"
	MethodApprovalList   = "approval/list"
	MethodInputAnswer    = "input/answer"
	MethodToolResult     = "tool/result"
	MethodRequestList    = "request/list"
	MethodRequestGet     = "request/get"
)

// Client names who sends a request, for the records of who answered.
type Client struct {
	// Name is the program's name from initialize (on HTTP POST, from
	// the Weft-Client header), if it sent one.
	Name string
	// Transport is stdio, http, websocket or "in-process".
	Transport string
}

// TransportInProcess is the transport of a call made by the program
// that embeds the host, not sent by a client over a connection.
const TransportInProcess = "in-process"

// Remote reports whether the call came from a client over a connection
// (stdio, HTTP, WebSocket) rather than from the program that embeds the
// host: what a remote client supplies is held to the host's limits on
// sessions (see host.Config.Protected).
func (c Client) Remote() bool { return c.Transport != TransportInProcess }

type clientKey struct{}

// WithClient returns ctx carrying c; the rpc layer sets it on every
// request, and an embedder may set it on its own calls.
func WithClient(ctx context.Context, c Client) context.Context {
	return context.WithValue(ctx, clientKey{}, c)
}

// ClientFrom returns the client ctx carries, or one with transport
// "in-process".
func ClientFrom(ctx context.Context) Client {
	if c, ok := ctx.Value(clientKey{}).(Client); ok {
		return c
	}
	return Client{Transport: TransportInProcess}
}
