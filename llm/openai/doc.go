// Package openai implements [llm.Provider] over OpenAI's HTTP APIs, using the
// official SDK (github.com/openai/openai-go/v3) to build and send requests.
//
// Two providers share one [Config]:
//
//   - [Responses] speaks the Responses API (POST /v1/responses). It stores
//     nothing server-side (store: false) and, when reasoning is configured,
//     round-trips encrypted reasoning items through [llm.Finish.ProviderState]
//     and [llm.Message.ProviderState].
//   - [Chat] speaks Chat Completions (POST /v1/chat/completions), the dialect
//     of compatible servers such as vLLM, Ollama, llama.cpp and OpenRouter. It
//     reads the non-standard reasoning_content and reasoning delta fields.
//
// Neither reads the environment: the caller passes the API key and base URL
// in [Config]. Neither retries: a failure is an [*llm.Error] whose Retryable
// and RetryAfter tell weft's agent loop what to do.
//
// # Stream decoding
//
// The SDK builds and sends the request and frames the server-sent events
// (ssestream.NewDecoder); the providers decode each event's JSON
// themselves. The SDK's typed stream (ssestream.Stream.Next) ends quietly
// both on "[DONE]" and when the connection closes early, so it cannot tell a
// complete Chat stream from a cut one, and it reduces an in-stream error
// object to a string. Here, a stream without its terminal event is an
// [llm.KindStreamCut] error, a chunk that is not JSON is an
// [llm.KindMalformed] error, and an in-stream error keeps its code.
//
// Text, reasoning and tool-call arguments are reassembled byte for byte: a
// server that splits a multi-byte UTF-8 character across two chunks sends
// each half as raw bytes in a JSON string; the half is held back until the
// rest arrives, so every yielded fragment ends on a character boundary.
package openai
