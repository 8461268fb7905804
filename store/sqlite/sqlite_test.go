package sqlite_test

import (
	"context"
	"database/sql"
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	msqlite "modernc.org/sqlite"

	"weft.dev/weft/event"
	"weft.dev/weft/store"
	"weft.dev/weft/store/sqlite"
	"weft.dev/weft/store/storetest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func open(t testing.TB, cfg sqlite.Config) *sqlite.Store {
	t.Helper()
	if cfg.Path == "" {
		cfg.Path = filepath.Join(t.TempDir(), "weft.db")
	}
	s, err := sqlite.Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store { return open(t, sqlite.Config{}) })
}

func TestConformanceFull(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store { return open(t, sqlite.Config{Synchronous: "FULL"}) })
}

func rawDB(t testing.TB, path string) *sql.DB {
	t.Helper()
	c, err := msqlite.NewConnector((&url.URL{Scheme: "file", Path: path, RawQuery: "_pragma=busy_timeout(0)"}).String())
	if err != nil {
		t.Fatal(err)
	}
	db := sql.OpenDB(c)
	db.SetMaxOpenConns(1)
	t.Cleanup(func() { db.Close() })
	return db
}

func createBatch(id string) store.Batch {
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	p := store.NewProjection(store.Session{}, nil)
	e, _ := event.New("", event.SessionCreated, event.SessionCreatedData{Title: id})
	e.SessionID, e.Seq, e.Time = id, 1, now
	if err := p.Apply(e); err != nil {
		panic(err)
	}
	b := store.Batch{SessionID: id, Events: []event.Event{e}}
	p.Flush(&b)
	return b
}

func TestOpenErrors(t *testing.T) {
	dir := t.TempDir()
	notDB := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(notDB, []byte(strings.Repeat("this is not a database\n", 100)), 0o600); err != nil {
		t.Fatal(err)
	}
	fileAsDir := filepath.Join(dir, "plain")
	if err := os.WriteFile(fileAsDir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		cfg  sqlite.Config
		want []string
	}{
		{"empty path", sqlite.Config{}, []string{"Path is empty"}},
		{"directory", sqlite.Config{Path: dir}, []string{dir, "is a directory"}},
		{"missing directory", sqlite.Config{Path: filepath.Join(dir, "nope", "weft.db")}, []string{filepath.Join(dir, "nope", "weft.db"), "no such file or directory"}},
		{"parent is a file", sqlite.Config{Path: filepath.Join(fileAsDir, "weft.db")}, []string{filepath.Join(fileAsDir, "weft.db"), "not a directory"}},
		{"not a database", sqlite.Config{Path: notDB}, []string{notDB, "not a SQLite database"}},
		{"bad synchronous", sqlite.Config{Path: filepath.Join(dir, "x.db"), Synchronous: "OFF"}, []string{"NORMAL or FULL"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, err := sqlite.Open(context.Background(), tc.cfg)
			if err == nil {
				s.Close()
				t.Fatal("Open succeeded")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
	// The file that is not a database is left as it was.
	if b, _ := os.ReadFile(notDB); !strings.HasPrefix(string(b), "this is not") {
		t.Errorf("Open changed a file that is not a database")
	}
}

func TestUnreadableFile(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root ignores file permissions")
	}
	path := filepath.Join(t.TempDir(), "weft.db")
	open(t, sqlite.Config{Path: path}).Close()
	if err := os.Chmod(path, 0); err != nil {
		t.Fatal(err)
	}
	_, err := sqlite.Open(context.Background(), sqlite.Config{Path: path})
	if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "permission") {
		t.Fatalf("Open of an unreadable file = %v", err)
	}
}

func TestFileMode(t *testing.T) {
	path := filepath.Join(t.TempDir(), "weft.db")
	s := open(t, sqlite.Config{Path: path})
	if err := s.Append(context.Background(), createBatch("s1")); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{path, path + "-wal"} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s has mode %v; want 0600", p, fi.Mode().Perm())
		}
	}
}

func TestLocked(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "weft.db")
	s := open(t, sqlite.Config{Path: path, BusyTimeout: 100 * time.Millisecond})
	if err := s.Append(ctx, createBatch("s1")); err != nil {
		t.Fatal(err)
	}
	// Another "process" holds the write lock.
	other := rawDB(t, path)
	conn, err := other.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err = s.Append(ctx, createBatch("s2"))
	if err == nil {
		t.Fatal("Append succeeded while another connection holds the write lock")
	}
	if time.Since(start) < 90*time.Millisecond {
		t.Errorf("Append gave up after %s; want the busy timeout", time.Since(start))
	}
	for _, w := range []string{path, "locked", "another", "--store"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("Append error %q does not contain %q", err, w)
		}
	}
	// Reads go on.
	if _, err := s.Read(ctx, store.ReadParams{SessionID: "s1"}); err != nil {
		t.Errorf("Read while locked: %v", err)
	}
	// A second store cannot open (its migration needs the lock).
	_, err = sqlite.Open(ctx, sqlite.Config{Path: path, BusyTimeout: 100 * time.Millisecond})
	if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "another") {
		t.Errorf("Open while locked = %v", err)
	}
	if _, err := conn.ExecContext(ctx, "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	if err := s.Append(ctx, createBatch("s2")); err != nil {
		t.Fatalf("Append after the lock is released: %v", err)
	}
}

func TestReopen(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "weft.db")
	s, err := sqlite.Open(ctx, sqlite.Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	b := createBatch("s1")
	if err := s.Append(ctx, b); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, sqlite.Config{Path: path})
	got, err := s.Read(ctx, store.ReadParams{SessionID: "s1"})
	if err != nil || len(got) != 1 || !got[0].Time.Equal(b.Events[0].Time) {
		t.Fatalf("Read after reopen = %+v, %v", got, err)
	}
	sess, err := s.Session(ctx, "s1")
	if err != nil || sess.Title != "s1" {
		t.Fatalf("Session after reopen = %+v, %v", sess, err)
	}
	s.Close()
	var v int
	if err := rawDB(t, path).QueryRow(`SELECT max(version) FROM schema_version`).Scan(&v); err != nil || v != 4 {
		t.Fatalf("schema version = %d, %v; want 4", v, err)
	}
}

func TestNewerSchema(t *testing.T) {
	path := filepath.Join(t.TempDir(), "weft.db")
	open(t, sqlite.Config{Path: path}).Close()
	raw := rawDB(t, path)
	if _, err := raw.Exec(`INSERT INTO schema_version (version, name, applied_at) VALUES (99, '0099_future.sql', 0)`); err != nil {
		t.Fatal(err)
	}
	raw.Close()
	_, err := sqlite.Open(context.Background(), sqlite.Config{Path: path})
	if !errors.Is(err, sqlite.ErrNewerSchema) {
		t.Fatalf("Open = %v; want ErrNewerSchema", err)
	}
	for _, w := range []string{path, "99", "upgrade"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not contain %q", err, w)
		}
	}
}

func TestWALMode(t *testing.T) {
	path := filepath.Join(t.TempDir(), "weft.db")
	open(t, sqlite.Config{Path: path}).Close()
	var mode string
	if err := rawDB(t, path).QueryRow(`PRAGMA journal_mode`).Scan(&mode); err != nil || mode != "wal" {
		t.Fatalf("journal_mode = %q, %v; want wal", mode, err)
	}
}
