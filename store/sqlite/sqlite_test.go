package sqlite_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	msqlite "modernc.org/sqlite"

	"weft.dev/weft/event"
	"weft.dev/weft/internal/testenv"
	"weft.dev/weft/store"
	"weft.dev/weft/store/record"
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

func TestConformanceReadOnWriter(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store { return open(t, sqlite.Config{ReadOnWriter: true}) })
	storetest.RunLeases(t, func(t *testing.T) store.Store { return open(t, sqlite.Config{ReadOnWriter: true}) })
}

// TestReadOnWriterOneConnection checks that a store opened with
// ReadOnWriter reads and writes through one open file of the database,
// where the default store opens a second for its reads.
func TestReadOnWriterOneConnection(t *testing.T) {
	if _, err := os.Stat("/proc/self/fd"); err != nil {
		testenv.Missing(t, "no /proc/self/fd to count the database's open files: %v", err)
	}
	for _, tc := range []struct {
		readOnWriter bool
		want         int
	}{{true, 1}, {false, 2}} {
		t.Run(fmt.Sprint("ReadOnWriter=", tc.readOnWriter), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "weft.db")
			s := open(t, sqlite.Config{Path: path, ReadOnWriter: tc.readOnWriter})
			ctx := t.Context()
			if err := s.Append(ctx, createBatch("s1")); err != nil {
				t.Fatal(err)
			}
			evs, err := s.Read(ctx, store.ReadParams{SessionID: "s1"})
			if err != nil || len(evs) != 1 {
				t.Fatalf("Read = %d events, %v; want 1", len(evs), err)
			}
			if _, err := s.Session(ctx, "s1"); err != nil {
				t.Fatal(err)
			}
			if got := openFiles(t, path); got != tc.want {
				t.Errorf("%d open files of %s; want %d", got, path, tc.want)
			}
		})
	}
}

// openFiles counts this process's open files of path.
func openFiles(t *testing.T, path string) int {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, fd := range fds {
		if p, err := os.Readlink(filepath.Join("/proc/self/fd", fd.Name())); err == nil && p == path {
			n++
		}
	}
	return n
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
	p := record.NewProjection(record.Session{}, nil)
	e, _ := event.New("", event.SessionCreated, event.SessionCreatedData{Title: id})
	e.SessionID, e.Seq, e.Time = id, 1, now
	if err := p.Apply(e); err != nil {
		panic(err)
	}
	b := store.Batch{SessionID: id, Events: []event.Event{e}}
	b.SetRecords(p.Flush())
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

// TestUnreadableFile: Open of a file it may not read names the file and
// the cause. Root reads any file, so the test runs in a child test binary
// without CAP_DAC_OVERRIDE.
func TestUnreadableFile(t *testing.T) {
	if testenv.Without(t, testenv.NoDACOverride) {
		return
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
	// A second store opens (its schema is current: checking it takes no
	// lock) and reads, but its writes wait for the lock too.
	s2, err := sqlite.Open(ctx, sqlite.Config{Path: path, BusyTimeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatalf("Open while locked: %v", err)
	}
	defer s2.Close()
	if _, err := s2.LastSeq(ctx, "s1"); err != nil {
		t.Errorf("LastSeq of a store opened while locked: %v", err)
	}
	if _, err := s2.PutReceipt(ctx, record.Receipt{Key: "k", Method: "m"}); err == nil || !strings.Contains(err.Error(), "another") {
		t.Errorf("PutReceipt while locked = %v", err)
	}
	if _, err := conn.ExecContext(ctx, "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	// The failed writes left both stores able to write, and s still
	// checks that its appends continue the log.
	if err := s.Append(ctx, createBatch("s2")); err != nil {
		t.Fatalf("Append after the lock is released: %v", err)
	}
	if err := s.Append(ctx, userBatch("s1", 3, "gap")); !errors.Is(err, store.ErrSeqConflict) {
		t.Fatalf("Append with a gap after the lock is released = %v; want ErrSeqConflict", err)
	}
	if err := s.Append(ctx, userBatch("s1", 2, "next")); err != nil {
		t.Fatalf("Append of s1 after the lock is released: %v", err)
	}
	if _, err := s2.PutReceipt(ctx, record.Receipt{Key: "k", Method: "m"}); err != nil {
		t.Fatalf("PutReceipt after the lock is released: %v", err)
	}
}

func TestLockedMigration(t *testing.T) {
	// A file whose schema must be created cannot be opened while another
	// process holds the write lock: the migration needs it.
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "weft.db")
	other := rawDB(t, path)
	conn, err := other.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "PRAGMA journal_mode=WAL"); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	_, err = sqlite.Open(ctx, sqlite.Config{Path: path, BusyTimeout: 100 * time.Millisecond})
	if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "another") {
		t.Errorf("Open while locked = %v", err)
	}
	if _, err := conn.ExecContext(ctx, "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	open(t, sqlite.Config{Path: path})
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
	if err := rawDB(t, path).QueryRow(`SELECT max(version) FROM schema_version`).Scan(&v); err != nil || v != 7 {
		t.Fatalf("schema version = %d, %v; want 7", v, err)
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

// userBatch is a batch of one message.user event of session id at seq,
// whose data carries text.
func userBatch(id string, seq int64, text string) store.Batch {
	data, _ := json.Marshal(event.MessageUserData{Content: []event.Part{{Type: "text", Text: text}}})
	return store.Batch{SessionID: id, Events: []event.Event{{
		SessionID: id, Seq: seq, Type: event.MessageUser, Time: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC), Data: data,
	}}}
}

// TestTwoWriters has two stores on one file (two processes) append to one
// session, against the one-owner rule: each store remembers the last seq
// it wrote, which the other then overtakes. The log must stay gap-free and
// nothing may be overwritten: every append that does not continue the
// stored log is ErrSeqConflict, whatever its store remembered.
func TestTwoWriters(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "weft.db")
	a := open(t, sqlite.Config{Path: path})
	b := open(t, sqlite.Config{Path: path})
	steps := []struct {
		s    *sqlite.Store
		name string
		seq  int64
		ok   bool
	}{
		{a, "a", 2, true},  // a remembers 2
		{b, "b", 3, true},  // b reads 2 from the log, remembers 3
		{a, "a", 3, false}, // a's 2 is stale: seq 3 is stored
		{a, "a", 5, false}, // a gap, whatever a remembered
		{a, "a", 4, true},  // a reads 3 from the log
		{b, "b", 4, false}, // b's 3 is stale
		{b, "b", 1, false}, // an overwrite of the first event
		{b, "b", 5, true},
		{a, "a", 6, true},
	}
	if err := a.Append(ctx, createBatch("s1")); err != nil {
		t.Fatal(err)
	}
	want := []string{""}
	for i, st := range steps {
		text := fmt.Sprintf("%s%d", st.name, i)
		err := st.s.Append(ctx, userBatch("s1", st.seq, text))
		switch {
		case st.ok && err != nil:
			t.Fatalf("step %d: %s appends seq %d: %v", i, st.name, st.seq, err)
		case !st.ok && !errors.Is(err, store.ErrSeqConflict):
			t.Fatalf("step %d: %s appends seq %d = %v; want ErrSeqConflict", i, st.name, st.seq, err)
		case st.ok:
			want = append(want, text)
		}
	}
	evs, err := b.Read(ctx, store.ReadParams{SessionID: "s1"})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for i, e := range evs {
		if e.Seq != int64(i+1) {
			t.Fatalf("event %d has seq %d", i, e.Seq)
		}
		var d event.MessageUserData
		if i > 0 {
			if err := e.Decode(&d); err != nil || len(d.Content) != 1 {
				t.Fatalf("event %d: %s, %v", e.Seq, e.Data, err)
			}
			got = append(got, d.Content[0].Text)
		} else {
			got = append(got, "")
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("log holds %q; want %q", got, want)
	}
}

// TestWriteAfterFailedBatch checks that a batch that fails after its
// events are inserted leaves nothing behind, not even in what the store
// remembers of the session's last seq.
func TestWriteAfterFailedBatch(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "weft.db")
	s := open(t, sqlite.Config{Path: path})
	if err := s.Append(ctx, createBatch("s1")); err != nil {
		t.Fatal(err)
	}
	if err := s.Append(ctx, userBatch("s1", 2, "two")); err != nil {
		t.Fatal(err)
	}
	// A batch that fails half-way (its run belongs to another session,
	// found after its events are inserted) is rolled back, and the seq
	// it would have left is not remembered.
	if err := s.Append(ctx, createBatch("s2")); err != nil {
		t.Fatal(err)
	}
	other := store.Batch{SessionID: "s2", Events: userBatch("s2", 2, "x").Events,
		Runs: []record.Run{{ID: "r2", SessionID: "s2", Status: record.RunQueued}}}
	if err := s.Append(ctx, other); err != nil {
		t.Fatal(err)
	}
	bad := userBatch("s1", 3, "bad")
	bad.Runs = []record.Run{{ID: "r2", SessionID: "s1", Status: record.RunQueued}}
	if err := s.Append(ctx, bad); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("Append of a run of another session = %v; want ErrInvalid", err)
	}
	if err := s.Append(ctx, userBatch("s1", 4, "gap")); !errors.Is(err, store.ErrSeqConflict) {
		t.Fatalf("Append after a rolled-back batch with seq 4 = %v; want ErrSeqConflict", err)
	}
	if err := s.Append(ctx, userBatch("s1", 3, "three")); err != nil {
		t.Fatalf("Append after a rolled-back batch: %v", err)
	}
	if last, err := s.LastSeq(ctx, "s1"); err != nil || last != 3 {
		t.Fatalf("LastSeq = %d, %v; want 3", last, err)
	}
}

func TestConformanceLeases(t *testing.T) {
	storetest.RunLeases(t, func(t *testing.T) store.Store { return open(t, sqlite.Config{}) })
}
