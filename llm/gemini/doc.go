// Package gemini is an [llm.Provider] for the Gemini API (Google AI
// Studio's generativelanguage.googleapis.com), spoken over net/http.
//
// It streams one streamGenerateContent response (alt=sse) per
// [Provider.Stream] call and maps it onto weft's provider-neutral stream:
// text, thought parts (as Reasoning), function calls (as
// [llm.ToolCallDelta], one whole call each), usage, and a terminal
// [llm.Finish]. The stream counts as complete only when a candidate's
// finishReason arrives; a body that ends without one is an *llm.Error of
// kind stream_cut.
//
// # No SDK
//
// The package builds the request (URL, API key, headers, the JSON body)
// and decodes the stream itself, with the standard library only. The
// official SDK (google.golang.org/genai) brought gRPC, protobuf, go-cmp
// and OpenTelemetry into every weft binary, about a tenth of its loaded
// image and of its start-up, for one POST; its stream iterator also ended
// a cut stream exactly as a finished one, took a final event without its
// blank line for a complete one, failed on SSE comments, kept no headers
// of an error response (Retry-After) and logged read errors through the
// standard log package. A test builds the same requests with the SDK
// (a test-only dependency) and checks that weft's URL and body are the
// SDK's, over random transcripts.
//
// The package reads no environment variables. Redirects are not
// followed. Nothing retries and nothing continues a response that stops
// early: the agent loop retries.
//
// # Request mapping
//
//   - System becomes systemInstruction.
//   - User messages become user text parts; assistant messages become
//     model contents with a text part and functionCall parts; RoleTool
//     messages become functionResponse parts named after the call
//     (ToolName), with the output as {"output": text}, or {"error": text}
//     when IsError is set. Consecutive messages of one role are merged into
//     one content, so the results of parallel calls travel together.
//   - A call's Arguments are sent as the functionCall args object;
//     arguments that are not a JSON object are sent as
//     {"_raw": "<arguments text>"}.
//   - Tools become one tool of functionDeclarations. Each InputSchema is
//     sent as it is in parametersJsonSchema, which takes JSON Schema, so
//     no conversion to the OpenAPI subset of the older parameters field is
//     needed; a tool without a schema declares no parameters.
//   - MaxTokens becomes maxOutputTokens, Temperature temperature, and
//     [Config]'s thinking settings thinkingConfig.
//
// # Calls, thoughts and signatures
//
// Gemini 2.5 models send function calls without IDs. A call without one
// gets "call_<turn>_<i>", where turn is the number of assistant messages in
// the request and i the call's position in the response, so a request sent
// again gets the same IDs (the scripted provider names its calls the same
// way). Such IDs are not sent back: the API matches a response without an
// ID to its call by position and name. IDs the API gave are sent back on
// the call and its response.
//
// Thinking models may put a thought signature on a part (on the first
// function call of a step, on the last text part); Gemini 3 refuses a
// request whose function calls lost theirs. When a response carries
// signatures, [llm.Finish.ProviderState] records the order of its parts
// and their signatures, not their text:
//
//	{"provider":"gemini","parts":[{"kind":"thought","len":412},{"kind":"text","len":12},{"kind":"call","call":0,"sig":"…"},{"kind":"call","call":1}]}
//
// where len counts bytes of the message's Reasoning or Content. An
// assistant message whose ProviderState holds such a layout is sent back
// part by part in that order, each with its signature; thoughts are sent
// back only when signed. State from another provider is ignored; a message
// from another provider (whose calls have no signatures) is sent as text
// then calls, which Gemini 3 may refuse for calls of the current turn.
//
// # Usage and finish
//
// InputTokens is promptTokenCount (cached tokens included),
// CacheReadTokens cachedContentTokenCount, ReasoningTokens
// thoughtsTokenCount, and OutputTokens candidatesTokenCount plus
// thoughtsTokenCount, so that output counts reasoning as OpenAI's and
// Anthropic's do. STOP is stop, or tool_calls if the response called
// functions; MAX_TOKENS (and CONTINUATION) is length; other reasons are
// other. A blocked prompt (promptFeedback.blockReason) and the finish
// reasons SAFETY, RECITATION, BLOCKLIST, PROHIBITED_CONTENT, SPII and their
// image variants are *llm.Error of kind safety, not retryable;
// MALFORMED_FUNCTION_CALL and UNEXPECTED_TOOL_CALL are retryable errors of
// kind malformed.
//
// # Errors
//
// HTTP errors are classified by status (429 and 5xx retryable, 401 and
// 403 auth, other 4xx bad request; a 400 for an invalid API key is auth).
// A 429's delay is the google.rpc.RetryInfo retryDelay in its body, else
// its Retry-After header. An error object inside a 200 stream is
// classified by its code, else its status name.
package gemini
