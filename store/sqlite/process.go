package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"weft.dev/weft/event"
	"weft.dev/weft/store"
	"weft.dev/weft/store/record"
)

// AppendProcess writes b in one transaction: its events, its record and
// its output drop, or nothing. It returns an error wrapping
// [store.ErrInvalid] for a malformed batch (no events, a record of another
// process, a first batch without a record), [store.ErrSeqConflict] if the
// batch does not continue the process's log, and [store.ErrClosed] after
// Close.
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
	if err := s.acquire(); err != nil {
		return err
	}
	defer s.mu.RUnlock()
	err := s.w.run(ctx, func(tx *wtx) error { return appendProcessTx(tx, b, r, rec) })
	if err != nil && !isStoreError(err) {
		return s.errorf("append to process "+b.ProcessID, err)
	}
	return err
}

// appendProcessTx writes batch b, whose record r is encoded as rec (nil
// if b has none), in tx. Errors the caller branches on wrap a store
// sentinel; the others are SQLite's, which AppendProcess wraps.
func appendProcessTx(tx *wtx, b store.ProcessBatch, r record.Process, rec []byte) error {
	var last int64
	err := tx.queryRow(stProcessLastSeq, []any{b.ProcessID}, &last)
	exists := err == nil
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return err
	}
	if first := b.Events[0].Seq; first != last+1 {
		return fmt.Errorf("%w: process %s: expected seq %d, got %d", store.ErrSeqConflict, b.ProcessID, last+1, first)
	}
	if !exists && rec == nil {
		return fmt.Errorf("%w: process %s: the first batch must carry the record", store.ErrInvalid, b.ProcessID)
	}
	if b.DropOutputBefore > 0 {
		if _, err := tx.exec(stDropOutput, b.ProcessID, b.DropOutputBefore); err != nil {
			return fmt.Errorf("drop output: %w", err)
		}
	}
	for _, e := range b.Events {
		if _, err := tx.exec(stInsertProcessEvent, b.ProcessID, e.Seq, string(e.Type), encodeTime(e.Time), nilIfEmpty(e.Data), e.Offset, e.Size); err != nil {
			if isConstraint(err) {
				return fmt.Errorf("%w: process %s: seq %d already stored", store.ErrSeqConflict, b.ProcessID, e.Seq)
			}
			return err
		}
	}
	lastSeq := b.Events[len(b.Events)-1].Seq
	if rec != nil {
		if _, err := tx.exec(stUpsertProcess, b.ProcessID, r.SessionID, r.Status, r.MountID, sortNanos(r.StartedAt), lastSeq, rec); err != nil {
			return fmt.Errorf("store record: %w", err)
		}
	} else if _, err := tx.exec(stSetProcessLastSeq, lastSeq, b.ProcessID); err != nil {
		return err
	}
	return insertReceipts(tx, "process", b.ProcessID, b.Receipts)
}

// ReadProcess returns up to p.Limit (default 1000) events of p.ProcessID
// with seq > p.After, filtered by p.Types. An unknown process returns an
// error wrapping [store.ErrNotFound].
func (s *Store) ReadProcess(ctx context.Context, p store.ReadProcessParams) ([]record.ProcessEvent, error) {
	if err := s.acquire(); err != nil {
		return nil, err
	}
	defer s.mu.RUnlock()
	limit := p.Limit
	if limit <= 0 {
		limit = 1000
	}
	var q strings.Builder
	q.WriteString(`SELECT seq, type, time, data, out_off, out_size FROM process_events WHERE process_id = ? AND seq > ?`)
	args := []any{p.ProcessID, max(p.After, 0)}
	args = whereIn(&q, args, "type", p.Types)
	q.WriteString(` ORDER BY seq LIMIT ?`)
	args = append(args, limit)
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
	limit := p.Limit
	if limit <= 0 {
		limit = 100
	}
	// Chunks are contiguous and ordered, so the chunk holding Offset is the
	// last one starting at or before it.
	return s.processEvents(ctx, p.ProcessID, `SELECT seq, type, time, data, out_off, out_size FROM process_events
		WHERE process_id = ?1 AND out_size > 0 AND out_off + out_size > ?2
		AND out_off >= coalesce((SELECT max(out_off) FROM process_events WHERE process_id = ?1 AND out_size > 0 AND out_off <= ?2), 0)
		ORDER BY out_off LIMIT ?3`, []any{p.ProcessID, max(p.Offset, 0), limit})
}

func (s *Store) processEvents(ctx context.Context, id, query string, args []any) ([]record.ProcessEvent, error) {
	op := "read process " + id
	rows, err := s.r.QueryContext(ctx, query, args...)
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
		if len(e.Data) == 0 {
			e.Data = nil
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, s.errorf(op, err)
	}
	if len(out) == 0 {
		var one int
		err := s.r.QueryRowContext(ctx, `SELECT 1 FROM processes WHERE id = ?`, id).Scan(&one)
		if errors.Is(err, sql.ErrNoRows) {
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
	err := s.r.QueryRowContext(ctx, `SELECT record FROM processes WHERE id = ?`, id).Scan(&rec)
	if errors.Is(err, sql.ErrNoRows) {
		return record.Process{}, fmt.Errorf("%w: process %s", store.ErrNotFound, id)
	}
	if err != nil {
		return record.Process{}, s.errorf("read process "+id, err)
	}
	var out record.Process
	if err := json.Unmarshal(rec, &out); err != nil {
		return record.Process{}, fmt.Errorf("store %s: process %s: decode record: %w", s.path, id, err)
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
	limit := p.Limit
	if limit <= 0 {
		limit = 1000
	}
	var q strings.Builder
	var args []any
	q.WriteString(`SELECT id, record FROM processes WHERE 1`)
	if p.SessionID != "" {
		if p.IncludeGranted {
			q.WriteString(` AND (session_id = ? OR EXISTS (SELECT 1 FROM json_each(record, '$.grants') WHERE value = ?))`)
			args = append(args, p.SessionID, p.SessionID)
		} else {
			q.WriteString(` AND session_id = ?`)
			args = append(args, p.SessionID)
		}
	}
	args = whereIn(&q, args, "status", p.Statuses)
	if p.MountID != "" {
		q.WriteString(` AND mount_id = ?`)
		args = append(args, p.MountID)
	}
	q.WriteString(` ORDER BY started_at, id LIMIT ?`)
	args = append(args, limit)
	rows, err := s.r.QueryContext(ctx, q.String(), args...)
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
			return nil, fmt.Errorf("store %s: process %s: decode record: %w", s.path, id, err)
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
