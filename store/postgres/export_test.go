package postgres

import (
	"context"

	"github.com/jackc/pgx/v5/pgxpool"

	"weft.dev/weft/store"
	"weft.dev/weft/store/internal/sqlstore"
)

// ReadQuery is the query of Store.Read and its arguments, for the test
// that explains its plans.
func ReadQuery(p store.ReadParams) (string, []any) { return sqlstore.ReadQuery(dialect(), p) }

// SetInTxHook makes s call f inside every transaction that succeeded,
// before its commit: a test stops a writer there.
func SetInTxHook(s *Store, f func(op string)) { s.inTxHook = f }

// HoldConns takes every connection of s's pool until release is called:
// a pool that stuck sessions fill.
func HoldConns(ctx context.Context, s *Store) (release func(), err error) {
	var held []*pgxpool.Conn
	release = func() {
		for _, c := range held {
			c.Release()
		}
	}
	for range s.pool.Config().MaxConns {
		c, err := s.pool.Acquire(ctx)
		if err != nil {
			release()
			return nil, err
		}
		held = append(held, c)
	}
	return release, nil
}

// Analyze updates the planner's statistics of s's database, so that a
// benchmark measures the plans a populated database would have.
func Analyze(ctx context.Context, s *Store) error {
	_, err := s.pool.Exec(ctx, "ANALYZE")
	return err
}
