package postgres

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/jackc/pgx/v5"

	"weft.dev/weft/store"
	"weft.dev/weft/store/internal/sqlstore"
)

// lockRetention is the advisory lock class of the retention pass (second
// key 0): one host's pass at a time on a database (see migrate.go for the
// other classes).
const lockRetention int32 = 0x57454652 // "WEFR"

var _ store.Purger = (*Store)(nil)

// Purge removes session id and everything that is its own in one
// transaction (see [store.Purger]), under the session's advisory lock,
// which appends and lease take-overs take too: no append of the session
// commits between the checks and the deletes. Its lease row goes with
// it. It returns an error wrapping [store.ErrNotFound] for an unknown
// session, [store.ErrInUse] while it has a run that has not ended or a
// running process, or while a live lease holds it (its owner has it
// loaded: the owner unloads it first), [store.ErrForkSource] while a fork
// reads through it, and [store.ErrClosed] after Close.
func (s *Store) Purge(ctx context.Context, id string) error {
	if err := s.guard.Enter(); err != nil {
		return err
	}
	defer s.guard.Leave()
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{}, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, lockSQL, lockSession, id); err != nil {
			return err
		}
		var holder string
		err := tx.QueryRow(ctx, `SELECT holder FROM leases WHERE session_id = $1 AND expires_at > now()`, id).Scan(&holder)
		if err == nil {
			return fmt.Errorf("%w: session %s is leased by %s", store.ErrInUse, id, holder)
		} else if !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		if err := sqlstore.Purge(purgeTx{ctx, tx}, id); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `DELETE FROM leases WHERE session_id = $1`, id)
		return err
	})
	switch {
	case err == nil:
		return nil
	case errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrInUse) || errors.Is(err, store.ErrForkSource):
		return err
	}
	return s.errorf("purge session "+id, err)
}

// LockRetention takes the database's retention lock: a session-level
// advisory lock on a connection of the pool, which it keeps until unlock
// (so one connection fewer serves the store meanwhile). The server
// releases the lock with the connection if the host dies. It returns an
// error wrapping [store.ErrLeaseHeld] while another host (or process) has
// it.
func (s *Store) LockRetention(ctx context.Context) (func(), error) {
	if err := s.guard.Enter(); err != nil {
		return nil, err
	}
	defer s.guard.Leave()
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, s.errorf("retention lock", err)
	}
	var ok bool
	if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock($1, 0)`, lockRetention).Scan(&ok); err != nil {
		conn.Release()
		return nil, s.errorf("retention lock", err)
	}
	if !ok {
		conn.Release()
		return nil, fmt.Errorf("%s: retention: %w", s.name, store.ErrLeaseHeld)
	}
	return sync.OnceFunc(func() {
		ctx, cancel := context.WithTimeout(context.Background(), rollbackTimeout)
		defer cancel()
		if _, err := conn.Exec(ctx, `SELECT pg_advisory_unlock($1, 0)`, lockRetention); err != nil {
			// A connection whose unlock failed must not go back to the
			// pool holding the lock: closing it releases it.
			conn.Conn().Close(ctx)
		}
		conn.Release()
	}), nil
}

// purgeTx is a transaction as [sqlstore.Purge] uses it.
type purgeTx struct {
	ctx context.Context
	tx  pgx.Tx
}

func (p purgeTx) QueryRow(query string, args ...any) sqlstore.Row {
	return p.tx.QueryRow(p.ctx, query, args...)
}

func (p purgeTx) Exec(query string, args ...any) error {
	_, err := p.tx.Exec(p.ctx, query, args...)
	return err
}
