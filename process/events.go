package process

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"unicode/utf8"

	"weft.dev/weft/event"
	"weft.dev/weft/store/record"
)

// Types of the events of a process's log.
const (
	// EventStarted opens the log: [StartedData].
	EventStarted event.Type = "process.started"
	// EventOutput is one chunk of output: [OutputData]. Its
	// [record.ProcessEvent] carries the byte range.
	EventOutput event.Type = "process.output"
	// EventOutputDropped marks that output before an offset was dropped to
	// keep the log under its cap: [OutputDroppedData].
	EventOutputDropped event.Type = "process.output_dropped"
	// EventOutputLost marks a range of output that was never stored (the
	// store refused writes for longer than the Manager could hold the
	// output): [OutputLostData]. Its [record.ProcessEvent] carries the
	// range, so that readers meet it in offset order where the output was
	// lost.
	EventOutputLost event.Type = "process.output_lost"
	// EventInput records bytes written to the process's stdin: [InputData].
	EventInput event.Type = "process.input"
	// EventCancelRequested records a cancel attempt, allowed or denied:
	// [CancelRequestedData].
	EventCancelRequested event.Type = "process.cancel_requested"
	// EventAccessDenied records an attempt by a caller that may not
	// address the process: [AccessDeniedData].
	EventAccessDenied event.Type = "process.access_denied"
	// EventGranted and EventRevoked record grants: [GrantData].
	EventGranted event.Type = "process.granted"
	EventRevoked event.Type = "process.revoked"
	// EventRestarted records that recovery started a rerunnable process
	// again: [RestartedData].
	EventRestarted event.Type = "process.restarted"
	// EventAgentRun records the run a subagent's child session started
	// for it: [AgentRunData].
	EventAgentRun event.Type = "process.agent_run"
	// The terminal events; exactly one ends a process: [EndedData].
	EventCompleted event.Type = "process.completed"
	EventFailed    event.Type = "process.failed"
	EventCancelled event.Type = "process.cancelled"
	EventAbandoned event.Type = "process.abandoned"
)

// SignalPrefix starts the type of a signal event: "signal.<name>", with
// [SignalData].
const SignalPrefix = "signal."

// AgentRunData is the data of [EventAgentRun].
type AgentRunData struct {
	SessionID string `json:"sessionId"`
	RunID     string `json:"runId"`
}

// StartedData is the data of [EventStarted].
type StartedData struct {
	Kind        string             `json:"kind"`
	Spec        record.ProcessSpec `json:"spec"`
	Disposition string             `json:"disposition"`
	CreatedBy   string             `json:"createdBy,omitempty"`
	SessionID   string             `json:"sessionId"`
	RunID       string             `json:"runId,omitempty"`
	// Pid and Pgid are the OS process and group of a shell process.
	Pid  int `json:"pid,omitempty"`
	Pgid int `json:"pgid,omitempty"`
}

// Output streams.
const (
	Stdout = "stdout"
	Stderr = "stderr"
	// PTYStream is the combined output of a process on a pseudo-terminal.
	PTYStream = "pty"
	// ResultStream is the result text of a tool process.
	ResultStream = "result"
	// AgentStream is a subagent's streamed answer.
	AgentStream = "agent"
)

// OutputData is the data of [EventOutput]. Offsets count the bytes of all
// streams of the process together, in the order they were read (one
// combined offset space); Stream says which stream a chunk came from. The
// bytes are in Text when they are valid UTF-8, else in Base64.
type OutputData struct {
	Stream string `json:"stream"`
	Offset int64  `json:"offset"`
	Text   string `json:"text,omitempty"`
	Base64 string `json:"base64,omitempty"`
}

// Bytes returns the chunk's bytes.
func (d OutputData) Bytes() []byte {
	if d.Base64 != "" {
		b, err := base64.StdEncoding.DecodeString(d.Base64)
		if err == nil {
			return b
		}
	}
	return []byte(d.Text)
}

func encodeOutput(stream string, off int64, b []byte) json.RawMessage {
	d := OutputData{Stream: stream, Offset: off}
	if utf8.Valid(b) && controlBytes(b) <= len(b)/16 {
		d.Text = string(b)
	} else {
		// Binary, or text that JSON would inflate (\u0000 is 6 bytes).
		d.Base64 = base64.StdEncoding.EncodeToString(b)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.Encode(d) // cannot fail
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

// controlBytes counts the bytes JSON escapes as \u00XX.
func controlBytes(b []byte) int {
	n := 0
	for _, c := range b {
		if c < 0x20 && c != '\n' && c != '\t' && c != '\r' {
			n++
		}
	}
	return n
}

// OutputDroppedData is the data of [EventOutputDropped].
type OutputDroppedData struct {
	// Before is the new trim point: output chunks that ended at or before
	// it were deleted.
	Before int64 `json:"before"`
	// Cap is the configured output cap.
	Cap int64 `json:"cap"`
}

// OutputLostData is the data of [EventOutputLost]: Bytes of output from
// Offset on were lost, for Reason (api.LostStoreUnavailable).
type OutputLostData struct {
	Offset int64  `json:"offset"`
	Bytes  int64  `json:"bytes"`
	Reason string `json:"reason"`
}

// InputData is the data of [EventInput].
type InputData struct {
	Bytes int    `json:"bytes"`
	By    Caller `json:"by"`
}

// SignalData is the data of a signal.<name> event.
type SignalData struct {
	Payload json.RawMessage `json:"payload,omitempty"`
	By      Caller          `json:"by"`
	// Posix names the OS signal sent to the process group, if any.
	Posix string `json:"posix,omitempty"`
}

// CancelRequestedData is the data of [EventCancelRequested].
type CancelRequestedData struct {
	By     Caller `json:"by"`
	Reason string `json:"reason,omitempty"`
	// Denied is set when the cancel was refused; DenyReason says why.
	Denied     bool   `json:"denied,omitempty"`
	DenyReason string `json:"denyReason,omitempty"`
}

// AccessDeniedData is the data of [EventAccessDenied].
type AccessDeniedData struct {
	Op string `json:"op"`
	By Caller `json:"by"`
}

// GrantData is the data of [EventGranted] and [EventRevoked].
type GrantData struct {
	SessionID string `json:"sessionId"`
	By        Caller `json:"by"`
}

// RestartedData is the data of [EventRestarted].
type RestartedData struct {
	Reason string `json:"reason"`
}

// EndedData is the data of the terminal events: the evidence of how the
// process ended.
type EndedData struct {
	Status string `json:"status"`
	// ExitCode is a shell's exit status (-1 if a signal killed it).
	ExitCode *int `json:"exitCode,omitempty"`
	// Signal names the signal that killed a shell, if any.
	Signal string `json:"signal,omitempty"`
	// Output and IsError are a tool process's result.
	Output  string `json:"output,omitempty"`
	IsError bool   `json:"isError,omitempty"`
	// Error is an infrastructure failure (the process could not be run).
	Error string `json:"error,omitempty"`
	// Cancel is the accepted cancel request, for a cancelled process.
	Cancel *CancelRequestedData `json:"cancel,omitempty"`
	// Evidence says why an abandoned process is considered dead: what was
	// observed and what was done.
	Evidence *Evidence `json:"evidence,omitempty"`
	// Failure is the typed reason a shell failed where one is known: a
	// resource limit its tree ran into (kind resource_limit), which
	// LimitMessage describes.
	Failure      *event.ToolFailure `json:"failure,omitempty"`
	LimitMessage string             `json:"limitMessage,omitempty"`
}

// Evidence is the reason a process was abandoned.
type Evidence struct {
	// Writer is who concluded it: "recovery" (a host start found it
	// running under a dead host) or "close" (the host shut down).
	Writer string `json:"writer"`
	Reason string `json:"reason"`
	// Pgid is the recorded process group; Killed lists the pids of that
	// group that were still alive and were killed.
	Pgid   int   `json:"pgid,omitempty"`
	Killed []int `json:"killed,omitempty"`
}

func terminalType(status string) event.Type {
	switch status {
	case record.ProcessCompleted:
		return EventCompleted
	case record.ProcessFailed:
		return EventFailed
	case record.ProcessCancelled:
		return EventCancelled
	}
	return EventAbandoned
}
