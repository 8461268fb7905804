package postgres

import (
	"context"
	"embed"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"

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
	return applyMigrations(ctx, conn, pcfg, name)
}

// applyMigrations runs the pending migrations on conn.
// River's tables come first, over pcfg (see migrateRiver).
func applyMigrations(ctx context.Context, conn *pgx.Conn, pcfg *pgxpool.Config, name string) (from, to int, err error) {
	ms, err := migrate.Load(migrationFS)
	if err != nil {
		return 0, 0, err
	}
	if len(ms) >= riverSchema {
		// River's tables first, each of its migrations committed on its
		// own (a later one uses an enum value an earlier one adds);
		// they are additive, so a weft migration that then fails leaves
		// nothing in the way.
		// Two migrators take turns (River's migrator takes no lock):
		// the lock is the session's, on conn, while River migrates
		// over a connection of its own.
		if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock($1, 1)`, lockMigrate); err != nil {
			return 0, 0, classify(name, "migrate: lock", err)
		}
		err := migrateRiver(ctx, pcfg, name)
		if _, uerr := conn.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock($1, 1)`, lockMigrate); err == nil && uerr != nil {
			err = classify(name, "migrate: unlock", uerr)
		}
		if err != nil {
			return 0, 0, err
		}
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
	// compatible is the lowest schema a binary must know to use the
	// database with that migration (migrate.Migration.Compatible); NULL
	// for rows recorded before it was, until a binary that knows them
	// fills them in below.
	if _, err := tx.Exec(ctx, `ALTER TABLE schema_version ADD COLUMN IF NOT EXISTS compatible integer`); err != nil {
		return 0, 0, classify(name, "migrate: schema_version.compatible", err)
	}
	var cur int
	if err := tx.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM schema_version`).Scan(&cur); err != nil {
		return 0, 0, classify(name, "migrate: read schema version", err)
	}
	if cur > len(ms) {
		return cur, cur, newerSchema(name, cur, len(ms))
	}
	for _, m := range ms[:cur] {
		if _, err := tx.Exec(ctx, `UPDATE schema_version SET compatible = $2 WHERE version = $1 AND compatible IS NULL`, m.Version, m.Compatible); err != nil {
			return cur, cur, classify(name, "record migration "+m.Name, err)
		}
	}
	for _, m := range ms[cur:] {
		if _, err := tx.Exec(ctx, m.SQL); err != nil {
			return cur, cur, classify(name, "apply migration "+m.Name, err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO schema_version (version, name, compatible) VALUES ($1, $2, $3)`, m.Version, m.Name, m.Compatible); err != nil {
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

// usableNewer reports whether this binary, which knows schema want, may
// use a database at a newer schema: every migration past want says that
// binaries of schema want or older can (migrate.Migration.Compatible),
// as additive ones do, so that hosts one version apart share a database
// through a rolling deploy. A migration that says nothing (or a database
// without the column) is not usable.
func usableNewer(ctx context.Context, conn *pgx.Conn, want int) bool {
	var need int
	err := conn.QueryRow(ctx, `SELECT coalesce(max(coalesce(compatible, version)), 0) FROM schema_version WHERE version > $1`, want).Scan(&need)
	return err == nil && need <= want
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

// riverSchema is the schema version from which a database holds River's
// tables (migration 0006_dispatch).
const riverSchema = 6

// migrateRiver applies the migrations of River (the job queue of run
// dispatch, see [Dispatcher]) that the database lacks, each committed on
// its own as River requires (a later one uses an enum value an earlier
// one adds), over a one-connection pool of pcfg: every River migration
// this binary's River knows, so that an upgrade of weft that brings a
// newer River brings its tables with `weft migrate` too.
func migrateRiver(ctx context.Context, pcfg *pgxpool.Config, name string) error {
	pcfg = pcfg.Copy()
	pcfg.MaxConns, pcfg.MinConns = 1, 0
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return classify(name, "migrate River's tables", err)
	}
	defer pool.Close()
	m, err := rivermigrate.New(riverpgxv5.New(pool), nil)
	if err != nil {
		return fmt.Errorf("store %s: migrate River: %w", name, err)
	}
	if _, err := m.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return classify(name, "migrate River's tables", err)
	}
	return nil
}
