package event

import "encoding/json"

// Session events.
const (
	// SessionCreated is the first event of every session. Data: [SessionCreatedData].
	SessionCreated Type = "session.created"
	// SessionUpdated records a change of title, model or metadata. Data: [SessionUpdatedData].
	SessionUpdated Type = "session.updated"
	// SessionDeleted marks a session as deleted. Data: {}.
	SessionDeleted Type = "session.deleted"
)

// Fork and rewind events.
const (
	// SessionForked is the first event a fork writes itself, at seq
	// Seq+1 of its log: the events before it are the source's 1..Seq,
	// read through the fork (see store.SessionLog.Read). Data:
	// [SessionForkedData].
	SessionForked Type = "session.forked"
	// SessionRewound records a rewind of the session to an earlier seq:
	// the log is not rewritten, but the conversation later runs see
	// (and, with Files, the read-write mounts' files) is that of ToSeq.
	// Data: [SessionRewoundData].
	SessionRewound Type = "session.rewound"
	// CheckpointRecorded records what a step's tool calls changed in one
	// read-write mount (and what changed there since the mount was last
	// looked at: a background process's output), so that a rewind can
	// undo it. Data: [CheckpointData].
	CheckpointRecorded Type = "checkpoint.recorded"
)

// CheckpointData is the data of [CheckpointRecorded].
type CheckpointData struct {
	// MountID and Path are the mount and its host directory when the
	// changes were seen; a rewind refuses a mount that is gone or now
	// another directory.
	MountID string `json:"mountId"`
	Path    string `json:"path"`
	// Changes are the paths that changed, relative to the mount, in
	// path order: created (no Before), deleted (no After) or modified.
	Changes []FileChange `json:"changes"`
	// Incomplete, if set, says why the checkpoint cannot restore what
	// changed (a file over the size cap, more bytes or changes than a
	// checkpoint keeps): a rewind across it is refused.
	Incomplete string `json:"incomplete,omitempty"`
}

// FileChange is one path's change in a [CheckpointData].
type FileChange struct {
	Path   string     `json:"path"`
	Before *FileState `json:"before,omitempty"`
	After  *FileState `json:"after,omitempty"`
}

// FileState is what a checkpoint knows of a path: its kind ("file",
// "dir" or "link"), permission bits, and a file's size and content hash
// (sha256, hex; the content is kept under the host's checkpoint
// directory) or a link's target.
type FileState struct {
	Kind string `json:"kind"`
	Mode uint32 `json:"mode"`
	Size int64  `json:"size,omitempty"`
	Hash string `json:"hash,omitempty"`
	Link string `json:"link,omitempty"`
}

// SessionForkedData is the data of [SessionForked]: the fork's settings
// (those of its source when it was forked, or the mounts the fork was
// given) and where it came from.
type SessionForkedData struct {
	SessionCreatedData
	// From is the session forked; Seq is its last event the fork's log
	// holds (the fork's own events start at Seq+1).
	From string `json:"from"`
	Seq  int64  `json:"seq"`
	// RequestedSeq is the seq the client asked for, when it fell inside
	// a run's step: the fork then starts from the step boundary before
	// it (Seq).
	RequestedSeq int64 `json:"requestedSeq,omitempty"`
	// SharedMounts are the IDs of the fork's read-write mounts whose
	// directory the source uses too: a write or a rewind of the files
	// through one session changes the other's.
	SharedMounts []string `json:"sharedMounts,omitempty"`
}

// SessionRewoundData is the data of [SessionRewound].
type SessionRewoundData struct {
	// ToSeq is the seq rewound to: later runs see the conversation as it
	// was after it.
	ToSeq int64 `json:"toSeq"`
	// Files reports that the read-write mounts' files were restored to
	// their state at ToSeq too.
	Files bool `json:"files,omitempty"`
}

// Run lifecycle events.
const (
	// RunQueued records admission of a run. Data: [RunQueuedData].
	RunQueued Type = "run.queued"
	// RunStarted records that the run began executing. Data: [RunStartedData].
	RunStarted Type = "run.started"
	// RunCompleted ends a run that reached a final answer. Data: [RunEndedData].
	RunCompleted Type = "run.completed"
	// RunFailed ends a run that failed. Data: [RunEndedData] with Error set.
	RunFailed Type = "run.failed"
	// RunCancelled ends a run that was cancelled. Data: [RunEndedData].
	RunCancelled Type = "run.cancelled"
	// RunInterrupted ends a run that the host found active after a crash. Data: [RunEndedData].
	RunInterrupted Type = "run.interrupted"
)

// Model output and transcript events.
const (
	// MessageUser is user input that starts a run. Data: [MessageUserData].
	MessageUser Type = "message.user"
	// MessageDelta is streamed assistant text, coalesced. Data: [DeltaData].
	MessageDelta Type = "message.delta"
	// ReasoningDelta is streamed reasoning text, coalesced. Data: [DeltaData].
	ReasoningDelta Type = "reasoning.delta"
	// MessageCompleted is the assistant message of one step, whole. Data: [MessageCompletedData].
	MessageCompleted Type = "message.completed"
	// StepStarted marks the start of a model call. Data: [StepData].
	StepStarted Type = "step.started"
	// ToolCallStarted records a tool call the model asked for. Data: [ToolCallStartedData].
	ToolCallStarted Type = "tool.call.started"
	// ToolCallCompleted records a tool call's result. Data: [ToolCallCompletedData].
	ToolCallCompleted Type = "tool.call.completed"
	// Usage records the tokens of one step. Data: [UsageData].
	Usage Type = "usage"
	// ModelRetry records a retried model request. Data: [ModelRetryData].
	ModelRetry Type = "model.retry"
)

// Steering events.
const (
	// SteerAccepted records input injected into an active run. Data: [SteerData].
	SteerAccepted Type = "steer.accepted"
	// SteerConsumed records that the model saw a steer. Data: [SteerData].
	SteerConsumed Type = "steer.consumed"
	// SteerDropped records a steer that the run ended before consuming. Data: [SteerData].
	SteerDropped Type = "steer.dropped"
)

// Part is one piece of message content: text ({"type":"text","text":…})
// or an image ({"type":"image","mediaType":"image/png","data":<base64>}).
// An image's bytes are kept inline in the event that carries it (see
// [CheckImage] for what an image may be); the log stays the one truth.
type Part struct {
	// Type is [PartText] or [PartImage].
	Type string `json:"type"`
	Text string `json:"text,omitempty"`
	// MediaType is an image's type: one of [ImageMediaTypes].
	MediaType string `json:"mediaType,omitempty"`
	// Data is an image's bytes, base64 in JSON.
	Data []byte `json:"data,omitempty"`
}

// Part types.
const (
	PartText  = "text"
	PartImage = "image"
)

// Images returns the image parts of parts, in order; nil if none.
func Images(parts []Part) []Part {
	var out []Part
	for _, p := range parts {
		if p.Type == PartImage {
			out = append(out, p)
		}
	}
	return out
}

// TokenUsage counts tokens. Zero fields mean the provider did not report them.
type TokenUsage struct {
	InputTokens      int64 `json:"inputTokens"`
	OutputTokens     int64 `json:"outputTokens"`
	CacheReadTokens  int64 `json:"cacheReadTokens,omitempty"`
	CacheWriteTokens int64 `json:"cacheWriteTokens,omitempty"`
	ReasoningTokens  int64 `json:"reasoningTokens,omitempty"`
	// CostUSD is what the tokens cost in US dollars at the model's price
	// (docs/config.md); zero when the model has no price.
	CostUSD float64 `json:"costUsd,omitempty"`
}

// Add adds o to u.
func (u *TokenUsage) Add(o TokenUsage) {
	u.InputTokens += o.InputTokens
	u.OutputTokens += o.OutputTokens
	u.CacheReadTokens += o.CacheReadTokens
	u.CacheWriteTokens += o.CacheWriteTokens
	u.ReasoningTokens += o.ReasoningTokens
	u.CostUSD += o.CostUSD
}

// Error is the typed error carried by failure events.
type Error struct {
	// Kind is a stable machine-readable category, e.g. "max_steps", "model", "timeout", "interrupted".
	Kind string `json:"kind"`
	// Message is for people.
	Message string `json:"message"`
	// Retryable reports whether the same request may succeed later.
	Retryable bool `json:"retryable,omitempty"`
	// Budget, for kind budget_exceeded, says which budget the run
	// reached: its scope, name, limit and what was spent.
	Budget *BudgetExceeded `json:"budget,omitempty"`
}

// Limits bound the resources of each command a session runs (a shell
// call, a background shell, an MCP server started for it): zero fields
// leave the host's defaults. docs/sandbox.md says what enforces each.
type Limits struct {
	// Processes caps the processes and threads alive at once in the
	// command's tree.
	Processes int `json:"processes,omitempty"`
	// MemoryBytes caps the tree's memory.
	MemoryBytes int64 `json:"memoryBytes,omitempty"`
	// CPUTimeMs caps the CPU time of the whole tree, in milliseconds.
	CPUTimeMs int64 `json:"cpuTimeMs,omitempty"`
	// FileSizeBytes caps the size any one file may be written to.
	FileSizeBytes int64 `json:"fileSizeBytes,omitempty"`
}

// ToolFailure is the typed reason of a failed tool call.
type ToolFailure struct {
	// Kind is the class of failure: [FailureResourceLimit].
	Kind string `json:"kind"`
	// Limit names the limit reached ("processes", "memory", "cpuTime",
	// "fileSize"), for FailureResourceLimit.
	Limit string `json:"limit,omitempty"`
	// Scope is whose limit it was: "command", "session" or "host".
	Scope string `json:"scope,omitempty"`
	// Message says more, where the kind alone does not (a subagent's
	// child run's error).
	Message string `json:"message,omitempty"`
}

// FailureResourceLimit is the [ToolFailure] kind of a command that ran
// into one of its resource limits.
const FailureResourceLimit = "resource_limit"

// The [ToolFailure] kinds of a subagent whose child run did not complete:
// it failed (Message says why), was cancelled, or was interrupted (a host
// restart cut it short; the parent may spawn it again).
const (
	FailureSubagentFailed      = "subagent_failed"
	FailureSubagentCancelled   = "subagent_cancelled"
	FailureSubagentInterrupted = "subagent_interrupted"
	// FailureSubagentLimit is a spawn_agent call refused by a limit
	// (Limit "depth" or "children").
	FailureSubagentLimit = "subagent_limit"
)

// SessionParent is where a child session (a subagent's) comes from: the
// session, run, tool call and process that spawned it, its depth, and
// the only tools its runs may use.
type SessionParent struct {
	SessionID  string `json:"sessionId"`
	RunID      string `json:"runId,omitempty"`
	ToolCallID string `json:"toolCallId,omitempty"`
	ProcessID  string `json:"processId,omitempty"`
	// Depth is 1 for a child of a top-level session.
	Depth int `json:"depth"`
	// Tools are the names of the tools the child's runs are offered (the
	// host's and MCP servers'; tools the client executes are the
	// session's own). Empty means none.
	Tools []string `json:"tools"`
}

// SessionCreatedData is the data of [SessionCreated].
type SessionCreatedData struct {
	Mounts []Mount `json:"mounts,omitempty"`
	// Network is the shells' network policy ("allow" or "deny"); empty
	// means the host's default.
	Network string `json:"network,omitempty"`
	// Limits are the session's own limits of each command, within the
	// host's ceiling; nil means the host's defaults.
	Limits   *Limits           `json:"limits,omitempty"`
	Title    string            `json:"title,omitempty"`
	Model    string            `json:"model,omitempty"`
	Metadata map[string]string `json:"metadata,omitempty"`
	// Policy is the session's approval policy (api.Policy), if any.
	Policy json.RawMessage `json:"policy,omitempty"`
	// Tools are the tools the session's client executes itself.
	Tools []ClientTool `json:"tools,omitempty"`
	// MCPServers are the session's own MCP tool servers, by name, beside
	// those of the host's configuration (a session's server replaces the
	// host's of the same name). They hold no secret: headers and
	// environment values name variables as ${VAR}, resolved when the
	// server starts.
	MCPServers map[string]MCPServer `json:"mcpServers,omitempty"`
	// Budget is the session's budget (its runs' spend together), if it
	// has one; the host's default session budget when it was created
	// without.
	Budget *Budget `json:"budget,omitempty"`
	// Parent, set for a subagent's session, is the session and run that
	// spawned it.
	Parent *SessionParent `json:"parent,omitempty"`
}

// MCPServer is how to reach an MCP tool server: a command that speaks
// MCP on its stdin and stdout (Command set), or a streamable HTTP
// endpoint (URL set). Values of Env and Headers may contain ${VAR},
// replaced by the host's environment variable VAR when the server
// starts, so that a token is never written into a log. See
// docs/config.md.
type MCPServer struct {
	// Command is the program of a stdio server, a path or a name looked
	// up in PATH.
	Command string `json:"command,omitempty"`
	// Args are the command's arguments.
	Args []string `json:"args,omitempty"`
	// Env holds the command's extra environment variables.
	Env map[string]string `json:"env,omitempty"`
	// Cwd is the command's working directory, a path in the session's
	// mounts (/environment/<id>/… or relative to the default mount);
	// empty means the root of the shells' default mount.
	Cwd string `json:"cwd,omitempty"`
	// ReadOnly lists host paths beyond the system directories that a
	// sandboxed command may read and execute (where its program lives).
	ReadOnly []string `json:"readOnly,omitempty"`
	// URL is the endpoint of a streamable HTTP server.
	URL string `json:"url,omitempty"`
	// Headers are sent with every HTTP request.
	Headers map[string]string `json:"headers,omitempty"`
	// Trusted runs a stdio server without the shells' sandbox (it is
	// still stopped with its whole process tree). Only the host's
	// configuration may set it.
	Trusted bool `json:"trusted,omitempty"`
}

// SessionUpdatedData is the data of [SessionUpdated]; nil fields are unchanged.
type SessionUpdatedData struct {
	Title *string `json:"title,omitempty"`
	Model *string `json:"model,omitempty"`
	// Budget, if set, is the session's budget from now on, whole.
	Budget *Budget `json:"budget,omitempty"`
}

// RunQueuedData is the data of [RunQueued].
type RunQueuedData struct {
	Model    string `json:"model"`
	MaxSteps int    `json:"maxSteps,omitempty"`
	Input    []Part `json:"input"`
	// Policy is the run's approval policy (api.Policy), layered over the
	// session's, if any.
	Policy json.RawMessage `json:"policy,omitempty"`
	// DefaultPreset is the preset the host's layer takes for this run
	// when no layer names one (api.StartRunParams.DefaultPreset), kept so
	// that a run resumed after a restart is decided by the same policy.
	DefaultPreset string `json:"defaultPreset,omitempty"`
	// Tools are tools the client executes itself, for this run.
	Tools []ClientTool `json:"tools,omitempty"`
	// Busy is the busy policy the run was admitted under
	// (api.StartRunParams.Busy), kept so that the queue can be rebuilt
	// from the log after a restart: a run admitted with "interrupt" goes
	// before the runs queued earlier.
	Busy string `json:"busy,omitempty"`
	// Budget is the run's budget (the run's params over the host's
	// default run budget), if it has one.
	Budget *Budget `json:"budget,omitempty"`
}

// RunStartedData is the data of [RunStarted].
type RunStartedData struct {
	Model string `json:"model"`
	// TraceID and SpanID name the OpenTelemetry span of the run, when
	// the host traces runs (hex, as W3C trace context spells them), so
	// that a log line leads to its trace; empty otherwise.
	TraceID string `json:"traceId,omitempty"`
	SpanID  string `json:"spanId,omitempty"`
}

// RunEndedData is the data of the run's terminal event.
type RunEndedData struct {
	Steps  int        `json:"steps"`
	Usage  TokenUsage `json:"usage"`
	Error  *Error     `json:"error,omitempty"`
	Reason string     `json:"reason,omitempty"`
}

// MessageUserData is the data of [MessageUser].
type MessageUserData struct {
	Content []Part `json:"content"`
}

// DeltaData is the data of [MessageDelta] and [ReasoningDelta].
type DeltaData struct {
	Step int    `json:"step"`
	Text string `json:"text"`
}

// StepData is the data of [StepStarted].
type StepData struct {
	Step int `json:"step"`
}

// ToolCall is a model's request to call a tool.
type ToolCall struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	// Arguments is the JSON text the model produced; it may be invalid.
	Arguments string `json:"arguments"`
}

// MessageCompletedData is the data of [MessageCompleted]: the assistant
// message of one step as the next model request must replay it.
type MessageCompletedData struct {
	Step         int        `json:"step"`
	Text         string     `json:"text,omitempty"`
	Reasoning    string     `json:"reasoning,omitempty"`
	ToolCalls    []ToolCall `json:"toolCalls,omitempty"`
	FinishReason string     `json:"finishReason,omitempty"`
	// ProviderState is opaque provider data that must be sent back verbatim
	// (e.g. encrypted reasoning, thinking signatures).
	ProviderState json.RawMessage `json:"providerState,omitempty"`
}

// ToolCallStartedData is the data of [ToolCallStarted].
type ToolCallStartedData struct {
	Step int `json:"step"`
	ToolCall
}

// ToolCallCompletedData is the data of [ToolCallCompleted].
type ToolCallCompletedData struct {
	ID     string `json:"id"`
	Name   string `json:"name"`
	Output string `json:"output"`
	// IsError reports whether Output describes a failure the model should see.
	IsError bool `json:"isError,omitempty"`
	// Truncated reports whether Output was cut to the result budget.
	Truncated  bool  `json:"truncated,omitempty"`
	DurationMs int64 `json:"durationMs"`
	// Failure is the typed reason of a failed call, where the tool gives
	// one (a command that ran into a resource limit).
	Failure *ToolFailure `json:"failure,omitempty"`
	// Confinement says, for a command the call ran, what held it: the
	// network (and what took it away) and each limit with what enforced
	// it (docs/sandbox.md).
	Confinement string `json:"confinement,omitempty"`
	// By, for the call of a tool a client executes, says which client
	// answered (or, with Policy set, that the run's cancel closed it).
	By *By `json:"by,omitempty"`
	// Attachments are the images the result carries beside Output (an
	// MCP tool's image content), as image parts; the model sees them
	// after Output. At most MaxImages and MaxImagesBytes.
	Attachments []Part `json:"attachments,omitempty"`
}

// UsageData is the data of [Usage].
type UsageData struct {
	Step  int        `json:"step"`
	Usage TokenUsage `json:"usage"`
}

// ModelRetryData is the data of [ModelRetry].
type ModelRetryData struct {
	Step    int    `json:"step"`
	Attempt int    `json:"attempt"`
	DelayMs int64  `json:"delayMs"`
	Error   string `json:"error"`
}

// SteerData is the data of the steer events.
type SteerData struct {
	SteerID string `json:"steerId"`
	Input   []Part `json:"input,omitempty"`
	Step    int    `json:"step,omitempty"`
	Reason  string `json:"reason,omitempty"`
}

// Text returns the concatenated text of parts.
func Text(parts []Part) string {
	if len(parts) == 1 {
		return parts[0].Text
	}
	var s string
	for _, p := range parts {
		s += p.Text
	}
	return s
}

// TextParts wraps s as a single text part.
func TextParts(s string) []Part { return []Part{{Type: "text", Text: s}} }

// Mount events.
const (
	// MountAdded records a mount attached to a session. Data: [MountChangeData].
	MountAdded Type = "mount.added"
	// MountRemoved records a mount detached from a session. Data: [MountChangeData].
	MountRemoved Type = "mount.removed"
	// MountInfo records the whole binding at the start of each run, and
	// the project instructions the run's model was given. Data:
	// [MountInfoData].
	MountInfo Type = "mount.info"
)

// Mount modes.
const (
	ModeReadOnly  = "ro"
	ModeReadWrite = "rw"
)

// Mount kinds.
const (
	// KindLocal is a host directory.
	KindLocal = "local"
	// KindScratch is a private directory owned by the session and removed with it.
	KindScratch = "scratch"
)

// Mount is a directory attached to a session; the agent sees it at
// /environment/<ID>.
type Mount struct {
	// ID is a slug unique within the session.
	ID string `json:"id"`
	// Kind is KindLocal or KindScratch.
	Kind string `json:"kind"`
	// Path is the host directory. For scratch mounts the host fills it in.
	Path string `json:"path,omitempty"`
	// Mode is ModeReadOnly or ModeReadWrite.
	Mode string `json:"mode"`
	// Default marks the mount relative paths resolve in.
	Default bool `json:"default,omitempty"`
	// DefaultForShell marks the read-write mount shells start in.
	DefaultForShell bool              `json:"defaultForShell,omitempty"`
	Metadata        map[string]string `json:"metadata,omitempty"`
}

// Binding is a session's environment at one version: its mounts, and the
// network policy of its shells.
type Binding struct {
	BindingVersion int64   `json:"bindingVersion"`
	Mounts         []Mount `json:"mounts"`
	// Network is the shells' network policy, "allow" or "deny"; empty
	// means the host's default.
	Network string `json:"network,omitempty"`
	// Limits are the session's own limits of each command; nil means
	// the host's defaults.
	Limits *Limits `json:"limits,omitempty"`
}

// MountInfoData is the data of [MountInfo]: the binding, and the project
// instructions (AGENTS.md) added to the system prompt, if any.
type MountInfoData struct {
	Binding
	Instructions *Instructions `json:"instructions,omitempty"`
}

// Instructions are project instructions the model is given: AGENTS.md at
// the root of the default mount, up to a size cap.
type Instructions struct {
	// Path is where they were read, as the model sees it
	// (/environment/<mount>/AGENTS.md).
	Path string `json:"path"`
	// Bytes is the file's size; Truncated is set when it was cut to the cap.
	Bytes     int64 `json:"bytes"`
	Truncated bool  `json:"truncated,omitempty"`
	// Text is what the model was given; not recorded in mount.info.
	Text string `json:"-"`
}

// MountChangeData is the data of [MountAdded] and [MountRemoved].
type MountChangeData struct {
	OperationID    string  `json:"operationId,omitempty"`
	Mount          Mount   `json:"mount"`
	BindingVersion int64   `json:"bindingVersion"`
	Mounts         []Mount `json:"mounts"`
}

// Process lifecycle events in the session log. Each process also has a
// log of its own (see package process).
const (
	// ProcessStarted records a background process of the session. Data: [ProcessData].
	ProcessStarted Type = "process.started"
	// ProcessExited records its end, with a summary. Data: [ProcessData].
	ProcessExited Type = "process.exited"
)

// SubagentRequest, in a parent session's log, mirrors a request of one
// of its subagents' sessions (approval.requested, input.requested) or its
// end (approval.resolved, approval.expired, input.resolved), so that the
// parent's clients see it and answer it (approval/decide and
// input/answer with the parent's session). The request itself lives in
// the child's session. Data: [SubagentRequestData].
const SubagentRequest Type = "subagent.request"

// SubagentRequestData is the data of [SubagentRequest].
type SubagentRequestData struct {
	// ProcessID is the subagent's process; SessionID its session.
	ProcessID string `json:"processId"`
	SessionID string `json:"sessionId"`
	// Event is the type of the child's event, Data its data.
	Event Type            `json:"event"`
	Data  json.RawMessage `json:"data"`
}

// ProcessData is the data of [ProcessStarted] and [ProcessExited].
type ProcessData struct {
	ProcessID string `json:"processId"`
	// RunID is the run that started the process, if any.
	RunID       string `json:"runId,omitempty"`
	Kind        string `json:"kind"`
	Command     string `json:"command,omitempty"`
	Tool        string `json:"tool,omitempty"`
	MountID     string `json:"mountId,omitempty"`
	Disposition string `json:"disposition"`
	Status      string `json:"status"`
	ExitCode    *int   `json:"exitCode,omitempty"`
	// Tail is the end of the output, for process.exited.
	Tail string `json:"tail,omitempty"`
}

// Tool progress events.
const (
	// ToolProgress reports the progress of a running tool call (an MCP
	// server's notifications/progress). Data: [ToolProgressData].
	ToolProgress Type = "tool.progress"
)

// ToolProgressData is the data of [ToolProgress]. Progress is a level,
// not a stream: a later event says all an earlier one did, so a producer
// may coalesce updates that come faster than it records them.
type ToolProgressData struct {
	// ID and Name are the tool call's.
	ID   string `json:"id"`
	Name string `json:"name"`
	// Progress is how far the call is; it grows with each event.
	Progress float64 `json:"progress"`
	// Total is what Progress reaches at the end; zero means unknown.
	Total float64 `json:"total,omitempty"`
	// Message says what the call is doing, at most MaxProgressMessageBytes.
	Message string `json:"message,omitempty"`
}

// MaxProgressMessageBytes caps the message of a [ToolProgressData].
const MaxProgressMessageBytes = 1 << 10

// MCP server events.
const (
	// MCPServerFailed records that an MCP server a run's step needed
	// failed: it did not start, it crashed, or its tools could not be
	// listed. Data: [MCPServerFailedData].
	MCPServerFailed Type = "mcp.server_failed"
)

// MCPServerFailedData is the data of [MCPServerFailed]. A session
// records each failure once: the steps that meet the same failure again
// (while the server waits out its backoff) add nothing.
type MCPServerFailedData struct {
	// Server is the server's name.
	Server string `json:"server"`
	// Error says what failed: the exit status and the tail of a
	// command's stderr, the HTTP error, the refused tool list.
	Error string `json:"error"`
	// Failures counts the server's failures one after another.
	Failures int `json:"failures,omitempty"`
	// Tools are the server's tools the model is still offered, which
	// answer each call with this error until the server is back.
	Tools []string `json:"tools,omitempty"`
}
