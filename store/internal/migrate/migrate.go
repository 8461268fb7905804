// Package migrate loads the numbered schema migrations that weft's SQL
// stores embed: files migrations/NNNN_name.sql, applied in order, each
// exactly once, and recorded by the store in a table schema_version. How
// a store applies them (its transaction, its lock) is the store's own.
package migrate

import (
	"fmt"
	"io/fs"
	"path"
	"strconv"
	"strings"
)

// Migration is one schema step.
type Migration struct {
	// Version is the number in the file name: 1, 2, 3 …
	Version int
	// Name is the file name, NNNN_name.sql.
	Name string
	// SQL is the file's content.
	SQL string
}

// Load reads migrations/NNNN_name.sql from fsys and checks that they are
// numbered 1, 2, 3 … without a gap or a repeat. The error names the file
// at fault.
func Load(fsys fs.FS) ([]Migration, error) {
	entries, err := fs.ReadDir(fsys, "migrations")
	if err != nil {
		return nil, fmt.Errorf("read migrations: %w", err)
	}
	var out []Migration
	for _, e := range entries {
		name := e.Name()
		num, _, ok := strings.Cut(name, "_")
		if !ok || !strings.HasSuffix(name, ".sql") {
			return nil, fmt.Errorf("migration %s: want NNNN_name.sql", name)
		}
		v, err := strconv.Atoi(num)
		if err != nil {
			return nil, fmt.Errorf("migration %s: %w", name, err)
		}
		b, err := fs.ReadFile(fsys, path.Join("migrations", name))
		if err != nil {
			return nil, fmt.Errorf("migration %s: %w", name, err)
		}
		out = append(out, Migration{Version: v, Name: name, SQL: string(b)})
	}
	// fs.ReadDir sorts by name and the names are zero-padded.
	for i, m := range out {
		if m.Version != i+1 {
			return nil, fmt.Errorf("migration %s: want version %d", m.Name, i+1)
		}
	}
	return out, nil
}
