package api

import (
	"context"
	"iter"

	"weft.dev/weft/event"
)

// Host is weft's protocol as a Go interface: one method per entry of the
// method table ([Methods]) that a host implements, with the table's
// params and result types. The host in this process (host.Host) and a
// connection to one (client.Client) both implement it, so code written
// against Host — the CLI's commands, package rpc, which serves any Host
// over JSON-RPC as net/http serves any Handler — runs the same against
// either. The descriptors bind each method: [RunStart] calls
// Host.StartRun.
//
// Implementations are safe for concurrent use. Errors that a client can
// act on are *[Error] of the table's kinds (errors.Is with the sentinels
// [ErrNotFound], [ErrRunConflict], … works on both sides of the wire);
// ctx's own error comes back as it is. A mutating method with an
// idempotencyKey is idempotent (see [Method.Mutating]).
//
// The streaming methods (Subscribe, FollowProcess) check their params and
// the cursor or offset before they return; the iterator is single-use
// and ends with an error: [ErrLagged] when the consumer fell behind (it
// resumes from the last item it has), an error of kind
// [KindOverloaded] when the host shuts down, ctx's error, or another
// failure; FollowProcess's ends with nil after the last output of an
// ended process. Breaking out of the loop ends the stream.
type Host interface {
	// CreateSession implements [SessionCreate].
	CreateSession(ctx context.Context, p CreateSessionParams) (*SessionResult, error)
	// GetSession implements [SessionGet].
	GetSession(ctx context.Context, p SessionGetParams) (*SessionResult, error)
	// ListSessions implements [SessionList].
	ListSessions(ctx context.Context, p ListSessionsParams) (*ListSessionsResult, error)
	// UpdateSession implements [SessionUpdate].
	UpdateSession(ctx context.Context, p UpdateSessionParams) (*SessionResult, error)
	// DeleteSession implements [SessionDelete].
	DeleteSession(ctx context.Context, p SessionIDParams) (*DeleteResult, error)
	// CompactSession implements [SessionCompact].
	CompactSession(ctx context.Context, p CompactParams) (*CompactResult, error)
	// ForkSession implements [SessionFork].
	ForkSession(ctx context.Context, p ForkSessionParams) (*ForkResult, error)
	// RewindSession implements [SessionRewind].
	RewindSession(ctx context.Context, p RewindParams) (*RewindResult, error)
	// PruneSessions implements [SessionPrune].
	PruneSessions(ctx context.Context, p PruneParams) (*PruneResult, error)

	// StartRun implements [RunStart].
	StartRun(ctx context.Context, p StartRunParams) (*RunResult, error)
	// GetRun implements [RunGet].
	GetRun(ctx context.Context, p RunIDParams) (*RunResult, error)
	// ListRuns implements [RunList].
	ListRuns(ctx context.Context, p ListRunsParams) (*ListRunsResult, error)
	// WaitRun implements [RunWait].
	WaitRun(ctx context.Context, p WaitRunParams) (*WaitRunResult, error)
	// SteerRun implements [RunSteer].
	SteerRun(ctx context.Context, p SteerParams) (*SteerReceipt, error)
	// CancelRun implements [RunCancel].
	CancelRun(ctx context.Context, p CancelParams) (*RunResult, error)

	// ReadEvents implements [EventsRead].
	ReadEvents(ctx context.Context, p ReadEventsParams) (*ReadEventsResult, error)
	// Subscribe implements [EventsSubscribe]: the session's events after
	// p.After, the replay and then the live tail, with no gap and no
	// duplicate.
	Subscribe(ctx context.Context, p SubscribeParams) (iter.Seq2[event.Event, error], error)

	// ListTools implements [ToolsList].
	ListTools(ctx context.Context, p ToolsListParams) (*ToolsListResult, error)

	// MCPResources implements [MCPResources].
	MCPResources(ctx context.Context, p MCPListParams) (*MCPResourcesResult, error)
	// MCPReadResource implements [MCPReadResource].
	MCPReadResource(ctx context.Context, p MCPReadResourceParams) (*MCPReadResourceResult, error)
	// MCPPrompts implements [MCPPrompts].
	MCPPrompts(ctx context.Context, p MCPListParams) (*MCPPromptsResult, error)
	// MCPGetPrompt implements [MCPGetPrompt].
	MCPGetPrompt(ctx context.Context, p MCPGetPromptParams) (*MCPGetPromptResult, error)
	// CheckModel implements [ModelCheck].
	CheckModel(ctx context.Context, p ModelCheckParams) (*ModelCheckResult, error)

	// ListEnv implements [EnvList].
	ListEnv(ctx context.Context, p ListEnvParams) (*ListEnvResult, error)
	// Mount implements [EnvMount].
	Mount(ctx context.Context, p MountParams) (*MountResult, error)
	// Unmount implements [EnvUnmount].
	Unmount(ctx context.Context, p UnmountParams) (*MountResult, error)

	// StartProcess implements [ProcessStart].
	StartProcess(ctx context.Context, p ProcessStartParams) (*ProcessResult, error)
	// GetProcess implements [ProcessGet].
	GetProcess(ctx context.Context, p ProcessIDParams) (*ProcessResult, error)
	// ListProcesses implements [ProcessList].
	ListProcesses(ctx context.Context, p ProcessListParams) (*ProcessListResult, error)
	// AwaitProcess implements [ProcessAwait].
	AwaitProcess(ctx context.Context, p ProcessAwaitParams) (*AwaitResult, error)
	// ProcessOutput implements [ProcessOutput].
	ProcessOutput(ctx context.Context, p ProcessOutputParams) (*Output, error)
	// WriteProcess implements [ProcessWrite].
	WriteProcess(ctx context.Context, p ProcessWriteParams) (*ProcessResult, error)
	// SignalProcess implements [ProcessSignal].
	SignalProcess(ctx context.Context, p ProcessSignalParams) (*ProcessSignalResult, error)
	// CancelProcess implements [ProcessCancel].
	CancelProcess(ctx context.Context, p ProcessCancelParams) (*ProcessResult, error)
	// GrantProcess implements [ProcessGrant].
	GrantProcess(ctx context.Context, p ProcessGrantParams) (*ProcessResult, error)
	// RevokeProcess implements [ProcessRevoke].
	RevokeProcess(ctx context.Context, p ProcessGrantParams) (*ProcessResult, error)
	// FollowProcess implements [ProcessFollow]: the process's output from
	// p.Offset, then live, until it ends.
	FollowProcess(ctx context.Context, p ProcessFollowParams) (iter.Seq2[Chunk, error], error)

	// DecideApproval implements [ApprovalDecide].
	DecideApproval(ctx context.Context, p DecideParams) (*RequestResult, error)
	// AnswerInput implements [InputAnswer].
	AnswerInput(ctx context.Context, p AnswerParams) (*RequestResult, error)
	// ToolResult implements [ToolResult].
	ToolResult(ctx context.Context, p ToolResultParams) (*RequestResult, error)
	// ListRequests implements [RequestList].
	ListRequests(ctx context.Context, p ListRequestsParams) (*ListRequestsResult, error)
	// ListApprovals implements [ApprovalList].
	ListApprovals(ctx context.Context, p ListRequestsParams) (*ListRequestsResult, error)
	// GetRequest implements [RequestGet].
	GetRequest(ctx context.Context, p RequestIDParams) (*RequestResult, error)
}
