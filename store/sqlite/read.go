package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"weft.dev/weft/event"
	"weft.dev/weft/store"
	"weft.dev/weft/store/record"
)

// Read returns up to p.Limit (default 1000) events of p.SessionID with
// seq > p.After in seq order, filtered by p.RunID and p.Types. An unknown
// session returns an error wrapping [store.ErrNotFound].
func (s *Store) Read(ctx context.Context, p store.ReadParams) ([]event.Event, error) {
	if err := s.acquire(); err != nil {
		return nil, err
	}
	defer s.mu.RUnlock()
	limit := p.Limit
	if limit <= 0 {
		limit = 1000
	}
	var q strings.Builder
	q.WriteString(`SELECT seq, run_id, type, time, data FROM events WHERE session_id = ? AND seq > ?`)
	args := []any{p.SessionID, max(p.After, 0)}
	if p.RunID != "" {
		q.WriteString(` AND run_id = ?`)
		args = append(args, p.RunID)
	}
	args = whereIn(&q, args, "type", p.Types)
	q.WriteString(` ORDER BY seq LIMIT ?`)
	args = append(args, limit)

	rows, err := s.r.QueryContext(ctx, q.String(), args...)
	if err != nil {
		return nil, s.errorf("read session "+p.SessionID, err)
	}
	defer rows.Close()
	out := make([]event.Event, 0, min(limit, 256))
	size := 0
	for (p.MaxBytes <= 0 || size < p.MaxBytes) && rows.Next() {
		e := event.Event{SessionID: p.SessionID}
		var typ string
		var t int64
		if err := rows.Scan(&e.Seq, &e.RunID, &typ, &t, (*[]byte)(&e.Data)); err != nil {
			return nil, s.errorf("read session "+p.SessionID, err)
		}
		e.Type, e.Time = event.Type(typ), decodeTime(t)
		if len(e.Data) == 0 {
			e.Data = nil
		}
		size += len(e.Data)
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, s.errorf("read session "+p.SessionID, err)
	}
	if len(out) == 0 {
		if _, err := s.lastSeq(ctx, p.SessionID); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// LastSeq returns the seq of the session's last event, or an error wrapping
// [store.ErrNotFound] for a session without events.
func (s *Store) LastSeq(ctx context.Context, sessionID string) (int64, error) {
	if err := s.acquire(); err != nil {
		return 0, err
	}
	defer s.mu.RUnlock()
	return s.lastSeq(ctx, sessionID)
}

func (s *Store) lastSeq(ctx context.Context, sessionID string) (int64, error) {
	var last sql.NullInt64
	if err := s.r.QueryRowContext(ctx, `SELECT max(seq) FROM events WHERE session_id = ?`, sessionID).Scan(&last); err != nil {
		return 0, s.errorf("read session "+sessionID, err)
	}
	if !last.Valid {
		return 0, fmt.Errorf("%w: session %s", store.ErrNotFound, sessionID)
	}
	return last.Int64, nil
}

// Session returns the session record, deleted or not, or an error wrapping
// [store.ErrNotFound].
func (s *Store) Session(ctx context.Context, id string) (record.Session, error) {
	if err := s.acquire(); err != nil {
		return record.Session{}, err
	}
	defer s.mu.RUnlock()
	var rec []byte
	var seq, at sql.NullInt64
	err := s.r.QueryRowContext(ctx, `SELECT record, `+sessionTail+` FROM sessions WHERE id = ?`, id).Scan(&rec, &seq, &at)
	if errors.Is(err, sql.ErrNoRows) {
		return record.Session{}, fmt.Errorf("%w: session %s", store.ErrNotFound, id)
	}
	if err != nil {
		return record.Session{}, s.errorf("read session "+id, err)
	}
	var out record.Session
	if err := json.Unmarshal(rec, &out); err != nil {
		return record.Session{}, fmt.Errorf("store %s: session %s: decode record: %w", s.path, id, err)
	}
	setTail(&out, seq, at)
	return out, nil
}

// Sessions lists sessions newest first (by CreatedAt, then ID), at most
// p.Limit (default 100), after the session p.Before. An unknown p.Before
// returns an error wrapping [store.ErrNotFound].
func (s *Store) Sessions(ctx context.Context, p store.ListSessionsParams) ([]record.Session, error) {
	if err := s.acquire(); err != nil {
		return nil, err
	}
	defer s.mu.RUnlock()
	limit := p.Limit
	if limit <= 0 {
		limit = 100
	}
	var q strings.Builder
	var args []any
	q.WriteString(`SELECT id, record, ` + sessionTail + ` FROM sessions WHERE 1`)
	if p.Before != "" {
		var created int64
		err := s.r.QueryRowContext(ctx, `SELECT created_at FROM sessions WHERE id = ?`, p.Before).Scan(&created)
		if errors.Is(err, sql.ErrNoRows) {
			return nil, fmt.Errorf("%w: cursor session %s", store.ErrNotFound, p.Before)
		}
		if err != nil {
			return nil, s.errorf("list sessions", err)
		}
		q.WriteString(` AND (created_at, id) < (?, ?)`)
		args = append(args, created, p.Before)
	}
	if !p.IncludeDeleted {
		q.WriteString(` AND deleted = 0`)
	}
	q.WriteString(` ORDER BY created_at DESC, id DESC LIMIT ?`)
	args = append(args, limit)
	rows, err := s.r.QueryContext(ctx, q.String(), args...)
	if err != nil {
		return nil, s.errorf("list sessions", err)
	}
	defer rows.Close()
	var out []record.Session
	for rows.Next() {
		var id string
		var rec []byte
		var seq, at sql.NullInt64
		if err := rows.Scan(&id, &rec, &seq, &at); err != nil {
			return nil, s.errorf("list sessions", err)
		}
		var sess record.Session
		if err := json.Unmarshal(rec, &sess); err != nil {
			return nil, fmt.Errorf("store %s: session %s: decode record: %w", s.path, id, err)
		}
		setTail(&sess, seq, at)
		out = append(out, sess)
	}
	if err := rows.Err(); err != nil {
		return nil, s.errorf("list sessions", err)
	}
	return out, nil
}

// Run returns the run record or an error wrapping [store.ErrNotFound].
func (s *Store) Run(ctx context.Context, id string) (record.Run, error) {
	if err := s.acquire(); err != nil {
		return record.Run{}, err
	}
	defer s.mu.RUnlock()
	var rec []byte
	var last sql.NullInt64
	err := s.r.QueryRowContext(ctx, `SELECT record, `+runTail+` FROM runs WHERE id = ?`, id).Scan(&rec, &last)
	if errors.Is(err, sql.ErrNoRows) {
		return record.Run{}, fmt.Errorf("%w: run %s", store.ErrNotFound, id)
	}
	if err != nil {
		return record.Run{}, s.errorf("read run "+id, err)
	}
	var out record.Run
	if err := json.Unmarshal(rec, &out); err != nil {
		return record.Run{}, fmt.Errorf("store %s: run %s: decode record: %w", s.path, id, err)
	}
	out.LastSeq = last.Int64
	return out, nil
}

// Request returns a request record or an error wrapping
// [store.ErrNotFound].
func (s *Store) Request(ctx context.Context, id string) (record.Request, error) {
	if err := s.acquire(); err != nil {
		return record.Request{}, err
	}
	defer s.mu.RUnlock()
	var rec []byte
	err := s.r.QueryRowContext(ctx, `SELECT record FROM requests WHERE id = ?`, id).Scan(&rec)
	if errors.Is(err, sql.ErrNoRows) {
		return record.Request{}, fmt.Errorf("%w: request %s", store.ErrNotFound, id)
	}
	if err != nil {
		return record.Request{}, s.errorf("read request "+id, err)
	}
	var out record.Request
	if err := json.Unmarshal(rec, &out); err != nil {
		return record.Request{}, fmt.Errorf("store %s: request %s: decode record: %w", s.path, id, err)
	}
	return out, nil
}

// Requests lists the requests matching p, oldest first (by session, then
// seq), at most p.Limit (default 1000).
func (s *Store) Requests(ctx context.Context, p store.ListRequestsParams) ([]record.Request, error) {
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
	q.WriteString(`SELECT id, record FROM requests WHERE 1`)
	if p.SessionID != "" {
		q.WriteString(` AND session_id = ?`)
		args = append(args, p.SessionID)
	}
	if p.RunID != "" {
		q.WriteString(` AND run_id = ?`)
		args = append(args, p.RunID)
	}
	args = whereIn(&q, args, "status", p.Statuses)
	q.WriteString(` ORDER BY session_id, seq LIMIT ?`)
	args = append(args, limit)
	rows, err := s.r.QueryContext(ctx, q.String(), args...)
	if err != nil {
		return nil, s.errorf("list requests", err)
	}
	defer rows.Close()
	var out []record.Request
	for rows.Next() {
		var id string
		var rec []byte
		if err := rows.Scan(&id, &rec); err != nil {
			return nil, s.errorf("list requests", err)
		}
		var r record.Request
		if err := json.Unmarshal(rec, &r); err != nil {
			return nil, fmt.Errorf("store %s: request %s: decode record: %w", s.path, id, err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, s.errorf("list requests", err)
	}
	return out, nil
}

// Runs lists the runs of p.SessionID (every session's if empty) whose
// status is one of p.Statuses (any if empty), oldest first (by CreatedAt,
// FirstSeq, ID), at most p.Limit (default 1000). An unknown session lists
// nothing.
func (s *Store) Runs(ctx context.Context, p store.ListRunsParams) ([]record.Run, error) {
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
	q.WriteString(`SELECT id, record, ` + runTail + ` FROM runs`)
	if p.SessionID != "" && len(p.Statuses) > 0 {
		// Left to itself, SQLite walks runs_by_session to save the sort,
		// reading every run of the session: a session's unended runs (what
		// loading it asks for) would cost as much as its whole history.
		q.WriteString(` INDEXED BY runs_by_session_status`)
	}
	q.WriteString(` WHERE 1`)
	if p.SessionID != "" {
		q.WriteString(` AND session_id = ?`)
		args = append(args, p.SessionID)
	}
	args = whereIn(&q, args, "status", p.Statuses)
	q.WriteString(` ORDER BY created_at, first_seq, id LIMIT ?`)
	args = append(args, limit)
	rows, err := s.r.QueryContext(ctx, q.String(), args...)
	if err != nil {
		return nil, s.errorf("list runs", err)
	}
	defer rows.Close()
	var out []record.Run
	for rows.Next() {
		var id string
		var rec []byte
		var last sql.NullInt64
		if err := rows.Scan(&id, &rec, &last); err != nil {
			return nil, s.errorf("list runs", err)
		}
		var r record.Run
		if err := json.Unmarshal(rec, &r); err != nil {
			return nil, fmt.Errorf("store %s: run %s: decode record: %w", s.path, id, err)
		}
		r.LastSeq = last.Int64
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, s.errorf("list runs", err)
	}
	return out, nil
}

// Receipt returns the receipt for (key, method) or an error wrapping
// [store.ErrNotFound].
func (s *Store) Receipt(ctx context.Context, key, method string) (record.Receipt, error) {
	if err := s.acquire(); err != nil {
		return record.Receipt{}, err
	}
	defer s.mu.RUnlock()
	r, err := receiptFrom(key, method, s.r.QueryRowContext(ctx, receiptSQL, key, method).Scan)
	if errors.Is(err, sql.ErrNoRows) {
		return record.Receipt{}, fmt.Errorf("%w: receipt %s %s", store.ErrNotFound, method, key)
	}
	if err != nil {
		return record.Receipt{}, s.errorf("read receipt", err)
	}
	return r, nil
}

// receiptSQL reads the receipt of (key, method).
const receiptSQL = `SELECT fingerprint, result, session_id, created_at FROM receipts WHERE key = ? AND method = ?`

// receiptFrom returns the receipt of (key, method) whose row of receiptSQL
// scan reads.
func receiptFrom(key, method string, scan func(dst ...any) error) (record.Receipt, error) {
	r := record.Receipt{Key: key, Method: method}
	var t int64
	if err := scan(&r.Fingerprint, (*[]byte)(&r.Result), &r.SessionID, &t); err != nil {
		return record.Receipt{}, err
	}
	if len(r.Result) == 0 {
		r.Result = nil
	}
	r.CreatedAt = decodeTime(t)
	return r, nil
}

// The parts of the session and run records that are read from the log
// rather than stored: a session's last seq and its time, a run's last seq.
// Each is one seek in a primary key or index, so appends that change no
// record write no record.
const (
	sessionTail = `(SELECT seq FROM events WHERE session_id = sessions.id ORDER BY seq DESC LIMIT 1),
		(SELECT time FROM events WHERE session_id = sessions.id ORDER BY seq DESC LIMIT 1)`
	runTail = `(SELECT seq FROM events WHERE session_id = runs.session_id AND run_id = runs.id ORDER BY seq DESC LIMIT 1)`
)

// setTail fills a session's LastSeq and UpdatedAt from its last event.
func setTail(sess *record.Session, seq, at sql.NullInt64) {
	sess.LastSeq = seq.Int64
	if at.Valid {
		sess.UpdatedAt = decodeTime(at.Int64)
	}
}

// whereIn adds "AND column IN (?, …)" for vals to q and their arguments to
// args; no vals adds nothing (no filter).
func whereIn[T ~string](q *strings.Builder, args []any, column string, vals []T) []any {
	if len(vals) == 0 {
		return args
	}
	q.WriteString(` AND ` + column + ` IN (?` + strings.Repeat(",?", len(vals)-1) + `)`)
	for _, v := range vals {
		args = append(args, string(v))
	}
	return args
}
