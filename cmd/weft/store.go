package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"weft.dev/weft/internal/config"
	"weft.dev/weft/store/sqlite"
)

// storePath returns the SQLite file named by --store/WEFT_STORE, the
// config file, or the default under $XDG_DATA_HOME.
func (a *app) storePath(f config.File) (string, error) {
	dsn := a.storeDSN
	if dsn == "" {
		dsn = f.Store
	}
	if dsn == "" {
		dir := a.getenv("XDG_DATA_HOME")
		if dir == "" {
			home := a.getenv("HOME")
			if home == "" {
				return "", fmt.Errorf("no store: set --store, WEFT_STORE, XDG_DATA_HOME or HOME")
			}
			dir = filepath.Join(home, ".local", "share")
		}
		return filepath.Join(dir, "weft", "weft.db"), nil
	}
	if p, ok := strings.CutPrefix(dsn, "sqlite:"); ok {
		dsn = p
	}
	if strings.Contains(dsn, "://") {
		return "", fmt.Errorf("store %q: only SQLite files are supported (a path or sqlite:PATH)", dsn)
	}
	return dsn, nil
}

// openStore opens the SQLite store, creating its directory.
func (a *app) openStore(ctx context.Context, f config.File) (*sqlite.Store, string, error) {
	p, err := a.storePath(f)
	if err != nil {
		return nil, "", err
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return nil, "", fmt.Errorf("store %s: %w", p, err)
	}
	st, err := sqlite.Open(ctx, sqlite.Config{Path: p})
	if err != nil {
		return nil, "", err
	}
	return st, p, nil
}

// lockDir is where session leases of the store at path live.
func lockDir(storePath string) string { return storePath + ".locks" }

// loadConfig reads the configuration file.
func (a *app) loadConfig() (config.File, string, error) {
	p := config.Path(a.getenv)
	f, err := config.Load(p)
	return f, p, err
}
