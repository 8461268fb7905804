// Package mcpserver offers a weft host to other agents as MCP tools, so
// that a coding agent can hand long work to a durable host and pick it up
// later, after its own restart included.
//
// [New] returns an [mcp.Server] (the official MCP Go SDK's) whose tools
// call a [Host] — the host in this process or a connection to one
// (package client), both an [api.Host] — and never the engine directly:
//
//	start_run        start a run (in a session, or a new one); answers at once with its IDs
//	await_run        wait, with a timeout, until the run ends or asks for an answer
//	get_run          a run's status, final answer, usage, open requests
//	read_events      a page of a session's event log after a cursor, by type
//	steer            inject input into an active run
//	cancel_run       cancel a run
//	list_sessions    the host's sessions, newest first
//	create_session   a session with a model and mounts
//	list_approvals   the approvals and questions that wait for an answer
//	answer_approval  allow once, allow for the session (always), or deny, with a message
//	answer_question  answer a question the model asked
//
// A run ID is a durable handle: it names the run in the host's log, so an
// agent that started a run, exited and came back awaits the same ID.
// Every tool has input and output schemas inferred from its Go types. A
// call that fails — bad arguments, an unknown ID, a refused mutation — is
// a tool result with isError set, whose text is "KIND: message" and whose
// _meta["weft.dev/error"] carries the [api.Error]'s kind, code,
// retryable flag and details.
//
// Serve it with the SDK's transports: [mcp.Server.Run] over stdio (`weft
// mcp-server`), or [Handler] for streamable HTTP (`weft serve` at /mcp,
// behind the host's bearer token).
package mcpserver
