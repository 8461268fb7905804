package sqlite

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"time"

	"weft.dev/weft/internal/migrate"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

// ErrNewerSchema reports a database written by a newer weft: its schema
// version is above every migration this binary knows. The store refuses to
// open it rather than misread it.
var ErrNewerSchema = errors.New("database schema is newer than this binary")

// migrate brings the database to the newest schema in one immediate
// transaction: either every pending migration is applied or none is. It
// returns the schema version before and after.
func (s *Store) migrate(ctx context.Context, fsys fs.FS) (from, to int, err error) {
	ms, err := migrate.Load(fsys)
	if err != nil {
		return 0, 0, err
	}
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return 0, 0, s.errorf("begin migration", err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_version (
		version    INTEGER NOT NULL PRIMARY KEY,
		name       TEXT    NOT NULL,
		applied_at INTEGER NOT NULL
	)`); err != nil {
		return 0, 0, s.errorf("create schema_version", err)
	}
	var cur int
	if err := tx.QueryRowContext(ctx, `SELECT coalesce(max(version), 0) FROM schema_version`).Scan(&cur); err != nil {
		return 0, 0, s.errorf("read schema version", err)
	}
	if cur > len(ms) {
		return cur, cur, fmt.Errorf("store %s: %w: schema version %d, this binary knows up to %d; upgrade weft or use another --store", s.path, ErrNewerSchema, cur, len(ms))
	}
	for _, m := range ms[cur:] {
		if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
			return cur, cur, s.errorf("apply migration "+m.Name, err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO schema_version (version, name, applied_at) VALUES (?, ?, ?)`,
			m.Version, m.Name, time.Now().UnixNano()); err != nil {
			return cur, cur, s.errorf("record migration "+m.Name, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return cur, cur, s.errorf("commit migrations", err)
	}
	return cur, len(ms), nil
}
