package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"

	"weft.dev/weft/event"
	"weft.dev/weft/store"
	"weft.dev/weft/store/record"
)

// The statements of a process append.
const (
	processLastSQL = `SELECT last_seq FROM processes WHERE id = $1`
	dropOutputSQL  = `DELETE FROM process_events WHERE process_id = $1 AND out_size > 0 AND out_off + out_size <= $2`
	insertProcEvts = `INSERT INTO process_events (process_id, seq, type, time, data, out_off, out_size)
		SELECT $1::text, * FROM unnest($2::bigint[], $3::text[], $4::bigint[], $5::bytea[], $6::bigint[], $7::bigint[])`
	upsertProcess = `INSERT INTO processes (id, session_id, status, mount_id, started_at, last_seq, grants, record)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
		ON CONFLICT (id) DO UPDATE SET session_id = excluded.session_id, status = excluded.status, mount_id = excluded.mount_id,
			started_at = excluded.started_at, last_seq = excluded.last_seq, grants = excluded.grants, record = excluded.record`
	bumpProcess = `UPDATE processes SET last_seq = $1 WHERE id = $2`
)

// AppendProcess writes b in one transaction: its events, its record, its
// output drop and its receipts, or nothing. Like [Store.Append] it holds
// the process's advisory lock while it checks that b starts at the
// process's last seq + 1 (the record's last_seq: dropped output may have
// removed the log's last rows). It returns an error wrapping
// [store.ErrInvalid] for a malformed batch (no events, a record of another
// process, a first batch without a record), [store.ErrSeqConflict] if the
// batch does not continue the process's log, [store.ErrReceiptExists] for
// a stored receipt, and [store.ErrClosed] after Close.
func (s *Store) AppendProcess(ctx context.Context, b store.ProcessBatch) error {
	if err := store.ValidateProcessBatch(b); err != nil {
		return err
	}
	var rec []byte
	var r record.Process
	if b.Record != nil {
		r = normProcess(*b.Record)
		var err error
		if rec, err = json.Marshal(r); err != nil {
			return fmt.Errorf("%w: process %s: encode record: %v", store.ErrInvalid, b.ProcessID, err)
		}
	}
	n := len(b.Events)
	seqs, types, times, datas, offs, sizes := make([]int64, n), make([]string, n), make([]int64, n), make([][]byte, n), make([]int64, n), make([]int64, n)
	for i, e := range b.Events {
		seqs[i], types[i], times[i], datas[i], offs[i], sizes[i] = e.Seq, string(e.Type), encodeTime(e.Time), nilIfEmpty(e.Data), e.Offset, e.Size
	}
	lastSeq := seqs[n-1]

	if err := s.acquire(); err != nil {
		return err
	}
	defer s.mu.RUnlock()
	op := "append to process " + b.ProcessID
	var bt pgx.Batch
	bt.BeginTx(pgx.TxOptions{})
	bt.Queue(lockSQL, lockProcess, b.ProcessID)
	bt.Queue(processLastSQL, b.ProcessID)
	if b.DropOutputBefore > 0 {
		bt.Queue(dropOutputSQL, b.ProcessID, b.DropOutputBefore)
	}
	bt.Queue(insertProcEvts, b.ProcessID, seqs, types, times, datas, offs, sizes)
	if rec != nil {
		grants := r.Grants
		if grants == nil {
			grants = []string{}
		}
		bt.Queue(upsertProcess, b.ProcessID, r.SessionID, r.Status, r.MountID, sortNanos(r.StartedAt), lastSeq, grants, rec)
	} else {
		bt.Queue(bumpProcess, lastSeq, b.ProcessID)
	}
	queueReceipts(&bt, b.Receipts)

	return s.inTx(ctx, &bt, op, func(br pgx.BatchResults) error {
		if _, err := br.Exec(); err != nil { // the lock
			return s.errorf(op, err)
		}
		var last int64
		err := br.QueryRow().Scan(&last)
		exists := err == nil
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return s.errorf(op, err)
		}
		if first := b.Events[0].Seq; first != last+1 {
			return fmt.Errorf("%w: process %s: expected seq %d, got %d", store.ErrSeqConflict, b.ProcessID, last+1, first)
		}
		if !exists && rec == nil {
			return fmt.Errorf("%w: process %s: the first batch must carry the record", store.ErrInvalid, b.ProcessID)
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

// ReadProcess returns up to p.Limit (default 1000) events of p.ProcessID
// with seq > p.After, filtered by p.Types. An unknown process returns an
// error wrapping [store.ErrNotFound].
func (s *Store) ReadProcess(ctx context.Context, p store.ReadProcessParams) ([]record.ProcessEvent, error) {
	if err := s.acquire(); err != nil {
		return nil, err
	}
	defer s.mu.RUnlock()
	var q strings.Builder
	q.WriteString(`SELECT seq, type, time, data, out_off, out_size FROM process_events WHERE process_id = $1 AND seq > $2`)
	args := []any{p.ProcessID, max(p.After, 0)}
	if len(p.Types) > 0 {
		types := make([]string, len(p.Types))
		for i, t := range p.Types {
			types[i] = string(t)
		}
		args = append(args, types)
		fmt.Fprintf(&q, ` AND type = ANY($%d)`, len(args))
	}
	args = append(args, limitOr(p.Limit, 1000))
	fmt.Fprintf(&q, ` ORDER BY seq LIMIT $%d`, len(args))
	return s.processEvents(ctx, p.ProcessID, q.String(), args)
}

// ProcessOutput returns up to p.Limit (default 100) output chunks of
// p.ProcessID that end after p.Offset, in offset order. An unknown process
// returns an error wrapping [store.ErrNotFound].
func (s *Store) ProcessOutput(ctx context.Context, p store.ProcessOutputParams) ([]record.ProcessEvent, error) {
	if err := s.acquire(); err != nil {
		return nil, err
	}
	defer s.mu.RUnlock()
	// Chunks are contiguous and ordered, so the chunk holding Offset is the
	// last one starting at or before it.
	return s.processEvents(ctx, p.ProcessID, `SELECT seq, type, time, data, out_off, out_size FROM process_events
		WHERE process_id = $1 AND out_size > 0 AND out_off + out_size > $2
		AND out_off >= coalesce((SELECT max(out_off) FROM process_events WHERE process_id = $1 AND out_size > 0 AND out_off <= $2), 0)
		ORDER BY out_off LIMIT $3`, []any{p.ProcessID, max(p.Offset, 0), limitOr(p.Limit, 100)})
}

func (s *Store) processEvents(ctx context.Context, id, query string, args []any) ([]record.ProcessEvent, error) {
	op := "read process " + id
	rows, err := s.pool.Query(ctx, query, args...)
	if err != nil {
		return nil, s.errorf(op, err)
	}
	defer rows.Close()
	out := []record.ProcessEvent{}
	for rows.Next() {
		e := record.ProcessEvent{ProcessID: id}
		var typ string
		var t int64
		if err := rows.Scan(&e.Seq, &typ, &t, (*[]byte)(&e.Data), &e.Offset, &e.Size); err != nil {
			return nil, s.errorf(op, err)
		}
		e.Type, e.Time = event.Type(typ), decodeTime(t)
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, s.errorf(op, err)
	}
	if len(out) == 0 {
		var one int
		err := s.pool.QueryRow(ctx, `SELECT 1 FROM processes WHERE id = $1`, id).Scan(&one)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, fmt.Errorf("%w: process %s", store.ErrNotFound, id)
		}
		if err != nil {
			return nil, s.errorf(op, err)
		}
	}
	return out, nil
}

// Process returns a process record or an error wrapping
// [store.ErrNotFound].
func (s *Store) Process(ctx context.Context, id string) (record.Process, error) {
	if err := s.acquire(); err != nil {
		return record.Process{}, err
	}
	defer s.mu.RUnlock()
	var rec []byte
	err := s.pool.QueryRow(ctx, `SELECT record FROM processes WHERE id = $1`, id).Scan(&rec)
	if errors.Is(err, pgx.ErrNoRows) {
		return record.Process{}, fmt.Errorf("%w: process %s", store.ErrNotFound, id)
	}
	if err != nil {
		return record.Process{}, s.errorf("read process "+id, err)
	}
	var out record.Process
	if err := json.Unmarshal(rec, &out); err != nil {
		return record.Process{}, fmt.Errorf("store %s: process %s: decode record: %w", s.name, id, err)
	}
	return out, nil
}

// Processes lists the records matching p, oldest first (by StartedAt,
// then ID), at most p.Limit (default 1000).
func (s *Store) Processes(ctx context.Context, p store.ListProcessesParams) ([]record.Process, error) {
	if err := s.acquire(); err != nil {
		return nil, err
	}
	defer s.mu.RUnlock()
	var q strings.Builder
	var args []any
	q.WriteString(`SELECT id, record FROM processes WHERE true`)
	if p.SessionID != "" {
		args = append(args, p.SessionID)
		if p.IncludeGranted {
			fmt.Fprintf(&q, ` AND (session_id = $%d OR grants @> ARRAY[$%[1]d::text])`, len(args))
		} else {
			fmt.Fprintf(&q, ` AND session_id = $%d`, len(args))
		}
	}
	if len(p.Statuses) > 0 {
		args = append(args, p.Statuses)
		fmt.Fprintf(&q, ` AND status = ANY($%d)`, len(args))
	}
	if p.MountID != "" {
		args = append(args, p.MountID)
		fmt.Fprintf(&q, ` AND mount_id = $%d`, len(args))
	}
	args = append(args, limitOr(p.Limit, 1000))
	fmt.Fprintf(&q, ` ORDER BY started_at, id LIMIT $%d`, len(args))
	rows, err := s.pool.Query(ctx, q.String(), args...)
	if err != nil {
		return nil, s.errorf("list processes", err)
	}
	defer rows.Close()
	var out []record.Process
	for rows.Next() {
		var id string
		var rec []byte
		if err := rows.Scan(&id, &rec); err != nil {
			return nil, s.errorf("list processes", err)
		}
		var pr record.Process
		if err := json.Unmarshal(rec, &pr); err != nil {
			return nil, fmt.Errorf("store %s: process %s: decode record: %w", s.name, id, err)
		}
		out = append(out, pr)
	}
	if err := rows.Err(); err != nil {
		return nil, s.errorf("list processes", err)
	}
	return out, nil
}

func normProcess(p record.Process) record.Process {
	p.StartedAt = p.StartedAt.UTC()
	if p.EndedAt != nil {
		t := p.EndedAt.UTC()
		p.EndedAt = &t
	}
	p.Grants = slices.Clone(p.Grants)
	return p
}
