package host

import (
	"encoding/json"

	"weft.dev/weft/event"
	"weft.dev/weft/store"
)

// Busy policies for a run started while another is active.
const (
	// BusyReject refuses the new run with a run conflict naming the active run.
	BusyReject = "reject"
	// BusyQueue starts the new run, in order, when the active run ends.
	BusyQueue = "queue"
	// BusyInterrupt cancels the active run, then starts the new one.
	BusyInterrupt = "interrupt"
	// BusySteer folds the input into the active run as a steer.
	BusySteer = "steer"
)

// Input is user input: a string or a list of content parts.
type Input []event.Part

// UnmarshalJSON accepts "text" or [{"type":"text","text":"…"}].
func (in *Input) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		*in = event.TextParts(s)
		return nil
	}
	var parts []event.Part
	if err := json.Unmarshal(b, &parts); err != nil {
		return errf(ErrInvalidParams, nil, "input: want a string or a list of content parts")
	}
	*in = parts
	return nil
}

// CreateSessionParams are the params of session/create.
type CreateSessionParams struct {
	Title  string        `json:"title,omitempty"`
	Model  string        `json:"model,omitempty"`
	Mounts []event.Mount `json:"mounts,omitempty"`
	// Network is the shells' network policy, "allow" or "deny"; empty
	// means the host's default (deny unless configured).
	Network        string `json:"network,omitempty"`
	IdempotencyKey string `json:"idempotencyKey,omitempty"`
}

// SessionResult is a session, as returned by session/create and session/get.
type SessionResult struct {
	store.Session
	Replayed bool `json:"replayed,omitempty"`
}

// SessionIDParams name a session.
type SessionIDParams struct {
	SessionID      string `json:"sessionId"`
	IdempotencyKey string `json:"idempotencyKey,omitempty"`
}

// ListSessionsParams are the params of session/list.
type ListSessionsParams struct {
	// Cursor is the nextCursor of the previous page.
	Cursor string `json:"cursor,omitempty"`
	Limit  int    `json:"limit,omitempty"`
}

// ListSessionsResult is a page of sessions.
type ListSessionsResult struct {
	Sessions   []store.Session `json:"sessions"`
	NextCursor string          `json:"nextCursor,omitempty"`
}

// StartRunParams are the params of run/start.
type StartRunParams struct {
	SessionID string `json:"sessionId"`
	Input     Input  `json:"input"`
	// Model overrides the session's model for this run.
	Model    string `json:"model,omitempty"`
	MaxSteps int    `json:"maxSteps,omitempty"`
	// Busy is one of reject (default), queue, interrupt, steer.
	Busy           string `json:"busy,omitempty"`
	IdempotencyKey string `json:"idempotencyKey,omitempty"`
}

// RunResult is a run, as returned by run/start, run/get and run/cancel.
type RunResult struct {
	store.Run
	// Steer is set when run/start with busy=steer folded the input into the active run.
	Steer    *SteerReceipt `json:"steer,omitempty"`
	Replayed bool          `json:"replayed,omitempty"`
}

// RunIDParams name a run.
type RunIDParams struct {
	RunID string `json:"runId"`
}

// ListRunsParams are the params of run/list.
type ListRunsParams struct {
	SessionID string `json:"sessionId"`
	Status    string `json:"status,omitempty"`
}

// ListRunsResult lists runs.
type ListRunsResult struct {
	Runs []store.Run `json:"runs"`
}

// WaitRunParams are the params of run/wait.
type WaitRunParams struct {
	RunID     string `json:"runId"`
	TimeoutMs int64  `json:"timeoutMs"`
}

// WaitRunResult says whether the run ended before the timeout.
type WaitRunResult struct {
	Run      store.Run `json:"run"`
	TimedOut bool      `json:"timedOut"`
}

// SteerParams are the params of run/steer.
type SteerParams struct {
	RunID string `json:"runId"`
	// ExpectedRunID, if set, must be the session's active run.
	ExpectedRunID  string `json:"expectedRunId,omitempty"`
	Input          Input  `json:"input"`
	IdempotencyKey string `json:"idempotencyKey,omitempty"`
}

// SteerReceipt acknowledges a steer.
type SteerReceipt struct {
	SteerID string `json:"steerId"`
	RunID   string `json:"runId"`
	Status  string `json:"status"`
	// EventCursor is the seq of the steer.accepted event.
	EventCursor int64 `json:"eventCursor"`
	Replayed    bool  `json:"replayed,omitempty"`
}

// CancelParams are the params of run/cancel.
type CancelParams struct {
	RunID          string `json:"runId"`
	Reason         string `json:"reason,omitempty"`
	IdempotencyKey string `json:"idempotencyKey,omitempty"`
}

// ReadEventsParams are the params of events/read.
type ReadEventsParams struct {
	SessionID string `json:"sessionId"`
	After     int64  `json:"after,omitempty"`
	Limit     int    `json:"limit,omitempty"`
	RunID     string `json:"runId,omitempty"`
}

// ReadEventsResult is a page of events.
type ReadEventsResult struct {
	Events     []event.Event `json:"events"`
	NextCursor int64         `json:"nextCursor"`
	HasMore    bool          `json:"hasMore"`
}

// DeleteResult acknowledges session/delete.
type DeleteResult struct {
	SessionID string `json:"sessionId"`
	Deleted   bool   `json:"deleted"`
	Replayed  bool   `json:"replayed,omitempty"`
}
