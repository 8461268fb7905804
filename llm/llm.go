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
	"strings"
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
//
// A provider reads req (its Messages above all) only until the stream
// ends or is closed, and keeps nothing of it: the agent loop reuses the
// memory of a run's messages for the session's next run.
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
	// Purpose says what the request is for; empty means an ordinary step
	// of the agent loop. Providers send every request alike: it is for
	// providers that answer without a model, such as the scripted one,
	// and for logs.
	Purpose string
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
	// Attachments are the images of a user message or of a tool result
	// (an assistant message has none), after Content. Each provider
	// sends them in its own wire shape.
	Attachments []Attachment
	// ProviderState is opaque data from the provider's earlier response that
	// must be sent back (e.g. thinking signatures, encrypted reasoning).
	ProviderState json.RawMessage
}

// Attachment is binary content of a message: an image, whose MediaType
// is one of event.ImageMediaTypes (the host checks that before an image
// reaches a transcript). Data is read-only: transcripts share it.
type Attachment struct {
	MediaType string
	Data      []byte
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
	KindTimeout     = "timeout"      // a limit of [Timeouts] was hit; Err is a *TimeoutError naming it
	// KindContextOverflow: the request did not fit the model's context
	// window (OpenAI's context_length_exceeded, Anthropic's "prompt is
	// too long", Gemini's "exceeds the maximum number of tokens"). The
	// agent loop compacts the conversation and retries the step once.
	KindContextOverflow = "context_overflow"
)

// PurposeSummary is the [Request.Purpose] of the request by which the
// agent loop asks a model to summarise the conversation so far, to
// compact it.
const PurposeSummary = "summary"

// Overflow returns e with its kind set to [KindContextOverflow] (and not
// retryable) when its text holds one of wordings, the phrases by which a
// provider says that a request exceeded the context window; otherwise e
// unchanged. Each provider passes its own wordings.
func Overflow(e *Error, wordings ...string) *Error {
	if e == nil || e.Err == nil {
		return e
	}
	msg := strings.ToLower(e.Err.Error())
	for _, w := range wordings {
		if strings.Contains(msg, strings.ToLower(w)) {
			e.Kind, e.Retryable, e.RetryAfter = KindContextOverflow, false, 0
			break
		}
	}
	return e
}

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

// Default limits of [Timeouts]: what a real model needs at worst, with a
// margin. A local server may load a model for a minute or more before its
// first byte, a large prompt's prefill takes minutes on a slow machine,
// and a reasoning model may think for minutes between two chunks (Codex
// CLI's stream idle timeout is also five minutes).
const (
	DefaultConnectTimeout   = 30 * time.Second
	DefaultFirstByteTimeout = 5 * time.Minute
	DefaultIdleTimeout      = 5 * time.Minute
)

// Timeouts bound the phases of one model request, so that a server that
// accepts a request and never answers, or stalls in the middle of a
// stream, fails the request with a retryable *[Error] of kind
// [KindTimeout] instead of holding the run forever. The whole request
// stays bounded only by the context passed to [Provider.Stream]: a
// response that keeps streaming may last as long as it needs.
//
// The zero value of each field means its default (DefaultConnectTimeout,
// DefaultFirstByteTimeout, DefaultIdleTimeout); a negative value means no
// limit for that phase.
type Timeouts struct {
	// Connect bounds getting a connection to the server: the DNS lookup,
	// the dial and the TLS handshake.
	Connect time.Duration
	// FirstByte bounds the wait from the connection to the first byte of
	// the response's body: sending the request, the server's queue and
	// prefill, and the response's header.
	FirstByte time.Duration
	// Idle bounds each wait for the next bytes of the response's body
	// once the first arrived: the silence between two stream chunks.
	Idle time.Duration
}

// Limits of [Timeouts], as [TimeoutError.Limit] names them.
const (
	LimitConnect   = "connect"
	LimitFirstByte = "firstByte"
	LimitIdle      = "idle"
)

// Resolve returns t with every zero field set to its default and every
// negative one set to zero (no limit).
func (t Timeouts) Resolve() Timeouts {
	pick := func(v, def time.Duration) time.Duration {
		switch {
		case v == 0:
			return def
		case v < 0:
			return 0
		}
		return v
	}
	return Timeouts{
		Connect:   pick(t.Connect, DefaultConnectTimeout),
		FirstByte: pick(t.FirstByte, DefaultFirstByteTimeout),
		Idle:      pick(t.Idle, DefaultIdleTimeout),
	}
}

// TimeoutError reports that the limit of [Timeouts] named Limit was hit.
// It is the Err of an *[Error] of kind [KindTimeout].
type TimeoutError struct {
	// Limit is LimitConnect, LimitFirstByte or LimitIdle.
	Limit string
	// After is the limit's duration.
	After time.Duration
}

func (e *TimeoutError) Error() string {
	switch e.Limit {
	case LimitConnect:
		return fmt.Sprintf("no connection to the model server within %v (connect timeout)", e.After)
	case LimitFirstByte:
		return fmt.Sprintf("the model server sent nothing for %v after the request (first-byte timeout)", e.After)
	case LimitIdle:
		return fmt.Sprintf("the model stream sent nothing for %v (idle timeout)", e.After)
	}
	return fmt.Sprintf("%s timeout after %v", e.Limit, e.After)
}

// Timeout reports true, as net.Error's method does.
func (e *TimeoutError) Timeout() bool { return true }

// TimeoutFrom returns the retryable *[Error] of kind [KindTimeout] for
// err when err wraps a *[TimeoutError], else nil. Providers call it first
// when they classify a failure, so that a hit limit is never mistaken for
// a cut stream or a connection error.
func TimeoutFrom(provider string, err error) *Error {
	var te *TimeoutError
	if !errors.As(err, &te) {
		return nil
	}
	return &Error{Provider: provider, Kind: KindTimeout, Retryable: true, Err: te}
}
