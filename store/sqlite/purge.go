package sqlite

import (
	"context"
	"fmt"
	"sync"

	"weft.dev/weft/store"
	"weft.dev/weft/store/internal/sqlstore"
)

var _ store.Purger = (*Store)(nil)

// Purge removes session id and everything that is its own in one write
// transaction (see [store.Purger]). It returns an error wrapping
// [store.ErrNotFound] for an unknown session, [store.ErrInUse] while it
// has a run that has not ended or a running process,
// [store.ErrForkSource] while a fork reads through it, and
// [store.ErrClosed] after Close. The writer forgets the session's last
// seq, so that an append after the purge reads the (empty) log again.
func (s *Store) Purge(ctx context.Context, id string) error {
	if err := s.guard.Enter(); err != nil {
		return err
	}
	defer s.guard.Leave()
	err := s.w.run(ctx, func(tx *wtx) error {
		if err := sqlstore.Purge(purgeTx{tx}, id); err != nil {
			return err
		}
		delete(tx.c.last, id)
		return nil
	})
	if err != nil && !isStoreError(err) {
		return s.errorf("purge session "+id, err)
	}
	return err
}

// LockRetention takes the store's retention lock. One process at a time
// opens a SQLite file for a host (its flock), so the lock is this
// store's: one pass at a time in this process. It returns an error
// wrapping [store.ErrLeaseHeld] while another holder has it.
func (s *Store) LockRetention(ctx context.Context) (func(), error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if !s.retention.TryLock() {
		return nil, fmt.Errorf("store %s: retention: %w", s.path, store.ErrLeaseHeld)
	}
	return sync.OnceFunc(s.retention.Unlock), nil
}

// purgeTx is a write transaction as [sqlstore.Purge] uses it.
type purgeTx struct{ tx *wtx }

func (p purgeTx) QueryRow(query string, args ...any) sqlstore.Row {
	return p.tx.c.conn.QueryRowContext(p.tx.ctx, query, args...)
}

func (p purgeTx) Exec(query string, args ...any) error { return p.tx.execSQL(query, args...) }
