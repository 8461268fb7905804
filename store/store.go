// Package store defines the contract of weft's durable storage: an
// append-only event log per session plus the records projected from it
// (sessions, runs, requests), updated in the same transaction as the
// events that imply them, idempotency receipts, snapshots, and the logs
// of background processes.
//
// The records themselves, and the projection that derives them from the
// events, are package store/record. Implementations live in subpackages
// (store/sqlite, store/postgres, store/memory); the conformance suite in
// store/storetest is run by each of them.
package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"weft.dev/weft/event"
	"weft.dev/weft/store/record"
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

// Store is durable storage for sessions: the union of the roles its
// consumers take, which every implementation (a driver) provides. A
// consumer names the role it uses, or a smaller interface of its own, not
// Store: the process manager takes a [ProcessLog], a session's journal
// what it appends and reads. Only what wires the roles together (the host,
// the CLI that opens the store) holds a Store.
//
// All methods are safe for concurrent use; appends to one session must
// come from that session's single owner, and the store rejects
// (ErrSeqConflict) any append that would leave a gap or overwrite an
// event.
type Store interface {
	SessionLog
	Receipts
	Snapshots
	ProcessLog
	// Close releases the store. It is safe to call more than once.
	Close() error
}

// SessionLog is the sessions' logs and the records projected from them
// (see [record.Projection]), written together by [SessionLog.Append]: what
// a session's owner appends, and what the readers of a session's events,
// runs and requests read. Its methods are safe for concurrent use.
type SessionLog interface {
	// Append writes b atomically: all of its events and records, or nothing.
	Append(ctx context.Context, b Batch) error
	// Read returns up to p.Limit events of p.SessionID with seq > p.After,
	// in seq order. An unknown session returns ErrNotFound. The log of a
	// fork (a session whose record has [record.Session.Fork]) is its
	// source's events 1..Fork.Seq, carrying the fork's session ID, then
	// its own: the source's events are stored once and read through it,
	// whatever became of the source since (deleted, rewound, compacted:
	// none of it rewrites a log). See [ReadFork].
	Read(ctx context.Context, p ReadParams) ([]event.Event, error)
	// LastSeq returns the seq of the session's last event (0 for none) or
	// ErrNotFound.
	LastSeq(ctx context.Context, sessionID string) (int64, error)
	// Session returns a session record or ErrNotFound.
	Session(ctx context.Context, id string) (record.Session, error)
	// Sessions lists sessions, newest first, paginated by p.
	Sessions(ctx context.Context, p ListSessionsParams) ([]record.Session, error)
	// Run returns a run record or ErrNotFound.
	Run(ctx context.Context, id string) (record.Run, error)
	// Runs lists runs matching p, oldest first.
	Runs(ctx context.Context, p ListRunsParams) ([]record.Run, error)
	// Request returns a request record (an approval, a question, a client
	// tool call) or ErrNotFound.
	Request(ctx context.Context, id string) (record.Request, error)
	// Requests lists the request records matching p, oldest first.
	Requests(ctx context.Context, p ListRequestsParams) ([]record.Request, error)
}

// Receipts keeps idempotency receipts: a mutation's (key, method), the
// fingerprint of its params and what it answered, so that a retry gets
// the first answer. A mutation that appends to a log stores its receipt
// in the same batch ([Batch.Receipts], [ProcessBatch.Receipts]); the
// others store it here. Its methods are safe for concurrent use.
type Receipts interface {
	// Receipt returns the idempotency receipt for (key, method) or ErrNotFound.
	Receipt(ctx context.Context, key, method string) (record.Receipt, error)
	// PutReceipt stores a receipt outside any session's batch (for
	// mutations that append no event of their own). If a receipt with the
	// same (key, method) exists, it is left as is and returned instead, so
	// the caller can tell a first request from a retry.
	PutReceipt(ctx context.Context, r record.Receipt) (record.Receipt, error)
	// PruneReceipts deletes receipts created before t.
	PruneReceipts(ctx context.Context, before time.Time) (int, error)
}

// Snapshots keeps the state an owner derived from a session's log through
// a seq (see [record.Snapshot]): a cache beside the log, never the truth.
// Its methods are safe for concurrent use.
type Snapshots interface {
	// PutSnapshot stores a snapshot, replacing the session's snapshot of
	// the same kind unless that one is through a later seq (then it is
	// kept and PutSnapshot returns nil). A snapshot beyond the session's
	// last event is ErrSeqConflict; an unknown session, ErrNotFound; a
	// snapshot whose Epoch is not the epoch of the session's lease, in a
	// store that fences writes as [Batch.Epoch] says, ErrFenced.
	PutSnapshot(ctx context.Context, s record.Snapshot) error
	// Snapshot returns the session's snapshot of kind, or ErrNotFound.
	Snapshot(ctx context.Context, sessionID, kind string) (record.Snapshot, error)
}

// Batch is one atomic append to one session.
type Batch struct {
	// SessionID names the session; every event must carry it.
	SessionID string
	// Events are appended in order; their seqs must run from the session's
	// last seq + 1 without a gap. A batch that creates a session starts at
	// 1, or, when it creates a fork (its Session record has
	// [record.Session.Fork]), at Fork.Seq+1: the store then records the
	// fork's source (which must exist and hold Fork.Seq events, else
	// ErrInvalid) and reads the fork's first Fork.Seq events through it.
	Events []event.Event
	// Session, if set, replaces the session record.
	Session *record.Session
	// Runs replace the run records with the same IDs.
	Runs []record.Run
	// Requests replace the request records with the same IDs.
	Requests []record.Request
	// Receipts are stored alongside; an existing (key, method) is an error.
	Receipts []record.Receipt
	// Epoch is the writer's lease epoch (see [Lease]): a store whose
	// sessions are leased in the database (store/postgres) commits the
	// batch only if the session's current lease has this epoch, and
	// otherwise refuses it whole with [ErrFenced]; zero is an unfenced
	// writer, refused only while a live lease holds the session. Stores
	// of one machine (SQLite, memory), whose leases are kernel locks,
	// ignore it. Process logs ([ProcessBatch]) and snapshots
	// ([Snapshots.PutSnapshot], [record.Snapshot.Epoch]) are fenced the
	// same way.
	Epoch int64
}

// SetRecords sets the session, run and request records of b to c: the
// records that the projection of b's session changed by applying b's
// events (see [record.Projection.Flush]).
func (b *Batch) SetRecords(c record.Changes) {
	b.Session, b.Runs, b.Requests = c.Session, c.Runs, c.Requests
}

// ReadFork reads the page p of a fork whose source is f, for a store's
// Read: the source's events after p.After through f.Seq (read with read,
// so that a fork of a fork reads through its own source), given the
// fork's session ID, then, while the page has room, the fork's own
// events after f.Seq (read with read too, which the store answers from
// the fork's own rows since After is then f.Seq). A store calls it only
// when p.After < f.Seq. The page keeps p's Limit, MaxBytes, RunID, Types
// and Through. It is safe for concurrent use if read is.
func ReadFork(ctx context.Context, p ReadParams, f record.Fork, read func(context.Context, ReadParams) ([]event.Event, error)) ([]event.Event, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = 1000
	}
	src := p
	src.SessionID, src.Limit, src.Through = f.SessionID, limit, f.Seq
	if p.Through > 0 {
		src.Through = min(p.Through, f.Seq)
	}
	out, err := read(ctx, src)
	if err != nil {
		return nil, fmt.Errorf("session %s: read its source %s: %w", p.SessionID, f.SessionID, err)
	}
	size := 0
	for i := range out {
		out[i].SessionID = p.SessionID
		size += len(out[i].Data)
	}
	if len(out) == limit || p.MaxBytes > 0 && size >= p.MaxBytes || p.Through > 0 && p.Through <= f.Seq {
		return out, nil
	}
	own := p
	own.After, own.Limit = f.Seq, limit-len(out)
	if p.MaxBytes > 0 {
		own.MaxBytes = p.MaxBytes - size
	}
	rest, err := read(ctx, own)
	if err != nil {
		return nil, err
	}
	return append(out, rest...), nil
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
	// Through, if positive, keeps only events with seq <= Through.
	Through int64
}

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

// ProcessLog is the part of [Store] that keeps durable background
// processes: one record per process (the registry) and one append-only log
// per process with its own gap-free seq from 1. It is a separate log rather
// than events in the session log because a process outlives the run and
// the step that started it, may be addressed by other sessions, and writes
// far more (its output) than a session; the session log only carries
// summaries that the host writes.
//
// The process log uses [record.ProcessEvent], not [event.Event]: its key is a
// process ID, not a session ID, and output chunks carry the byte range the
// store indexes for [ProcessLog.ProcessOutput] and trims with
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
type ProcessLog interface {
	// AppendProcess writes b atomically: its events, its record and its
	// output drop, or nothing. The first batch of a process must start at
	// seq 1 and carry its record.
	AppendProcess(ctx context.Context, b ProcessBatch) error
	// ReadProcess returns up to p.Limit events of p.ProcessID with
	// seq > p.After in seq order; dropped output chunks are skipped (their
	// seqs are missing). An unknown process returns ErrNotFound.
	ReadProcess(ctx context.Context, p ReadProcessParams) ([]record.ProcessEvent, error)
	// ProcessOutput returns up to p.Limit output chunks (events with
	// Size > 0) of p.ProcessID whose range ends after p.Offset, in offset
	// order. An unknown process returns ErrNotFound.
	ProcessOutput(ctx context.Context, p ProcessOutputParams) ([]record.ProcessEvent, error)
	// Process returns a process record or ErrNotFound.
	Process(ctx context.Context, id string) (record.Process, error)
	// Processes lists the records matching p, oldest first (by StartedAt,
	// then ID).
	Processes(ctx context.Context, p ListProcessesParams) ([]record.Process, error)
}

// ProcessBatch is one atomic append to one process's log.
type ProcessBatch struct {
	ProcessID string
	// Events continue the log from its last seq + 1; at least one.
	Events []record.ProcessEvent
	// Record, if set, replaces the process record. The first batch of a
	// process must carry it.
	Record *record.Process
	// DropOutputBefore, if positive, deletes the output chunks of earlier
	// batches that end at or before this offset.
	DropOutputBefore int64
	// Receipts are idempotency receipts stored in the same transaction as
	// the events (a signal, a cancel request, a grant); an existing
	// (key, method) fails the batch with ErrReceiptExists.
	Receipts []record.Receipt
	// Epoch is the lease epoch of the process's session under which its
	// writer runs it ([record.Process.Epoch]; a reconciler's, the epoch
	// of the lease it took): fenced like [Batch.Epoch], against the
	// lease of the session that owns the process. A store of leased
	// sessions (store/postgres) refuses the batch whole with [ErrFenced]
	// when the session's lease has another epoch (zero: while a live
	// lease holds the session), so that a host that lost the session
	// stops writing for its processes rather than race the host that
	// took it over; stores of one machine ignore it.
	Epoch int64
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
