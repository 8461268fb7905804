package postgres_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"weft.dev/weft/store"
	"weft.dev/weft/store/postgres"
	"weft.dev/weft/store/record"
)

// TestUndecodableRecord: a stored record that does not decode (written by
// hand, or by a weft whose records had another shape) is reported once,
// naming the database and the record, by the reads of one record and
// the lists alike, not as a failure of the connection wrapped around it
// (which the reads of each driver said before they shared one core).
func TestUndecodableRecord(t *testing.T) {
	ctx := context.Background()
	url := pg.Database(t)
	s := openURL(t, url)
	b := batch("s", 1, 1, "w")
	b.Session = &record.Session{ID: "s", CreatedAt: t0}
	b.Runs = []record.Run{{ID: "r1", SessionID: "s", Status: record.RunQueued, CreatedAt: t0, FirstSeq: 1}}
	if err := s.Append(ctx, b); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	for _, table := range []string{"sessions", "runs"} {
		if _, err := conn.Exec(ctx, `UPDATE `+table+` SET record = '[]'`); err != nil {
			t.Fatal(err)
		}
	}
	name, err := postgres.Name(url)
	if err != nil {
		t.Fatal(err)
	}
	check := func(what string, err error, want string) {
		t.Helper()
		wantError(t, err, want)
		if n := strings.Count(err.Error(), name); n != 1 {
			t.Errorf("%s: error %q names the database %d times, want once", what, err, n)
		}
		if strings.Contains(err.Error(), "connection") {
			t.Errorf("%s: error %q blames the connection", what, err)
		}
		if errors.Is(err, store.ErrNotFound) {
			t.Errorf("%s: an undecodable record is ErrNotFound", what)
		}
	}
	_, err = s.Session(ctx, "s")
	check("Session", err, "session s: decode record")
	_, err = s.Sessions(ctx, store.ListSessionsParams{})
	check("Sessions", err, "session s: decode record")
	_, err = s.Run(ctx, "r1")
	check("Run", err, "run r1: decode record")
	_, err = s.Runs(ctx, store.ListRunsParams{SessionID: "s"})
	check("Runs", err, "run r1: decode record")
}
