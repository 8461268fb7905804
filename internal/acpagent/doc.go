// Package acpagent is weft's Agent Client Protocol agent: it serves ACP
// (https://agentclientprotocol.com) on a pair of pipes, as an editor
// such as Zed spawns an agent, and maps it onto a weft host through the
// host's method table ([api.Host]) alone, so that the same code drives a
// `weft serve` over the wire (a *client.Client) and a host in the same
// process.
//
// An ACP session is a weft session. session/new creates one whose
// default read-write mount is the client's working directory;
// session/load replays its whole log as session/update notifications
// and then keeps streaming it, so a run started before the editor or
// the ACP process died is seen going on; session/prompt starts a run
// (or, while one is active, queues or steers it, as [Config.Busy]
// says) and ends with the run's stop reason; session/cancel cancels
// the session's active run. The session's approval requests become
// session/request_permission requests, and the answer is the
// approval's decision; an approval still open when a client loads the
// session is asked again. A question the model asks (ask_user) ends
// the prompt's turn, and the next prompt answers it. The mapping is
// documented in docs/acp.md.
package acpagent
