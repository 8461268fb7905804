package mcpserver

import (
	"time"

	"weft.dev/weft/event"
)

// The tools' inputs and outputs. Their JSON Schemas, inferred from these
// types, are the tools' input and output schemas: a field without
// omitempty is required, the jsonschema tag is its description.

// MountArg is a directory a new session works in.
type MountArg struct {
	Path     string `json:"path" jsonschema:"the directory: absolute, or relative to the server's working directory"`
	ID       string `json:"id,omitempty" jsonschema:"the mount's ID, a slug (default: the directory's name); the agent sees it at /environment/ID"`
	ReadOnly bool   `json:"readOnly,omitempty" jsonschema:"mount it read-only"`
}

// StartRunInput is start_run's input.
type StartRunInput struct {
	Prompt         string     `json:"prompt" jsonschema:"the task or message for weft's agent"`
	SessionID      string     `json:"sessionId,omitempty" jsonschema:"continue this session (its transcript, mounts and settings); omit to create a session"`
	Title          string     `json:"title,omitempty" jsonschema:"a new session's title (default: the start of the prompt)"`
	Model          string     `json:"model,omitempty" jsonschema:"provider:model for this run, and a new session's model (e.g. anthropic:claude-sonnet-4-5); omit for the session's or the host's"`
	Mounts         []MountArg `json:"mounts,omitempty" jsonschema:"directories a new session works in, the first the default; omit for the server's working directory"`
	Busy           string     `json:"busy,omitempty" jsonschema:"when the session already has an active run: reject (the default: an error naming it), queue (run after it), interrupt (cancel it) or steer (fold the prompt into it)"`
	Approval       string     `json:"approval,omitempty" jsonschema:"this run's approval preset: read-only, ask-writes, ask-all or never-ask (default: the host's policy)"`
	MaxSteps       int        `json:"maxSteps,omitempty" jsonschema:"the most model calls the run may make (default: the host's)"`
	IdempotencyKey string     `json:"idempotencyKey,omitempty" jsonschema:"a key of yours: a retry with the same key and arguments answers with the same run instead of starting another"`
}

// RunOutput is a run, as start_run, await_run, get_run and cancel_run
// answer.
type RunOutput struct {
	RunID     string `json:"runId"`
	SessionID string `json:"sessionId"`
	Status    string `json:"status" jsonschema:"queued, running, waiting (for an answer: see pendingRequests), completed, failed, cancelled or interrupted"`
	Done      bool   `json:"done" jsonschema:"the run has ended and its status is final"`
	TimedOut  bool   `json:"timedOut,omitempty" jsonschema:"await_run's timeout passed first: call await_run again"`
	Answer    string `json:"answer,omitempty" jsonschema:"a completed run's final answer"`
	// Error says why a run failed, was cancelled or interrupted.
	Error           *event.Error     `json:"error,omitempty"`
	Steps           int              `json:"steps"`
	Usage           event.TokenUsage `json:"usage"`
	PendingRequests []Request        `json:"pendingRequests,omitempty" jsonschema:"what a waiting run asks: answer with answer_approval or answer_question"`
	LastSeq         int64            `json:"lastSeq" jsonschema:"the seq of the run's last event, a cursor for read_events"`
	SessionCreated  bool             `json:"sessionCreated,omitempty" jsonschema:"start_run created the session"`
	Steer           *SteerOutput     `json:"steer,omitempty" jsonschema:"set when busy=steer folded the prompt into the active run, which this is"`
	Replayed        bool             `json:"replayed,omitempty" jsonschema:"an exact retry of an idempotencyKey: nothing new was started"`
}

// Request is an approval or a question that waits for an answer.
type Request struct {
	ID        string `json:"id" jsonschema:"answer it by this ID"`
	Kind      string `json:"kind" jsonschema:"approval (answer with answer_approval), input (a question: answer_question) or tool"`
	SessionID string `json:"sessionId"`
	RunID     string `json:"runId"`
	Status    string `json:"status"`
	// Tool and Arguments are the call an approval gates.
	Tool      string     `json:"tool,omitempty"`
	Arguments string     `json:"arguments,omitempty" jsonschema:"the call's arguments, as the model wrote them (JSON text)"`
	Options   []string   `json:"options,omitempty" jsonschema:"the decisions an approval accepts"`
	Question  string     `json:"question,omitempty"`
	Choices   []string   `json:"choices,omitempty"`
	Deadline  *time.Time `json:"deadline,omitempty" jsonschema:"when it expires and takes its default decision"`
	Decision  string     `json:"decision,omitempty"`
	Message   string     `json:"message,omitempty"`
}

// RunIDInput names a run.
type RunIDInput struct {
	RunID string `json:"runId" jsonschema:"the run's ID, as start_run answered"`
}

// AwaitRunInput is await_run's input.
type AwaitRunInput struct {
	RunID          string  `json:"runId" jsonschema:"the run's ID, as start_run answered (also after a restart of yours)"`
	TimeoutSeconds float64 `json:"timeoutSeconds,omitempty" jsonschema:"how long to wait (default 30; at most the server's limit, 600 unless configured)"`
	// UntilDone, when set, keeps waiting through approvals and questions.
	UntilDone bool `json:"untilDone,omitempty" jsonschema:"keep waiting while the run waits for an answer (default: answer as soon as it asks)"`
}

// ReadEventsInput is read_events' input.
type ReadEventsInput struct {
	SessionID string   `json:"sessionId"`
	After     int64    `json:"after,omitempty" jsonschema:"the cursor: events after this seq (default 0, the start)"`
	Limit     int      `json:"limit,omitempty" jsonschema:"the most events to return (default 50, at most 1000)"`
	RunID     string   `json:"runId,omitempty" jsonschema:"only this run's events"`
	Types     []string `json:"types,omitempty" jsonschema:"only these event types, e.g. message.completed, tool.call.completed; a trailing * matches a prefix (tool.*)"`
}

// Event is one event of a session's log.
type Event struct {
	Seq   int64     `json:"seq"`
	Type  string    `json:"type"`
	RunID string    `json:"runId,omitempty"`
	Time  time.Time `json:"time"`
	Data  any       `json:"data,omitempty"`
}

// ReadEventsOutput is a page of events.
type ReadEventsOutput struct {
	Events     []Event `json:"events"`
	NextCursor int64   `json:"nextCursor" jsonschema:"pass as after to read on"`
	HasMore    bool    `json:"hasMore"`
}

// SteerInput is steer's input.
type SteerInput struct {
	RunID          string `json:"runId" jsonschema:"the active run to steer"`
	Text           string `json:"text" jsonschema:"what to tell the agent; it reads it at its next step"`
	IdempotencyKey string `json:"idempotencyKey,omitempty"`
}

// SteerOutput acknowledges a steer.
type SteerOutput struct {
	SteerID     string `json:"steerId"`
	RunID       string `json:"runId"`
	Status      string `json:"status"`
	EventCursor int64  `json:"eventCursor" jsonschema:"the seq of its steer.accepted event"`
	Replayed    bool   `json:"replayed,omitempty"`
}

// CancelRunInput is cancel_run's input.
type CancelRunInput struct {
	RunID  string `json:"runId"`
	Reason string `json:"reason,omitempty"`
}

// ListSessionsInput is list_sessions' input.
type ListSessionsInput struct {
	Cursor string `json:"cursor,omitempty" jsonschema:"the nextCursor of the previous page"`
	Limit  int    `json:"limit,omitempty" jsonschema:"the most sessions to return (default 20, at most 1000)"`
}

// Session is a session.
type Session struct {
	ID          string            `json:"id"`
	Title       string            `json:"title,omitempty"`
	Model       string            `json:"model,omitempty"`
	CreatedAt   time.Time         `json:"createdAt"`
	UpdatedAt   time.Time         `json:"updatedAt"`
	LastSeq     int64             `json:"lastSeq"`
	ActiveRunID string            `json:"activeRunId,omitempty"`
	Mounts      []SessionMount    `json:"mounts,omitempty"`
	Metadata    map[string]string `json:"metadata,omitempty"`
}

// SessionMount is a directory a session works in.
type SessionMount struct {
	ID      string `json:"id"`
	Path    string `json:"path,omitempty"`
	Mode    string `json:"mode"`
	Default bool   `json:"default,omitempty"`
}

// ListSessionsOutput is a page of sessions.
type ListSessionsOutput struct {
	Sessions   []Session `json:"sessions"`
	NextCursor string    `json:"nextCursor,omitempty"`
}

// CreateSessionInput is create_session's input.
type CreateSessionInput struct {
	Title          string     `json:"title,omitempty"`
	Model          string     `json:"model,omitempty" jsonschema:"provider:model of the session's runs (default: the host's)"`
	Mounts         []MountArg `json:"mounts,omitempty" jsonschema:"directories the session works in, the first the default; omit for the server's working directory"`
	IdempotencyKey string     `json:"idempotencyKey,omitempty"`
}

// ListApprovalsInput is list_approvals' input.
type ListApprovalsInput struct {
	SessionID string `json:"sessionId,omitempty" jsonschema:"only this session's"`
	RunID     string `json:"runId,omitempty" jsonschema:"only this run's"`
}

// ListApprovalsOutput lists open requests, oldest first.
type ListApprovalsOutput struct {
	Requests []Request `json:"requests"`
}

// AnswerApprovalInput is answer_approval's input.
type AnswerApprovalInput struct {
	ApprovalID     string `json:"approvalId"`
	Decision       string `json:"decision" jsonschema:"allow_once, allow_session (also allows such calls for the rest of the session; always is the same) or deny"`
	Message        string `json:"message,omitempty" jsonschema:"shown to the agent with a deny"`
	IdempotencyKey string `json:"idempotencyKey,omitempty"`
}

// AnswerQuestionInput is answer_question's input.
type AnswerQuestionInput struct {
	RequestID      string `json:"requestId"`
	Text           string `json:"text,omitempty" jsonschema:"the answer's text"`
	Choice         *int   `json:"choice,omitempty" jsonschema:"or: the index of one of the question's choices"`
	IdempotencyKey string `json:"idempotencyKey,omitempty"`
}

// RequestOutput is a request after its answer.
type RequestOutput struct {
	Request
	Replayed bool `json:"replayed,omitempty"`
}
