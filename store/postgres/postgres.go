// Package postgres is the [store.Store] for deployments that outgrow one
// machine's SQLite file: a PostgreSQL database reached through pgx
// (github.com/jackc/pgx/v5) and a pool of connections (pgxpool). It has
// the semantics of store/sqlite and runs the same conformance suite
// (store/storetest).
//
// # Appends
//
// Every [Store.Append] is one transaction, sent in one round trip with its
// BEGIN and committed in a second: it takes the session's advisory lock
// (pg_advisory_xact_lock, held to the end of the transaction), reads the
// session's last seq, inserts the events, upserts the records, inserts the
// receipts, and commits only if the batch starts at last seq + 1. The
// lock makes concurrent writers of one session (two hosts, or a host and
// a stale one) take turns: the second reads the first's events and gets
// [store.ErrSeqConflict], so two batches can never interleave; the
// primary key (session_id, seq) refuses an overwrite even if the check
// were bypassed. Under the same lock it reads the session's lease row and
// refuses a batch whose epoch is not the lease's ([store.ErrFenced]; see
// [Leases]). Nothing of a refused batch is written.
//
// # Reads
//
// LastSeq and UpdatedAt come from the log, as in SQLite: the last row of
// the session in the primary key. A read after a cursor is a range scan
// of the primary key (session_id, seq), cut by ReadParams.MaxBytes on the
// server.
//
// # Errors
//
// Errors name the database (postgres://HOST:PORT/DB, never the password)
// and say what failed. Constraint violations become the store's sentinels
// (ErrSeqConflict, ErrReceiptExists, ErrInvalid); everything else —
// connection failures, a server that shuts down or restarts (57P01-3), a
// full disk (53100), a read-only database (25006) — is returned wrapped
// with its cause, so the host answers storage_unavailable (-32019,
// retryable) and the pool reconnects when the server is back.
//
// # Schema
//
// The schema is created and upgraded by numbered migrations embedded in
// the binary (migrations/NNNN_name.sql, recorded in table
// schema_version), applied explicitly by [Migrate] (`weft migrate`) or, if
// [Config.Migrate] is set, by [Open]. Unlike SQLite, a database is shared
// by hosts that may run different versions, so migrating is a decision
// for whoever upgrades, not a side effect of starting a host.
package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"weft.dev/weft/event"
	"weft.dev/weft/store"
	"weft.dev/weft/store/record"
)

// Config configures [Open]. The zero value of every field but URL selects
// the default.
type Config struct {
	// URL is the database: a PostgreSQL URL
	// (postgres://USER:PASSWORD@HOST:PORT/DB?sslmode=…) or key=value
	// connection string. Required. As libpq does, pgx fills in what it
	// omits from the PG* environment variables and ~/.pgpass, so that a
	// password need not be written in the URL.
	URL string
	// Migrate applies pending migrations when the store opens. When false,
	// a database whose schema is older than this binary's (or absent) is
	// refused with an error wrapping [ErrOldSchema] that says to run
	// `weft migrate`.
	Migrate bool
	// MaxConns caps the connection pool. Zero means max(4, number of CPUs).
	MaxConns int
	// ConnectTimeout bounds each attempt to connect when the URL sets no
	// connect_timeout. Zero means 10s.
	ConnectTimeout time.Duration
	// Logger receives the store's few log lines (open, migrations). Nil
	// means silent.
	Logger *slog.Logger
}

// Store is a [store.Store] on a PostgreSQL database. Create it with
// [Open]; close it with [Store.Close]. All methods are safe for concurrent
// use, also by several processes on several machines on one database:
// appends to one session or process are serialised by the database.
type Store struct {
	name   string // postgres://HOST:PORT/DB: in every error
	logger *slog.Logger
	pool   *pgxpool.Pool

	// mu guards closed; every method holds it for reading while it uses
	// the pool, so Close waits for calls in flight.
	mu     sync.RWMutex
	closed bool
}

var _ store.Store = (*Store)(nil)

// Open connects to the database at cfg.URL and checks its schema. Errors
// name the host and database and say what failed: a malformed URL, a
// server that does not answer, a refused password, a missing database, an
// encoding other than UTF8, a schema older than this binary's
// ([ErrOldSchema]: run `weft migrate`, or set [Config.Migrate]) or newer
// ([ErrNewerSchema]).
func Open(ctx context.Context, cfg Config) (*Store, error) {
	pcfg, name, err := parseConfig(cfg)
	if err != nil {
		return nil, err
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, classify(name, "open", err)
	}
	s := &Store{name: name, logger: logger, pool: pool}
	if err := s.check(ctx, cfg.Migrate); err != nil {
		pool.Close()
		return nil, err
	}
	return s, nil
}

// check connects once, so that a wrong URL fails in Open, and checks the
// encoding and the schema version, migrating if asked to.
func (s *Store) check(ctx context.Context, migrate bool) error {
	c, err := s.pool.Acquire(ctx)
	if err != nil {
		return classify(s.name, "open", err)
	}
	defer c.Release()
	if err := checkEncoding(ctx, c.Conn(), s.name); err != nil {
		return err
	}
	have, want, err := schemaVersion(ctx, c.Conn(), s.name)
	switch {
	case err != nil:
		return err
	case have > want:
		return newerSchema(s.name, have, want)
	case have < want && !migrate:
		return oldSchema(s.name, have, want)
	case have < want:
		from, to, err := applyMigrations(ctx, c.Conn(), s.name)
		if err != nil {
			return err
		}
		s.logger.Info("store migrated", "store", s.name, "from", from, "to", to)
	}
	s.logger.Debug("store opened", "store", s.name, "schema", want)
	return nil
}

// parseConfig parses cfg.URL into a pool configuration and the name that
// errors give the database.
func parseConfig(cfg Config) (*pgxpool.Config, string, error) {
	if cfg.URL == "" {
		return nil, "", errors.New("postgres store: Config.URL is empty")
	}
	// pgx redacts the password from its parse errors.
	pcfg, err := pgxpool.ParseConfig(cfg.URL)
	if err != nil {
		return nil, "", fmt.Errorf("postgres store: %w", err)
	}
	if cfg.MaxConns > 0 {
		pcfg.MaxConns = int32(min(cfg.MaxConns, math.MaxInt32))
	}
	if pcfg.ConnConfig.ConnectTimeout == 0 { // the URL has no connect_timeout
		pcfg.ConnConfig.ConnectTimeout = cfg.ConnectTimeout
		if pcfg.ConnConfig.ConnectTimeout <= 0 {
			pcfg.ConnConfig.ConnectTimeout = 10 * time.Second
		}
	}
	return pcfg, describe(pcfg.ConnConfig), nil
}

// Name returns the name errors give the database at url:
// postgres://HOST:PORT/DB, without user or password, so the same for every
// URL of one database that names it the same way (cmd/weft keys its host
// lease by it).
func Name(url string) (string, error) {
	_, name, err := parseConfig(Config{URL: url})
	return name, err
}

func describe(cc *pgx.ConnConfig) string {
	host := cc.Host
	if !strings.HasPrefix(host, "/") {
		return "postgres://" + net.JoinHostPort(host, strconv.Itoa(int(cc.Port))) + "/" + cc.Database
	}
	// A Unix socket's directory.
	return "postgres://" + host + ":" + strconv.Itoa(int(cc.Port)) + "/" + cc.Database
}

// acquire takes the close lock for reading; it fails once the store is
// closed. The caller releases with s.mu.RUnlock.
func (s *Store) acquire() error {
	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		return fmt.Errorf("store %s: %w", s.name, store.ErrClosed)
	}
	return nil
}

// The statements of an append. Events, runs, requests and receipts go in
// one statement each whatever their number, as arrays unnested on the
// server.
const (
	lockSQL = `SELECT pg_advisory_xact_lock($1, hashtext($2))`
	// lastSeqSQL reads the session's last seq and its lease (epoch,
	// holder, live), read under the advisory lock that a lease take-over
	// takes too: the epoch cannot change before the append commits.
	lastSeqSQL = `SELECT e.last, l.epoch, l.holder, coalesce(l.expires_at > now(), false)
		FROM (SELECT coalesce(max(seq), 0) AS last FROM events WHERE session_id = $1) e
		LEFT JOIN leases l ON l.session_id = $1`
	insertEvent = `INSERT INTO events (session_id, seq, run_id, type, time, data)
		SELECT $1::text, * FROM unnest($2::bigint[], $3::text[], $4::text[], $5::bigint[], $6::bytea[])`
	upsertSession = `INSERT INTO sessions (id, created_at, deleted, record) VALUES ($1, $2, $3, $4)
		ON CONFLICT (id) DO UPDATE SET created_at = excluded.created_at, deleted = excluded.deleted, record = excluded.record`
	// A run or request ID of another session is not taken over: the
	// upsert skips it and returns no row for it.
	upsertRuns = `INSERT INTO runs (id, session_id, status, created_at, first_seq, record)
		SELECT r.id, $1::text, r.status, r.created_at, r.first_seq, r.record
		FROM unnest($2::text[], $3::text[], $4::bigint[], $5::bigint[], $6::json[]) AS r (id, status, created_at, first_seq, record)
		ON CONFLICT (id) DO UPDATE SET status = excluded.status, created_at = excluded.created_at,
			first_seq = excluded.first_seq, record = excluded.record
		WHERE runs.session_id = excluded.session_id
		RETURNING id`
	upsertRequests = `INSERT INTO requests (id, session_id, run_id, status, seq, record)
		SELECT q.id, $1::text, q.run_id, q.status, q.seq, q.record
		FROM unnest($2::text[], $3::text[], $4::text[], $5::bigint[], $6::json[]) AS q (id, run_id, status, seq, record)
		ON CONFLICT (id) DO UPDATE SET status = excluded.status, record = excluded.record
		WHERE requests.session_id = excluded.session_id
		RETURNING id`
	insertReceipts = `INSERT INTO receipts (key, method, fingerprint, result, session_id, created_at)
		SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::bytea[], $5::text[], $6::bigint[])`
)

// Append writes b in one transaction: all of its events, records and
// receipts, or nothing. It returns an error wrapping [store.ErrInvalid]
// for a malformed batch (or a run or request ID of another session),
// [store.ErrSeqConflict] (naming the session, the expected and the given
// seq) if the batch does not continue the session's log,
// [store.ErrReceiptExists] for a receipt whose (key, method) is stored,
// [store.ErrFenced] when b.Epoch is not the epoch of the session's lease
// (see [Leases]; an epoch of zero passes only while no live lease holds
// the session), [store.ErrClosed] after Close, and an error naming the
// database and what failed when the database does.
func (s *Store) Append(ctx context.Context, b store.Batch) error {
	if err := store.ValidateBatch(b); err != nil {
		return err
	}
	// Encode everything before taking a connection.
	var sessRec []byte
	if b.Session != nil {
		rec := *b.Session
		rec.CreatedAt, rec.UpdatedAt = rec.CreatedAt.UTC(), rec.UpdatedAt.UTC()
		var err error
		if sessRec, err = json.Marshal(rec); err != nil {
			return fmt.Errorf("%w: session %s: encode record: %v", store.ErrInvalid, b.SessionID, err)
		}
	}
	n := len(b.Events)
	seqs, runIDs, types, times, datas := make([]int64, n), make([]string, n), make([]string, n), make([]int64, n), make([][]byte, n)
	for i, e := range b.Events {
		seqs[i], runIDs[i], types[i], times[i], datas[i] = e.Seq, e.RunID, string(e.Type), encodeTime(e.Time), nilIfEmpty(e.Data)
	}
	runs := lastByID(b.Runs, func(r record.Run) string { return r.ID })
	var rIDs, rStatus []string
	var rCreated, rFirst []int64
	var rRecs [][]byte
	for _, r := range runs {
		normRun(&r)
		rec, err := json.Marshal(r)
		if err != nil {
			return fmt.Errorf("%w: session %s run %s: encode record: %v", store.ErrInvalid, b.SessionID, r.ID, err)
		}
		rIDs, rStatus = append(rIDs, r.ID), append(rStatus, r.Status)
		rCreated, rFirst = append(rCreated, sortNanos(r.CreatedAt)), append(rFirst, r.FirstSeq)
		rRecs = append(rRecs, rec)
	}
	reqs := lastByID(b.Requests, func(q record.Request) string { return q.ID })
	var qIDs, qRuns, qStatus []string
	var qSeqs []int64
	var qRecs [][]byte
	for _, q := range reqs {
		rec, err := json.Marshal(q)
		if err != nil {
			return fmt.Errorf("%w: session %s: encode request %s: %v", store.ErrInvalid, b.SessionID, q.ID, err)
		}
		qIDs, qRuns, qStatus = append(qIDs, q.ID), append(qRuns, q.RunID), append(qStatus, q.Status)
		qSeqs, qRecs = append(qSeqs, q.Seq), append(qRecs, rec)
	}

	if err := s.acquire(); err != nil {
		return err
	}
	defer s.mu.RUnlock()
	op := "append to session " + b.SessionID
	var bt pgx.Batch
	bt.BeginTx(pgx.TxOptions{})
	bt.Queue(lockSQL, lockSession, b.SessionID)
	bt.Queue(lastSeqSQL, b.SessionID)
	bt.Queue(insertEvent, b.SessionID, seqs, runIDs, types, times, datas)
	if b.Session != nil {
		bt.Queue(upsertSession, b.SessionID, sortNanos(b.Session.CreatedAt), b.Session.Deleted, sessRec)
	}
	if len(runs) > 0 {
		bt.Queue(upsertRuns, b.SessionID, rIDs, rStatus, rCreated, rFirst, rRecs)
	}
	if len(reqs) > 0 {
		bt.Queue(upsertRequests, b.SessionID, qIDs, qRuns, qStatus, qSeqs, qRecs)
	}
	queueReceipts(&bt, b.Receipts)

	return s.inTx(ctx, &bt, op, func(br pgx.BatchResults) error {
		if _, err := br.Exec(); err != nil { // the lock
			return s.errorf(op, err)
		}
		var last int64
		var epoch *int64
		var holder *string
		var live bool
		if err := br.QueryRow().Scan(&last, &epoch, &holder, &live); err != nil {
			return s.errorf(op, err)
		}
		if err := fence(b.SessionID, b.Epoch, epoch, holder, live); err != nil {
			return err
		}
		if first := b.Events[0].Seq; first != last+1 {
			return fmt.Errorf("%w: session %s: expected seq %d, got %d", store.ErrSeqConflict, b.SessionID, last+1, first)
		}
		if _, err := br.Exec(); err != nil {
			if constraint(err, "events_pkey") {
				// Unreachable under the lock; the key holds regardless.
				return fmt.Errorf("%w: session %s: seq %d..%d already stored", store.ErrSeqConflict, b.SessionID, seqs[0], seqs[n-1])
			}
			return s.errorf(op, err)
		}
		if b.Session != nil {
			if _, err := br.Exec(); err != nil {
				return s.errorf(op+": store session record", err)
			}
		}
		if len(runs) > 0 {
			if err := upserted(br, rIDs, func(id string) error {
				return fmt.Errorf("%w: session %s: run %s belongs to another session", store.ErrInvalid, b.SessionID, id)
			}); err != nil {
				return s.errorf(op+": store runs", err)
			}
		}
		if len(reqs) > 0 {
			if err := upserted(br, qIDs, func(id string) error {
				return fmt.Errorf("%w: session %s: request %s belongs to another session", store.ErrInvalid, b.SessionID, id)
			}); err != nil {
				return s.errorf(op+": store requests", err)
			}
		}
		return s.receiptsResult(br, "session "+b.SessionID, b.Receipts)
	})
}

// fence checks an append under lease epoch want against the session's
// lease (nil when it has none): it passes when the epochs are equal, or
// when the writer is unfenced (0) and no live lease holds the session.
func fence(session string, want int64, epoch *int64, holder *string, live bool) error {
	switch {
	case epoch == nil && want == 0:
		return nil
	case epoch == nil:
		return fmt.Errorf("%w: session %s: append under lease epoch %d, but the session has no lease", store.ErrFenced, session, want)
	case *epoch == want:
		return nil
	case want == 0 && !live:
		return nil
	case want == 0:
		return fmt.Errorf("%w: session %s: an append without a lease, but %s holds the session's lease (epoch %d)", store.ErrFenced, session, *holder, *epoch)
	}
	return fmt.Errorf("%w: session %s: append under lease epoch %d, but the lease is at epoch %d (holder %s)", store.ErrFenced, session, want, *epoch, *holder)
}

// rollbackTimeout bounds a rollback, which runs even when the caller's
// context is done so that the connection can go back to the pool.
const rollbackTimeout = 5 * time.Second

// inTx sends bt, which begins a transaction, reads its results with read
// (after the BEGIN's), and commits if read and every statement succeeded;
// otherwise it rolls back. Two round trips: the batch, the commit.
func (s *Store) inTx(ctx context.Context, bt *pgx.Batch, op string, read func(pgx.BatchResults) error) error {
	br := s.pool.SendBatch(ctx, bt)
	tx := br.Tx()
	_, err := br.Exec() // BEGIN
	if err != nil {
		err = s.errorf(op, err)
	} else {
		err = read(br)
	}
	if cerr := br.Close(); err == nil && cerr != nil {
		err = s.errorf(op, cerr)
	}
	if err != nil {
		// A rollback that fails (the connection is gone) leaves the
		// connection outside the pool: it is closed, and the server rolls
		// the transaction back.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rollbackTimeout)
		defer cancel()
		tx.Rollback(rctx)
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return s.errorf(op+": commit", err)
	}
	return nil
}

// upserted reads the IDs an upsert returned and reports the first of ids
// it skipped (one of another session) with refused.
func upserted(br pgx.BatchResults, ids []string, refused func(id string) error) error {
	rows, err := br.Query()
	if err != nil {
		return err
	}
	got, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return err
	}
	if len(got) == len(ids) {
		return nil
	}
	for _, id := range ids {
		if !slices.Contains(got, id) {
			return refused(id)
		}
	}
	return nil
}

// queueReceipts queues the insert of rs, if any, sorted by (key, method)
// so that two transactions inserting the same receipts wait for each
// other in the same order rather than deadlock.
func queueReceipts(bt *pgx.Batch, rs []record.Receipt) {
	if len(rs) == 0 {
		return
	}
	rs = slices.Clone(rs)
	slices.SortFunc(rs, func(a, b record.Receipt) int {
		return strings.Compare(a.Key+"\x00"+a.Method, b.Key+"\x00"+b.Method)
	})
	n := len(rs)
	keys, methods, fps, sessions := make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	results, created := make([][]byte, n), make([]int64, n)
	for i, r := range rs {
		keys[i], methods[i], fps[i], sessions[i] = r.Key, r.Method, r.Fingerprint, r.SessionID
		results[i], created[i] = nilIfEmpty(r.Result), encodeTime(r.CreatedAt)
	}
	bt.Queue(insertReceipts, keys, methods, fps, results, sessions, created)
}

// receiptsResult reads the result of queueReceipts, if it queued one.
func (s *Store) receiptsResult(br pgx.BatchResults, of string, rs []record.Receipt) error {
	if len(rs) == 0 {
		return nil
	}
	if _, err := br.Exec(); err != nil {
		var pe *pgconn.PgError
		if constraint(err, "receipts_pkey") && errors.As(err, &pe) {
			return fmt.Errorf("%w: %s: %s", store.ErrReceiptExists, of, pe.Detail)
		}
		return s.errorf("append to "+of+": store receipts", err)
	}
	return nil
}

// Read returns up to p.Limit (default 1000) events of p.SessionID with
// seq > p.After in seq order, filtered by p.RunID and p.Types and cut by
// p.MaxBytes. An unknown session returns an error wrapping
// [store.ErrNotFound].
func (s *Store) Read(ctx context.Context, p store.ReadParams) ([]event.Event, error) {
	if err := s.acquire(); err != nil {
		return nil, err
	}
	defer s.mu.RUnlock()
	query, args := readQuery(p)
	op := "read session " + p.SessionID
	rows, err := s.pool.Query(ctx, query, args...)
	if err != nil {
		return nil, s.errorf(op, err)
	}
	defer rows.Close()
	out := make([]event.Event, 0, min(limitOr(p.Limit, 1000), 256))
	for rows.Next() {
		e := event.Event{SessionID: p.SessionID}
		var typ string
		var t int64
		if err := rows.Scan(&e.Seq, &e.RunID, &typ, &t, (*[]byte)(&e.Data)); err != nil {
			return nil, s.errorf(op, err)
		}
		e.Type, e.Time = event.Type(typ), decodeTime(t)
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, s.errorf(op, err)
	}
	if len(out) == 0 {
		if _, err := s.lastSeq(ctx, p.SessionID); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// readQuery builds Read's query. The page is a range scan of the primary
// key (session_id, seq) from the cursor, in key order, stopped by LIMIT;
// with a run the index events_by_run serves it instead. MaxBytes cuts the
// page on the server: a row is sent while the data of the rows before it
// add up to less than MaxBytes (so the first always is).
func readQuery(p store.ReadParams) (string, []any) {
	var q strings.Builder
	args := []any{p.SessionID, max(p.After, 0)}
	q.WriteString(`SELECT seq, run_id, type, time, data`)
	if p.MaxBytes > 0 {
		q.WriteString(`, coalesce(sum(octet_length(data)) OVER (ORDER BY seq ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) AS before`)
	}
	q.WriteString(` FROM events WHERE session_id = $1 AND seq > $2`)
	if p.RunID != "" {
		args = append(args, p.RunID)
		fmt.Fprintf(&q, ` AND run_id = $%d`, len(args))
	}
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
	if p.MaxBytes <= 0 {
		return q.String(), args
	}
	args = append(args, p.MaxBytes)
	return fmt.Sprintf(`SELECT seq, run_id, type, time, data FROM (%s) page WHERE before < $%d ORDER BY seq`, q.String(), len(args)), args
}

// LastSeq returns the seq of the session's last event, or an error
// wrapping [store.ErrNotFound] for a session without events.
func (s *Store) LastSeq(ctx context.Context, sessionID string) (int64, error) {
	if err := s.acquire(); err != nil {
		return 0, err
	}
	defer s.mu.RUnlock()
	return s.lastSeq(ctx, sessionID)
}

func (s *Store) lastSeq(ctx context.Context, sessionID string) (int64, error) {
	var last *int64
	if err := s.pool.QueryRow(ctx, `SELECT max(seq) FROM events WHERE session_id = $1`, sessionID).Scan(&last); err != nil {
		return 0, s.errorf("read session "+sessionID, err)
	}
	if last == nil {
		return 0, fmt.Errorf("%w: session %s", store.ErrNotFound, sessionID)
	}
	return *last, nil
}

// The parts of the session and run records that are read from the log
// rather than stored: a session's last seq and its time, a run's last seq.
// Each is one descent of the primary key or of events_by_run, so appends
// that change no record write no record.
const (
	sessionCols = `s.id, s.record, e.seq, e.time FROM sessions s
		LEFT JOIN LATERAL (SELECT seq, time FROM events WHERE session_id = s.id ORDER BY seq DESC LIMIT 1) e ON true`
	runCols = `r.id, r.record, (SELECT seq FROM events WHERE session_id = r.session_id AND run_id = r.id ORDER BY seq DESC LIMIT 1)
		FROM runs r`
)

// scanSession decodes a row of sessionCols.
func (s *Store) scanSession(row pgx.Row) (record.Session, error) {
	var id string
	var rec []byte
	var seq, at *int64
	if err := row.Scan(&id, &rec, &seq, &at); err != nil {
		return record.Session{}, err
	}
	var out record.Session
	if err := json.Unmarshal(rec, &out); err != nil {
		return record.Session{}, fmt.Errorf("store %s: session %s: decode record: %w", s.name, id, err)
	}
	out.LastSeq = 0
	if seq != nil {
		out.LastSeq = *seq
	}
	if at != nil {
		out.UpdatedAt = decodeTime(*at)
	}
	return out, nil
}

// Session returns the session record, deleted or not, or an error wrapping
// [store.ErrNotFound].
func (s *Store) Session(ctx context.Context, id string) (record.Session, error) {
	if err := s.acquire(); err != nil {
		return record.Session{}, err
	}
	defer s.mu.RUnlock()
	out, err := s.scanSession(s.pool.QueryRow(ctx, `SELECT `+sessionCols+` WHERE s.id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return record.Session{}, fmt.Errorf("%w: session %s", store.ErrNotFound, id)
	}
	if err != nil {
		return record.Session{}, s.errorf("read session "+id, err)
	}
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
	var q strings.Builder
	var args []any
	q.WriteString(`SELECT ` + sessionCols + ` WHERE true`)
	if p.Before != "" {
		var created int64
		err := s.pool.QueryRow(ctx, `SELECT created_at FROM sessions WHERE id = $1`, p.Before).Scan(&created)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, fmt.Errorf("%w: cursor session %s", store.ErrNotFound, p.Before)
		}
		if err != nil {
			return nil, s.errorf("list sessions", err)
		}
		args = append(args, created, p.Before)
		q.WriteString(` AND (s.created_at, s.id) < ($1, $2)`)
	}
	if !p.IncludeDeleted {
		q.WriteString(` AND NOT s.deleted`)
	}
	args = append(args, limitOr(p.Limit, 100))
	fmt.Fprintf(&q, ` ORDER BY s.created_at DESC, s.id DESC LIMIT $%d`, len(args))
	rows, err := s.pool.Query(ctx, q.String(), args...)
	if err != nil {
		return nil, s.errorf("list sessions", err)
	}
	defer rows.Close()
	var out []record.Session
	for rows.Next() {
		sess, err := s.scanSession(rows)
		if err != nil {
			return nil, s.errorf("list sessions", err)
		}
		out = append(out, sess)
	}
	if err := rows.Err(); err != nil {
		return nil, s.errorf("list sessions", err)
	}
	return out, nil
}

// scanRun decodes a row of runCols.
func (s *Store) scanRun(row pgx.Row) (record.Run, error) {
	var id string
	var rec []byte
	var last *int64
	if err := row.Scan(&id, &rec, &last); err != nil {
		return record.Run{}, err
	}
	var out record.Run
	if err := json.Unmarshal(rec, &out); err != nil {
		return record.Run{}, fmt.Errorf("store %s: run %s: decode record: %w", s.name, id, err)
	}
	out.LastSeq = 0
	if last != nil {
		out.LastSeq = *last
	}
	return out, nil
}

// Run returns the run record or an error wrapping [store.ErrNotFound].
func (s *Store) Run(ctx context.Context, id string) (record.Run, error) {
	if err := s.acquire(); err != nil {
		return record.Run{}, err
	}
	defer s.mu.RUnlock()
	out, err := s.scanRun(s.pool.QueryRow(ctx, `SELECT `+runCols+` WHERE r.id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return record.Run{}, fmt.Errorf("%w: run %s", store.ErrNotFound, id)
	}
	if err != nil {
		return record.Run{}, s.errorf("read run "+id, err)
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
	var q strings.Builder
	var args []any
	q.WriteString(`SELECT ` + runCols + ` WHERE true`)
	if p.SessionID != "" {
		args = append(args, p.SessionID)
		fmt.Fprintf(&q, ` AND r.session_id = $%d`, len(args))
	}
	if len(p.Statuses) > 0 {
		args = append(args, p.Statuses)
		fmt.Fprintf(&q, ` AND r.status = ANY($%d)`, len(args))
	}
	args = append(args, limitOr(p.Limit, 1000))
	fmt.Fprintf(&q, ` ORDER BY r.created_at, r.first_seq, r.id LIMIT $%d`, len(args))
	rows, err := s.pool.Query(ctx, q.String(), args...)
	if err != nil {
		return nil, s.errorf("list runs", err)
	}
	defer rows.Close()
	var out []record.Run
	for rows.Next() {
		r, err := s.scanRun(rows)
		if err != nil {
			return nil, s.errorf("list runs", err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, s.errorf("list runs", err)
	}
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
	err := s.pool.QueryRow(ctx, `SELECT record FROM requests WHERE id = $1`, id).Scan(&rec)
	if errors.Is(err, pgx.ErrNoRows) {
		return record.Request{}, fmt.Errorf("%w: request %s", store.ErrNotFound, id)
	}
	if err != nil {
		return record.Request{}, s.errorf("read request "+id, err)
	}
	var out record.Request
	if err := json.Unmarshal(rec, &out); err != nil {
		return record.Request{}, fmt.Errorf("store %s: request %s: decode record: %w", s.name, id, err)
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
	var q strings.Builder
	var args []any
	q.WriteString(`SELECT id, record FROM requests WHERE true`)
	if p.SessionID != "" {
		args = append(args, p.SessionID)
		fmt.Fprintf(&q, ` AND session_id = $%d`, len(args))
	}
	if p.RunID != "" {
		args = append(args, p.RunID)
		fmt.Fprintf(&q, ` AND run_id = $%d`, len(args))
	}
	if len(p.Statuses) > 0 {
		args = append(args, p.Statuses)
		fmt.Fprintf(&q, ` AND status = ANY($%d)`, len(args))
	}
	args = append(args, limitOr(p.Limit, 1000))
	fmt.Fprintf(&q, ` ORDER BY session_id, seq LIMIT $%d`, len(args))
	rows, err := s.pool.Query(ctx, q.String(), args...)
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
			return nil, fmt.Errorf("store %s: request %s: decode record: %w", s.name, id, err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, s.errorf("list requests", err)
	}
	return out, nil
}

const selectReceipt = `SELECT fingerprint, result, session_id, created_at FROM receipts WHERE key = $1 AND method = $2`

// Receipt returns the receipt for (key, method) or an error wrapping
// [store.ErrNotFound].
func (s *Store) Receipt(ctx context.Context, key, method string) (record.Receipt, error) {
	if err := s.acquire(); err != nil {
		return record.Receipt{}, err
	}
	defer s.mu.RUnlock()
	return s.scanReceipt(s.pool.QueryRow(ctx, selectReceipt, key, method), key, method)
}

func (s *Store) scanReceipt(row pgx.Row, key, method string) (record.Receipt, error) {
	r := record.Receipt{Key: key, Method: method}
	var t int64
	err := row.Scan(&r.Fingerprint, (*[]byte)(&r.Result), &r.SessionID, &t)
	if errors.Is(err, pgx.ErrNoRows) {
		return record.Receipt{}, fmt.Errorf("%w: receipt %s %s", store.ErrNotFound, method, key)
	}
	if err != nil {
		return record.Receipt{}, s.errorf("read receipt", err)
	}
	r.CreatedAt = decodeTime(t)
	return r, nil
}

// PutReceipt stores r unless a receipt for (r.Key, r.Method) exists; either
// way it returns the stored receipt. An empty key or method is
// [store.ErrInvalid].
func (s *Store) PutReceipt(ctx context.Context, r record.Receipt) (record.Receipt, error) {
	if err := store.ValidateReceipt(r); err != nil {
		return record.Receipt{}, err
	}
	if err := s.acquire(); err != nil {
		return record.Receipt{}, err
	}
	defer s.mu.RUnlock()
	// Two statements in one round trip; each reads the rows committed
	// before it starts, so the select sees a receipt that a concurrent
	// insert stored first (the insert waited for it).
	var bt pgx.Batch
	bt.Queue(`INSERT INTO receipts (key, method, fingerprint, result, session_id, created_at)
		VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (key, method) DO NOTHING`,
		r.Key, r.Method, r.Fingerprint, nilIfEmpty(r.Result), r.SessionID, encodeTime(r.CreatedAt))
	bt.Queue(selectReceipt, r.Key, r.Method)
	br := s.pool.SendBatch(ctx, &bt)
	defer br.Close()
	if _, err := br.Exec(); err != nil {
		return record.Receipt{}, s.errorf("put receipt", err)
	}
	got, err := s.scanReceipt(br.QueryRow(), r.Key, r.Method)
	if err != nil {
		return record.Receipt{}, err
	}
	if err := br.Close(); err != nil {
		return record.Receipt{}, s.errorf("put receipt", err)
	}
	return got, nil
}

// PutSnapshot implements [store.Store]. The log only grows, so a seq
// checked against its last event stays valid while the snapshot is
// written.
func (s *Store) PutSnapshot(ctx context.Context, snap record.Snapshot) error {
	if err := s.acquire(); err != nil {
		return err
	}
	defer s.mu.RUnlock()
	last, err := s.lastSeq(ctx, snap.SessionID)
	if err != nil {
		return err
	}
	if snap.Seq < 0 || snap.Seq > last {
		return fmt.Errorf("%w: snapshot of session %s through seq %d, last seq %d", store.ErrSeqConflict, snap.SessionID, snap.Seq, last)
	}
	if _, err := s.pool.Exec(ctx, `INSERT INTO snapshots (session_id, kind, seq, data, created_at) VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (session_id, kind) DO UPDATE SET seq = excluded.seq, data = excluded.data, created_at = excluded.created_at
		WHERE excluded.seq >= snapshots.seq`,
		snap.SessionID, snap.Kind, snap.Seq, snap.Data, encodeTime(snap.CreatedAt)); err != nil {
		return s.errorf("put snapshot of session "+snap.SessionID, err)
	}
	return nil
}

// Snapshot implements [store.Store].
func (s *Store) Snapshot(ctx context.Context, sessionID, kind string) (record.Snapshot, error) {
	if err := s.acquire(); err != nil {
		return record.Snapshot{}, err
	}
	defer s.mu.RUnlock()
	snap := record.Snapshot{SessionID: sessionID, Kind: kind}
	var created int64
	err := s.pool.QueryRow(ctx, `SELECT seq, data, created_at FROM snapshots WHERE session_id = $1 AND kind = $2`, sessionID, kind).
		Scan(&snap.Seq, &snap.Data, &created)
	if errors.Is(err, pgx.ErrNoRows) {
		return record.Snapshot{}, fmt.Errorf("%w: snapshot %s of session %s", store.ErrNotFound, kind, sessionID)
	}
	if err != nil {
		return record.Snapshot{}, s.errorf("read snapshot of session "+sessionID, err)
	}
	snap.CreatedAt = decodeTime(created)
	return snap, nil
}

// PruneReceipts deletes the receipts created before t and returns how many.
func (s *Store) PruneReceipts(ctx context.Context, before time.Time) (int, error) {
	if err := s.acquire(); err != nil {
		return 0, err
	}
	defer s.mu.RUnlock()
	tag, err := s.pool.Exec(ctx, `DELETE FROM receipts WHERE created_at < $1`, sortNanos(before))
	if err != nil {
		return 0, s.errorf("prune receipts", err)
	}
	return int(tag.RowsAffected()), nil
}

// Close waits for calls in flight, then closes the pool's connections.
// Later calls return [store.ErrClosed]; Close itself may be called more
// than once.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	s.pool.Close()
	return nil
}

// errorf wraps a database error with the database's name and what failed.
func (s *Store) errorf(op string, err error) error { return classify(s.name, op, err) }

// classify wraps err with the database's name, op and, for the failures
// a person has to act on, what happened and what to do. The cause stays
// wrapped for errors.Is. Text that PostgreSQL cannot hold (a NUL
// character in an ID or key) is [store.ErrInvalid]; every other failure
// is one the host reports as storage_unavailable.
func classify(name, op string, err error) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		why := ""
		switch c := pe.Code; {
		case c == "22021" || c == "22P05": // character_not_in_repertoire, untranslatable_character
			return fmt.Errorf("%w: store %s: %s: text PostgreSQL cannot store (a NUL character?): %v", store.ErrInvalid, name, op, err)
		case c == "53100":
			why = "the database server's disk is full"
		case c == "53200":
			why = "the database server is out of memory"
		case c == "53300":
			why = "the database server has no connection to spare (max_connections)"
		case c == "25006":
			why = "the database is read-only (a standby, or default_transaction_read_only is on): point --store at the primary"
		case c == "57P01" || c == "57P02" || c == "57P03":
			why = "the database server is shutting down or restarting; retry once it is back"
		case c == "57014":
			why = "the statement was cancelled"
		case c == "28P01" || c == "28000":
			why = "the server refused the login: check the user and password (in the URL, PGPASSWORD or ~/.pgpass)"
		case c == "3D000":
			why = "the database does not exist: create it (createdb) or fix the URL"
		case c == "42P01" || c == "42703" || c == "42883":
			why = "the database lacks weft's tables or has older ones: run `weft migrate --store URL`"
		case c == "42501":
			why = "permission denied: grant the user the right to read and write weft's tables"
		case strings.HasPrefix(c, "08"):
			why = "the connection to the database server failed"
		}
		if why != "" {
			return fmt.Errorf("store %s: %s: %s: %w", name, op, why, err)
		}
		return fmt.Errorf("store %s: %s: %w", name, op, err)
	}
	var ce *pgconn.ConnectError
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("store %s: %s: %w", name, op, err)
	case errors.As(err, &ce):
		// pgx's message names the user, the database, the address and
		// what failed (refused, timed out, no such host).
		return fmt.Errorf("store %s: %s: cannot connect (is the server running, and the URL right?): %w", name, op, oneLine{err})
	}
	return fmt.Errorf("store %s: %s: the connection to the database server failed: %w", name, op, err)
}

// oneLine is err with its message on one line: pgx gives each address it
// tried a line of its own.
type oneLine struct{ error }

func (e oneLine) Error() string {
	return strings.ReplaceAll(strings.Replace(e.error.Error(), "\n\t", " ", 1), "\n\t", "; ")
}

func (e oneLine) Unwrap() error { return e.error }

// constraint reports whether err violates the unique constraint named.
func constraint(err error, name string) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "23505" && pe.ConstraintName == name
}

// lastByID returns xs with only the last of each ID, in ID order: the
// upserts of one statement may touch a row once, and transactions that
// lock rows in one order cannot deadlock on them.
func lastByID[T any](xs []T, id func(T) string) []T {
	if len(xs) == 0 {
		return nil
	}
	seen := make(map[string]int, len(xs))
	var out []T
	for _, x := range xs {
		if i, ok := seen[id(x)]; ok {
			out[i] = x
			continue
		}
		seen[id(x)] = len(out)
		out = append(out, x)
	}
	slices.SortFunc(out, func(a, b T) int { return strings.Compare(id(a), id(b)) })
	return out
}

func limitOr(limit, def int) int {
	if limit <= 0 {
		return def
	}
	return limit
}

// encodeTime stores t as Unix nanoseconds; the zero time becomes the
// smallest int64 so that it comes back as the zero time.
// [store.ValidateBatch] has rejected times that do not fit.
func encodeTime(t time.Time) int64 {
	if t.IsZero() {
		return math.MinInt64
	}
	return t.UnixNano()
}

func decodeTime(n int64) time.Time {
	if n == math.MinInt64 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}

// sortNanos is encodeTime for sort and filter keys, clamped instead of
// validated.
func sortNanos(t time.Time) int64 {
	switch {
	case t.IsZero() || t.Year() < 1678:
		return math.MinInt64
	case t.Year() > 2261:
		return math.MaxInt64
	}
	return t.UnixNano()
}

func nilIfEmpty(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return b
}

func normRun(r *record.Run) {
	r.CreatedAt = r.CreatedAt.UTC()
	if r.StartedAt != nil {
		t := r.StartedAt.UTC()
		r.StartedAt = &t
	}
	if r.EndedAt != nil {
		t := r.EndedAt.UTC()
		r.EndedAt = &t
	}
}
