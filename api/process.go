package api

import (
	"encoding/json"

	"weft.dev/weft/store"
)

// AwaitResult is the result of process/await: the record when the wait
// ended and the tail of the output.
type AwaitResult struct {
	// Process is the record when Await returned.
	Process store.Process `json:"process"`
	// TimedOut is set when the process was still running at the timeout.
	TimedOut bool `json:"timedOut,omitempty"`
	// Tail is the end of the output (Config.TailBytes), as text.
	Tail string `json:"tail"`
}

// Chunk is a piece of a process's output.
type Chunk struct {
	// Stream is "stdout", "stderr", "pty" or "result".
	Stream string `json:"stream"`
	// Offset is the offset of Data's first byte in the combined output.
	Offset int64  `json:"offset"`
	Data   []byte `json:"data"`
	// Skipped counts bytes before Offset that the reader asked for but
	// that were dropped by the output cap.
	Skipped int64 `json:"skipped,omitempty"`
}

// Output is a read of a process's output by offset.
type Output struct {
	// Data is the output from Offset on, all streams combined.
	Data []byte `json:"data"`
	// Chunks are the same bytes by stream.
	Chunks []Chunk `json:"chunks,omitempty"`
	// Offset is where Data starts: the requested offset, or the earliest
	// available one when Truncated.
	Offset int64 `json:"offset"`
	// Next is the offset to read from next.
	Next int64 `json:"next"`
	// Truncated is set when the requested offset was dropped by the output
	// cap; Offset then is the earliest available offset.
	Truncated bool `json:"truncated,omitempty"`
	// Total is the output so far.
	Total int64 `json:"total"`
	// Ended is set when the process has ended and Next == Total: no more
	// output will come.
	Ended bool `json:"ended,omitempty"`
}

// ProcessStartParams are the params of process/start: a shell command or
// a tool with its arguments, started in the background.
type ProcessStartParams struct {
	SessionID string `json:"sessionId"`
	// Command is a shell command (sh -c); or set Tool and Args.
	Command string            `json:"command,omitempty"`
	Tool    string            `json:"tool,omitempty"`
	Args    json.RawMessage   `json:"args,omitempty"`
	MountID string            `json:"mountId,omitempty"`
	Cwd     string            `json:"cwd,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	// Disposition is owner_bound (default), rerunnable or externally_owned.
	Disposition string `json:"disposition,omitempty"`
	// WakeOnExit starts a follow-up run with the result when the process
	// ends while the session has no active run.
	WakeOnExit     bool   `json:"wakeOnExit,omitempty"`
	PTY            bool   `json:"pty,omitempty"`
	IdempotencyKey string `json:"idempotencyKey,omitempty"`
}

// ProcessResult is a process record.
type ProcessResult struct {
	store.Process
	Handle   Handle `json:"handle"`
	Replayed bool   `json:"replayed,omitempty"`
}

// ProcessIDParams name a process; SessionID, when set, is the session the
// caller acts as (visibility and grants apply), else the caller is an
// operator of the host.
type ProcessIDParams struct {
	ID        string `json:"id"`
	SessionID string `json:"sessionId,omitempty"`
}

// ProcessListParams are the params of process/list. Without SessionID an
// operator lists every session's processes.
type ProcessListParams struct {
	SessionID string `json:"sessionId,omitempty"`
	Status    string `json:"status,omitempty"`
}

// ProcessListResult lists processes.
type ProcessListResult struct {
	Processes []store.Process `json:"processes"`
}

// ProcessAwaitParams are the params of process/await.
type ProcessAwaitParams struct {
	ID        string `json:"id"`
	SessionID string `json:"sessionId,omitempty"`
	TimeoutMs int64  `json:"timeoutMs"`
}

// ProcessOutputParams are the params of process/output.
type ProcessOutputParams struct {
	ID        string `json:"id"`
	SessionID string `json:"sessionId,omitempty"`
	Offset    int64  `json:"offset,omitempty"`
	Limit     int    `json:"limit,omitempty"`
}

// ProcessWriteParams are the params of process/write (stdin).
type ProcessWriteParams struct {
	ID        string `json:"id"`
	SessionID string `json:"sessionId,omitempty"`
	Data      string `json:"data"`
	// Close closes stdin after writing Data.
	Close          bool   `json:"close,omitempty"`
	IdempotencyKey string `json:"idempotencyKey,omitempty"`
}

// ProcessSignalParams are the params of process/signal.
type ProcessSignalParams struct {
	ID             string          `json:"id"`
	SessionID      string          `json:"sessionId,omitempty"`
	Name           string          `json:"name"`
	Payload        json.RawMessage `json:"payload,omitempty"`
	IdempotencyKey string          `json:"idempotencyKey,omitempty"`
}

// ProcessSignalResult acknowledges a signal.
type ProcessSignalResult struct {
	// Seq is the seq of the signal.<name> event in the process log.
	Seq      int64 `json:"seq"`
	Replayed bool  `json:"replayed,omitempty"`
}

// ProcessCancelParams are the params of process/cancel.
type ProcessCancelParams struct {
	ID             string `json:"id"`
	SessionID      string `json:"sessionId,omitempty"`
	Reason         string `json:"reason,omitempty"`
	IdempotencyKey string `json:"idempotencyKey,omitempty"`
}

// ProcessGrantParams are the params of process/grant and process/revoke.
type ProcessGrantParams struct {
	ID             string `json:"id"`
	SessionID      string `json:"sessionId,omitempty"`
	ToSessionID    string `json:"toSessionId"`
	IdempotencyKey string `json:"idempotencyKey,omitempty"`
}

// ProcessFollowParams are the params of process/follow.
type ProcessFollowParams struct {
	ID        string `json:"id"`
	SessionID string `json:"sessionId,omitempty"`
	Offset    int64  `json:"offset,omitempty"`
}

// ProcessOutputNotification is the params of the process/output
// notification.
type ProcessOutputNotification struct {
	SubscriptionID string `json:"subscriptionId"`
	Chunk          Chunk  `json:"chunk"`
}

// Reasons a process follow ends, beyond those of [ClosedNotification].
const (
	// ReasonEnded: the process ended and all its output was delivered.
	ReasonEnded = "ended"
)

// ProcessClosedNotification is the params of process/closed: Reason is
// "ended" (all output was delivered), "unsubscribed", "closed", "overflow"
// or "error"; Offset is where to resume.
type ProcessClosedNotification struct {
	SubscriptionID string `json:"subscriptionId"`
	Reason         string `json:"reason"`
	Offset         int64  `json:"offset"`
	Message        string `json:"message,omitempty"`
}
