package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"weft.dev/weft/store/internal/sqlstore"
)

// stmtID names one of the statements the writer prepares on its
// connection; stmtSQL gives its text.
type stmtID int

const (
	stBegin stmtID = iota
	stCommit
	stRollback
	stLastSeq
	stUpsertSession
	stFixSession
	stUpsertRun
	stFixRun
	stUpsertRequest
	stInsertReceipt
	stPutReceipt
	stReceipt
	stPruneReceipts
	stProcessLastSeq
	stDropOutput
	stInsertProcessEvent
	stUpsertProcess
	stSetProcessLastSeq
	stSavepoint
	stRelease
	stRollbackTo
	stInsertEvents // stInsertEvents+i inserts 1<<i events
	numStmts       = stInsertEvents + insertSizes
)

// insertSizes is the number of multi-row event INSERTs: of 1, 2, 4 … 64
// rows. A batch is written by statements of 64, 32 … 1 rows (its size in
// binary).
const insertSizes = 7

// stmtSQL returns the text of statement id.
func stmtSQL(id stmtID) string {
	switch id {
	case stBegin:
		return `BEGIN IMMEDIATE`
	case stCommit:
		return `COMMIT`
	case stRollback:
		return `ROLLBACK`
	case stLastSeq:
		return `SELECT coalesce(max(seq), 0) FROM events WHERE session_id = ?`
	// The upserts leave the sort keys alone so that the indexes on them
	// are not rewritten on every append; the fix* statements change a
	// sort key in the rare case it changed (they write nothing otherwise).
	case stUpsertSession:
		return `INSERT INTO sessions (id, created_at, deleted, record) VALUES (?, ?, ?, ?)
			ON CONFLICT (id) DO UPDATE SET deleted = excluded.deleted, record = excluded.record`
	case stFixSession:
		return `UPDATE sessions SET created_at = ?1 WHERE id = ?2 AND created_at <> ?1`
	case stUpsertRun:
		return `INSERT INTO runs (id, session_id, status, created_at, first_seq, record) VALUES (?, ?, ?, ?, ?, ?)
			ON CONFLICT (id) DO UPDATE SET record = excluded.record
			WHERE runs.session_id = excluded.session_id`
	case stFixRun:
		return `UPDATE runs SET status = ?1, created_at = ?2, first_seq = ?3
			WHERE id = ?4 AND (status <> ?1 OR created_at <> ?2 OR first_seq <> ?3)`
	case stUpsertRequest:
		return `INSERT INTO requests (id, session_id, run_id, status, seq, record) VALUES (?, ?, ?, ?, ?, ?)
			ON CONFLICT (id) DO UPDATE SET status = excluded.status, record = excluded.record
			WHERE requests.session_id = excluded.session_id`
	case stInsertReceipt:
		return `INSERT INTO receipts (key, method, fingerprint, result, session_id, created_at) VALUES (?, ?, ?, ?, ?, ?)`
	case stPutReceipt:
		return sqlstore.PutReceiptSQL
	case stReceipt:
		return sqlstore.ReceiptSQL
	case stPruneReceipts:
		return sqlstore.PruneReceiptsSQL
	case stProcessLastSeq:
		return sqlstore.ProcessLastSeqSQL
	case stDropOutput:
		return sqlstore.DropOutputSQL
	case stInsertProcessEvent:
		return `INSERT INTO process_events (process_id, seq, type, time, data, out_off, out_size) VALUES (?, ?, ?, ?, ?, ?, ?)`
	case stUpsertProcess:
		return `INSERT INTO processes (id, session_id, status, mount_id, started_at, last_seq, record, host, epoch) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (id) DO UPDATE SET session_id = excluded.session_id, status = excluded.status, mount_id = excluded.mount_id,
			started_at = excluded.started_at, last_seq = excluded.last_seq, record = excluded.record, host = excluded.host, epoch = excluded.epoch`
	case stSetProcessLastSeq:
		return sqlstore.SetProcessLastSeqSQL
	case stSavepoint:
		return `SAVEPOINT batch`
	case stRelease:
		return `RELEASE batch`
	case stRollbackTo:
		return `ROLLBACK TO batch`
	}
	if id >= stInsertEvents && id < numStmts {
		n := 1 << (id - stInsertEvents)
		return `INSERT INTO events (session_id, seq, run_id, type, time, data) VALUES (?,?,?,?,?,?)` +
			strings.Repeat(`,(?,?,?,?,?,?)`, n-1)
	}
	panic(fmt.Sprintf("sqlite: unknown statement %d", id))
}

// maxCachedSessions bounds the writer's cache of last seqs; beyond it an
// arbitrary entry makes room, and a session without an entry costs one
// query on its next append.
const maxCachedSessions = 1024

// writer is the store's one write connection, kept open for the store's
// life (or until an error leaves its state unknown), with the statements
// prepared on it and what it knows of the sessions it has appended to.
// Every write of the store is a transaction run by [writer.run]. Its
// methods are safe for concurrent use; they take its lock, which is held
// from BEGIN to COMMIT.
type writer struct {
	db *sql.DB // the pool the connection comes from; one connection at most

	mu     sync.Mutex
	closed bool
	c      *wconn // nil until the first use, and after the connection broke

	// writes counts the transactions run, for the idle checkpointer
	// (ckpt, nil until the store has opened), which checkpoints the WAL
	// when the count stands still (see checkpoint.go); checkpoints
	// counts the checkpoints it ran.
	writes      atomic.Uint64
	checkpoints atomic.Int64
	ckpt        *checkpointer

	// queue holds the appends waiting to join a group transaction
	// ([writer.group]), oldest first. qmu guards it and is taken after mu
	// when both are held.
	qmu   sync.Mutex
	queue []*pending
}

// maxGroup is the most appends one group transaction writes: enough to
// take every session's batch of a busy host at once, few enough that the
// first of them is not kept waiting long for its commit.
const maxGroup = 64

// pending is an append waiting in the writer's queue. The transaction
// that takes it sets err and closes done.
type pending struct {
	ctx  context.Context
	fn   func(tx *wtx) error
	err  error
	done chan struct{}
}

// errWriterClosed is returned after [writer.close]; the store checks that
// it is open first, so its callers never see it.
var errWriterClosed = errors.New("writer closed")

// connLocked returns the writer's connection, opening it if there is
// none. w.mu is held.
func (w *writer) connLocked(ctx context.Context) (*wconn, error) {
	if w.closed {
		return nil, errWriterClosed
	}
	if w.c == nil {
		conn, err := w.db.Conn(ctx)
		if err != nil {
			return nil, err
		}
		w.c = &wconn{conn: conn, last: make(map[string]int64)}
	}
	return w.c, nil
}

// use runs fn on the writer's connection, opening it if there is none,
// under the writer's lock. A connection fn leaves broken is closed; the
// next use opens a new one.
func (w *writer) use(ctx context.Context, fn func(c *wconn) error) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	c, err := w.connLocked(ctx)
	if err != nil {
		return err
	}
	err = fn(c)
	w.wrote()
	if w.c.broken {
		w.c.close()
		w.c = nil
	}
	return err
}

// run runs fn in one write transaction: BEGIN IMMEDIATE (which waits for
// another process's write lock up to the busy timeout), fn, COMMIT. If fn
// or the COMMIT fails, the transaction is rolled back and the error
// returned; BEGIN's and COMMIT's errors say which it was, fn's come back
// as they are.
//
// ctx is checked once, before the write starts; a write that has started
// runs to its commit or its first error, so a cancel never tears it, and
// its wait for another process's lock is bounded by the busy timeout, not
// by ctx. Watching ctx in the driver would cost a goroutine and a SQLite
// progress handler per statement, for a wait that a single process never
// has: this writer's lock serialises its own writes, and readers never
// block a writer in WAL mode.
func (w *writer) run(ctx context.Context, fn func(tx *wtx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return w.use(ctx, func(c *wconn) error { return c.transact(ctx, fn) })
}

// group runs fn in a write transaction like [writer.run], which it may
// share with the appends of other sessions that wait at the same time:
// whoever holds the connection next writes every waiting append (up to
// maxGroup) between one BEGIN and one COMMIT, each in a savepoint of its
// own. An append that fails (a refused batch: a seq conflict, a record of
// another session, a receipt that exists) rolls back its savepoint only,
// and the others commit; a failure that ends the transaction (a full
// disk, an I/O error: SQLite rolls back by itself) or a failed COMMIT
// fails every append of the group, none of which is then stored. On a
// host with many busy sessions that is one commit, and one write of the
// pages they share, for many batches.
func (w *writer) group(ctx context.Context, fn func(tx *wtx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	p := &pending{ctx: ctx, fn: fn, done: make(chan struct{})}
	w.qmu.Lock()
	w.queue = append(w.queue, p)
	w.qmu.Unlock()
	for {
		select {
		case <-p.done:
			return p.err
		default:
		}
		err := w.use(ctx, func(c *wconn) error {
			w.qmu.Lock()
			n := min(len(w.queue), maxGroup)
			batch := make([]*pending, n)
			copy(batch, w.queue)
			w.queue = append(w.queue[:0], w.queue[n:]...)
			w.qmu.Unlock()
			c.transactGroup(batch)
			return nil
		})
		if err != nil {
			// The connection could not be had (the store closed, or
			// opening it failed): withdraw p, unless a transaction took
			// it meanwhile.
			if w.withdraw(p) {
				return err
			}
			<-p.done
			return p.err
		}
	}
}

// withdraw removes p from the queue and reports whether it was there.
func (w *writer) withdraw(p *pending) bool {
	w.qmu.Lock()
	defer w.qmu.Unlock()
	for i, q := range w.queue {
		if q == p {
			w.queue = append(w.queue[:i], w.queue[i+1:]...)
			return true
		}
	}
	return false
}

// close stops the idle checkpointer, waiting for a checkpoint in
// progress, and closes the connection, its statements and the pool.
// Later uses fail with errWriterClosed.
func (w *writer) close() error {
	w.stopCheckpointer()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil
	}
	w.closed = true
	var errs []error
	if w.c != nil {
		errs = append(errs, w.c.close())
		w.c = nil
	}
	errs = append(errs, w.db.Close())
	return errors.Join(errs...)
}

// wconn is the writer's connection and what lives as long as it: the
// statements prepared on it and the cache of last seqs. It is not safe
// for concurrent use: the writer's lock guards it.
type wconn struct {
	conn  *sql.Conn
	stmts [numStmts]*sql.Stmt
	// last holds the last seq of sessions this connection has appended
	// to. An entry may be lower than the log's last seq (another process
	// appended since, against the one-writer rule; the next INSERT then
	// hits the primary key) but never higher: it is set only after a
	// commit, and dropped when a transaction that read it fails.
	last map[string]int64
	// broken reports that a ROLLBACK failed: the connection's
	// transaction state is unknown and it must not be used again.
	broken bool
}

// transact runs fn between BEGIN IMMEDIATE and COMMIT, rolling back if
// either fn or the COMMIT fails.
func (c *wconn) transact(ctx context.Context, fn func(tx *wtx) error) error {
	tx := &wtx{c: c, ctx: ctx}
	if ctx.Done() != nil {
		tx.ctx = context.WithoutCancel(ctx)
	}
	if err := tx.exec1(stBegin); err != nil {
		// A failed BEGIN normally begins nothing, and the ROLLBACK then
		// fails too, which replaces the connection: rare, and safer than
		// guessing its state.
		c.rollback(tx)
		return fmt.Errorf("begin: %w", err)
	}
	if err := fn(tx); err != nil {
		c.rollback(tx)
		return err
	}
	if err := tx.exec1(stCommit); err != nil {
		c.rollback(tx)
		return fmt.Errorf("commit: %w", err)
	}
	c.remember(tx)
	return nil
}

// transactGroup writes the appends of group in one transaction (see
// [writer.group]), each in its savepoint when there are several, sets
// each one's error and closes its done channel.
func (c *wconn) transactGroup(group []*pending) {
	if len(group) == 0 {
		return
	}
	if len(group) == 1 {
		p := group[0]
		p.err = c.transact(p.ctx, p.fn)
		close(p.done)
		return
	}
	txs := make([]*wtx, len(group))
	for i, p := range group {
		txs[i] = &wtx{c: c, ctx: context.WithoutCancel(p.ctx)}
	}
	// failAll ends the transaction with err for every append that has
	// not failed on its own.
	failAll := func(tx *wtx, err error) {
		for _, t := range txs {
			if t.session != "" {
				delete(c.last, t.session)
			}
		}
		c.rollback(tx)
		for _, p := range group {
			if p.err == nil {
				p.err = err
			}
			close(p.done)
		}
	}
	if err := txs[0].exec1(stBegin); err != nil {
		failAll(txs[0], fmt.Errorf("begin: %w", err))
		return
	}
	for i, p := range group {
		tx := txs[i]
		if err := tx.exec1(stSavepoint); err != nil {
			failAll(tx, fmt.Errorf("savepoint: %w", err))
			return
		}
		if err := p.fn(tx); err != nil {
			p.err = err
			if tx.session != "" {
				delete(c.last, tx.session)
			}
			tx.newLast = 0
			if rerr := tx.exec1(stRollbackTo); rerr != nil {
				// The transaction is gone with the savepoint
				// (SQLite rolled it back on a full disk or an I/O
				// error): nothing of the group is stored.
				failAll(tx, err)
				return
			}
		}
		if err := tx.exec1(stRelease); err != nil {
			failAll(tx, fmt.Errorf("release savepoint: %w", err))
			return
		}
	}
	if err := txs[0].exec1(stCommit); err != nil {
		failAll(txs[0], fmt.Errorf("commit: %w", err))
		return
	}
	for i, p := range group {
		if p.err == nil {
			c.remember(txs[i])
		}
		close(p.done)
	}
}

// remember keeps the last seq a committed transaction left in its
// session.
func (c *wconn) remember(tx *wtx) {
	if tx.newLast <= 0 {
		return
	}
	if _, ok := c.last[tx.session]; !ok && len(c.last) >= maxCachedSessions {
		for k := range c.last {
			delete(c.last, k)
			break
		}
	}
	c.last[tx.session] = tx.newLast
}

// rollback ends a failed transaction and forgets the last seq it read. A
// ROLLBACK fails when there is no transaction (SQLite rolls back by itself
// on a full disk, an I/O error or an interrupt, and a failed BEGIN may
// have begun nothing) and when the connection is broken; either way the
// connection is marked broken, to be replaced.
func (c *wconn) rollback(tx *wtx) {
	if tx.session != "" {
		delete(c.last, tx.session)
	}
	if err := tx.exec1(stRollback); err != nil {
		c.broken = true
	}
}

// close closes the statements and the connection. A broken connection is
// discarded rather than returned to the pool.
func (c *wconn) close() error {
	var errs []error
	for i, st := range c.stmts {
		if st != nil {
			errs = append(errs, st.Close())
			c.stmts[i] = nil
		}
	}
	if c.broken {
		// ErrBadConn makes database/sql close the driver connection
		// instead of keeping it, in whatever state, in the pool.
		c.conn.Raw(func(any) error { return driver.ErrBadConn })
		return nil
	}
	errs = append(errs, c.conn.Close())
	return errors.Join(errs...)
}

// stmt returns statement id, preparing it the first time. Statements are
// prepared lazily: a store that never writes a process or a batch of 64
// never parses those statements.
func (c *wconn) stmt(ctx context.Context, id stmtID) (*sql.Stmt, error) {
	if st := c.stmts[id]; st != nil {
		return st, nil
	}
	st, err := c.conn.PrepareContext(ctx, stmtSQL(id))
	if err != nil {
		return nil, err
	}
	c.stmts[id] = st
	return st, nil
}

// wtx is one transaction on the writer's connection; it exists only
// inside [wconn.transact].
type wtx struct {
	c *wconn
	// ctx is the caller's context without its cancellation (see
	// [writer.run]).
	ctx context.Context
	// session is the session whose last seq the transaction read, if
	// any; newLast is the last seq it leaves there once committed.
	session string
	newLast int64
}

// exec runs statement id with args.
func (tx *wtx) exec(id stmtID, args ...any) (sql.Result, error) {
	st, err := tx.c.stmt(tx.ctx, id)
	if err != nil {
		return nil, err
	}
	return st.ExecContext(tx.ctx, args...)
}

// exec1 runs statement id, which takes no arguments and returns nothing
// the caller needs.
func (tx *wtx) exec1(id stmtID) error {
	_, err := tx.exec(id)
	return err
}

// row runs statement id with args, which returns at most one row.
func (tx *wtx) row(id stmtID, args ...any) sqlstore.Row {
	st, err := tx.c.stmt(tx.ctx, id)
	if err != nil {
		return sqlstore.RowFunc(func(...any) error { return err })
	}
	return st.QueryRowContext(tx.ctx, args...)
}

// execSQL runs query, which is not one of the prepared statements (a
// migration).
func (tx *wtx) execSQL(query string, args ...any) error {
	_, err := tx.c.conn.ExecContext(tx.ctx, query, args...)
	return err
}

// lastSeq returns the last seq of session's log for a batch that starts
// at first: from the connection's cache when the batch continues the
// cached seq, otherwise (no entry, or one the batch does not continue,
// which may be stale) from the log. A cached seq is never above the log's,
// so one the batch continues either is the log's last seq or is followed
// by a stored event, which the batch's first INSERT then hits (the primary
// key (session_id, seq)): a match never lets a gap or an overwrite
// through. A batch starting at 1 needs no lookup for the same reason.
// Once the transaction commits, the cache holds what [wtx.setLast] set.
func (tx *wtx) lastSeq(session string, first int64) (int64, error) {
	tx.session = session
	if last, ok := tx.c.last[session]; ok && last == first-1 {
		return last, nil
	} else if !ok && first == 1 {
		return 0, nil
	}
	var last int64
	if err := tx.row(stLastSeq, session).Scan(&last); err != nil {
		return 0, err
	}
	return last, nil
}

// setLast records the last seq the transaction leaves in the session whose
// last seq it read.
func (tx *wtx) setLast(seq int64) { tx.newLast = seq }
