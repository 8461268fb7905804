// Package scripted is an offline, deterministic [llm.Provider] that plays a
// script of responses from a JSON file. It is meant for testing agents
// (tool calls, broken arguments, provider failures, steering) without a
// network or an API key, and it is weft's default for trying things out:
//
//	weft run -m scripted:path/to/script.json -p "hello"
//
// # Format
//
//	{
//	  "steps": [
//	    {"text": "I'll write the file.",
//	     "toolCalls": [{"name": "write_file", "arguments": {"path": "hello.txt", "content": "hi"}}]},
//	    {"reasoning": "The file is written.", "text": "Done. You said: {{input}}", "delayMs": 5},
//	    {"error": {"kind": "server", "status": 503, "times": 1}, "text": "Recovered."}
//	  ],
//	  "loop": false,
//	  "usage": true
//	}
//
// Top level: steps (required, at least one), loop (default false), usage
// (default true), comment (ignored). A step has text, reasoning,
// toolCalls, delayMs, error, finish, providerState and comment; it must
// have at least one of text, reasoning, toolCalls or error. A tool call
// has name (required), id and arguments. An error has kind (required),
// status, message, times, retryAfterMs, retryable and afterTokens.
// docs/scripted-model.md is the full reference.
//
// # Step selection
//
// The step that answers a request is a pure function of the request: its
// index is the number of assistant messages in [llm.Request.Messages]
// (modulo the number of steps when loop is true). Continuing a session,
// restarting after a crash and replaying a transcript therefore pick the
// same step. When the index is past the last step and loop is false, the
// stream yields an *llm.Error of kind [llm.KindScript].
//
// The one piece of state is the failure counter of error steps with
// times: N; the first N requests answered by that step fail. It lives in
// the [Provider] value, so a new Provider (e.g. after a restart) counts
// from zero again.
//
// # Output
//
// Reasoning, then text, then tool calls are streamed. Text and reasoning
// are split into words, each keeping the whitespace before it, so the
// deltas concatenate to exactly the scripted string. Tool call arguments
// are streamed in up to three fragments. {{input}} in text, reasoning and
// tool call arguments becomes the text of the latest user message in the
// request, {{step}} the step's index in steps, {{turn}} the number of
// assistant messages in the request and {{images}} the media types and
// sizes of the images the request carries since its last assistant
// message ("no images" if none). Tool calls without an id get
// "call_<turn>_<i>". Usage is synthetic but deterministic: a quarter of
// the characters of the request (input) and of the response (output),
// rounded up.
package scripted
