package sqlstore

import (
	"database/sql"
	"errors"
	"fmt"

	"weft.dev/weft/store"
)

// PurgeTx is a driver's write transaction as [Purge] uses it.
type PurgeTx interface {
	// QueryRow runs a query that returns at most one row.
	QueryRow(query string, args ...any) Row
	// Exec runs a statement.
	Exec(query string, args ...any) error
}

// The refusals of a purge: each query returns a row (what is in the way)
// when the purge must not happen.
var purgeChecks = []struct {
	query string
	err   error
	what  string
}{
	{`SELECT id || ' ' || status FROM runs WHERE session_id = $1 AND status IN ('queued', 'running', 'waiting') LIMIT 1`,
		store.ErrInUse, "has run"},
	{`SELECT id FROM processes WHERE session_id = $1 AND status = 'running' LIMIT 1`,
		store.ErrInUse, "has running process"},
	{`SELECT session_id FROM forks WHERE parent_id = $1 LIMIT 1`,
		store.ErrForkSource, "is the source of fork"},
}

// purgeDeletes remove a session's rows, the processes' logs before the
// processes that name them.
var purgeDeletes = []string{
	`DELETE FROM process_events WHERE process_id IN (SELECT id FROM processes WHERE session_id = $1)`,
	`DELETE FROM processes WHERE session_id = $1`,
	`DELETE FROM events WHERE session_id = $1`,
	`DELETE FROM runs WHERE session_id = $1`,
	`DELETE FROM requests WHERE session_id = $1`,
	`DELETE FROM receipts WHERE session_id = $1`,
	`DELETE FROM snapshots WHERE session_id = $1`,
	`DELETE FROM forks WHERE session_id = $1`,
	`DELETE FROM sessions WHERE id = $1`,
}

// Purge removes session id in tx, which the driver commits: the checks
// of [store.Purger.Purge] (an error wrapping [store.ErrNotFound],
// [store.ErrInUse] or [store.ErrForkSource], before anything is removed),
// then every row of the session. The driver runs it in a transaction that
// excludes the session's appends (SQLite's one writer; PostgreSQL's
// session advisory lock). Errors of the database come back as they are.
func Purge(tx PurgeTx, id string) error {
	var one string
	err := tx.QueryRow(`SELECT id FROM sessions WHERE id = $1 UNION ALL SELECT session_id FROM events WHERE session_id = $1 AND seq = 1`, id).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("%w: session %s", store.ErrNotFound, id)
	} else if err != nil {
		return err
	}
	for _, c := range purgeChecks {
		var what string
		err := tx.QueryRow(c.query, id).Scan(&what)
		if err == nil {
			return fmt.Errorf("%w: session %s %s %s", c.err, id, c.what, what)
		} else if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
	}
	for _, q := range purgeDeletes {
		if err := tx.Exec(q, id); err != nil {
			return err
		}
	}
	return nil
}
