package api

import (
	"encoding/json"
	"fmt"
	"strings"

	"weft.dev/weft/store/record"
)

// AwaitResult is the result of process/await: the record when the wait
// ended and an excerpt of the output.
type AwaitResult struct {
	// Process is the record when Await returned: its status, exit code
	// and the true size of its output (outputBytes, droppedBytes).
	Process record.Process `json:"process"`
	// TimedOut is set when the process was still running at the timeout.
	TimedOut bool `json:"timedOut,omitempty"`
	// Head is the beginning of the output, as text, when the output is
	// longer than the excerpt the host returns; Omitted bytes that are
	// not shown follow it, then Tail. A lost range (see [Chunk.Lost]) is
	// shown as its [Chunk.LostNote] on a line of its own.
	Head string `json:"head,omitempty"`
	// Omitted counts the output bytes between Head and Tail that are not
	// shown: the range [TailOffset-Omitted, TailOffset), to be read with
	// process/output.
	Omitted int64 `json:"omitted,omitempty"`
	// TailOffset is the offset of Tail's first byte.
	TailOffset int64 `json:"tailOffset,omitempty"`
	// Tail is the end of the output, as text: all of it when it fits.
	Tail string `json:"tail"`
}

// Why output was lost ([Chunk.Reason]).
const (
	// LostStoreUnavailable: the store refused writes for longer than the
	// host could hold the output in memory.
	LostStoreUnavailable = "store_unavailable"
)

// Chunk is a piece of a process's output, or a mark where output was lost.
type Chunk struct {
	// Stream is "stdout", "stderr", "pty" or "result"; empty for a lost
	// range.
	Stream string `json:"stream"`
	// Offset is the offset of Data's first byte in the combined output
	// (of the lost range, when Lost is set).
	Offset int64  `json:"offset"`
	Data   []byte `json:"data"`
	// Skipped counts bytes before Offset that the reader asked for but
	// that were dropped by the output cap.
	Skipped int64 `json:"skipped,omitempty"`
	// Lost, when positive, makes the chunk a mark: the Lost bytes of
	// output from Offset on were never stored, for Reason (e.g.
	// [LostStoreUnavailable]). Data is empty. Their offsets stay
	// reserved, and the process's droppedBytes counts them.
	Lost   int64  `json:"lost,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// End returns the offset after c: where the next chunk starts.
func (c Chunk) End() int64 { return c.Offset + int64(len(c.Data)) + c.Lost }

// LostNote returns what a reader shows in place of a lost range,
// "[N bytes lost at offset X: store unavailable]", or "" for a chunk of
// output.
func (c Chunk) LostNote() string {
	if c.Lost <= 0 {
		return ""
	}
	why := strings.ReplaceAll(c.Reason, "_", " ")
	if why == "" {
		why = "unknown reason"
	}
	return fmt.Sprintf("[%d bytes lost at offset %d: %s]", c.Lost, c.Offset, why)
}

// Output is a read of a process's output by offset.
type Output struct {
	// Data is the output from Offset to Next, all streams combined,
	// without the lost ranges: Next-Offset == len(Data)+Lost.
	Data []byte `json:"data"`
	// Chunks are the same bytes by stream, and the lost ranges in their
	// place (chunks with Lost set).
	Chunks []Chunk `json:"chunks,omitempty"`
	// Offset is where Data starts: the requested offset, or the earliest
	// available one when Truncated.
	Offset int64 `json:"offset"`
	// Next is the offset to read from next.
	Next int64 `json:"next"`
	// Truncated is set when the requested offset was dropped by the output
	// cap; Offset then is the earliest available offset.
	Truncated bool `json:"truncated,omitempty"`
	// Lost counts the bytes of [Offset, Next) that were lost (see
	// [Chunk.Lost]).
	Lost int64 `json:"lost,omitempty"`
	// Total is the output so far.
	Total int64 `json:"total"`
	// Ended is set when the process has ended and Next == Total: no more
	// output will come.
	Ended bool `json:"ended,omitempty"`
}

// Limits of what process/start and process/signal put in a process's
// record and log, in bytes.
const (
	// MaxProcessEnvBytes caps a process's environment (env): its names
	// and values together.
	MaxProcessEnvBytes = 64 << 10
	// MaxSignalPayloadBytes caps a signal's payload.
	MaxSignalPayloadBytes = 16 << 10
)

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

// Validate checks that either a command or a tool is given, the sizes
// of what the process's record keeps (the command at most
// [MaxShellCommandBytes], the tool's name [MaxIDBytes], its arguments
// [MaxInputBytes], the cwd [MaxReasonBytes], the environment
// [MaxProcessEnvBytes]), and the idempotency key; the host checks the
// tool's arguments, the mount and the environment's names.
func (p ProcessStartParams) Validate() error {
	env := 0
	for k, v := range p.Env {
		env += len(k) + len(v)
	}
	err := firstError(
		checkKey(p.IdempotencyKey),
		required("sessionId", p.SessionID),
		checkID("mountId", p.MountID),
		checkSize("command", len(p.Command), MaxShellCommandBytes),
		checkSize("tool", len(p.Tool), MaxIDBytes),
		checkSize("args", len(p.Args), MaxInputBytes),
		checkSize("cwd", len(p.Cwd), MaxReasonBytes),
		checkSize("env", env, MaxProcessEnvBytes),
	)
	if err == nil && (p.Command == "") == (p.Tool == "") {
		err = InvalidParam("command", "give either command or tool")
	}
	return err
}

// ProcessResult is a process record.
type ProcessResult struct {
	record.Process
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

// Validate checks that the process is named.
func (p ProcessIDParams) Validate() error {
	return firstError(required("id", p.ID), checkID("sessionId", p.SessionID))
}

// ProcessListParams are the params of process/list. Without SessionID an
// operator lists every session's processes.
type ProcessListParams struct {
	SessionID string `json:"sessionId,omitempty"`
	Status    string `json:"status,omitempty"`
}

// Validate checks the session's ID; every list is served (visibility
// applies).
func (p ProcessListParams) Validate() error { return checkID("sessionId", p.SessionID) }

// ProcessListResult lists processes.
type ProcessListResult struct {
	Processes []record.Process `json:"processes"`
}

// ProcessAwaitParams are the params of process/await.
type ProcessAwaitParams struct {
	ID        string `json:"id"`
	SessionID string `json:"sessionId,omitempty"`
	TimeoutMs int64  `json:"timeoutMs"`
}

// Validate checks the timeout and that the process is named.
func (p ProcessAwaitParams) Validate() error {
	return firstError(
		required("id", p.ID),
		checkID("sessionId", p.SessionID),
		nonNegative("timeoutMs", p.TimeoutMs),
	)
}

// ProcessOutputParams are the params of process/output.
type ProcessOutputParams struct {
	ID        string `json:"id"`
	SessionID string `json:"sessionId,omitempty"`
	Offset    int64  `json:"offset,omitempty"`
	Limit     int    `json:"limit,omitempty"`
}

// Validate checks the offset and the limit, and that the process is
// named.
func (p ProcessOutputParams) Validate() error {
	if err := firstError(required("id", p.ID), checkID("sessionId", p.SessionID)); err != nil {
		return err
	}
	if p.Offset < 0 || p.Limit < 0 {
		return InvalidParam("offset", "offset and limit must not be negative")
	}
	return nil
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

// Validate checks that the process is named, and the idempotency key.
func (p ProcessWriteParams) Validate() error {
	return firstError(checkKey(p.IdempotencyKey), required("id", p.ID), checkID("sessionId", p.SessionID))
}

// ProcessSignalParams are the params of process/signal.
type ProcessSignalParams struct {
	ID             string          `json:"id"`
	SessionID      string          `json:"sessionId,omitempty"`
	Name           string          `json:"name"`
	Payload        json.RawMessage `json:"payload,omitempty"`
	IdempotencyKey string          `json:"idempotencyKey,omitempty"`
}

// Validate checks that the process and the signal are named, the
// payload's size (at most [MaxSignalPayloadBytes]), and the idempotency
// key.
func (p ProcessSignalParams) Validate() error {
	return firstError(checkKey(p.IdempotencyKey), required("id", p.ID), checkID("sessionId", p.SessionID), required("name", p.Name),
		checkSize("payload", len(p.Payload), MaxSignalPayloadBytes))
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

// Validate checks the reason's size, that the process is named, and the
// idempotency key.
func (p ProcessCancelParams) Validate() error {
	return firstError(
		checkKey(p.IdempotencyKey),
		required("id", p.ID),
		checkID("sessionId", p.SessionID),
		checkSize("reason", len(p.Reason), MaxReasonBytes),
	)
}

// ProcessGrantParams are the params of process/grant and process/revoke.
type ProcessGrantParams struct {
	ID             string `json:"id"`
	SessionID      string `json:"sessionId,omitempty"`
	ToSessionID    string `json:"toSessionId"`
	IdempotencyKey string `json:"idempotencyKey,omitempty"`
}

// Validate checks that the process and the other session are named, and
// the idempotency key.
func (p ProcessGrantParams) Validate() error {
	return firstError(checkKey(p.IdempotencyKey), required("id", p.ID), checkID("sessionId", p.SessionID), required("toSessionId", p.ToSessionID))
}

// ProcessFollowParams are the params of process/follow.
type ProcessFollowParams struct {
	ID        string `json:"id"`
	SessionID string `json:"sessionId,omitempty"`
	Offset    int64  `json:"offset,omitempty"`
}

// Validate checks the offset and that the process is named.
func (p ProcessFollowParams) Validate() error {
	return firstError(required("id", p.ID), checkID("sessionId", p.SessionID), nonNegative("offset", p.Offset))
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
