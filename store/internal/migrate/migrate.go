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
	// Compatible is the lowest schema version a binary must know to use
	// a database this migration has been applied to: the migration's own
	// version unless its first line says `-- compatible-with: N` (N
	// below it: the change is additive, and binaries that know schema N
	// read and write the database correctly with it). A store records it
	// beside the version, so that a binary one version behind can tell a
	// newer schema it may use from one it must refuse (a rolling deploy).
	Compatible int
}

// compatPrefix starts the first line of a migration that binaries of an
// older schema may use.
const compatPrefix = "-- compatible-with:"

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
		m := Migration{Version: v, Name: name, SQL: string(b), Compatible: v}
		first, _, _ := strings.Cut(m.SQL, "\n")
		if rest, ok := strings.CutPrefix(first, compatPrefix); ok {
			c, err := strconv.Atoi(strings.TrimSpace(rest))
			if err != nil || c < 1 || c > v {
				return nil, fmt.Errorf("migration %s: %s wants a schema version from 1 to %d", name, compatPrefix, v)
			}
			m.Compatible = c
		}
		out = append(out, m)
	}
	// fs.ReadDir sorts by name and the names are zero-padded.
	for i, m := range out {
		if m.Version != i+1 {
			return nil, fmt.Errorf("migration %s: want version %d", m.Name, i+1)
		}
	}
	return out, nil
}
