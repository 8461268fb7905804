package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"weft.dev/weft/event"
	"weft.dev/weft/store"
	"weft.dev/weft/store/record"
)

// Reads are the reads of a [store.Store] on a SQL database: every method
// of the store but its writes and Close. A driver embeds them in its
// store. Every read enters the store's [Guard] first, and wraps the
// database's errors with [DB.Error]. Reads are safe for concurrent use.
type Reads struct {
	name  string
	g     *Guard
	db    DB
	d     Dialect
	forks *forkCache
}

// NewReads returns the reads of the store named name (in its errors) on
// db, in dialect d, whose calls enter g.
func NewReads(name string, g *Guard, db DB, d Dialect) Reads {
	return Reads{name: name, g: g, db: db, d: d, forks: &forkCache{m: make(map[string]record.Fork)}}
}

// forkCacheEntries bounds a [forkCache]: past it the cache starts over
// (an entry is a session ID and a fork's source, about 100 bytes).
const forkCacheEntries = 1 << 14

// forkCache remembers which sessions are forks, and of what, so that a
// read of a session's log looks it up in the database once per store
// rather than once per page. An entry never goes stale: a session is a
// fork, or not, from its first event on. Safe for concurrent use.
type forkCache struct {
	mu sync.Mutex
	m  map[string]record.Fork // a zero Fork: not a fork
}

func (c *forkCache) get(id string) (record.Fork, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	f, ok := c.m[id]
	return f, ok
}

func (c *forkCache) put(id string, f record.Fork) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.m) >= forkCacheEntries {
		clear(c.m)
	}
	c.m[id] = f
}

// ForkSQL reads whether session $1 is a fork, and of what: no row for an
// unknown session, NULLs for one that is not a fork.
const ForkSQL = `SELECT f.parent_id, f.parent_seq FROM sessions s LEFT JOIN forks f ON f.session_id = s.id WHERE s.id = $1`

// InsertForkSQL records that session $1 is a fork of session $2 through
// its seq $3, once (a later batch carrying the fork's record changes
// nothing).
const InsertForkSQL = `INSERT INTO forks (session_id, parent_id, parent_seq) VALUES ($1, $2, $3) ON CONFLICT (session_id) DO NOTHING`

// fork returns the source of session id if it is a fork (a zero Fork
// otherwise, and for an unknown session).
func (r Reads) fork(ctx context.Context, id string) (record.Fork, error) {
	if f, ok := r.forks.get(id); ok {
		return f, nil
	}
	var parent *string
	var seq *int64
	err := r.db.QueryRow(ctx, ForkSQL, id).Scan(&parent, &seq)
	if errors.Is(err, sql.ErrNoRows) {
		return record.Fork{}, nil
	}
	if err != nil {
		return record.Fork{}, r.db.Error("read session "+id, err)
	}
	var f record.Fork
	if parent != nil && seq != nil {
		f = record.Fork{SessionID: *parent, Seq: *seq}
	}
	r.forks.put(id, f)
	return f, nil
}

// Read returns up to p.Limit (default 1000) events of p.SessionID with
// seq > p.After in seq order, filtered by p.RunID and p.Types and cut by
// p.MaxBytes. An unknown session returns an error wrapping
// [store.ErrNotFound].
func (r Reads) Read(ctx context.Context, p store.ReadParams) ([]event.Event, error) {
	if err := r.g.Enter(); err != nil {
		return nil, err
	}
	defer r.g.Leave()
	return r.read(ctx, p)
}

// read is Read inside the guard.
func (r Reads) read(ctx context.Context, p store.ReadParams) ([]event.Event, error) {
	f, err := r.fork(ctx, p.SessionID)
	if err != nil {
		return nil, err
	}
	if f.SessionID != "" && p.After < f.Seq {
		return store.ReadFork(ctx, p, f, r.read)
	}
	query, args := ReadQuery(r.d, p)
	op := "read session " + p.SessionID
	rows, err := r.db.Query(ctx, query, args...)
	if err != nil {
		return nil, r.db.Error(op, err)
	}
	defer rows.Close()
	out := make([]event.Event, 0, min(limitOr(p.Limit, 1000), 256))
	// One set of destinations for every row: a call of Rows.Scan through
	// the interface would otherwise allocate its arguments on each.
	var e event.Event
	var typ string
	var t int64
	dest := []any{&e.Seq, &e.RunID, &typ, &t, (*[]byte)(&e.Data)}
	size := 0
	for (p.MaxBytes <= 0 || size < p.MaxBytes) && rows.Next() {
		e = event.Event{SessionID: p.SessionID}
		if err := rows.Scan(dest...); err != nil {
			return nil, r.db.Error(op, err)
		}
		e.Type, e.Time, e.Data = event.Type(typ), DecodeTime(t), Bytes(e.Data)
		size += len(e.Data)
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, r.db.Error(op, err)
	}
	if len(out) == 0 {
		if _, err := r.lastSeq(ctx, p.SessionID); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// ReadQuery returns the query of [Reads.Read] in dialect d and its
// arguments. The page is a range scan of the primary key (session_id,
// seq) from the cursor, in key order, stopped by LIMIT; with a run the
// index events_by_run serves it instead. With [Dialect.PageBytes] the
// database cuts the page at p.MaxBytes: a row is sent while the data of
// the rows before it add up to less (so the first always is).
func ReadQuery(d Dialect, p store.ReadParams) (string, []any) {
	var q query
	q.add(`SELECT seq, run_id, type, time, data`)
	cut := p.MaxBytes > 0 && d.PageBytes != ""
	if cut {
		q.add(`, coalesce(sum(`, d.PageBytes, `) OVER (ORDER BY seq ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) AS before`)
	}
	q.add(` FROM events WHERE session_id = `, q.arg(p.SessionID), ` AND seq > `, q.arg(max(p.After, 0)))
	if p.Through > 0 {
		q.add(` AND seq <= `, q.arg(p.Through))
	}
	if p.RunID != "" {
		q.add(` AND run_id = `, q.arg(p.RunID))
	}
	in(&q, "type", p.Types)
	q.add(` ORDER BY seq LIMIT `, q.arg(limitOr(p.Limit, 1000)))
	if !cut {
		return q.sql.String(), q.args
	}
	inner := q.sql.String()
	return `SELECT seq, run_id, type, time, data FROM (` + inner + `) page WHERE before < ` + q.arg(p.MaxBytes) + ` ORDER BY seq`, q.args
}

// LastSeq returns the seq of the session's last event, or an error
// wrapping [store.ErrNotFound] for a session without events.
func (r Reads) LastSeq(ctx context.Context, sessionID string) (int64, error) {
	if err := r.g.Enter(); err != nil {
		return 0, err
	}
	defer r.g.Leave()
	return r.lastSeq(ctx, sessionID)
}

func (r Reads) lastSeq(ctx context.Context, sessionID string) (int64, error) {
	var last *int64
	if err := r.db.QueryRow(ctx, `SELECT max(seq) FROM events WHERE session_id = $1`, sessionID).Scan(&last); err != nil {
		return 0, r.db.Error("read session "+sessionID, err)
	}
	if last == nil {
		return 0, fmt.Errorf("%w: session %s", store.ErrNotFound, sessionID)
	}
	return *last, nil
}

// Session returns the session record, deleted or not, or an error wrapping
// [store.ErrNotFound].
func (r Reads) Session(ctx context.Context, id string) (record.Session, error) {
	if err := r.g.Enter(); err != nil {
		return record.Session{}, err
	}
	defer r.g.Leave()
	return one(ctx, r, "session", id, r.scanSession, `SELECT `+r.d.SessionRows+` WHERE s.id = $1`)
}

// Sessions lists sessions newest first (by CreatedAt, then ID), at most
// p.Limit (default 100), after the session p.Before. An unknown p.Before
// returns an error wrapping [store.ErrNotFound].
func (r Reads) Sessions(ctx context.Context, p store.ListSessionsParams) ([]record.Session, error) {
	if err := r.g.Enter(); err != nil {
		return nil, err
	}
	defer r.g.Leave()
	var q query
	q.add(`SELECT `, r.d.SessionRows, ` WHERE true`)
	if p.Before != "" {
		var created int64
		err := r.db.QueryRow(ctx, `SELECT created_at FROM sessions WHERE id = $1`, p.Before).Scan(&created)
		if errors.Is(err, sql.ErrNoRows) {
			return nil, fmt.Errorf("%w: cursor session %s", store.ErrNotFound, p.Before)
		}
		if err != nil {
			return nil, r.db.Error("list sessions", err)
		}
		q.add(` AND (s.created_at, s.id) < (`, q.arg(created), `, `, q.arg(p.Before), `)`)
	}
	if !p.IncludeDeleted {
		q.add(` AND NOT s.deleted`)
	}
	q.add(` ORDER BY s.created_at DESC, s.id DESC LIMIT `, q.arg(limitOr(p.Limit, 100)))
	return list(ctx, r, "list sessions", &q, r.scanSession)
}

// scanSession decodes a row of [Dialect.SessionRows].
func (r Reads) scanSession(row Row) (record.Session, error) {
	var id string
	var rec []byte
	var seq, at *int64
	if err := row.Scan(&id, &rec, &seq, &at); err != nil {
		return record.Session{}, err
	}
	out, err := decode[record.Session](r, "session", id, rec)
	if err != nil {
		return record.Session{}, err
	}
	out.LastSeq = 0
	if seq != nil {
		out.LastSeq = *seq
	}
	if at != nil {
		out.UpdatedAt = DecodeTime(*at)
	}
	return out, nil
}

// runRows selects run rows: the run's id and record, then the seq of its
// last event. Like a session's, a run's last seq is read from the log, so
// appends that change no record write no record; it is one descent of
// the index events_by_run.
const runRows = `r.id, r.record, (SELECT seq FROM events WHERE session_id = r.session_id AND run_id = r.id ORDER BY seq DESC LIMIT 1)
	FROM runs r`

// Run returns the run record or an error wrapping [store.ErrNotFound].
func (r Reads) Run(ctx context.Context, id string) (record.Run, error) {
	if err := r.g.Enter(); err != nil {
		return record.Run{}, err
	}
	defer r.g.Leave()
	return one(ctx, r, "run", id, r.scanRun, `SELECT `+runRows+` WHERE r.id = $1`)
}

// Runs lists the runs of p.SessionID (every session's if empty) whose
// status is one of p.Statuses (any if empty), oldest first (by CreatedAt,
// FirstSeq, ID), at most p.Limit (default 1000). An unknown session lists
// nothing.
func (r Reads) Runs(ctx context.Context, p store.ListRunsParams) ([]record.Run, error) {
	if err := r.g.Enter(); err != nil {
		return nil, err
	}
	defer r.g.Leave()
	var q query
	q.add(`SELECT `, runRows)
	if p.SessionID != "" && len(p.Statuses) > 0 {
		q.add(r.d.RunsOfSessionByStatus)
	}
	q.add(` WHERE true`)
	if p.SessionID != "" {
		q.add(` AND r.session_id = `, q.arg(p.SessionID))
	}
	in(&q, "r.status", p.Statuses)
	q.add(` ORDER BY r.created_at, r.first_seq, r.id LIMIT `, q.arg(limitOr(p.Limit, 1000)))
	return list(ctx, r, "list runs", &q, r.scanRun)
}

// scanRun decodes a row of runRows.
func (r Reads) scanRun(row Row) (record.Run, error) {
	var id string
	var rec []byte
	var last *int64
	if err := row.Scan(&id, &rec, &last); err != nil {
		return record.Run{}, err
	}
	out, err := decode[record.Run](r, "run", id, rec)
	if err != nil {
		return record.Run{}, err
	}
	out.LastSeq = 0
	if last != nil {
		out.LastSeq = *last
	}
	return out, nil
}

// Request returns a request record or an error wrapping
// [store.ErrNotFound].
func (r Reads) Request(ctx context.Context, id string) (record.Request, error) {
	if err := r.g.Enter(); err != nil {
		return record.Request{}, err
	}
	defer r.g.Leave()
	return one(ctx, r, "request", id, recordOf[record.Request](r, "request"), `SELECT id, record FROM requests WHERE id = $1`)
}

// Requests lists the requests matching p, oldest first (by session, then
// seq), at most p.Limit (default 1000).
func (r Reads) Requests(ctx context.Context, p store.ListRequestsParams) ([]record.Request, error) {
	if err := r.g.Enter(); err != nil {
		return nil, err
	}
	defer r.g.Leave()
	var q query
	q.add(`SELECT id, record FROM requests WHERE true`)
	if p.SessionID != "" {
		q.add(` AND session_id = `, q.arg(p.SessionID))
	}
	if p.RunID != "" {
		q.add(` AND run_id = `, q.arg(p.RunID))
	}
	in(&q, "status", p.Statuses)
	q.add(` ORDER BY session_id, seq LIMIT `, q.arg(limitOr(p.Limit, 1000)))
	return list(ctx, r, "list requests", &q, recordOf[record.Request](r, "request"))
}

// Receipt returns the receipt for (key, method) or an error wrapping
// [store.ErrNotFound].
func (r Reads) Receipt(ctx context.Context, key, method string) (record.Receipt, error) {
	if err := r.g.Enter(); err != nil {
		return record.Receipt{}, err
	}
	defer r.g.Leave()
	rc, err := ScanReceipt(r.db.QueryRow(ctx, ReceiptSQL, key, method), key, method)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return record.Receipt{}, r.db.Error("read receipt", err)
	}
	return rc, err
}

// ScanReceipt reads the receipt of (key, method) from its row of
// [ReceiptSQL]. No row is an error wrapping [store.ErrNotFound]; the
// others are the row's.
func ScanReceipt(row Row, key, method string) (record.Receipt, error) {
	rc := record.Receipt{Key: key, Method: method}
	var t int64
	err := row.Scan(&rc.Fingerprint, (*[]byte)(&rc.Result), &rc.SessionID, &t)
	if errors.Is(err, sql.ErrNoRows) {
		return record.Receipt{}, fmt.Errorf("%w: receipt %s %s", store.ErrNotFound, method, key)
	}
	if err != nil {
		return record.Receipt{}, err
	}
	rc.Result, rc.CreatedAt = Bytes(rc.Result), DecodeTime(t)
	return rc, nil
}

// Snapshot returns the session's snapshot of kind, or an error wrapping
// [store.ErrNotFound].
func (r Reads) Snapshot(ctx context.Context, sessionID, kind string) (record.Snapshot, error) {
	if err := r.g.Enter(); err != nil {
		return record.Snapshot{}, err
	}
	defer r.g.Leave()
	snap := record.Snapshot{SessionID: sessionID, Kind: kind}
	var created int64
	err := r.db.QueryRow(ctx, `SELECT seq, data, created_at FROM snapshots WHERE session_id = $1 AND kind = $2`, sessionID, kind).
		Scan(&snap.Seq, &snap.Data, &created)
	if errors.Is(err, sql.ErrNoRows) {
		return record.Snapshot{}, fmt.Errorf("%w: snapshot %s of session %s", store.ErrNotFound, kind, sessionID)
	}
	if err != nil {
		return record.Snapshot{}, r.db.Error("read snapshot of session "+sessionID, err)
	}
	snap.CreatedAt = DecodeTime(created)
	return snap, nil
}

// list runs q and scans each of its rows; op names the read in errors.
func list[T any](ctx context.Context, r Reads, op string, q *query, scan func(Row) (T, error)) ([]T, error) {
	rows, err := r.db.Query(ctx, q.sql.String(), q.args...)
	if err != nil {
		return nil, r.db.Error(op, err)
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		x, err := scan(rows)
		if err != nil {
			return nil, r.fail(op, err)
		}
		out = append(out, x)
	}
	if err := rows.Err(); err != nil {
		return nil, r.db.Error(op, err)
	}
	return out, nil
}

// one reads the record of kind id with query, which selects its row by
// the ID $1, and scan. No row is an error wrapping [store.ErrNotFound].
func one[T any](ctx context.Context, r Reads, kind, id string, scan func(Row) (T, error), query string) (T, error) {
	out, err := scan(r.db.QueryRow(ctx, query, id))
	var zero T
	if errors.Is(err, sql.ErrNoRows) {
		return zero, fmt.Errorf("%w: %s %s", store.ErrNotFound, kind, id)
	}
	if err != nil {
		return zero, r.fail("read "+kind+" "+id, err)
	}
	return out, nil
}

// recordOf returns the scan of an (id, record) row of a record of kind.
func recordOf[T any](r Reads, kind string) func(Row) (T, error) {
	return func(row Row) (T, error) {
		var id string
		var rec []byte
		if err := row.Scan(&id, &rec); err != nil {
			var zero T
			return zero, err
		}
		return decode[T](r, kind, id, rec)
	}
}

// decodeError is a stored record that does not decode: the store's
// name and the record's say which.
type decodeError struct{ error }

// decode decodes the stored record rec of kind id.
func decode[T any](r Reads, kind, id string, rec []byte) (T, error) {
	var out T
	if err := json.Unmarshal(rec, &out); err != nil {
		return out, decodeError{fmt.Errorf("store %s: %s %s: decode record: %w", r.name, kind, id, err)}
	}
	return out, nil
}

func (e decodeError) Unwrap() error { return e.error }

// fail wraps an error of a scan: a record that does not decode says
// so itself; anything else is the database's.
func (r Reads) fail(op string, err error) error {
	var de decodeError
	if errors.As(err, &de) {
		return de.error
	}
	return r.db.Error(op, err)
}
