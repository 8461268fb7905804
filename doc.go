// Package weft is a durable runtime host for LLM agents; it has no code
// of its own. This comment maps the library, so that `go doc
// weft.dev/weft` is where a program that embeds weft starts.
//
// The packages, from the bottom up:
//
//   - [weft.dev/weft/event]: the events of a session's append-only log.
//   - [weft.dev/weft/store] and its implementations
//     [weft.dev/weft/store/sqlite], [weft.dev/weft/store/postgres] and
//     [weft.dev/weft/store/memory]: where logs are kept.
//   - [weft.dev/weft/llm] and the providers [weft.dev/weft/llm/openai],
//     [weft.dev/weft/llm/anthropic], [weft.dev/weft/llm/gemini] and
//     the offline [weft.dev/weft/llm/scripted].
//   - [weft.dev/weft/tool], [weft.dev/weft/env], [weft.dev/weft/env/sandbox],
//     [weft.dev/weft/process] and [weft.dev/weft/policy]: tools, the
//     mounted directories they reach, shells, and approvals.
//   - [weft.dev/weft/agent]: the loop that runs one agent.
//   - [weft.dev/weft/host]: sessions and runs in the background, the API
//     every client uses; [weft.dev/weft/rpc] serves it over JSON-RPC and
//     SSE and [weft.dev/weft/client] calls it.
//
// Each package has runnable examples: `go doc -http weft.dev/weft/host`
// shows them with the package's documentation, and `go test -run Example
// weft.dev/weft/host` runs them. Start with host's Example, a host over
// the in-memory store with the scripted model, and agent's.
//
// No module proxy serves weft.dev/weft: a program requires it with a
// replace directive pointing at a checkout (or a go.work that uses one);
// README.md has the recipe and a program that builds against it.
package weft
