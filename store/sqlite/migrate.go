package sqlite

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"time"

	"weft.dev/weft/store/internal/migrate"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

// ErrNewerSchema reports a database written by a newer weft: its schema
// version is above every migration this binary knows. The store refuses to
// open it rather than misread it.
var ErrNewerSchema = errors.New("database schema is newer than this binary")

// migrate brings the database to the newest schema and returns the schema
// version before and after. A current schema costs one query on the write
// connection (which must be open), outside any transaction, so opening a
// store takes no write lock. Otherwise (an older schema, a new file
// without the version table, or any error of that query) every pending
// migration is applied in one immediate transaction, or none is; the
// transaction reads the version again, so two processes opening an old
// file migrate it once.
func (s *Store) migrate(ctx context.Context, fsys fs.FS) (from, to int, err error) {
	ms, err := migrate.Load(fsys)
	if err != nil {
		return 0, 0, err
	}
	var cur int
	err = s.w.use(ctx, func(c *wconn) error {
		return c.conn.QueryRowContext(ctx, `SELECT coalesce(max(version), 0) FROM schema_version`).Scan(&cur)
	})
	switch {
	case err == nil && cur > len(ms):
		return cur, cur, s.newerSchema(cur, len(ms))
	case err == nil && cur == len(ms):
		return cur, cur, nil
	}
	err = s.w.run(ctx, func(tx *wtx) error {
		if err := tx.execSQL(`CREATE TABLE IF NOT EXISTS schema_version (
			version    INTEGER NOT NULL PRIMARY KEY,
			name       TEXT    NOT NULL,
			applied_at INTEGER NOT NULL
		)`); err != nil {
			return fmt.Errorf("create schema_version: %w", err)
		}
		if err := tx.c.conn.QueryRowContext(tx.ctx, `SELECT coalesce(max(version), 0) FROM schema_version`).Scan(&cur); err != nil {
			return fmt.Errorf("read schema version: %w", err)
		}
		if cur > len(ms) {
			return s.newerSchema(cur, len(ms))
		}
		for _, m := range ms[cur:] {
			if err := tx.execSQL(m.SQL); err != nil {
				return fmt.Errorf("apply migration %s: %w", m.Name, err)
			}
			if err := tx.execSQL(`INSERT INTO schema_version (version, name, applied_at) VALUES (?, ?, ?)`,
				m.Version, m.Name, time.Now().UnixNano()); err != nil {
				return fmt.Errorf("record migration %s: %w", m.Name, err)
			}
		}
		return nil
	})
	switch {
	case errors.Is(err, ErrNewerSchema):
		return cur, cur, err
	case err != nil:
		return cur, cur, s.errorf("migrate", err)
	}
	return cur, len(ms), nil
}

// newerSchema is the error for a database at schema version cur when this
// binary knows up to known.
func (s *Store) newerSchema(cur, known int) error {
	return fmt.Errorf("store %s: %w: schema version %d, this binary knows up to %d; upgrade weft or use another --store", s.path, ErrNewerSchema, cur, known)
}
