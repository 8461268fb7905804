// Package openai implements [llm.Provider] over OpenAI's HTTP APIs, spoken
// over net/http.
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
// # No SDK
//
// The package encodes the requests and decodes the event streams itself,
// with the standard library only. The official SDK
// (github.com/openai/openai-go/v3) was about a fifth of the loaded weft
// binary and the largest share of its package initialisation, paid by
// every weft command, for two POSTs; its reflection-based encoder also
// cost more than the rest of a warm turn once a history reached a few
// hundred messages. Tests build the same requests with the SDK (a
// test-only dependency) and check that weft's URL, headers and body are
// the SDK's, over random transcripts. Events are framed as the SDK's
// decoder framed them (weft.dev/weft/internal/sse).
//
// # Stream decoding
//
// The SDK's typed stream ended quietly both on "[DONE]" and when the
// connection closed early, so it could not tell a complete Chat stream
// from a cut one, and it reduced an in-stream error object to a string.
// Here, a stream without its terminal event is an [llm.KindStreamCut]
// error, a chunk that is not JSON is an [llm.KindMalformed] error, and an
// in-stream error keeps its code.
//
// Text, reasoning and tool-call arguments are reassembled byte for byte: a
// server that splits a multi-byte UTF-8 character across two chunks sends
// each half as raw bytes in a JSON string; the half is held back until the
// rest arrives, so every yielded fragment ends on a character boundary.
package openai
