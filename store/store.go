// Package store defines the contract of weft's durable storage: an
// append-only event log per session plus the projections (sessions, runs,
// idempotency receipts) that are updated in the same transaction as the
// events that imply them.
//
// Implementations live in subpackages (store/sqlite, store/postgres,
// store/memory); the conformance suite in store/storetest is run by each
// of them.
package store

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"weft.dev/weft/event"
)

// Sentinel errors that callers branch on with errors.Is.
var (
	// ErrNotFound reports an unknown session, run or receipt.
	ErrNotFound = errors.New("not found")
	// ErrSeqConflict reports an append whose first seq is not exactly the
	// session's last seq + 1, or whose seqs are not contiguous. Nothing of
	// the batch is written.
	ErrSeqConflict = errors.New("sequence conflict")
	// ErrInvalid reports a malformed batch (no events, mixed sessions).
	ErrInvalid = errors.New("invalid batch")
	// ErrClosed reports use of a closed store.
	ErrClosed = errors.New("store closed")
	// ErrReceiptExists reports an append whose batch carries a receipt for a
	// (key, method) that is already stored (or twice in the batch). Nothing
	// of the batch is written; the caller reads the stored receipt with
	// [Store.Receipt] and replays or rejects it.
	ErrReceiptExists = errors.New("receipt exists")
)

// Store is durable storage for sessions. All methods are safe for
// concurrent use; appends to one session must come from that session's
// single owner, and the store rejects (ErrSeqConflict) any append that
// would leave a gap or overwrite an event.
type Store interface {
	// Append writes b atomically: all of its events and records, or nothing.
	Append(ctx context.Context, b Batch) error
	// Read returns up to p.Limit events of p.SessionID with seq > p.After,
	// in seq order. An unknown session returns ErrNotFound.
	Read(ctx context.Context, p ReadParams) ([]event.Event, error)
	// LastSeq returns the seq of the session's last event (0 for none) or
	// ErrNotFound.
	LastSeq(ctx context.Context, sessionID string) (int64, error)
	// Session returns a session record or ErrNotFound.
	Session(ctx context.Context, id string) (Session, error)
	// Sessions lists sessions, newest first, paginated by p.
	Sessions(ctx context.Context, p ListSessionsParams) ([]Session, error)
	// Run returns a run record or ErrNotFound.
	Run(ctx context.Context, id string) (Run, error)
	// Runs lists runs matching p, oldest first.
	Runs(ctx context.Context, p ListRunsParams) ([]Run, error)
	// Request returns a request record (an approval, a question, a client
	// tool call) or ErrNotFound.
	Request(ctx context.Context, id string) (Request, error)
	// Requests lists the request records matching p, oldest first.
	Requests(ctx context.Context, p ListRequestsParams) ([]Request, error)
	// Receipt returns the idempotency receipt for (key, method) or ErrNotFound.
	Receipt(ctx context.Context, key, method string) (Receipt, error)
	// PutReceipt stores a receipt outside any session's batch (for
	// mutations that append no event of their own). If a receipt with the
	// same (key, method) exists, it is left as is and returned instead, so
	// the caller can tell a first request from a retry.
	PutReceipt(ctx context.Context, r Receipt) (Receipt, error)
	// PruneReceipts deletes receipts created before t.
	PruneReceipts(ctx context.Context, before time.Time) (int, error)
	// PutSnapshot stores a snapshot, replacing the session's snapshot of
	// the same kind unless that one is through a later seq (then it is
	// kept and PutSnapshot returns nil). A snapshot beyond the session's
	// last event is ErrSeqConflict; an unknown session, ErrNotFound.
	PutSnapshot(ctx context.Context, s Snapshot) error
	// Snapshot returns the session's snapshot of kind, or ErrNotFound.
	Snapshot(ctx context.Context, sessionID, kind string) (Snapshot, error)
	// Close releases the store. It is safe to call more than once.
	Close() error

	ProcessStore
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
}

// SnapshotTranscript is the kind of a session's transcript snapshot (the
// binary form of agent.TranscriptBuilder).
const SnapshotTranscript = "transcript"

// Batch is one atomic append to one session.
type Batch struct {
	// SessionID names the session; every event must carry it.
	SessionID string
	// Events are appended in order; their seqs must run from the session's
	// last seq + 1 without a gap. A batch that creates a session starts at 1.
	Events []event.Event
	// Session, if set, replaces the session record.
	Session *Session
	// Runs replace the run records with the same IDs.
	Runs []Run
	// Requests replace the request records with the same IDs.
	Requests []Request
	// Receipts are stored alongside; an existing (key, method) is an error.
	Receipts []Receipt
	// Epoch is the writer's lease epoch (see [Lease]): a store whose
	// sessions are leased in the database (store/postgres) commits the
	// batch only if the session's current lease has this epoch, and
	// otherwise refuses it whole with [ErrFenced]; zero is an unfenced
	// writer, refused only while a live lease holds the session. Stores
	// of one machine (SQLite, memory), whose leases are kernel locks,
	// ignore it. Process logs ([ProcessBatch]) carry no epoch: the
	// process manager of the host that runs a process writes them, not
	// the session's owner.
	Epoch int64
}

// ReadParams selects events of one session.
type ReadParams struct {
	SessionID string
	// After is the cursor: events with seq > After are returned.
	After int64
	// Limit caps the number of events; zero or negative means 1000.
	Limit int
	// RunID, if set, keeps only that run's events.
	RunID string
	// Types, if set, keeps only events of these types.
	Types []event.Type
	// MaxBytes, if positive, ends the page once the data of the events in
	// it reach this many bytes; the page holds at least one event. A page
	// cut short this way does not mean the log has no more events.
	MaxBytes int
}

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
	// Seq is the seq of the event that opened it.
	Seq        int64      `json:"seq"`
	CreatedAt  time.Time  `json:"createdAt"`
	ResolvedAt *time.Time `json:"resolvedAt,omitempty"`
}

// IsRequestFinal reports whether a request status is final.
func IsRequestFinal(status string) bool { return status != RequestOpen }

// ListRequestsParams selects request records.
type ListRequestsParams struct {
	// SessionID, if set, keeps one session's requests.
	SessionID string
	// RunID, if set, keeps one run's requests.
	RunID string
	// Statuses, if set, keeps only requests in one of them.
	Statuses []string
	// Limit caps the list; zero or negative means 1000.
	Limit int
}

// ListSessionsParams pages through sessions.
type ListSessionsParams struct {
	// Before, if set, lists sessions created strictly before this session ID's
	// position (a page cursor returned as the last ID of the previous page).
	Before string
	// Limit caps the page; zero means 100.
	Limit int
	// IncludeDeleted lists deleted sessions too.
	IncludeDeleted bool
}

// ListRunsParams selects runs.
type ListRunsParams struct {
	SessionID string
	// Statuses, if set, keeps only runs in one of them.
	Statuses []string
	// Limit caps the list; zero means 1000.
	Limit int
}

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

// ProcessStore is the part of [Store] that keeps durable background
// processes: one record per process (the registry) and one append-only log
// per process with its own gap-free seq from 1. It is a separate log rather
// than events in the session log because a process outlives the run and
// the step that started it, may be addressed by other sessions, and writes
// far more (its output) than a session; the session log only carries
// summaries that the host writes.
//
// The process log uses [ProcessEvent], not [event.Event]: its key is a
// process ID, not a session ID, and output chunks carry the byte range the
// store indexes for [ProcessStore.ProcessOutput] and trims with
// [ProcessBatch.DropOutputBefore]. An event with a range (Size > 0) is an
// output chunk to the store whatever its type: the writer also marks
// ranges of output it could not store (process.output_lost) this way, so
// that they are read, in offset order, where the output was lost, and
// trimmed like the chunks around them. Reusing event.Event with SessionID set to
// a process ID would let a process event pass for a session event.
//
// All methods are safe for concurrent use; appends to one process must come
// from that process's single owner (the process manager), and the store
// rejects (ErrSeqConflict) any append that would leave a gap.
type ProcessStore interface {
	// AppendProcess writes b atomically: its events, its record and its
	// output drop, or nothing. The first batch of a process must start at
	// seq 1 and carry its record.
	AppendProcess(ctx context.Context, b ProcessBatch) error
	// ReadProcess returns up to p.Limit events of p.ProcessID with
	// seq > p.After in seq order; dropped output chunks are skipped (their
	// seqs are missing). An unknown process returns ErrNotFound.
	ReadProcess(ctx context.Context, p ReadProcessParams) ([]ProcessEvent, error)
	// ProcessOutput returns up to p.Limit output chunks (events with
	// Size > 0) of p.ProcessID whose range ends after p.Offset, in offset
	// order. An unknown process returns ErrNotFound.
	ProcessOutput(ctx context.Context, p ProcessOutputParams) ([]ProcessEvent, error)
	// Process returns a process record or ErrNotFound.
	Process(ctx context.Context, id string) (Process, error)
	// Processes lists the records matching p, oldest first (by StartedAt,
	// then ID).
	Processes(ctx context.Context, p ListProcessesParams) ([]Process, error)
}

// Process statuses. Running is the only status that is not final.
const (
	ProcessRunning   = "running"
	ProcessCompleted = "completed"
	ProcessFailed    = "failed"
	ProcessCancelled = "cancelled"
	ProcessAbandoned = "abandoned"
)

// IsProcessTerminal reports whether a process status is final.
func IsProcessTerminal(status string) bool {
	switch status {
	case ProcessCompleted, ProcessFailed, ProcessCancelled, ProcessAbandoned:
		return true
	}
	return false
}

// Process kinds.
const (
	// ProcessShell is a shell command run by /bin/sh -c.
	ProcessShell = "shell"
	// ProcessTool is a tool call run in the background.
	ProcessTool = "tool"
)

// Recovery dispositions: what a host that starts after a crash does with a
// process that was running.
const (
	// Rerunnable processes are started again (tool calls declared safe to
	// repeat).
	Rerunnable = "rerunnable"
	// OwnerBound processes die with their host; they become abandoned.
	OwnerBound = "owner_bound"
	// ExternallyOwned processes are left alone: someone else owns them.
	ExternallyOwned = "externally_owned"
)

// ProcessSpec is what a process runs: a shell command (Command, Cwd, Env,
// PTY) or a tool call (Tool, Args).
type ProcessSpec struct {
	// Command is the shell command line of a shell process.
	Command string `json:"command,omitempty"`
	// Mount is the mount the working directory lies in.
	Mount string `json:"mount,omitempty"`
	// Cwd is the working directory as the caller gave it (a mount path).
	Cwd string `json:"cwd,omitempty"`
	// Env holds the explicit environment variables, beyond the allow-list.
	Env map[string]string `json:"env,omitempty"`
	// PTY runs the command on a pseudo-terminal.
	PTY bool `json:"pty,omitempty"`
	// Tool is the tool name of a tool process.
	Tool string `json:"tool,omitempty"`
	// Args are the tool call's arguments, validated before registration.
	Args json.RawMessage `json:"args,omitempty"`
}

// Process is the registry record of one background process. It is kept as
// JSON beside the columns queries filter on, like [Run].
type Process struct {
	ID        string `json:"id"`
	SessionID string `json:"sessionId"`
	// RunID is the run that started the process, if any.
	RunID string `json:"runId,omitempty"`
	// ToolCallID is the tool call that asked for the process, if any.
	ToolCallID string `json:"toolCallId,omitempty"`
	// Kind is ProcessShell or ProcessTool.
	Kind string      `json:"kind"`
	Spec ProcessSpec `json:"spec"`
	// Status is one of the Process* statuses.
	Status string `json:"status"`
	// ExitCode is the exit status of a shell process that exited (-1 when
	// a signal killed it); nil while running or for tool processes.
	ExitCode *int `json:"exitCode,omitempty"`
	// Disposition is Rerunnable, OwnerBound or ExternallyOwned.
	Disposition string `json:"disposition"`
	// CreatedBy says who started it (e.g. "tool:shell", "rpc").
	CreatedBy string     `json:"createdBy,omitempty"`
	StartedAt time.Time  `json:"startedAt"`
	EndedAt   *time.Time `json:"endedAt,omitempty"`
	// Pgid is the OS process group of a shell process (0 if none), swept
	// at recovery.
	Pgid int `json:"pgid,omitempty"`
	// MountID is the mount that owns the process (its working directory's
	// mount); a mount with a running process cannot be unmounted.
	MountID string `json:"mountId,omitempty"`
	// Grants are the other sessions that may address the process.
	Grants []string `json:"grants,omitempty"`
	// OutputBytes is the total output so far (the next output offset),
	// lost bytes included: offsets are never reused.
	OutputBytes int64 `json:"outputBytes"`
	// DroppedBytes counts the output bytes no reader can get: those before
	// TrimmedBefore, which the cap may have dropped, and the lost bytes
	// after it.
	DroppedBytes int64 `json:"droppedBytes"`
	// TrimmedBefore is the trim point: output chunks that end at or before
	// it may have been dropped to keep the log under its cap.
	TrimmedBefore int64 `json:"trimmedBefore,omitempty"`
	// LostBytes counts the output bytes that were never stored (the store
	// refused writes for longer than the writer could hold them), each
	// range marked in the log by an output-range event of its own (see
	// [ProcessStore]).
	LostBytes int64 `json:"lostBytes,omitempty"`
	// WakeOnExit asks the host to start a run in the owning session when
	// the process ends.
	WakeOnExit bool `json:"wakeOnExit,omitempty"`
	// LastSeq is the seq of the last event of the process's log.
	LastSeq int64 `json:"lastSeq"`
}

// ProcessEvent is one entry of a process's log.
type ProcessEvent struct {
	// Seq is the position in the process's log, from 1, gap-free when
	// appended (dropped output chunks leave holes).
	Seq       int64           `json:"seq"`
	ProcessID string          `json:"processId"`
	Type      event.Type      `json:"type"`
	Time      time.Time       `json:"time"`
	Data      json.RawMessage `json:"data"`
	// Offset and Size are set on output chunks only: the chunk covers the
	// process's output bytes [Offset, Offset+Size). Size is zero for every
	// other event.
	Offset int64 `json:"offset,omitempty"`
	Size   int64 `json:"size,omitempty"`
}

// ProcessBatch is one atomic append to one process's log.
type ProcessBatch struct {
	ProcessID string
	// Events continue the log from its last seq + 1; at least one.
	Events []ProcessEvent
	// Record, if set, replaces the process record. The first batch of a
	// process must carry it.
	Record *Process
	// DropOutputBefore, if positive, deletes the output chunks of earlier
	// batches that end at or before this offset.
	DropOutputBefore int64
	// Receipts are idempotency receipts stored in the same transaction as
	// the events (a signal, a cancel request, a grant); an existing
	// (key, method) fails the batch with ErrReceiptExists.
	Receipts []Receipt
}

// ReadProcessParams selects events of one process's log.
type ReadProcessParams struct {
	ProcessID string
	// After is the cursor: events with seq > After are returned.
	After int64
	// Limit caps the number of events; zero or negative means 1000.
	Limit int
	// Types, if set, keeps only events of these types.
	Types []event.Type
}

// ProcessOutputParams selects output chunks of one process.
type ProcessOutputParams struct {
	ProcessID string
	// Offset: chunks that end after it are returned.
	Offset int64
	// Limit caps the number of chunks; zero or negative means 100.
	Limit int
}

// ListProcessesParams selects process records.
type ListProcessesParams struct {
	// SessionID, if set, keeps the processes owned by this session (and,
	// with IncludeGranted, those granted to it).
	SessionID      string
	IncludeGranted bool
	// Statuses, if set, keeps only processes in one of them.
	Statuses []string
	// MountID, if set, keeps only processes owned by this mount.
	MountID string
	// Limit caps the list; zero or negative means 1000.
	Limit int
}
