package api

import (
	"reflect"

	"weft.dev/weft/event"
)

// The method table: one descriptor per method of the protocol, in the
// order of docs/protocol.md. Adding a method is a descriptor here (with
// its params' Validate), its [Host] method, and its implementations in
// package host and package client; rpc serves it, the OpenRPC document
// describes it, and the tests check that the client, the document and
// docs/protocol.md all have it.
//
// The descriptors are values to read; nothing assigns to them.
var (
	// Initialize exchanges program information: served by the connection.
	Initialize = Method[InitializeParams, InitializeResult]{Name: MethodInitialize,
		Doc: "Exchange program information and the protocol version; reports the connection's capabilities."}
	// Discover returns the OpenRPC document: served by the connection.
	Discover = Method[DiscoverParams, DiscoverResult]{Name: MethodDiscover,
		Doc: "Return the OpenRPC document describing every method, notification, event type and error code."}

	SessionCreate = Method[CreateSessionParams, SessionResult]{Name: MethodSessionCreate, Mutating: true,
		Doc: "Create a session with its mounts.", call: Host.CreateSession}
	SessionGet = Method[SessionGetParams, SessionResult]{Name: MethodSessionGet,
		Doc: "Get a session.", call: Host.GetSession}
	SessionList = Method[ListSessionsParams, ListSessionsResult]{Name: MethodSessionList,
		Doc: "List sessions, newest first.", call: Host.ListSessions}
	SessionUpdate = Method[UpdateSessionParams, SessionResult]{Name: MethodSessionUpdate, Mutating: true,
		Doc: "Change a session's title or model; fields left out stay as they are.", call: Host.UpdateSession}
	SessionDelete = Method[SessionIDParams, DeleteResult]{Name: MethodSessionDelete, Mutating: true,
		Doc: "Delete a session without an active run.", call: Host.DeleteSession}
	SessionCompact = Method[CompactParams, CompactResult]{Name: MethodSessionCompact, Mutating: true,
		Doc: "Compact a session's conversation now: a summary by its model replaces what the next request sends; the log keeps everything.", call: Host.CompactSession}
	SessionFork = Method[ForkSessionParams, ForkResult]{Name: MethodSessionFork, Mutating: true,
		Doc: "Create a session whose history is another's up to a seq (stored once, by reference); it goes on on its own.", call: Host.ForkSession}
	SessionPrune = Method[PruneParams, PruneResult]{Name: MethodSessionPrune,
		Doc: "Run a retention pass now: purge the ended sessions the host's retention policy selects, then sweep the checkpoint blobs no session references (dryRun lists them).", call: Host.PruneSessions}
	SessionRewind = Method[RewindParams, RewindResult]{Name: MethodSessionRewind, Mutating: true,
		Doc: "Rewind the conversation (and with files, the read-write mounts' files) to an earlier seq; records session.rewound.", call: Host.RewindSession}

	RunStart = Method[StartRunParams, RunResult]{Name: MethodRunStart, Mutating: true,
		Doc: "Start a run; busy decides what happens when one is active.", call: Host.StartRun}
	RunGet = Method[RunIDParams, RunResult]{Name: MethodRunGet,
		Doc: "Get a run.", call: Host.GetRun}
	RunList = Method[ListRunsParams, ListRunsResult]{Name: MethodRunList,
		Doc: "List a session's runs.", call: Host.ListRuns}
	RunWait = Method[WaitRunParams, WaitRunResult]{Name: MethodRunWait,
		Doc: "Wait for a run's terminal event or the timeout.", call: Host.WaitRun}
	RunSteer = Method[SteerParams, SteerReceipt]{Name: MethodRunSteer, Mutating: true,
		Doc: "Inject input into the active run.", call: Host.SteerRun}
	RunCancel = Method[CancelParams, RunResult]{Name: MethodRunCancel, Mutating: true,
		Doc: "Cancel a run; returns once run.cancelled is committed.", call: Host.CancelRun}

	EventsRead = Method[ReadEventsParams, ReadEventsResult]{Name: MethodEventsRead,
		Doc: "Read a page of a session's events after a cursor.", call: Host.ReadEvents}
	EventsSubscribe = Stream[SubscribeParams, event.Event]{Name: MethodEventsSubscribe, Item: NotifyEvent, End: NotifyClosed,
		Doc: "Subscribe to a session's events after a cursor: replay, then live (WebSocket and stdio).", call: Host.Subscribe}
	// EventsUnsubscribe ends a subscription of the connection: served by
	// the connection (a Go client breaks out of its iterator).
	EventsUnsubscribe = Method[UnsubscribeParams, UnsubscribeResult]{Name: MethodEventsUnsubscribe,
		Doc: "End a subscription."}

	ToolsList = Method[ToolsListParams, ToolsListResult]{Name: MethodToolsList,
		Doc: "List the tools runs are offered.", call: Host.ListTools}
	ModelCheck = Method[ModelCheckParams, ModelCheckResult]{Name: MethodModelCheck,
		Doc: "Say which model a run would use and whether the host can use it, before anything is written.", call: Host.CheckModel}

	EnvList = Method[ListEnvParams, ListEnvResult]{Name: MethodEnvList,
		Doc: "List a session's mounts and binding version.", call: Host.ListEnv}
	EnvMount = Method[MountParams, MountResult]{Name: MethodEnvMount, Mutating: true,
		Doc: "Attach (or with replace, replace) a mount; the active run's next tool call sees it.", call: Host.Mount}
	EnvUnmount = Method[UnmountParams, MountResult]{Name: MethodEnvUnmount, Mutating: true,
		Doc: "Detach a mount; refused while it owns a running process.", call: Host.Unmount}

	ApprovalDecide = Method[DecideParams, RequestResult]{Name: MethodApprovalDecide, Mutating: true,
		Doc: "Answer an approval: allow_once, allow_session or deny (with a message for the model). The first answer wins.", call: Host.DecideApproval}
	InputAnswer = Method[AnswerParams, RequestResult]{Name: MethodInputAnswer, Mutating: true,
		Doc: "Answer a question the model asked (ask_user): text, or the index of a choice.", call: Host.AnswerInput}
	ToolResult = Method[ToolResultParams, RequestResult]{Name: MethodToolResult, Mutating: true,
		Doc: "Give the result of a call of a tool the client executes (tool.call.requested).", call: Host.ToolResult}
	RequestList = Method[ListRequestsParams, ListRequestsResult]{Name: MethodRequestList,
		Doc: "List requests to people and clients (open ones by default), oldest first.", call: Host.ListRequests}
	ApprovalList = Method[ListRequestsParams, ListRequestsResult]{Name: MethodApprovalList,
		Doc: "List approvals (open ones by default), oldest first.", call: Host.ListApprovals}
	RequestGet = Method[RequestIDParams, RequestResult]{Name: MethodRequestGet,
		Doc: "Get a request.", call: Host.GetRequest}

	ProcessStart = Method[ProcessStartParams, ProcessResult]{Name: MethodProcessStart, Mutating: true,
		Doc: "Start a shell command or a tool in the background; returns its handle at once.", call: Host.StartProcess}
	ProcessGet = Method[ProcessIDParams, ProcessResult]{Name: MethodProcessGet,
		Doc: "Get a process.", call: Host.GetProcess}
	ProcessList = Method[ProcessListParams, ProcessListResult]{Name: MethodProcessList,
		Doc: "List the processes a session owns or was granted.", call: Host.ListProcesses}
	ProcessAwait = Method[ProcessAwaitParams, AwaitResult]{Name: MethodProcessAwait,
		Doc: "Wait for a process to end, or the timeout.", call: Host.AwaitProcess}
	ProcessOutput = Method[ProcessOutputParams, Output]{Name: MethodProcessOutput,
		Doc: "Read a process's output from a byte offset (data is base64).", call: Host.ProcessOutput}
	ProcessWrite = Method[ProcessWriteParams, ProcessResult]{Name: MethodProcessWrite, Mutating: true,
		Doc: "Write to a process's stdin.", call: Host.WriteProcess}
	ProcessSignal = Method[ProcessSignalParams, ProcessSignalResult]{Name: MethodProcessSignal, Mutating: true,
		Doc: "Append signal.<name> to the process log; interrupt, terminate, kill and hangup also reach a shell's process group.", call: Host.SignalProcess}
	ProcessCancel = Method[ProcessCancelParams, ProcessResult]{Name: MethodProcessCancel, Mutating: true,
		Doc: "Cancel a process through the cancel policy.", call: Host.CancelProcess}
	ProcessGrant = Method[ProcessGrantParams, ProcessResult]{Name: MethodProcessGrant, Mutating: true,
		Doc: "Let another session address a process.", call: Host.GrantProcess}
	ProcessRevoke = Method[ProcessGrantParams, ProcessResult]{Name: MethodProcessRevoke, Mutating: true,
		Doc: "Withdraw a grant.", call: Host.RevokeProcess}
	ProcessFollow = Stream[ProcessFollowParams, Chunk]{Name: MethodProcessFollow, Item: NotifyProcessOutput, End: NotifyProcessClosed,
		Doc: "Follow a process's output from an offset: notifications process/output, then process/closed (WebSocket and stdio).", call: Host.FollowProcess}
)

// Methods returns the method table: every method of the protocol, in the
// order of docs/protocol.md, a new slice on each call.
func Methods() []Descriptor {
	return []Descriptor{
		Initialize, Discover,
		SessionCreate, SessionGet, SessionList, SessionUpdate, SessionDelete,
		SessionCompact,
		SessionFork, SessionRewind,
		SessionPrune,
		RunStart, RunGet, RunList, RunWait, RunSteer, RunCancel,
		EventsRead, EventsSubscribe, EventsUnsubscribe,
		ToolsList,
		ModelCheck,
		EnvList, EnvMount, EnvUnmount,
		ApprovalDecide, InputAnswer, ToolResult, RequestList, ApprovalList, RequestGet,
		ProcessStart, ProcessGet, ProcessList, ProcessAwait, ProcessOutput, ProcessWrite,
		ProcessSignal, ProcessCancel, ProcessGrant, ProcessRevoke, ProcessFollow,
		MCPResources, MCPReadResource, MCPPrompts, MCPGetPrompt,
	}
}

// NotificationInfo describes a notification the server sends.
type NotificationInfo struct {
	// Name is the notification's method.
	Name string
	// Doc says when it is sent.
	Doc string
	// Params is the type of its params.
	Params reflect.Type
}

// Notifications returns the notifications a host sends, a new slice on
// each call. Each belongs to a stream of the table ([Stream.Item],
// [Stream.End]).
func Notifications() []NotificationInfo {
	return []NotificationInfo{
		{NotifyEvent, "One event of a subscription.", reflect.TypeFor[EventNotification]()},
		{NotifyClosed, "A subscription ended; resume after cursor.", reflect.TypeFor[ClosedNotification]()},
		{NotifyProcessOutput, "A chunk of a followed process's output.", reflect.TypeFor[ProcessOutputNotification]()},
		{NotifyProcessClosed, "A process follow ended; resume from offset.", reflect.TypeFor[ProcessClosedNotification]()},
	}
}

// EventInfo describes an event type of a session's log.
type EventInfo struct {
	// Type is the event's type.
	Type event.Type
	// Doc says what it records.
	Doc string
	// Data is the Go type of its data.
	Data reflect.Type
}

// Events returns every event type a session's log holds, with the type
// of its data, a new slice on each call (docs/events.md is the
// reference).
func Events() []EventInfo {
	return []EventInfo{
		{event.SessionCreated, "The first event of every session.", reflect.TypeFor[event.SessionCreatedData]()},
		{event.SessionUpdated, "A change of title or model.", reflect.TypeFor[event.SessionUpdatedData]()},
		{event.SessionDeleted, "The session was deleted.", reflect.TypeFor[struct{}]()},
		{event.RunQueued, "A run was admitted.", reflect.TypeFor[event.RunQueuedData]()},
		{event.RunStarted, "A run began executing.", reflect.TypeFor[event.RunStartedData]()},
		{event.RunCompleted, "A run reached a final answer.", reflect.TypeFor[event.RunEndedData]()},
		{event.RunFailed, "A run failed; error says why.", reflect.TypeFor[event.RunEndedData]()},
		{event.RunCancelled, "A run was cancelled.", reflect.TypeFor[event.RunEndedData]()},
		{event.RunInterrupted, "A run found active after a crash was closed, or that a draining host could not hand over in time.", reflect.TypeFor[event.RunEndedData]()},
		{event.MessageUser, "The user input that starts a run.", reflect.TypeFor[event.MessageUserData]()},
		{event.MessageDelta, "Streamed assistant text, coalesced.", reflect.TypeFor[event.DeltaData]()},
		{event.ReasoningDelta, "Streamed reasoning text, coalesced.", reflect.TypeFor[event.DeltaData]()},
		{event.MessageCompleted, "One step's assistant message, whole.", reflect.TypeFor[event.MessageCompletedData]()},
		{event.StepStarted, "A model call began.", reflect.TypeFor[event.StepData]()},
		{event.ToolCallStarted, "A tool call the model asked for.", reflect.TypeFor[event.ToolCallStartedData]()},
		{event.ToolCallCompleted, "A tool call's result.", reflect.TypeFor[event.ToolCallCompletedData]()},
		{event.Usage, "Tokens of one step.", reflect.TypeFor[event.UsageData]()},
		{event.ModelRetry, "A model request is retried.", reflect.TypeFor[event.ModelRetryData]()},
		{event.ContextCompacted, "The conversation was compacted: later requests start from its summary and re-injected state.", reflect.TypeFor[event.ContextCompactedData]()},
		{event.SteerAccepted, "Input injected into the active run.", reflect.TypeFor[event.SteerData]()},
		{event.SteerConsumed, "The model saw a steer.", reflect.TypeFor[event.SteerData]()},
		{event.SteerDropped, "A steer the run ended before consuming.", reflect.TypeFor[event.SteerData]()},
		{event.MountAdded, "A mount was attached.", reflect.TypeFor[event.MountChangeData]()},
		{event.MountRemoved, "A mount was detached.", reflect.TypeFor[event.MountChangeData]()},
		{event.MountInfo, "The session's mounts at the start of a run, and the project instructions (AGENTS.md) the model was given.", reflect.TypeFor[event.MountInfoData]()},
		{event.ProcessStarted, "A background process of the session started.", reflect.TypeFor[event.ProcessData]()},
		{event.ProcessExited, "A background process of the session ended.", reflect.TypeFor[event.ProcessData]()},
		{event.ApprovalRequested, "A tool call waits for a person's approval.", reflect.TypeFor[event.ApprovalRequestedData]()},
		{event.ApprovalResolved, "The first answer to an approval (or its cancellation with the run).", reflect.TypeFor[event.ApprovalResolvedData]()},
		{event.ApprovalExpired, "An approval's deadline passed; its decision is the policy's default.", reflect.TypeFor[event.ApprovalResolvedData]()},
		{event.InputRequested, "The model asks the user a question (ask_user).", reflect.TypeFor[event.InputRequestedData]()},
		{event.InputResolved, "A question was answered, expired or cancelled.", reflect.TypeFor[event.InputResolvedData]()},
		{event.ToolCallRequested, "A call of a tool the client executes; tool/result answers it.", reflect.TypeFor[event.ToolCallRequestedData]()},
		{event.RunResumed, "A run that waited for answers, or was handed over, goes on.", reflect.TypeFor[event.RunResumedData]()},
		{event.RunSuspended, "A draining host stopped a run at a step boundary and handed it over; the session's next owner continues it.", reflect.TypeFor[event.RunSuspendedData]()},
		{event.ToolProgress, "A running tool call's progress (an MCP server's progress notification).", reflect.TypeFor[event.ToolProgressData]()},
		{event.MCPServerFailed, "An MCP server a step needed failed to start, crashed, or could not list its tools.", reflect.TypeFor[event.MCPServerFailedData]()},
		{event.SessionForked, "The first event a fork writes itself, after its source's events 1..seq.", reflect.TypeFor[event.SessionForkedData]()},
		{event.SessionRewound, "Later runs see the conversation (and with files, the mounts' files) as at toSeq.", reflect.TypeFor[event.SessionRewoundData]()},
		{event.CheckpointRecorded, "What a step changed in a read-write mount, for a rewind of files.", reflect.TypeFor[event.CheckpointData]()},
		{event.BudgetRaised, "A person raised a budget the run had reached (answering its budget question); the run goes on.", reflect.TypeFor[event.BudgetRaisedData]()},
		{event.SubagentRequest, "A request of a subagent's session (or its end), mirrored in its parent's log for the parent's clients.", reflect.TypeFor[event.SubagentRequestData]()},
	}
}
