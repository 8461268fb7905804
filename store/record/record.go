// Package record holds the rows of weft's store: the records of sessions,
// runs, requests, receipts, snapshots and processes, the entries of a
// process's log, and the [Projection] that derives a session's records
// from its events.
//
// The records are what a store keeps and gives back; the contract that
// keeps them (appends, reads, leases, the sentinels callers branch on) is
// package store. Keeping the rows apart lets the wire types of package api
// and the engine name a run or a process without the storage contract, as
// River keeps its row types in rivertype and its storage contract in
// riverdriver.
//
// Records are plain values, safe to copy; a store keeps its own copy of
// what it is given and returns copies its caller may change.
package record

import (
	"encoding/json"
	"time"

	"weft.dev/weft/event"
)

// Session is the projection of a session's log.
type Session struct {
	ID        string            `json:"id"`
	Title     string            `json:"title,omitempty"`
	Model     string            `json:"model,omitempty"`
	Metadata  map[string]string `json:"metadata,omitempty"`
	CreatedAt time.Time         `json:"createdAt"`
	UpdatedAt time.Time         `json:"updatedAt"`
	// LastSeq is the seq of the session's last event. Like UpdatedAt (the
	// time of that event), stores read it from the log, not from the record.
	LastSeq int64 `json:"lastSeq"`
	// ActiveRunID is the run that is queued, running or waiting, if any.
	ActiveRunID string `json:"activeRunId,omitempty"`
	// Binding is the session's mounts.
	Binding event.Binding `json:"binding"`
	// Policy is the session's approval policy (api.Policy), if it has one.
	Policy json.RawMessage `json:"policy,omitempty"`
	// Tools are the tools the session's client executes itself.
	Tools []event.ClientTool `json:"tools,omitempty"`
	// MCPServers are the session's own MCP tool servers, by name.
	MCPServers map[string]event.MCPServer `json:"mcpServers,omitempty"`
	Deleted    bool                       `json:"deleted,omitempty"`
	// Fork, if set, says the session is a fork: the first Fork.Seq events
	// of its log are those of session Fork.SessionID, stored once, by
	// reference, and read through the fork under its own ID.
	Fork *Fork `json:"fork,omitempty"`
	// Usage is what the session's runs have spent together: the tokens
	// and cost of every step and compaction in its log, compactions on
	// demand outside runs included (a fork counts from the fork on).
	Usage event.TokenUsage `json:"usage"`
	// Steps counts the model calls of the session's runs that have
	// ended (a run's count as it goes is on its own record).
	Steps int `json:"steps,omitempty"`
	// WallTimeMs is the sum of the durations of the session's runs that
	// have ended, from start to end.
	WallTimeMs int64 `json:"wallTimeMs,omitempty"`
	// Budget is the session's budget, if it has one.
	Budget *event.Budget `json:"budget,omitempty"`
	// Parent, if set, says the session is a subagent's: who spawned it
	// and the tools its runs may use.
	Parent *event.SessionParent `json:"parent,omitempty"`
}

// Spent is what the session's runs have spent, as a budget counts it,
// with its active run's steps and wall time so far (Steps and WallTimeMs
// count ended runs; Usage counts every step).
func (s Session) Spent(steps int, running time.Duration) event.Spent {
	sp := event.SpentOf(s.Usage, s.Steps+steps, running)
	sp.WallTimeMs += s.WallTimeMs
	return sp
}

// Fork is where a forked session comes from: its source session and the
// last of the source's events its log holds.
type Fork struct {
	SessionID string `json:"sessionId"`
	Seq       int64  `json:"seq"`
}

// Run statuses.
const (
	RunQueued      = "queued"
	RunRunning     = "running"
	RunWaiting     = "waiting"
	RunCompleted   = "completed"
	RunFailed      = "failed"
	RunCancelled   = "cancelled"
	RunInterrupted = "interrupted"
)

// IsTerminal reports whether a run status is final.
func IsTerminal(status string) bool {
	switch status {
	case RunCompleted, RunFailed, RunCancelled, RunInterrupted:
		return true
	}
	return false
}

// Run is the projection of one run.
type Run struct {
	ID        string           `json:"id"`
	SessionID string           `json:"sessionId"`
	Status    string           `json:"status"`
	Model     string           `json:"model"`
	MaxSteps  int              `json:"maxSteps,omitempty"`
	Steps     int              `json:"steps"`
	Usage     event.TokenUsage `json:"usage"`
	Error     *event.Error     `json:"error,omitempty"`
	CreatedAt time.Time        `json:"createdAt"`
	StartedAt *time.Time       `json:"startedAt,omitempty"`
	EndedAt   *time.Time       `json:"endedAt,omitempty"`
	// FirstSeq and LastSeq bound the run's events in the session log;
	// stores read LastSeq from the log, not from the record.
	FirstSeq int64 `json:"firstSeq"`
	LastSeq  int64 `json:"lastSeq"`
	// Requests are the run's open requests (approvals, questions, client
	// tool calls), by ID; while there are any the run is waiting.
	Requests []string `json:"requests,omitempty"`
	// Budget is the run's budget, if it has one, with the raises a person
	// gave it.
	Budget *event.Budget `json:"budget,omitempty"`
	// TraceID and SpanID name the run's OpenTelemetry trace and span
	// (from run.started) when the host that ran it traced runs; empty
	// otherwise.
	TraceID string `json:"traceId,omitempty"`
	SpanID  string `json:"spanId,omitempty"`
}

// Spent is what the run has spent, as a budget counts it, at now.
func (r Run) Spent(now time.Time) event.Spent {
	var wall time.Duration
	switch {
	case r.StartedAt == nil:
	case r.EndedAt != nil:
		wall = r.EndedAt.Sub(*r.StartedAt)
	default:
		wall = now.Sub(*r.StartedAt)
	}
	return event.SpentOf(r.Usage, r.Steps, wall)
}

// Request statuses. Open is the only one that is not final.
const (
	RequestOpen      = "open"
	RequestResolved  = "resolved"
	RequestExpired   = "expired"
	RequestCancelled = "cancelled"
)

// Request is the projection of one request to a person or a client: an
// approval of a tool call, a question the model asked, or a call of a
// tool the client executes.
type Request struct {
	ID        string `json:"id"`
	SessionID string `json:"sessionId"`
	RunID     string `json:"runId"`
	// Kind is event.RequestApproval, event.RequestInput or event.RequestTool.
	Kind string `json:"kind"`
	// ToolCall is the call the request gates.
	ToolCall event.ToolCall `json:"toolCall"`
	Step     int            `json:"step"`
	// Status is one of the Request* statuses.
	Status string `json:"status"`
	// Decision is an approval's decision (allow_once, allow_session,
	// deny, cancelled; for an expired one, the default it took).
	Decision string `json:"decision,omitempty"`
	// Message is the answerer's message (an approval), or the answer's
	// text (a question).
	Message string `json:"message,omitempty"`
	// By says who answered.
	By *event.By `json:"by,omitempty"`
	// Rule is the policy rule that asked (approvals).
	Rule *event.Rule `json:"rule,omitempty"`
	// Question and Choices are a question's (input requests).
	Question string   `json:"question,omitempty"`
	Choices  []string `json:"choices,omitempty"`
	// Options are the decisions an approval accepts.
	Options []string `json:"options,omitempty"`
	// Deadline, if set, is when the request expires; Default is the
	// decision it then takes.
	Deadline *time.Time `json:"deadline,omitempty"`
	Default  string     `json:"default,omitempty"`
	// Budget, for a question the host asks because the run reached a
	// budget (kind input, no tool call), is the budget reached.
	Budget *event.BudgetExceeded `json:"budget,omitempty"`
	// Seq is the seq of the event that opened it.
	Seq        int64      `json:"seq"`
	CreatedAt  time.Time  `json:"createdAt"`
	ResolvedAt *time.Time `json:"resolvedAt,omitempty"`
}

// IsRequestFinal reports whether a request status is final.
func IsRequestFinal(status string) bool { return status != RequestOpen }

// Receipt is a stored idempotency receipt.
type Receipt struct {
	Key    string `json:"key"`
	Method string `json:"method"`
	// Fingerprint is a digest of the canonical params.
	Fingerprint string          `json:"fingerprint"`
	Result      json.RawMessage `json:"result"`
	SessionID   string          `json:"sessionId,omitempty"`
	CreatedAt   time.Time       `json:"createdAt"`
}

// Snapshot is state an owner derived from a session's log through event
// Seq, stored so that a later load folds only the events after it instead
// of the whole log. It is a cache: the log stays the truth, a snapshot
// may be dropped or ignored at any time, and the events through Seq never
// change, so a snapshot never goes stale, it only falls behind.
type Snapshot struct {
	SessionID string
	// Kind names what Data holds (e.g. SnapshotTranscript).
	Kind string
	// Seq is the last event the snapshot reflects.
	Seq int64
	// Data is the owner's encoding.
	Data      []byte
	CreatedAt time.Time
	// Epoch is the lease epoch of the writer, fenced like
	// store.Batch.Epoch by the stores that fence appends: a host that
	// lost the session's lease cannot replace the snapshot of its new
	// owner. It is not stored: zero when read.
	Epoch int64
}

// SnapshotTranscript is the kind of a session's transcript snapshot (the
// binary form of agent.TranscriptBuilder).
const SnapshotTranscript = "transcript"
