// Package api is weft's protocol: the method table (one descriptor per
// JSON-RPC method, [Methods]), the [Host] interface it describes, the
// params and results of every method with their validation, the
// notifications, the event types, and the error table. It depends on
// nothing of the engine (no host, agent loop, process manager or
// sandbox), so that a client of weft links only this package, the event
// envelope and the store's record types.
//
// The host implements [Host] in process (package host); package rpc
// serves any Host over the wire, and package client is a Host that
// calls one there. Both are checked against the table: rpc registers
// from it, and the OpenRPC document (rpc.discover, `weft schema`) is
// generated from it. Errors that callers branch on are the sentinels of
// this package ([ErrNotFound], [ErrRunConflict], …), matched with
// errors.Is on either side of the wire.
package api

// Method names. Mutating methods take an optional idempotencyKey.
const (
	MethodInitialize = "initialize"
	MethodDiscover   = "rpc.discover"

	MethodSessionCreate = "session/create"
	MethodSessionGet    = "session/get"
	MethodSessionList   = "session/list"
	MethodSessionDelete = "session/delete"
	MethodSessionUpdate = "session/update"
	// MethodSessionCompact compacts a session's conversation on demand.
	MethodSessionCompact = "session/compact"
	MethodSessionFork    = "session/fork"
	MethodSessionRewind  = "session/rewind"

	MethodRunStart  = "run/start"
	MethodRunGet    = "run/get"
	MethodRunList   = "run/list"
	MethodRunWait   = "run/wait"
	MethodRunSteer  = "run/steer"
	MethodRunCancel = "run/cancel"

	MethodEventsRead        = "events/read"
	MethodEventsSubscribe   = "events/subscribe"
	MethodEventsUnsubscribe = "events/unsubscribe"

	MethodEnvList    = "env/list"
	MethodEnvMount   = "env/mount"
	MethodEnvUnmount = "env/unmount"

	MethodToolsList = "tools/list"

	MethodModelCheck = "model/check"

	MethodProcessStart  = "process/start"
	MethodProcessGet    = "process/get"
	MethodProcessList   = "process/list"
	MethodProcessAwait  = "process/await"
	MethodProcessOutput = "process/output"
	MethodProcessWrite  = "process/write"
	MethodProcessSignal = "process/signal"
	MethodProcessCancel = "process/cancel"
	MethodProcessGrant  = "process/grant"
	MethodProcessRevoke = "process/revoke"
	MethodProcessFollow = "process/follow"
)

// Notification names (server to client).
const (
	// NotifyEvent carries one event of a subscription: [EventNotification].
	NotifyEvent = "events/event"
	// NotifyClosed ends a subscription: [ClosedNotification].
	NotifyClosed = "events/closed"
	// NotifyProcessOutput carries a chunk of a followed process:
	// [ProcessOutputNotification].
	NotifyProcessOutput = "process/output"
	// NotifyProcessClosed ends a follow: [ProcessClosedNotification].
	NotifyProcessClosed = "process/closed"
)

// DefaultMaxFrameBytes is the default bound of one JSON-RPC frame (a stdio
// line, an HTTP body, a WebSocket message) on both ends.
const DefaultMaxFrameBytes = 8 << 20

// Limits of what one request may carry. A request beyond one is refused
// with [ErrInvalidParams] naming the limit (error data: field, limit).
const (
	// MaxTitleBytes caps a session title.
	MaxTitleBytes = 1 << 10
	// MaxModelBytes caps a model name, a session's or a run's:
	// PROVIDER:MODEL, a model named in the host's config, or a scripted
	// model's path.
	MaxModelBytes = 1 << 10
	// MaxInputBytes caps the input of one run or steer (text and parts,
	// encoded), not counting its images' data, which event.MaxImageBytes
	// and event.MaxImagesBytes cap.
	MaxInputBytes = 1 << 20
	// MaxMetadataBytes caps a session's metadata (keys and values).
	MaxMetadataBytes = 16 << 10
	// MaxMetadataKeys caps the number of metadata entries.
	MaxMetadataKeys = 64
	// MaxIDBytes caps an ID or idempotency key given by a client.
	MaxIDBytes = 256
	// MaxReasonBytes caps a cancel reason.
	MaxReasonBytes = 4 << 10
	// MaxMCPServers caps the MCP servers of one session.
	MaxMCPServers = 16
	// MaxMounts caps the mounts of one session's binding: each is a
	// directory the host opens whenever it binds the session.
	MaxMounts = 64
	// MaxMCPServersBytes caps a session's MCP server configurations,
	// encoded.
	MaxMCPServersBytes = 64 << 10
	// MaxClientTools caps the client tools a session or a run declares:
	// each is offered to the model at every step.
	MaxClientTools = 128
	// MaxClientToolsBytes caps the client tools a session or a run
	// declares, their names, descriptions and input schemas together:
	// they are stored in the log and sent to the model at every step.
	MaxClientToolsBytes = 256 << 10
)
