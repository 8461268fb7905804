// Package sqlstore is what weft's SQL stores (store/sqlite and
// store/postgres) have in common, written once: the codecs of times and
// records, the scans of their rows, the list loops, the guard that keeps
// calls out of a closed store, and every read of [store.Store]. A driver
// keeps what differs between the databases: its connections and
// transactions, how it writes a batch, the fencing of appends by lease
// epoch (PostgreSQL), its errors, and a [Dialect] of the few SQL fragments
// the databases spell their own way. So the drivers stay thin over one
// core, as River's are over one driver test suite; store/storetest checks
// both.
//
// The shared SQL is written with PostgreSQL's numbered placeholders ($1,
// $2 …), which modernc.org/sqlite binds by number too.
package sqlstore

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"weft.dev/weft/store"
)

// DB is a store's database as the shared reads use it. Each driver adapts
// its own: a database/sql pool of read connections (SQLite), a pgx pool
// (PostgreSQL). Its methods must be safe for concurrent use.
type DB interface {
	// Query runs a query and returns its rows, which the caller closes.
	Query(ctx context.Context, sql string, args ...any) (Rows, error)
	// QueryRow runs a query that returns at most one row. The row's Scan
	// reports no row with an error that errors.Is sql.ErrNoRows (pgx's
	// ErrNoRows does).
	QueryRow(ctx context.Context, sql string, args ...any) Row
	// Error wraps an error of the database with the store's name and op,
	// saying what to do about the failures a person has to act on.
	Error(op string, err error) error
}

// Row is one row of a result: *sql.Row, *sql.Rows, pgx.Row and pgx.Rows
// are.
type Row interface {
	Scan(dest ...any) error
}

// Rows are the rows of a result, read once from the first: pgx.Rows are;
// a driver adapts *sql.Rows, whose Close returns an error.
type Rows interface {
	Row
	Next() bool
	Err() error
	Close()
}

// RowFunc is a function that scans a row, as a [Row]: a driver's
// transaction reading one row through a prepared statement.
type RowFunc func(dest ...any) error

// Scan calls f.
func (f RowFunc) Scan(dest ...any) error { return f(dest...) }

// Dialect is what the shared SQL spells differently in each database: a
// few fragments that each driver fills in. Everything else is written
// once.
type Dialect struct {
	// SessionRows is the select list and FROM clause of session rows,
	// whose table has the alias s: the session's id and record, then the
	// seq and the time of its last event (NULL when it has none). The
	// reads add a WHERE clause.
	SessionRows string
	// RunsOfSessionByStatus, if set, follows "FROM runs r" in a list of one
	// session's runs in some statuses (what loading a session asks for):
	// an index hint, for a planner that would otherwise walk every run of
	// the session to save the sort.
	RunsOfSessionByStatus string
	// Granted is the condition that the session whose ID is the query's
	// argument %[1]s (a placeholder) owns the process of a processes row or
	// was granted it.
	Granted string
	// PageBytes, if set, is the size in bytes of an events row's data,
	// for the database to cut a page at ReadParams.MaxBytes itself (a
	// server should, not to send what the page cannot hold); when empty,
	// the reads cut the page as they read it.
	PageBytes string
}

// Guard keeps a store's calls apart from its Close: each call enters it,
// and fails with [store.ErrClosed] once the store is closed, and leaves it
// when done with the database; Close waits for the calls in flight before
// it lets the database go. It is safe for concurrent use.
type Guard struct {
	name   string
	mu     sync.RWMutex
	closed bool
}

// NewGuard returns the guard of the store named name (in its errors).
func NewGuard(name string) *Guard { return &Guard{name: name} }

// Enter lets a call in, or fails once the store is closed. A call that
// entered must Leave.
func (g *Guard) Enter() error {
	g.mu.RLock()
	if g.closed {
		g.mu.RUnlock()
		return fmt.Errorf("store %s: %w", g.name, store.ErrClosed)
	}
	return nil
}

// Leave lets Close go on once no call is in.
func (g *Guard) Leave() { g.mu.RUnlock() }

// Close waits for the calls in, closes the guard to later ones and calls
// release, the first time only: it may be called more than once.
func (g *Guard) Close(release func() error) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return nil
	}
	g.closed = true
	return release()
}

// query builds a statement and its arguments.
type query struct {
	sql  strings.Builder
	args []any
}

// arg adds v to the arguments and returns its placeholder.
func (q *query) arg(v any) string {
	q.args = append(q.args, v)
	return "$" + strconv.Itoa(len(q.args))
}

// add writes s.
func (q *query) add(s ...string) {
	for _, x := range s {
		q.sql.WriteString(x)
	}
}

// in writes "AND column IN (…)" with vals as arguments; no vals writes
// nothing (no filter).
func in[T ~string](q *query, column string, vals []T) {
	if len(vals) == 0 {
		return
	}
	q.add(" AND ", column, " IN (")
	for i, v := range vals {
		if i > 0 {
			q.add(",")
		}
		q.add(q.arg(string(v)))
	}
	q.add(")")
}

// limitOr returns limit, or def when limit is not positive.
func limitOr(limit, def int) int {
	if limit <= 0 {
		return def
	}
	return limit
}
