package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"weft.dev/weft/internal/config"
	"weft.dev/weft/store"
	"weft.dev/weft/store/postgres"
	"weft.dev/weft/store/sqlite"
)

// storeLoc is where the store lives: a SQLite file or a PostgreSQL
// database.
type storeLoc struct {
	path string // the SQLite file, or ""
	url  string // the PostgreSQL URL, or ""
	// name names the store in messages: the file, or
	// postgres://HOST:PORT/DB (never the password).
	name string
	// leaseTTL is a PostgreSQL store's lease TTL (postgres.Config.LeaseTTL,
	// which its sessions' timeouts derive from); zero means the default.
	leaseTTL time.Duration
	// readOnWriter opens a SQLite store with one connection, which
	// reads too (sqlite.Config.ReadOnWriter): a one-shot host's.
	readOnWriter bool
}

// storeLocation returns the store named by --store/WEFT_STORE, the config
// file, or the default SQLite file under $XDG_DATA_HOME. A postgres:// or
// postgresql:// URL is PostgreSQL; a path, or sqlite:PATH, is SQLite; any
// other scheme is refused.
func (a *app) storeLocation(f config.File) (storeLoc, error) {
	dsn := a.storeDSN
	if dsn == "" {
		dsn = f.Store
	}
	if dsn == "" {
		dir := a.getenv("XDG_DATA_HOME")
		if dir == "" {
			home := a.getenv("HOME")
			if home == "" {
				return storeLoc{}, fmt.Errorf("no store: set --store, WEFT_STORE, XDG_DATA_HOME or HOME")
			}
			dir = filepath.Join(home, ".local", "share")
		}
		p := filepath.Join(dir, "weft", "weft.db")
		return storeLoc{path: p, name: p}, nil
	}
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		name, err := postgres.Name(dsn)
		if err != nil {
			return storeLoc{}, err
		}
		return storeLoc{url: dsn, name: name}, nil
	}
	if p, ok := strings.CutPrefix(dsn, "sqlite:"); ok {
		dsn = p
	}
	if scheme, _, ok := strings.Cut(dsn, "://"); ok {
		// Only the scheme: the rest may hold a password.
		return storeLoc{}, fmt.Errorf("store URL with scheme %q: weft's stores are SQLite (a path or sqlite:PATH) and PostgreSQL (postgres://…)", scheme)
	}
	return storeLoc{path: dsn, name: dsn}, nil
}

// openStore opens the store: SQLite (creating its directory, and
// migrating its schema) or PostgreSQL (whose schema `weft migrate`
// creates and upgrades). It returns the store's name for messages.
func (a *app) openStore(ctx context.Context, f config.File) (store.Store, string, error) {
	loc, err := a.storeLocation(f)
	if err != nil {
		return nil, "", err
	}
	st, err := openStoreAt(ctx, loc)
	if err != nil {
		return nil, "", err
	}
	return st, loc.name, nil
}

func openStoreAt(ctx context.Context, loc storeLoc) (store.Store, error) {
	if loc.url != "" {
		return postgres.Open(ctx, postgres.Config{URL: loc.url, LeaseTTL: loc.leaseTTL})
	}
	if err := os.MkdirAll(filepath.Dir(loc.path), 0o700); err != nil {
		return nil, fmt.Errorf("store %s: %w", loc.path, err)
	}
	return sqlite.Open(ctx, sqlite.Config{Path: loc.path, ReadOnWriter: loc.readOnWriter})
}

// lockDir is where a SQLite store's leases live (sqlite.Store.LockDir:
// the host lock, which keeps a second host from serving the file, and the
// session leases), or "" for PostgreSQL, whose leases are rows in the
// database (store/postgres.Leases).
func lockDir(loc storeLoc) string {
	if loc.url != "" {
		return ""
	}
	return loc.path + ".locks"
}

// loadConfig reads the configuration file.
func (a *app) loadConfig() (config.File, string, error) {
	p := config.Path(a.getenv)
	f, err := config.Load(p)
	return f, p, err
}
