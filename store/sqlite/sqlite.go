// Package sqlite is the [store.Store] weft uses on one machine: a SQLite
// database file opened with the pure-Go driver modernc.org/sqlite (no cgo).
//
// The database runs in WAL mode. All writes go through one connection,
// kept open with its prepared statements for the store's life; its
// transactions begin IMMEDIATE and are serialised by a mutex. Reads use a
// separate pool of read-only connections, opened on demand, so readers
// never wait for the writer and the writer never waits for readers (a
// short-lived process may read on the write connection instead, one
// connection in all: [Config.ReadOnWriter]). Every
// [Store.Append] is one transaction that checks that the batch continues
// the session's log, inserts the events and upserts the records and
// receipts of the batch. The writer remembers the last seq of the sessions
// it appended to, so the check costs a query only for a session's first
// append through this store; the primary key (session_id, seq) refuses an
// overwrite, which makes a remembered seq that another process has since
// overtaken harmless (see [Store.Append]).
//
// The writer copies the WAL into the database file (a checkpoint) when it
// has been idle for a moment, not inside a commit; a writer that is never
// idle checkpoints in the commit that takes the WAL past 4,000 pages, so
// the -wal file stays under about 16 MB while no reader holds it back.
//
// Durability: with the default synchronous=NORMAL a committed append
// survives a crash of the process (including SIGKILL); after a power loss or
// an operating-system crash the last transactions may roll back, but the
// database stays consistent. synchronous=FULL survives power loss too, at
// the price of an fsync per commit. See [Config.Synchronous].
//
// The schema is created and upgraded by numbered migrations embedded in the
// binary (migrations/NNNN_name.sql, recorded in table schema_version). A
// database whose schema is newer than the binary's is refused with
// [ErrNewerSchema].
package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	msqlite "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"weft.dev/weft/event"
	"weft.dev/weft/store"
	"weft.dev/weft/store/internal/sqlstore"
	"weft.dev/weft/store/record"
)

// defaultCacheKiB is a connection's page cache when [Config.CacheBytes]
// is zero. What a host touches is the tail of its sessions' logs and
// their indexes' upper pages: a run start reads a session's last events,
// unended runs and snapshot, an append the pages it inserts into. Those
// fit, and the writer and four readers hold 2.5 MiB at most rather than
// SQLite's 2 MiB each.
const defaultCacheKiB = 512

// Config configures [Open]. The zero value of every field but Path selects
// the default.
type Config struct {
	// Path is the database file. It is created (mode 0600) if missing; its
	// directory must exist. The -wal and -shm files live beside it. Required.
	Path string
	// Synchronous is SQLite's synchronous setting: "NORMAL" (the default
	// when empty) or "FULL". In WAL mode NORMAL loses nothing committed when
	// the process dies; only a power loss or OS crash can roll back the last
	// commits. FULL syncs the WAL on every commit and survives power loss.
	Synchronous string
	// BusyTimeout is how long a write waits for a lock held by another
	// process (another weft on the same file) before failing. Zero means
	// 5s.
	BusyTimeout time.Duration
	// ReadConns caps the pool of read connections. Zero means
	// max(4, GOMAXPROCS).
	ReadConns int
	// ReadOnWriter runs every read on the write connection, under the
	// writer's lock between its transactions, instead of on a pool of
	// read connections: the store opens one SQLite connection, not two
	// or more, which saves a short-lived process whose reads are few
	// (a one-shot `weft run`) opening a second connection and loading
	// the schema into it. A read then waits for a write in progress and
	// a write for a read; a read's rows are copied out before the lock
	// is released. ReadConns is ignored.
	ReadOnWriter bool
	// CacheBytes bounds the page cache of each connection, the writer's
	// and each reader's (SQLite's cache_size, rounded up to KiB), which
	// SQLite allocates outside the Go heap and fills as the database
	// grows. Zero means 512 KiB; negative means SQLite's default of
	// about 2 MiB a connection.
	CacheBytes int64
	// Logger receives the store's few log lines (open, migrations). Nil
	// means silent.
	Logger *slog.Logger
}

// Store is a [store.Store] on a SQLite file. Create it with [Open]; close it
// with [Store.Close]. All methods are safe for concurrent use. Writes are
// serialised inside the process; several processes may open the same file,
// each write waiting up to [Config.BusyTimeout] for the others.
//
// Its reads are the contract's, documented there: Read, LastSeq, Session,
// Sessions, Run, Runs, Request and Requests ([store.SessionLog]), Receipt
// ([store.Receipts]), Snapshot ([store.Snapshots]), ReadProcess,
// ProcessOutput, Process and Processes ([store.ProcessLog]). Both SQL
// stores share them, so the methods do not appear beside the writes
// below.
type Store struct {
	// reads are every read of the store: the SQL stores' shared core,
	// over the read-only pool.
	reads

	path   string
	busy   time.Duration
	logger *slog.Logger
	// guard keeps every call out of a closed store; Close waits for the
	// calls in flight.
	guard *sqlstore.Guard

	w *writer // all writes
	r *sql.DB // read-only pool
	// retention is the retention lock (see purge.go).
	retention sync.Mutex
}

// reads are the reads of every SQL store. Embedded under this name, they
// give [Store] their methods without an exported field.
type reads = sqlstore.Reads

// dialect is SQLite's spelling of the shared SQL. A session's last seq
// and its time are read from the log, each one seek in the primary key:
// SQLite has no LATERAL join to read them with one.
func dialect() sqlstore.Dialect {
	return sqlstore.Dialect{
		SessionRows: `s.id, s.record,
			(SELECT seq FROM events WHERE session_id = s.id ORDER BY seq DESC LIMIT 1),
			(SELECT time FROM events WHERE session_id = s.id ORDER BY seq DESC LIMIT 1)
			FROM sessions s`,
		// Left to itself, SQLite walks runs_by_session to save the sort,
		// reading every run of the session: a session's unended runs (what
		// loading it asks for) would cost as much as its whole history.
		RunsOfSessionByStatus: ` INDEXED BY runs_by_session_status`,
		Granted:               `(session_id = %[1]s OR EXISTS (SELECT 1 FROM json_each(record, '$.grants') WHERE value = %[1]s))`,
	}
}

var _ store.Store = (*Store)(nil)

// Open opens (creating if needed) the database at cfg.Path and brings its
// schema up to date. It opens the write connection and reads the schema
// version (one query when the schema is current); read connections are
// opened by the first reads. Errors name the file and say what is wrong: a
// directory where the file should be, a missing directory, a file that is
// not a SQLite database, a database that needs migrating while another
// process holds it locked for longer than the busy timeout, or a schema
// newer than this binary ([ErrNewerSchema]).
func Open(ctx context.Context, cfg Config) (*Store, error) {
	if cfg.Path == "" {
		return nil, errors.New("sqlite store: Config.Path is empty")
	}
	abs, err := filepath.Abs(cfg.Path)
	if err != nil {
		return nil, fmt.Errorf("store %s: %w", cfg.Path, err)
	}
	sync := strings.ToUpper(cfg.Synchronous)
	switch sync {
	case "":
		sync = "NORMAL"
	case "NORMAL", "FULL":
	default:
		return nil, fmt.Errorf("store %s: Config.Synchronous %q: want NORMAL or FULL", abs, cfg.Synchronous)
	}
	busy := cfg.BusyTimeout
	if busy <= 0 {
		busy = 5 * time.Second
	}
	readConns := cfg.ReadConns
	if readConns <= 0 {
		readConns = max(4, runtime.GOMAXPROCS(0))
	}
	var cache []string // the pragma, or none for SQLite's default
	switch {
	case cfg.CacheBytes == 0:
		cache = append(cache, "cache_size(-"+strconv.Itoa(defaultCacheKiB)+")")
	case cfg.CacheBytes > 0:
		cache = append(cache, "cache_size(-"+strconv.FormatInt((cfg.CacheBytes+1023)/1024, 10)+")")
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if err := checkFile(abs); err != nil {
		return nil, err
	}

	s := &Store{path: abs, busy: busy, logger: logger, guard: sqlstore.NewGuard(abs)}
	var db sqlstore.DB = readers{s}
	if cfg.ReadOnWriter {
		db = writerReads{s}
	}
	s.reads = sqlstore.NewReads(abs, s.guard, db, dialect())
	busyMS := strconv.FormatInt(busy.Milliseconds(), 10)
	// The writer checkpoints the WAL when it is idle; SQLite's automatic
	// checkpoint in the commit is only its backstop (see checkpoint.go).
	wdb, err := openDB(abs, url.Values{
		"_pragma": append([]string{"busy_timeout(" + busyMS + ")", "journal_mode(WAL)", "synchronous(" + sync + ")",
			"wal_autocheckpoint(" + strconv.Itoa(ckptBackstopPages) + ")"}, cache...),
	})
	if err != nil {
		return nil, s.errorf("open", err)
	}
	wdb.SetMaxOpenConns(1)
	wdb.SetMaxIdleConns(1)
	wdb.SetConnMaxLifetime(0)
	wdb.SetConnMaxIdleTime(0)
	s.w = &writer{db: wdb}
	// Open the write connection, which sets the pragmas (and turns a new
	// file to WAL mode): a file that is no database fails here.
	if err := s.w.use(ctx, func(*wconn) error { return nil }); err != nil {
		s.w.close()
		return nil, s.errorf("open", err)
	}
	from, to, err := s.migrate(ctx, migrationFS)
	if err != nil {
		s.w.close()
		return nil, err
	}
	if from != to {
		logger.Info("store migrated", "path", abs, "from", from, "to", to)
	}
	if cfg.ReadOnWriter {
		s.w.startCheckpointer(logger, abs)
		logger.Debug("store opened", "path", abs, "synchronous", sync, "schema", to, "reads", "writer")
		return s, nil
	}
	s.r, err = openDB(abs, url.Values{
		"_pragma": append([]string{"busy_timeout(" + busyMS + ")", "query_only(1)"}, cache...),
	})
	if err != nil {
		s.w.close()
		return nil, s.errorf("open readers", err)
	}
	s.r.SetMaxOpenConns(readConns)
	s.r.SetMaxIdleConns(readConns)
	s.w.startCheckpointer(logger, abs)
	logger.Debug("store opened", "path", abs, "synchronous", sync, "schema", to)
	return s, nil
}

// checkFile gives the errors SQLite would report vaguely a clear text, and
// creates a missing database file with mode 0600 (SQLite gives the -wal and
// -shm files the database file's mode).
func checkFile(path string) error {
	fi, err := os.Stat(path)
	switch {
	case err == nil && fi.IsDir():
		return fmt.Errorf("store %s is a directory; want a SQLite database file", path)
	case err == nil && !fi.Mode().IsRegular():
		return fmt.Errorf("store %s is not a regular file", path)
	case errors.Is(err, os.ErrNotExist):
		dir := filepath.Dir(path)
		if di, err := os.Stat(dir); err != nil {
			return fmt.Errorf("store %s: directory %s: %w", path, dir, err)
		} else if !di.IsDir() {
			return fmt.Errorf("store %s: %s is not a directory", path, dir)
		}
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil && !errors.Is(err, os.ErrExist) {
			return fmt.Errorf("store %s: create: %w", path, err)
		}
		if f != nil {
			f.Close()
		}
		return nil
	case err != nil:
		return fmt.Errorf("store %s: %w", path, err)
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("store %s: cannot open for reading and writing (check its permissions): %w", path, err)
	}
	f.Close()
	return nil
}

// openDB opens a pool on path with the DSN parameters q.
func openDB(path string, q url.Values) (*sql.DB, error) {
	u := url.URL{Scheme: "file", Path: filepath.ToSlash(path), RawQuery: q.Encode()}
	c, err := msqlite.NewConnector(u.String())
	if err != nil {
		return nil, err
	}
	return sql.OpenDB(c), nil
}

// readers are the store's read-only pool as the shared reads use it.
type readers struct{ s *Store }

func (r readers) Query(ctx context.Context, query string, args ...any) (sqlstore.Rows, error) {
	rows, err := r.s.r.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	return sqlRows{rows}, nil
}

func (r readers) QueryRow(ctx context.Context, query string, args ...any) sqlstore.Row {
	return r.s.r.QueryRowContext(ctx, query, args...)
}

func (r readers) Error(op string, err error) error { return r.s.errorf(op, err) }

// sqlRows are rows of database/sql as [sqlstore.Rows].
type sqlRows struct{ *sql.Rows }

// Close closes the rows; an error of theirs is their Err's.
func (r sqlRows) Close() { r.Rows.Close() }

// Append writes b in one transaction: all of its events, records and
// receipts, or nothing. It returns an error wrapping [store.ErrInvalid] for
// a malformed batch, [store.ErrSeqConflict] (naming the session, the
// expected and the given seq) if the batch does not continue the session's
// log, [store.ErrReceiptExists] for a receipt whose (key, method) is
// stored, [store.ErrClosed] after Close, and a message naming the file if
// another process holds the database beyond the busy timeout.
//
// ctx is checked before the write starts; a write that has started runs
// to its commit or its first error, and waits for a lock another process
// holds at most [Config.BusyTimeout]. The same holds for every write.
//
// The check that b continues the log reads the session's last seq once,
// at its first append through this store; later appends compare with the
// seq the previous one left. A batch that continues a remembered seq which
// another process has overtaken since (two writers on one session, which
// the one-owner rule forbids) is still refused: its first event's seq is
// stored already, and the primary key (session_id, seq) rejects it.
func (s *Store) Append(ctx context.Context, b store.Batch) error {
	// Encode the records before taking any lock.
	recs, err := sqlstore.EncodeBatch(b)
	if err != nil {
		return err
	}
	if err := s.guard.Enter(); err != nil {
		return err
	}
	defer s.guard.Leave()
	err = s.w.group(ctx, func(tx *wtx) error { return appendTx(tx, b, recs) })
	if err != nil && !isStoreError(err) {
		return s.errorf("append to session "+b.SessionID, err)
	}
	return err
}

// appendTx writes batch b, whose records are recs, in tx. Errors the
// caller branches on wrap a store sentinel; the others are SQLite's, which
// Append wraps.
func appendTx(tx *wtx, b store.Batch, recs sqlstore.Records) error {
	first := b.Events[0].Seq
	last, err := tx.lastSeq(b.SessionID, first)
	if err != nil {
		return err
	}
	if last == 0 && b.Session != nil && b.Session.Fork != nil {
		// The batch creates a fork: it continues its source's Seq.
		f := b.Session.Fork
		var srcLast int64
		if err := tx.row(stLastSeq, f.SessionID).Scan(&srcLast); err != nil {
			return err
		}
		if f.Seq < 1 || srcLast < f.Seq {
			return fmt.Errorf("%w: session %s: a fork of session %s at seq %d, which its log does not hold (last seq %d)", store.ErrInvalid, b.SessionID, f.SessionID, f.Seq, srcLast)
		}
		if err := tx.execSQL(sqlstore.InsertForkSQL, b.SessionID, f.SessionID, f.Seq); err != nil {
			return fmt.Errorf("store fork: %w", err)
		}
		last = f.Seq
	}
	if err := sqlstore.Continues("session", b.SessionID, last, first); err != nil {
		return err
	}
	if err := insertEventRows(tx, b.Events); err != nil {
		return err
	}
	if b.Session != nil {
		created := sqlstore.SortKey(b.Session.CreatedAt)
		if _, err := tx.exec(stUpsertSession, b.SessionID, created, b.Session.Deleted, recs.Session); err != nil {
			return fmt.Errorf("store session record: %w", err)
		}
		if _, err := tx.exec(stFixSession, created, b.SessionID); err != nil {
			return fmt.Errorf("store session record: %w", err)
		}
	}
	for i, r := range recs.Runs {
		created := sqlstore.SortKey(r.CreatedAt)
		res, err := tx.exec(stUpsertRun, r.ID, r.SessionID, r.Status, created, r.FirstSeq, recs.RunJSON[i])
		if err != nil {
			return fmt.Errorf("store run %s: %w", r.ID, err)
		}
		if n, err := res.RowsAffected(); err != nil {
			return fmt.Errorf("store run %s: %w", r.ID, err)
		} else if n == 0 {
			return fmt.Errorf("%w: session %s: run %s belongs to another session", store.ErrInvalid, b.SessionID, r.ID)
		}
		if _, err := tx.exec(stFixRun, r.Status, created, r.FirstSeq, r.ID); err != nil {
			return fmt.Errorf("store run %s: %w", r.ID, err)
		}
	}
	for i, q := range recs.Requests {
		res, err := tx.exec(stUpsertRequest, q.ID, q.SessionID, q.RunID, q.Status, q.Seq, recs.RequestJSON[i])
		if err != nil {
			return fmt.Errorf("store request %s: %w", q.ID, err)
		}
		if n, err := res.RowsAffected(); err != nil {
			return fmt.Errorf("store request %s: %w", q.ID, err)
		} else if n == 0 {
			return fmt.Errorf("%w: session %s: request %s belongs to another session", store.ErrInvalid, b.SessionID, q.ID)
		}
	}
	if err := insertReceipts(tx, "session", b.SessionID, b.Receipts); err != nil {
		return err
	}
	tx.setLast(b.Events[len(b.Events)-1].Seq)
	return nil
}

// isStoreError reports whether err wraps one of the sentinels callers
// branch on, which already say what went wrong and where.
func isStoreError(err error) bool {
	return errors.Is(err, store.ErrSeqConflict) || errors.Is(err, store.ErrInvalid) ||
		errors.Is(err, store.ErrReceiptExists) || errors.Is(err, store.ErrNotFound) ||
		errors.Is(err, store.ErrInUse) || errors.Is(err, store.ErrForkSource)
}

// insertReceipts stores the receipts of a batch of a session or process
// (kind) id in tx.
func insertReceipts(tx *wtx, kind, id string, rs []record.Receipt) error {
	for _, r := range rs {
		if _, err := tx.exec(stInsertReceipt, r.Key, r.Method, r.Fingerprint, sqlstore.Bytes(r.Result), r.SessionID, sqlstore.EncodeTime(r.CreatedAt)); err != nil {
			if isConstraint(err) {
				return fmt.Errorf("%w: %s %s: receipt %s %s", store.ErrReceiptExists, kind, id, r.Method, r.Key)
			}
			return fmt.Errorf("store receipt: %w", err)
		}
	}
	return nil
}

// maxRowsPerInsert is the most events one INSERT statement writes.
const maxRowsPerInsert = 1 << (insertSizes - 1)

// insertEventRows inserts evs with as few multi-row INSERTs as the
// prepared sizes allow. A row that is stored already (the primary key)
// is [store.ErrSeqConflict].
func insertEventRows(tx *wtx, evs []event.Event) error {
	args := make([]any, 0, 6*min(len(evs), maxRowsPerInsert))
	for len(evs) > 0 {
		i := insertSizes - 1
		for 1<<i > len(evs) {
			i--
		}
		n := 1 << i
		args = args[:0]
		for _, e := range evs[:n] {
			args = append(args, e.SessionID, e.Seq, e.RunID, string(e.Type), sqlstore.EncodeTime(e.Time), sqlstore.Bytes(e.Data))
		}
		if _, err := tx.exec(stInsertEvents+stmtID(i), args...); err != nil {
			if isConstraint(err) {
				return fmt.Errorf("%w: session %s: seq %d..%d already stored", store.ErrSeqConflict, evs[0].SessionID, evs[0].Seq, evs[n-1].Seq)
			}
			return err
		}
		evs = evs[n:]
	}
	return nil
}

// PutReceipt stores r unless a receipt for (r.Key, r.Method) exists, and
// reads the stored receipt back in the same write transaction, which is
// what it returns either way. An empty key or method is
// [store.ErrInvalid].
func (s *Store) PutReceipt(ctx context.Context, r record.Receipt) (record.Receipt, error) {
	if err := store.ValidateReceipt(r); err != nil {
		return record.Receipt{}, err
	}
	if err := s.guard.Enter(); err != nil {
		return record.Receipt{}, err
	}
	defer s.guard.Leave()
	var got record.Receipt
	err := s.w.run(ctx, func(tx *wtx) error {
		if _, err := tx.exec(stPutReceipt, r.Key, r.Method, r.Fingerprint, sqlstore.Bytes(r.Result), r.SessionID, sqlstore.EncodeTime(r.CreatedAt)); err != nil {
			return err
		}
		var err error
		got, err = sqlstore.ScanReceipt(tx.row(stReceipt, r.Key, r.Method), r.Key, r.Method)
		return err
	})
	if err != nil {
		return record.Receipt{}, s.errorf("put receipt", err)
	}
	return got, nil
}

// PruneReceipts deletes the receipts created before t and returns how many.
func (s *Store) PruneReceipts(ctx context.Context, before time.Time) (int, error) {
	if err := s.guard.Enter(); err != nil {
		return 0, err
	}
	defer s.guard.Leave()
	var n int64
	err := s.w.run(ctx, func(tx *wtx) error {
		res, err := tx.exec(stPruneReceipts, sqlstore.SortKey(before))
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return 0, s.errorf("prune receipts", err)
	}
	return int(n), nil
}

// PutSnapshot implements [store.Snapshots].
func (s *Store) PutSnapshot(ctx context.Context, snap record.Snapshot) error {
	if err := s.guard.Enter(); err != nil {
		return err
	}
	defer s.guard.Leave()
	err := s.w.run(ctx, func(tx *wtx) error {
		var last int64
		if err := tx.row(stLastSeq, snap.SessionID).Scan(&last); err != nil {
			return err
		}
		if err := sqlstore.FitSnapshot(snap, last); err != nil {
			return err
		}
		// Snapshots are rare (one per session every few hundred events),
		// so the statement is not among the prepared ones.
		return tx.execSQL(sqlstore.PutSnapshotSQL, snap.SessionID, snap.Kind, snap.Seq, snap.Data, sqlstore.EncodeTime(snap.CreatedAt))
	})
	if errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrSeqConflict) {
		return err
	}
	if err != nil {
		return s.errorf("put snapshot", err)
	}
	return nil
}

// Close waits for calls in flight, then closes the database. Later calls
// return [store.ErrClosed]; Close itself may be called more than once.
func (s *Store) Close() error {
	return s.guard.Close(func() error {
		var err error
		if s.r != nil {
			err = s.r.Close()
		}
		if err := errors.Join(err, s.w.close()); err != nil {
			return fmt.Errorf("store %s: close: %w", s.path, err)
		}
		return nil
	})
}

// errorf wraps a database error with the file name and, for the failures
// a person has to act on, what to do.
func (s *Store) errorf(op string, err error) error {
	var se *msqlite.Error
	if !errors.As(err, &se) {
		return fmt.Errorf("store %s: %s: %w", s.path, op, err)
	}
	switch se.Code() & 0xff {
	case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED:
		return fmt.Errorf("store %s: %s: database is locked: another process (another weft?) has held it for longer than the busy timeout of %s; close it or use --store to choose another file: %w", s.path, op, s.busy, err)
	case sqlite3.SQLITE_NOTADB:
		return fmt.Errorf("store %s: %s: the file is not a SQLite database (or is encrypted); use --store to choose another file: %w", s.path, op, err)
	case sqlite3.SQLITE_CANTOPEN:
		return fmt.Errorf("store %s: %s: cannot open the database file; check that it and its directory are readable and writable: %w", s.path, op, err)
	case sqlite3.SQLITE_READONLY, sqlite3.SQLITE_PERM, sqlite3.SQLITE_AUTH:
		return fmt.Errorf("store %s: %s: cannot write the database; check the permissions of the file and of its directory (which holds the -wal and -shm files): %w", s.path, op, err)
	case sqlite3.SQLITE_CORRUPT:
		return fmt.Errorf("store %s: %s: the database file is corrupt: %w", s.path, op, err)
	case sqlite3.SQLITE_FULL:
		return fmt.Errorf("store %s: %s: the disk is full: %w", s.path, op, err)
	}
	return fmt.Errorf("store %s: %s: %w", s.path, op, err)
}

func isConstraint(err error) bool {
	var se *msqlite.Error
	return errors.As(err, &se) && se.Code()&0xff == sqlite3.SQLITE_CONSTRAINT
}
