package postgres

import (
	"context"
	"embed"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"weft.dev/weft/store/internal/migrate"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

var (
	// ErrOldSchema reports a database whose schema is older than this
	// binary's (or that has none): [Open] refuses it unless
	// [Config.Migrate] is set; [Migrate] (`weft migrate`) brings it up to
	// date.
	ErrOldSchema = errors.New("database schema is older than this binary")
	// ErrNewerSchema reports a database written by a newer weft: its
	// schema version is above every migration this binary knows. The
	// store refuses it rather than misread it.
	ErrNewerSchema = errors.New("database schema is newer than this binary")
)

// Advisory lock classes: the first key of pg_advisory_xact_lock(int, int),
// so that weft's locks keep apart from other users of the database (such
// as a job queue) that lock single bigint keys. The second key is
// hashtext of the session or process ID; two IDs that hash alike only
// share a lock.
const (
	lockSession int32 = 0x57454653 // "WEFS": appends to one session's log
	lockProcess int32 = 0x57454650 // "WEFP": appends to one process's log
	lockMigrate int32 = 0x5745464d // "WEFM": schema migrations (second key 0)
)

// Migrate brings the schema of the database at url up to date, applying
// every migration it lacks in one transaction (PostgreSQL's DDL is
// transactional: all of them or none) under an advisory lock, so that
// concurrent migrations apply each step once. It returns the schema
// version before and after. The user needs the right to create tables in
// the database's schema (from PostgreSQL 15 on, only the database's owner
// has it in public by default); hosts can then run as a user that may
// only read and write the tables.
//
// Errors name the database and say what failed, as [Open]'s do; a schema
// newer than this binary's is [ErrNewerSchema].
func Migrate(ctx context.Context, url string) (from, to int, err error) {
	pcfg, name, err := parseConfig(Config{URL: url})
	if err != nil {
		return 0, 0, err
	}
	conn, err := pgx.ConnectConfig(ctx, pcfg.ConnConfig)
	if err != nil {
		return 0, 0, classify(name, "migrate", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if err := checkEncoding(ctx, conn, name); err != nil {
		return 0, 0, err
	}
	return applyMigrations(ctx, conn, name)
}

// applyMigrations runs the pending migrations on conn.
func applyMigrations(ctx context.Context, conn *pgx.Conn, name string) (from, to int, err error) {
	ms, err := migrate.Load(migrationFS)
	if err != nil {
		return 0, 0, err
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		return 0, 0, classify(name, "migrate", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	// A migration may rewrite a large table and waits for concurrent
	// migrations: the timeouts of the pool's connections (see
	// Config.LeaseTTL) are not for it.
	if _, err := tx.Exec(ctx, `SET LOCAL statement_timeout = 0; SET LOCAL lock_timeout = 0`); err != nil {
		return 0, 0, classify(name, "migrate", err)
	}
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1, 0)`, lockMigrate); err != nil {
		return 0, 0, classify(name, "migrate: lock", err)
	}
	if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_version (
		version    integer     NOT NULL PRIMARY KEY,
		name       text        NOT NULL,
		applied_at timestamptz NOT NULL DEFAULT now()
	)`); err != nil {
		return 0, 0, classify(name, "migrate: create schema_version", err)
	}
	var cur int
	if err := tx.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM schema_version`).Scan(&cur); err != nil {
		return 0, 0, classify(name, "migrate: read schema version", err)
	}
	if cur > len(ms) {
		return cur, cur, newerSchema(name, cur, len(ms))
	}
	for _, m := range ms[cur:] {
		if _, err := tx.Exec(ctx, m.SQL); err != nil {
			return cur, cur, classify(name, "apply migration "+m.Name, err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO schema_version (version, name) VALUES ($1, $2)`, m.Version, m.Name); err != nil {
			return cur, cur, classify(name, "record migration "+m.Name, err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return cur, cur, classify(name, "migrate: commit", err)
	}
	return cur, len(ms), nil
}

// schemaVersion returns the database's schema version (0 without a
// schema_version table) and the version this binary's migrations reach.
func schemaVersion(ctx context.Context, conn *pgx.Conn, name string) (have, want int, err error) {
	ms, err := migrate.Load(migrationFS)
	if err != nil {
		return 0, 0, err
	}
	err = conn.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM schema_version`).Scan(&have)
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "42P01" { // undefined_table
		return 0, len(ms), nil
	}
	if err != nil {
		return 0, 0, classify(name, "read schema version", err)
	}
	return have, len(ms), nil
}

func newerSchema(name string, have, want int) error {
	return fmt.Errorf("store %s: %w: schema version %d, this binary knows up to %d; upgrade weft or use another --store", name, ErrNewerSchema, have, want)
}

func oldSchema(name string, have, want int) error {
	if have == 0 {
		return fmt.Errorf("store %s: %w: the database has no weft schema; run `weft migrate --store URL` to create it", name, ErrOldSchema)
	}
	return fmt.Errorf("store %s: %w: schema version %d, this binary needs %d; run `weft migrate --store URL` to upgrade it", name, ErrOldSchema, have, want)
}

// checkEncoding refuses a database whose encoding would make text columns
// (IDs, keys, types) fail or change: UTF8 stores them as they are, and so
// does SQL_ASCII (which checks nothing).
func checkEncoding(ctx context.Context, conn *pgx.Conn, name string) error {
	var enc string
	if err := conn.QueryRow(ctx, `SHOW server_encoding`).Scan(&enc); err != nil {
		return classify(name, "open", err)
	}
	if enc != "UTF8" && enc != "SQL_ASCII" {
		return fmt.Errorf("store %s: the database's encoding is %s; weft needs UTF8: create it with CREATE DATABASE … ENCODING 'UTF8' TEMPLATE template0", name, enc)
	}
	return nil
}
