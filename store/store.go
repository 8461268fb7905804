// Package store defines the contract of weft's durable storage: an
// append-only event log per session plus the projections (sessions, runs,
// idempotency receipts) that are updated in the same transaction as the
// events that imply them.
//
// Implementations live in subpackages (store/sqlite, store/memory); the
// conformance suite in store/storetest is run by each of them.
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
	// Receipt returns the idempotency receipt for (key, method) or ErrNotFound.
	Receipt(ctx context.Context, key, method string) (Receipt, error)
	// PutReceipt stores a receipt that belongs to no session's batch; it
	// returns ErrSeqConflict-free semantics: an existing (key, method) is
	// left as is and returned.
	PutReceipt(ctx context.Context, r Receipt) (Receipt, error)
	// PruneReceipts deletes receipts created before t.
	PruneReceipts(ctx context.Context, before time.Time) (int, error)
	// Close releases the store. It is safe to call more than once.
	Close() error
}

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
	// Receipts are stored alongside; an existing (key, method) is an error.
	Receipts []Receipt
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
}

// Session is the projection of a session's log.
type Session struct {
	ID        string            `json:"id"`
	Title     string            `json:"title,omitempty"`
	Model     string            `json:"model,omitempty"`
	Metadata  map[string]string `json:"metadata,omitempty"`
	CreatedAt time.Time         `json:"createdAt"`
	UpdatedAt time.Time         `json:"updatedAt"`
	// LastSeq is the seq of the session's last event.
	LastSeq int64 `json:"lastSeq"`
	// ActiveRunID is the run that is queued, running or waiting, if any.
	ActiveRunID string `json:"activeRunId,omitempty"`
	// Binding is the session's mounts.
	Binding event.Binding `json:"binding"`
	Deleted bool          `json:"deleted,omitempty"`
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
	// FirstSeq and LastSeq bound the run's events in the session log.
	FirstSeq int64 `json:"firstSeq"`
	LastSeq  int64 `json:"lastSeq"`
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
