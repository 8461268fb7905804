package sqlite_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"weft.dev/weft/store"
	"weft.dev/weft/store/record"
	"weft.dev/weft/store/sqlite"
)

// TestUndecodableRecord: a stored record that does not decode is
// reported once, naming the file and the record, by the reads of one
// record and the lists alike (as store/postgres's test of the same name
// checks on the reads both drivers share).
func TestUndecodableRecord(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "weft.db")
	s := open(t, sqlite.Config{Path: path})
	b := createBatch("s")
	b.Runs = []record.Run{{ID: "r1", SessionID: "s", Status: record.RunQueued, CreatedAt: b.Events[0].Time, FirstSeq: 1}}
	if err := s.Append(ctx, b); err != nil {
		t.Fatal(err)
	}
	db := rawDB(t, path)
	for _, table := range []string{"sessions", "runs"} {
		if _, err := db.Exec(`UPDATE ` + table + ` SET record = '[]'`); err != nil {
			t.Fatal(err)
		}
	}
	check := func(what string, err error, want string) {
		t.Helper()
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("%s: error %v, want one containing %q", what, err, want)
		}
		if n := strings.Count(err.Error(), path); n != 1 {
			t.Errorf("%s: error %q names the file %d times, want once", what, err, n)
		}
		if errors.Is(err, store.ErrNotFound) {
			t.Errorf("%s: an undecodable record is ErrNotFound", what)
		}
	}
	_, err := s.Session(ctx, "s")
	check("Session", err, "session s: decode record")
	_, err = s.Sessions(ctx, store.ListSessionsParams{})
	check("Sessions", err, "session s: decode record")
	_, err = s.Run(ctx, "r1")
	check("Run", err, "run r1: decode record")
	_, err = s.Runs(ctx, store.ListRunsParams{SessionID: "s"})
	check("Runs", err, "run r1: decode record")
}
