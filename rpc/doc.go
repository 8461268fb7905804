// Package rpc is weft's JSON-RPC 2.0 server: the typed method table
// ([Register]), the one error table of DESIGN §4 ([Error], [Kind]), the
// transports (stdio NDJSON via [Server.ServeStdio]; HTTP POST /rpc and
// WebSocket /rpc/ws via [Server.Handler]), bearer-token auth that fails
// closed ([RequireToken], [Config.Token], [Config.NoAuth]), the Host check
// of loopback servers ([Config.Loopback]) and discovery (initialize and rpc.discover, an OpenRPC
// 1.3 document generated from the registered Go types).
//
// The protocol is strict: "jsonrpc":"2.0" is required; ids are strings or
// numbers and are echoed byte for byte; params are objects decoded with
// unknown fields rejected; a valid request without an id is a notification
// and is never answered, even when it fails. A message that is not a valid
// request object is answered with -32600 (id null when no id could be
// read), as the specification's examples require.
//
// Every error response carries error.data = {"kind", "retryable", ...}.
// Handler errors that are not an *api.Error go through [Config.MapError]; the
// rest become -32603 with a message that reveals nothing, and the real
// error is logged with the request id.
//
// Bounds: frames are limited to [Config.MaxFrameBytes] (too_large, and the
// stream recovers at the next frame), requests in flight per connection to
// [Config.MaxConcurrentPerConn] (overloaded, retryable), connections to
// [Config.MaxConns] (HTTP 503), queued notifications per connection to
// [Config.NotifyQueue] ([ErrNotifyOverflow]), and what all event streams
// hold to write, host-wide, to [Config.StreamBytes] (a stream stalled past
// [Config.StallGrace] is dropped when others wait). [NewHTTPServer] bounds
// the connections of the http.Server itself ([ConnLimits]): header and
// idle timeouts, and caps on idle and open connections that shed the
// oldest idle one, never-authenticated first.
//
// Handlers reach their connection with [ConnFrom] to push notifications
// ([Conn.Notify]) and to end subscriptions when it closes ([Conn.Done],
// [Conn.OnClose]).
//
// A Go client lives in weft.dev/weft/internal/jsonrpc/client.
package rpc
