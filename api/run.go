package api

import (
	"weft.dev/weft/event"
	"weft.dev/weft/store/record"
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

// StartRunParams are the params of run/start.
type StartRunParams struct {
	SessionID string `json:"sessionId"`
	// Input is at most MaxInputBytes.
	Input Input `json:"input"`
	// Model overrides the session's model for this run.
	Model    string `json:"model,omitempty"`
	MaxSteps int    `json:"maxSteps,omitempty"`
	// Busy is one of reject (default), queue, interrupt, steer.
	Busy string `json:"busy,omitempty"`
	// Policy is the run's approval policy, layered over the session's.
	Policy *Policy `json:"policy,omitempty"`
	// DefaultPreset, if set, is a preset the host puts in its own
	// (config) layer for this run when no layer names one: not the host's
	// config, nor the session's policy, nor Policy. It is how a client
	// applies its approval mode (say, ask-writes for a person at a
	// terminal) without hiding the session's rules or the rules a person
	// approved for the session, which rank above the host's layer. One of
	// PresetReadOnly, PresetAskWrites, PresetAskAll, PresetNeverAsk.
	DefaultPreset string `json:"defaultPreset,omitempty"`
	// Tools are tools the client executes itself, for this run (beside
	// the session's).
	Tools []ToolSpec `json:"tools,omitempty"`
	// Budget caps what the run may spend (tokens, cost, steps, wall
	// time) and says what it does on reaching a limit (onBudget stop or
	// ask); its fields are laid over the host's default run budget. The
	// session's budget, if any, holds as well. Nil means the host's
	// default.
	Budget         *event.Budget `json:"budget,omitempty"`
	IdempotencyKey string        `json:"idempotencyKey,omitempty"`
}

// Validate checks a run's params: the session, the input (not empty, at
// most MaxInputBytes), busy, maxSteps, the model's length, the client's
// tools, the idempotency key. The host checks the rest: that it can use
// the model (the run's, or the one it would use), the policy over its
// own, the default preset.
func (p StartRunParams) Validate() error {
	return firstError(
		checkKey(p.IdempotencyKey),
		required("sessionId", p.SessionID),
		checkInput(p.Input),
		oneOf("busy", p.Busy, "busy %q: want reject, queue, interrupt or steer", "", BusyReject, BusyQueue, BusyInterrupt, BusySteer),
		nonNegative("maxSteps", int64(p.MaxSteps)),
		checkSize("model", len(p.Model), MaxModelBytes),
		checkTools("tools", p.Tools),
		checkBudget("budget", p.Budget),
	)
}

// RunResult is a run, as returned by run/start, run/get and run/cancel.
type RunResult struct {
	record.Run
	// Steer is set when run/start with busy=steer folded the input into the active run.
	Steer    *SteerReceipt `json:"steer,omitempty"`
	Replayed bool          `json:"replayed,omitempty"`
}

// RunIDParams name a run.
type RunIDParams struct {
	RunID string `json:"runId"`
}

// Validate checks that the run is named.
func (p RunIDParams) Validate() error {
	return required("runId", p.RunID)
}

// ListRunsParams are the params of run/list.
type ListRunsParams struct {
	SessionID string `json:"sessionId"`
	Status    string `json:"status,omitempty"`
}

// Validate checks that the session is named.
func (p ListRunsParams) Validate() error {
	return required("sessionId", p.SessionID)
}

// ListRunsResult lists runs.
type ListRunsResult struct {
	Runs []record.Run `json:"runs"`
}

// WaitRunParams are the params of run/wait.
type WaitRunParams struct {
	RunID     string `json:"runId"`
	TimeoutMs int64  `json:"timeoutMs"`
}

// Validate checks the timeout and that the run is named.
func (p WaitRunParams) Validate() error {
	return firstError(
		nonNegative("timeoutMs", p.TimeoutMs),
		required("runId", p.RunID),
	)
}

// WaitRunResult says whether the run ended before the timeout.
type WaitRunResult struct {
	Run      record.Run `json:"run"`
	TimedOut bool       `json:"timedOut"`
}

// SteerParams are the params of run/steer.
type SteerParams struct {
	RunID string `json:"runId"`
	// ExpectedRunID, if set, must be the session's active run.
	ExpectedRunID string `json:"expectedRunId,omitempty"`
	// Input is at most MaxInputBytes.
	Input          Input  `json:"input"`
	IdempotencyKey string `json:"idempotencyKey,omitempty"`
}

// Validate checks the input (not empty, at most MaxInputBytes), that the
// run is named, and the idempotency key.
func (p SteerParams) Validate() error {
	return firstError(
		checkKey(p.IdempotencyKey),
		required("runId", p.RunID),
		checkID("expectedRunId", p.ExpectedRunID),
		checkInput(p.Input),
	)
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
	RunID string `json:"runId"`
	// Reason is at most MaxReasonBytes.
	Reason         string `json:"reason,omitempty"`
	IdempotencyKey string `json:"idempotencyKey,omitempty"`
}

// Validate checks the reason's size, that the run is named, and the
// idempotency key.
func (p CancelParams) Validate() error {
	return firstError(
		checkKey(p.IdempotencyKey),
		checkSize("reason", len(p.Reason), MaxReasonBytes),
		required("runId", p.RunID),
	)
}
