// Package mcp is weft's client of MCP (Model Context Protocol) tool
// servers, through the official Go SDK. A [Manager] starts the servers a
// host's configuration and a session name, lists their tools and offers
// them to the model as mcp__<server>__<tool>, with the server's JSON
// Schemas, through a [tool.Registry]: the same argument validation,
// output budget, timeouts and approval policy as the built-in tools.
//
// # Servers
//
// A server ([event.MCPServer]) is a command that speaks MCP on its stdin
// and stdout, or a streamable HTTP endpoint. Servers start lazily, when a
// run's step first needs their tools or a call needs the server, and are
// shared by every session that names the same configuration (for a
// sandboxed command: the same configuration and the same mounts). A
// server whose connection ends (the command exited or crashed, sent
// malformed JSON-RPC or a frame over the limit) is started again on next
// use; failures one after another wait 1 s, 2 s, 4 s … up to a minute
// before the next attempt, and meanwhile its tools fail at once saying
// why. A server nobody used for [Config.IdleTimeout] is stopped. A
// notifications/tools/list_changed makes the next step list the tools
// again.
//
// A command runs under the shells' sandbox (package sandbox): confined by
// Landlock to the session's mounts (read-only mounts read-only), the
// system directories and the server's readOnly paths, with the network
// as the session's shells have it, and its whole process tree contained.
// A server the host's configuration marks trusted runs unconfined, still
// contained. Its environment is an allow-list of the host's (PATH, LANG,
// …; HOME is its working directory when sandboxed) plus its own env.
// Its stderr goes to the host's logger, line by line, each line cut at
// 2 KiB and at most 50 lines a second (bursts of 500); the last 4 KiB are
// kept for the error of a server that did not start or crashed.
//
// # Secrets
//
// Values of env and headers may name a host environment variable as
// ${VAR}; it is read when the server starts, so that a session's
// configuration, which is written to its log, never holds the token. A
// session's server may only name the variables [Config.SessionEnv]
// allows, and may not write a credential-looking header or variable
// (Authorization, …TOKEN, …KEY, …SECRET, …PASSWORD) as a literal.
// [SecretsOf] lists the values ${VAR} can reach, for the host to redact
// them from what it stores (a server may print its token on stderr, and
// a failed call's result quotes stderr's tail). A session's command
// server may not name a readOnly path or a command that reaches what
// [Config.Protected] protects, checked again at every start.
//
// # Bounds
//
// One JSON-RPC frame from a server is at most [Config.MaxFrameBytes]
// (a larger one ends the connection); a server's tools/list is at most
// [Config.MaxToolsBytes] in all and is refused beyond; a tool result is
// cut by the registry's output budget. Images and audio are not passed to
// the model (weft's messages carry text only): a result shows a
// placeholder naming the type and size.
//
// # Goroutines
//
// A Manager owns one janitor goroutine and, per live connection, a
// watcher, the command's waiter and its stderr reader (the SDK owns the
// connection's readers). [Manager.Close] stops every server and returns
// after all of them have exited.
package mcp
