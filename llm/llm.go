// Package llm defines weft's provider-neutral model interface: the request
// (system prompt, messages with tool calls and results, tools with JSON
// Schema), the typed stream of output a provider yields, and the typed
// errors that decide retries.
//
// Each provider lives in its own subpackage (llm/openai, llm/anthropic,
// llm/scripted). These types hold only what every provider means the same
// way; provider settings belong to each provider's constructor.
package llm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"time"

	"weft.dev/weft/event"
)

// Provider streams one model response.
//
// Stream returns a single-use iterator. It yields stream events in order and
// at most one error, after which it stops. A response that ends without the
// provider's terminal evidence (e.g. finish_reason and [DONE],
// response.completed, message_stop) must yield an *Error of kind
// KindStreamCut, never end quietly. The last item of a successful stream is
// an event with Finish set. Breaking out of the loop closes the stream.
//
// Providers do not retry: the agent loop does, before any output was
// yielded, using the *Error's Retryable and RetryAfter.
type Provider interface {
	Stream(ctx context.Context, req *Request) iter.Seq2[StreamEvent, error]
}

// Role is the author of a message.
type Role string

// Roles.
const (
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	// RoleTool carries one tool call's result.
	RoleTool Role = "tool"
)

// Request is one model call.
type Request struct {
	// Model is the provider's own model name (without the "provider:" prefix).
	Model    string
	System   string
	Messages []Message
	Tools    []ToolSpec
	// MaxTokens caps output tokens; zero means the provider's default.
	MaxTokens int
	// Temperature, if set, is passed through.
	Temperature *float64
}

// Message is one transcript entry.
type Message struct {
	Role Role
	// Content is the text of a user or assistant message, or a tool result's output.
	Content string
	// Reasoning is the assistant's reasoning text, if the provider returned one.
	Reasoning string
	// ToolCalls are the calls an assistant message asked for.
	ToolCalls []event.ToolCall
	// ToolCallID and ToolName identify the call a RoleTool message answers.
	ToolCallID string
	ToolName   string
	// IsError marks a tool result that reports a failure.
	IsError bool
	// ProviderState is opaque data from the provider's earlier response that
	// must be sent back (e.g. thinking signatures, encrypted reasoning).
	ProviderState json.RawMessage
}

// ToolSpec describes a tool to the model.
type ToolSpec struct {
	Name        string
	Description string
	// InputSchema is a JSON Schema object for the arguments.
	InputSchema json.RawMessage
}

// StreamEvent is one item of a streamed response. Exactly one field is set.
type StreamEvent struct {
	// Text is a fragment of assistant text.
	Text string
	// Reasoning is a fragment of reasoning text.
	Reasoning string
	// ToolCall is a fragment of a tool call.
	ToolCall *ToolCallDelta
	// Usage reports token counts; several may arrive and are summed
	// field-wise by taking the latest non-zero value of each.
	Usage *event.TokenUsage
	// Finish is the terminal item of a successful stream.
	Finish *Finish
}

// ToolCallDelta is a fragment of the tool call at Index (the position of the
// call in the response, from 0). The first fragment of a call carries ID and
// Name; Arguments fragments are concatenated in order.
type ToolCallDelta struct {
	Index     int
	ID        string
	Name      string
	Arguments string
}

// Finish reasons, normalised across providers.
const (
	FinishStop      = "stop"
	FinishToolCalls = "tool_calls"
	FinishLength    = "length"
	FinishOther     = "other"
)

// Finish ends a stream.
type Finish struct {
	// Reason is one of the Finish* constants.
	Reason string
	// ProviderState is opaque data to send back with this assistant message.
	ProviderState json.RawMessage
}

// Error kinds.
const (
	KindRateLimited = "rate_limited" // 429
	KindServer      = "server"       // 5xx, overloaded
	KindConnection  = "connection"   // network failure before a response
	KindAuth        = "auth"         // 401/403, missing key
	KindBadRequest  = "bad_request"  // other 4xx
	KindStreamCut   = "stream_cut"   // the stream ended without its terminal event
	KindMalformed   = "malformed"    // a chunk that is not valid JSON or not understood
	KindSafety      = "safety"       // the provider blocked the prompt or the response (safety, recitation, prohibited content)
	KindScript      = "script"       // the scripted provider's file is wrong or ran out
)

// Error is a typed provider failure.
type Error struct {
	// Provider names the provider, e.g. "openai-chat".
	Provider string
	Kind     string
	// StatusCode is the HTTP status, if any.
	StatusCode int
	// RetryAfter is the server's requested delay, if it gave one.
	RetryAfter time.Duration
	// Retryable reports whether the same request may succeed if sent again.
	Retryable bool
	Err       error
}

func (e *Error) Error() string {
	s := e.Provider + ": " + e.Kind
	if e.StatusCode != 0 {
		s += fmt.Sprintf(" (HTTP %d)", e.StatusCode)
	}
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

func (e *Error) Unwrap() error { return e.Err }

// AsError returns err's *Error, if any.
func AsError(err error) (*Error, bool) {
	var e *Error
	ok := errors.As(err, &e)
	return e, ok
}

// StatusError classifies an HTTP status into an *Error: 429 and 5xx are
// retryable; retryAfter is the parsed Retry-After header (zero if absent).
func StatusError(provider string, status int, retryAfter time.Duration, err error) *Error {
	e := &Error{Provider: provider, StatusCode: status, RetryAfter: retryAfter, Err: err}
	switch {
	case status == 429:
		e.Kind, e.Retryable = KindRateLimited, true
	case status == 408 || status == 409 || status >= 500:
		e.Kind, e.Retryable = KindServer, true
	case status == 401 || status == 403:
		e.Kind = KindAuth
	default:
		e.Kind = KindBadRequest
	}
	return e
}

// ParseRetryAfter parses a Retry-After header (delay-seconds or HTTP date),
// and the retry-after-ms header some providers send; zero if absent or bad.
func ParseRetryAfter(retryAfter, retryAfterMs string, now time.Time) time.Duration {
	if retryAfterMs != "" {
		var ms float64
		if _, err := fmt.Sscanf(retryAfterMs, "%g", &ms); err == nil && ms > 0 {
			return time.Duration(ms * float64(time.Millisecond))
		}
	}
	if retryAfter == "" {
		return 0
	}
	var secs float64
	if _, err := fmt.Sscanf(retryAfter, "%g", &secs); err == nil && secs > 0 {
		return time.Duration(secs * float64(time.Second))
	}
	if t, err := time.Parse(time.RFC1123, retryAfter); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}
