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
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"

	"weft.dev/weft/store"
	"weft.dev/weft/store/internal/sqlstore"
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
	// MaxConns caps the connection pool. Zero means what the URL's
	// pool_max_conns parameter says, else max(4, number of CPUs). The
	// lease renewals of [NewLeases] have a connection of their own
	// beside the pool, so that a pool that stuck sessions fill never
	// delays a renewal.
	MaxConns int
	// LeaseTTL is how long a session lease lives without a renewal (the
	// [LeaseConfig.TTL] of the leases [Store.HostLeases] makes), and what
	// every pooled connection's timeouts derive from, so that a frozen or
	// partitioned host never blocks another's take-over of its sessions
	// for much longer than the TTL: with TTL T, each connection sets
	//
	//	idle_in_transaction_session_timeout = T/2
	//	lock_timeout                        = T/2
	//	statement_timeout                   = T
	//
	// A host frozen inside an append (its transaction idle, holding the
	// session's advisory lock) loses its connection, and so the lock,
	// T/2 after it froze, before its lease (renewed last at most T/3
	// before it froze) can expire; a statement that holds a lock ends
	// within T; a statement waits for a lock at most T/2 and then fails
	// (retryable), rather than queue behind a stuck holder. weft's
	// statements take milliseconds; these bounds only cut what is stuck.
	// A timeout the URL sets itself (statement_timeout=5s, or options=-c
	// …) is kept. Zero means 10s.
	LeaseTTL time.Duration
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
//
// Its reads are the contract's, documented there: Read, LastSeq, Session,
// Sessions, Run, Runs, Request and Requests ([store.SessionLog]), Receipt
// ([store.Receipts]), Snapshot ([store.Snapshots]), ReadProcess,
// ProcessOutput, Process and Processes ([store.ProcessLog]). Both SQL
// stores share them, so the methods do not appear beside the writes
// below.
type Store struct {
	// reads are every read of the store: the SQL stores' shared core,
	// over the pool.
	reads

	name     string // postgres://HOST:PORT/DB: in every error
	logger   *slog.Logger
	pool     *pgxpool.Pool
	leaseTTL time.Duration // Config.LeaseTTL, defaulted
	// jobs inserts the wake-up jobs of queued runs in their appends'
	// transactions (see [Dispatcher]).
	jobs *river.Client[pgx.Tx]
	// guard keeps every call out of a closed store; Close waits for the
	// calls in flight.
	guard *sqlstore.Guard
	// inTxHook, if set (by tests, before use), is called inside every
	// transaction that succeeded, before its commit, with its op.
	inTxHook func(op string)
}

// reads are the reads of every SQL store. Embedded under this name, they
// give [Store] their methods without an exported field.
type reads = sqlstore.Reads

// dialect is PostgreSQL's spelling of the shared SQL.
func dialect() sqlstore.Dialect {
	return sqlstore.Dialect{
		// A session's last seq and its time, from the log: one descent
		// of the primary key.
		SessionRows: `s.id, s.record, e.seq, e.time FROM sessions s
			LEFT JOIN LATERAL (SELECT seq, time FROM events WHERE session_id = s.id ORDER BY seq DESC LIMIT 1) e ON true`,
		Granted: `(session_id = %[1]s OR grants @> ARRAY[%[1]s::text])`,
		// Cut pages on the server, not to send what they cannot hold.
		PageBytes: `octet_length(data)`,
	}
}

// conns are the store's connection pool as the shared reads use it.
type conns struct{ s *Store }

func (p conns) Query(ctx context.Context, query string, args ...any) (sqlstore.Rows, error) {
	return p.s.pool.Query(ctx, query, args...)
}

func (p conns) QueryRow(ctx context.Context, query string, args ...any) sqlstore.Row {
	return p.s.pool.QueryRow(ctx, query, args...)
}

func (p conns) Error(op string, err error) error { return p.s.errorf(op, err) }

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
	jobs, err := newInserter(logger)
	if err != nil {
		pool.Close()
		return nil, err
	}
	s := &Store{name: name, logger: logger, pool: pool, leaseTTL: cfg.LeaseTTL, jobs: jobs, guard: sqlstore.NewGuard(name)}
	if s.leaseTTL <= 0 {
		s.leaseTTL = defaultLeaseTTL
	}
	s.reads = sqlstore.NewReads(name, s.guard, conns{s}, dialect())
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
	case have > want && usableNewer(ctx, c.Conn(), want):
		// A rolling deploy: a newer host migrated, and every step since
		// this binary's schema is one it may use.
		s.logger.Info("store schema is newer than this binary, and compatible with it", "store", s.name, "schema", have, "binary", want)
	case have > want:
		return newerSchema(s.name, have, want)
	case have < want && !migrate:
		return oldSchema(s.name, have, want)
	case have < want:
		from, to, err := applyMigrations(ctx, c.Conn(), s.pool.Config(), s.name)
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
	ttl := cfg.LeaseTTL
	if ttl <= 0 {
		ttl = defaultLeaseTTL
	}
	if ttl < 3*time.Millisecond {
		return nil, "", fmt.Errorf("postgres store: Config.LeaseTTL %v is too short", ttl)
	}
	setTimeouts(pcfg.ConnConfig.RuntimeParams, ttl)
	if pcfg.ConnConfig.ConnectTimeout == 0 { // the URL has no connect_timeout
		pcfg.ConnConfig.ConnectTimeout = cfg.ConnectTimeout
		if pcfg.ConnConfig.ConnectTimeout <= 0 {
			pcfg.ConnConfig.ConnectTimeout = 10 * time.Second
		}
	}
	return pcfg, describe(pcfg.ConnConfig), nil
}

// defaultLeaseTTL is the TTL of session leases when no one sets it.
const defaultLeaseTTL = 10 * time.Second

// setTimeouts sets the session timeouts that ttl implies (see
// [Config.LeaseTTL]) in params, the startup parameters of each
// connection, unless the URL set them.
func setTimeouts(params map[string]string, ttl time.Duration) {
	ms := func(d time.Duration) string { return strconv.FormatInt(max(d.Milliseconds(), 1), 10) }
	set := func(k, v string) {
		if _, ok := params[k]; !ok && !strings.Contains(params["options"], k) {
			params[k] = v
		}
	}
	set("idle_in_transaction_session_timeout", ms(ttl/2))
	set("lock_timeout", ms(ttl/2))
	set("statement_timeout", ms(ttl))
}

// Name returns the name errors give the database at url:
// postgres://HOST:PORT/DB, without user or password, so the same for every
// URL of one database that names it the same way.
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
	// forkSourceSQL reads the last seq of a fork's source.
	forkSourceSQL = `SELECT coalesce(max(seq), 0) FROM events WHERE session_id = $1`
	insertEvent   = `INSERT INTO events (session_id, seq, run_id, type, time, data)
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
	// Encode everything before taking a connection.
	recs, err := sqlstore.EncodeBatch(b)
	if err != nil {
		return err
	}
	n := len(b.Events)
	seqs, runIDs, types, times, datas := make([]int64, n), make([]string, n), make([]string, n), make([]int64, n), make([][]byte, n)
	for i, e := range b.Events {
		seqs[i], runIDs[i], types[i], times[i], datas[i] = e.Seq, e.RunID, string(e.Type), sqlstore.EncodeTime(e.Time), sqlstore.Bytes(e.Data)
	}
	var rIDs, rStatus []string
	var rCreated, rFirst []int64
	for _, r := range recs.Runs {
		rIDs, rStatus = append(rIDs, r.ID), append(rStatus, r.Status)
		rCreated, rFirst = append(rCreated, sqlstore.SortKey(r.CreatedAt)), append(rFirst, r.FirstSeq)
	}
	var qIDs, qRuns, qStatus []string
	var qSeqs []int64
	for _, q := range recs.Requests {
		qIDs, qRuns, qStatus = append(qIDs, q.ID), append(qRuns, q.RunID), append(qStatus, q.Status)
		qSeqs = append(qSeqs, q.Seq)
	}

	if err := s.guard.Enter(); err != nil {
		return err
	}
	defer s.guard.Leave()
	op := "append to session " + b.SessionID
	var bt pgx.Batch
	bt.BeginTx(pgx.TxOptions{})
	bt.Queue(lockSQL, lockSession, b.SessionID)
	bt.Queue(lastSeqSQL, b.SessionID)
	fork := b.Session != nil && b.Session.Fork != nil
	if fork {
		// A fork's first batch continues its source's Seq; later batches
		// carry the same record and change nothing.
		bt.Queue(forkSourceSQL, b.Session.Fork.SessionID)
		bt.Queue(sqlstore.InsertForkSQL, b.SessionID, b.Session.Fork.SessionID, b.Session.Fork.Seq)
	}
	bt.Queue(insertEvent, b.SessionID, seqs, runIDs, types, times, datas)
	if b.Session != nil {
		bt.Queue(upsertSession, b.SessionID, sqlstore.SortKey(b.Session.CreatedAt), b.Session.Deleted, recs.Session)
	}
	if len(rIDs) > 0 {
		bt.Queue(upsertRuns, b.SessionID, rIDs, rStatus, rCreated, rFirst, recs.RunJSON)
	}
	if len(qIDs) > 0 {
		bt.Queue(upsertRequests, b.SessionID, qIDs, qRuns, qStatus, qSeqs, recs.RequestJSON)
	}
	queueReceipts(&bt, b.Receipts)
	// Other hosts' subscribers learn of the batch at its commit (see
	// Notifier).
	bt.Queue(notifySQL, notice(b.SessionID, seqs[n-1]))
	// A queued run's wake-up job commits with its run.queued (see
	// Dispatcher), after the batch, before the commit.
	var dispatch func(context.Context, pgx.Tx) error
	if jobs := wakeJobs(b); len(jobs) > 0 {
		dispatch = func(ctx context.Context, tx pgx.Tx) error {
			if _, err := s.jobs.InsertManyTx(ctx, tx, jobs); err != nil {
				return s.errorf(op+": insert the queued runs' jobs", err)
			}
			return nil
		}
	}

	return s.inTx(ctx, &bt, op, dispatch, func(br pgx.BatchResults) error {
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
		if fork {
			var srcLast int64
			if err := br.QueryRow().Scan(&srcLast); err != nil {
				return s.errorf(op, err)
			}
			if _, err := br.Exec(); err != nil {
				return s.errorf(op+": store fork", err)
			}
			if f := b.Session.Fork; last == 0 {
				if f.Seq < 1 || srcLast < f.Seq {
					return fmt.Errorf("%w: session %s: a fork of session %s at seq %d, which its log does not hold (last seq %d)", store.ErrInvalid, b.SessionID, f.SessionID, f.Seq, srcLast)
				}
				last = f.Seq
			}
		}
		if err := sqlstore.Continues("session", b.SessionID, last, b.Events[0].Seq); err != nil {
			return err
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
		if len(rIDs) > 0 {
			if err := upserted(br, rIDs, func(id string) error {
				return fmt.Errorf("%w: session %s: run %s belongs to another session", store.ErrInvalid, b.SessionID, id)
			}); err != nil {
				return s.errorf(op+": store runs", err)
			}
		}
		if len(qIDs) > 0 {
			if err := upserted(br, qIDs, func(id string) error {
				return fmt.Errorf("%w: session %s: request %s belongs to another session", store.ErrInvalid, b.SessionID, id)
			}); err != nil {
				return s.errorf(op+": store requests", err)
			}
		}
		if err := s.receiptsResult(br, "session "+b.SessionID, b.Receipts); err != nil {
			return err
		}
		if _, err := br.Exec(); err != nil {
			return s.errorf(op+": notify", err)
		}
		return nil
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
// (after the BEGIN's), runs then (if not nil) in the transaction, and
// commits if read, then and every statement succeeded; otherwise it rolls
// back. Two round trips, the batch and the commit, and then's.
func (s *Store) inTx(ctx context.Context, bt *pgx.Batch, op string, then func(context.Context, pgx.Tx) error, read func(pgx.BatchResults) error) error {
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
	if err == nil && then != nil {
		err = then(ctx, tx)
	}
	if err == nil && s.inTxHook != nil {
		s.inTxHook(op)
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
		results[i], created[i] = sqlstore.Bytes(r.Result), sqlstore.EncodeTime(r.CreatedAt)
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

// PutReceipt stores r unless a receipt for (r.Key, r.Method) exists, and
// returns the stored receipt either way: two statements in one round
// trip, each of which reads the rows committed before it starts, so that
// the select sees a receipt a concurrent insert stored first (the insert
// waited for it). An empty key or method is [store.ErrInvalid].
func (s *Store) PutReceipt(ctx context.Context, r record.Receipt) (record.Receipt, error) {
	if err := store.ValidateReceipt(r); err != nil {
		return record.Receipt{}, err
	}
	if err := s.guard.Enter(); err != nil {
		return record.Receipt{}, err
	}
	defer s.guard.Leave()
	var bt pgx.Batch
	bt.Queue(sqlstore.PutReceiptSQL, r.Key, r.Method, r.Fingerprint, sqlstore.Bytes(r.Result), r.SessionID, sqlstore.EncodeTime(r.CreatedAt))
	bt.Queue(sqlstore.ReceiptSQL, r.Key, r.Method)
	br := s.pool.SendBatch(ctx, &bt)
	defer br.Close()
	if _, err := br.Exec(); err != nil {
		return record.Receipt{}, s.errorf("put receipt", err)
	}
	got, err := sqlstore.ScanReceipt(br.QueryRow(), r.Key, r.Method)
	if errors.Is(err, store.ErrNotFound) {
		return record.Receipt{}, err
	}
	if err != nil {
		return record.Receipt{}, s.errorf("put receipt", err)
	}
	if err := br.Close(); err != nil {
		return record.Receipt{}, s.errorf("put receipt", err)
	}
	return got, nil
}

// PutSnapshot implements [store.Snapshots]: in one transaction, under
// the session's advisory lock (the lock of its appends and lease
// take-overs), it checks snap.Epoch against the session's lease as
// [Store.Append] checks a batch's ([store.ErrFenced]) and snap.Seq
// against its last event, then stores it.
func (s *Store) PutSnapshot(ctx context.Context, snap record.Snapshot) error {
	if err := s.guard.Enter(); err != nil {
		return err
	}
	defer s.guard.Leave()
	op := "put snapshot of session " + snap.SessionID
	var bt pgx.Batch
	bt.BeginTx(pgx.TxOptions{})
	bt.Queue(lockSQL, lockSession, snap.SessionID)
	bt.Queue(lastSeqSQL, snap.SessionID)
	bt.Queue(sqlstore.PutSnapshotSQL, snap.SessionID, snap.Kind, snap.Seq, snap.Data, sqlstore.EncodeTime(snap.CreatedAt))
	return s.inTx(ctx, &bt, op, nil, func(br pgx.BatchResults) error {
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
		if err := fence(snap.SessionID, snap.Epoch, epoch, holder, live); err != nil {
			return fmt.Errorf("snapshot: %w", err)
		}
		if err := sqlstore.FitSnapshot(snap, last); err != nil {
			return err
		}
		if _, err := br.Exec(); err != nil {
			return s.errorf(op, err)
		}
		return nil
	})
}

// PruneReceipts deletes the receipts created before t and returns how
// many, in one transaction free of the statement timeout.
func (s *Store) PruneReceipts(ctx context.Context, before time.Time) (int, error) {
	if err := s.guard.Enter(); err != nil {
		return 0, err
	}
	defer s.guard.Leave()
	// A day's receipts may take longer to delete than the statement
	// timeout (Config.LeaseTTL) allows, and the delete holds no lock that
	// a take-over waits for: it runs without one.
	var n int
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SET LOCAL statement_timeout = 0`); err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, sqlstore.PruneReceiptsSQL, sqlstore.SortKey(before))
		n = int(tag.RowsAffected())
		return err
	})
	if err != nil {
		return 0, s.errorf("prune receipts", err)
	}
	return n, nil
}

// Close waits for calls in flight, then closes the pool's connections.
// Later calls return [store.ErrClosed]; Close itself may be called more
// than once.
func (s *Store) Close() error {
	return s.guard.Close(func() error {
		s.pool.Close()
		return nil
	})
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
