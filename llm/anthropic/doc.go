// Package anthropic is an [llm.Provider] for the Anthropic Messages API,
// spoken over net/http.
//
// It streams one Messages API response per [Provider.Stream] call and maps
// it onto weft's provider-neutral stream: text deltas, thinking deltas
// (as Reasoning), tool-use input fragments (as [llm.ToolCallDelta]), usage,
// and a terminal [llm.Finish]. The stream counts as complete only when the
// message_stop event arrives; anything else is an *llm.Error.
//
// The package reads no environment variables and no credential files:
// everything comes from [Config]. Nothing retries; the agent loop does.
//
// # No SDK
//
// The package encodes the request and decodes the event stream itself,
// with the standard library only. The official SDK
// (github.com/anthropics/anthropic-sdk-go/v2) was about a fifth of the
// loaded weft binary and brought OpenTelemetry, for one POST and a few
// event shapes, and every weft command paid for it at start-up. A test
// builds the same requests with the SDK (a test-only dependency) and
// checks that weft's URL, headers and body are the SDK's, over random
// transcripts; the stream's events are framed as the SDK framed them
// (weft.dev/weft/internal/sse).
//
// # Request mapping
//
//   - System becomes the system prompt.
//   - User messages become user text blocks; assistant messages become
//     text and tool_use blocks; RoleTool messages become tool_result blocks
//     (is_error from IsError). Consecutive messages that map to the same
//     role are merged into one message, so the results of parallel tool
//     calls, and any user text that follows them, travel in one user
//     message with the tool_result blocks first.
//   - A tool call's Arguments are sent as the tool_use input object. The
//     API only accepts an object, but a model can produce invalid JSON and
//     the transcript must still be sendable, so Arguments that are not a
//     JSON object are sent as {"_raw": "<arguments text>"}; empty Arguments
//     are sent as {}.
//   - Tools are sent with their InputSchema verbatim as input_schema.
//   - Temperature, if set, is sent as temperature. The API deprecated that
//     field; a model that rejects it answers with a bad_request error.
//
// # Thinking
//
// With [Config.ThinkingBudget] or [Config.AdaptiveThinking] set, thinking
// deltas stream as [llm.StreamEvent.Reasoning]. The thinking blocks, with
// their signatures (and any redacted_thinking blocks), are returned in
// [llm.Finish.ProviderState] as JSON of the form
//
//	{"provider":"anthropic","thinking":[{"type":"thinking","thinking":"…","signature":"…"},{"type":"redacted_thinking","data":"…"}]}
//
// and sent back, ahead of the text and tool_use blocks, when an assistant
// message carries it in [llm.Message.ProviderState]. State from another
// provider is ignored.
package anthropic
