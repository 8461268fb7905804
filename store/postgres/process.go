package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"weft.dev/weft/store"
	"weft.dev/weft/store/internal/sqlstore"
)

// The statements of a process append that are PostgreSQL's own.
const (
	insertProcEvts = `INSERT INTO process_events (process_id, seq, type, time, data, out_off, out_size)
		SELECT $1::text, * FROM unnest($2::bigint[], $3::text[], $4::bigint[], $5::bytea[], $6::bigint[], $7::bigint[])`
	upsertProcess = `INSERT INTO processes (id, session_id, status, mount_id, started_at, last_seq, grants, record, host, epoch)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
		ON CONFLICT (id) DO UPDATE SET session_id = excluded.session_id, status = excluded.status, mount_id = excluded.mount_id,
			started_at = excluded.started_at, last_seq = excluded.last_seq, grants = excluded.grants, record = excluded.record,
			host = excluded.host, epoch = excluded.epoch`
	// processSessionSQL is the session that owns process $2: $1 (the
	// batch's record's), else the stored row's.
	processSessionSQL = `coalesce($1::text, (SELECT session_id FROM processes WHERE id = $2::text))`
	// lockProcessSession takes the advisory lock of the session that owns
	// the process, the lock of its appends and lease take-overs ($3 is
	// lockSession), so that the lease read next cannot change before the
	// batch commits.
	lockProcessSession = `SELECT pg_advisory_xact_lock($3, hashtext(` + processSessionSQL + `))`
	// processLease reads the lease (epoch, holder, live) of the session
	// that owns the process, nulls when it has none.
	processLease = `SELECT l.epoch, l.holder, coalesce(l.expires_at > now(), false)
		FROM (SELECT 1) AS one LEFT JOIN leases l ON l.session_id = ` + processSessionSQL
)

// AppendProcess writes b in one transaction: its events, its record, its
// output drop and its receipts, or nothing. Like [Store.Append] it holds
// the process's advisory lock while it checks that b starts at the
// process's last seq + 1 (the record's last_seq: dropped output may have
// removed the log's last rows). It returns an error wrapping
// [store.ErrInvalid] for a malformed batch (no events, a record of another
// process, a first batch without a record), [store.ErrSeqConflict] if the
// batch does not continue the process's log, [store.ErrReceiptExists] for
// a stored receipt, [store.ErrFenced] when b.Epoch is not the epoch of
// the lease of the session that owns the process (checked under that
// session's advisory lock, after the process's, as [Store.Append] checks
// its batches), and [store.ErrClosed] after Close.
func (s *Store) AppendProcess(ctx context.Context, b store.ProcessBatch) error {
	r, rec, err := sqlstore.EncodeProcessBatch(b)
	if err != nil {
		return err
	}
	n := len(b.Events)
	seqs, types, times, datas, offs, sizes := make([]int64, n), make([]string, n), make([]int64, n), make([][]byte, n), make([]int64, n), make([]int64, n)
	for i, e := range b.Events {
		seqs[i], types[i], times[i], datas[i], offs[i], sizes[i] = e.Seq, string(e.Type), sqlstore.EncodeTime(e.Time), sqlstore.Bytes(e.Data), e.Offset, e.Size
	}
	lastSeq := seqs[n-1]

	if err := s.guard.Enter(); err != nil {
		return err
	}
	defer s.guard.Leave()
	op := "append to process " + b.ProcessID
	var bt pgx.Batch
	bt.BeginTx(pgx.TxOptions{})
	bt.Queue(lockSQL, lockProcess, b.ProcessID)
	var session *string
	if rec != nil {
		session = &r.SessionID
	}
	bt.Queue(lockProcessSession, session, b.ProcessID, lockSession)
	bt.Queue(processLease, session, b.ProcessID)
	bt.Queue(sqlstore.ProcessLastSeqSQL, b.ProcessID)
	if b.DropOutputBefore > 0 {
		bt.Queue(sqlstore.DropOutputSQL, b.ProcessID, b.DropOutputBefore)
	}
	bt.Queue(insertProcEvts, b.ProcessID, seqs, types, times, datas, offs, sizes)
	if rec != nil {
		grants := r.Grants
		if grants == nil {
			grants = []string{}
		}
		bt.Queue(upsertProcess, b.ProcessID, r.SessionID, r.Status, r.MountID, sqlstore.SortKey(r.StartedAt), lastSeq, grants, rec, r.Host, r.Epoch)
	} else {
		bt.Queue(sqlstore.SetProcessLastSeqSQL, lastSeq, b.ProcessID)
	}
	queueReceipts(&bt, b.Receipts)

	return s.inTx(ctx, &bt, op, nil, func(br pgx.BatchResults) error {
		if _, err := br.Exec(); err != nil { // the process's lock
			return s.errorf(op, err)
		}
		if _, err := br.Exec(); err != nil { // its session's
			return s.errorf(op, err)
		}
		var epoch *int64
		var holder *string
		var live bool
		if err := br.QueryRow().Scan(&epoch, &holder, &live); err != nil {
			return s.errorf(op, err)
		}
		owner := r.SessionID
		if session == nil {
			owner = "of process " + b.ProcessID
		}
		if err := fence(owner, b.Epoch, epoch, holder, live); err != nil {
			return fmt.Errorf("process %s: %w", b.ProcessID, err)
		}
		last, exists, err := sqlstore.ScanProcessLastSeq(br.QueryRow())
		if err != nil {
			return s.errorf(op, err)
		}
		if err := sqlstore.ContinuesProcess(b, last, exists); err != nil {
			return err
		}
		if b.DropOutputBefore > 0 {
			if _, err := br.Exec(); err != nil {
				return s.errorf(op+": drop output", err)
			}
		}
		if _, err := br.Exec(); err != nil {
			if constraint(err, "process_events_pkey") {
				return fmt.Errorf("%w: process %s: seq %d..%d already stored", store.ErrSeqConflict, b.ProcessID, seqs[0], lastSeq)
			}
			return s.errorf(op, err)
		}
		if _, err := br.Exec(); err != nil {
			return s.errorf(op+": store record", err)
		}
		return s.receiptsResult(br, "process "+b.ProcessID, b.Receipts)
	})
}
