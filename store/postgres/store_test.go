package postgres_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"weft.dev/weft/event"
	"weft.dev/weft/internal/pgtest"
	"weft.dev/weft/store"
	"weft.dev/weft/store/postgres"
)

var t0 = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

// batch returns n events of session id from seq first, each data naming
// the writer.
func batch(id string, first int64, n int, writer string) store.Batch {
	b := store.Batch{SessionID: id}
	for i := range n {
		b.Events = append(b.Events, event.Event{Seq: first + int64(i), SessionID: id, Type: event.MessageUser,
			Time: t0.Add(time.Duration(first+int64(i)) * time.Millisecond), Data: json.RawMessage(fmt.Sprintf(`{"w":%q}`, writer))})
	}
	return b
}

func writerOf(t *testing.T, e event.Event) string {
	var d struct{ W string }
	if err := json.Unmarshal(e.Data, &d); err != nil {
		t.Fatal(err)
	}
	return d.W
}

// TestTwoStoresOneSession: two stores on one database (two pools, as two
// hosts would have) append to the same session at the same seq at once.
// Each round one batch wins whole and the other gets ErrSeqConflict; the
// log stays gap-free and no batch interleaves with another.
func TestTwoStoresOneSession(t *testing.T) {
	ctx := context.Background()
	url := pg.Database(t)
	a, b := openURL(t, url), openURL(t, url)
	if err := a.Append(ctx, batch("s", 1, 1, "create")); err != nil {
		t.Fatal(err)
	}
	const rounds = 30
	wins := map[string]int{}
	for round := range rounds {
		last, err := a.LastSeq(ctx, "s")
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		var errA, errB error
		wg.Go(func() { errA = a.Append(ctx, batch("s", last+1, 3, fmt.Sprint("a", round))) })
		wg.Go(func() { errB = b.Append(ctx, batch("s", last+1, 5, fmt.Sprint("b", round))) })
		wg.Wait()
		switch {
		case errA == nil && errors.Is(errB, store.ErrSeqConflict):
			wins["a"]++
		case errB == nil && errors.Is(errA, store.ErrSeqConflict):
			wins["b"]++
		default:
			t.Fatalf("round %d: a: %v; b: %v; want one success and one ErrSeqConflict", round, errA, errB)
		}
	}
	evs, err := b.Read(ctx, store.ReadParams{SessionID: "s", Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range evs {
		if e.Seq != int64(i+1) {
			t.Fatalf("event %d has seq %d: a gap", i, e.Seq)
		}
	}
	if want := 1 + 3*wins["a"] + 5*wins["b"]; len(evs) != want {
		t.Fatalf("%d events; want %d (a won %d rounds, b %d)", len(evs), want, wins["a"], wins["b"])
	}
	// Each round's batch is whole: its writer's events, one after another.
	for i := 1; i < len(evs); {
		w := writerOf(t, evs[i])
		n := map[byte]int{'a': 3, 'b': 5}[w[0]]
		for j := range n {
			if got := writerOf(t, evs[i+j]); got != w {
				t.Fatalf("seq %d is %s's inside %s's batch", evs[i+j].Seq, got, w)
			}
		}
		i += n
	}
	t.Logf("a won %d rounds, b %d", wins["a"], wins["b"])
}

func freePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func wantError(t *testing.T, err error, want ...string) {
	t.Helper()
	if err == nil {
		t.Fatal("no error")
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not contain %q", err, w)
		}
	}
}

func TestOpenUnreachable(t *testing.T) {
	port := strconv.Itoa(freePort(t))
	url := "postgres://weft:s3cret-pw@127.0.0.1:" + port + "/weft"
	_, err := postgres.Open(context.Background(), postgres.Config{URL: url})
	wantError(t, err, "postgres://127.0.0.1:"+port+"/weft", "cannot connect", "connection refused")
	if strings.Contains(err.Error(), "s3cret-pw") {
		t.Errorf("error %q shows the password", err)
	}
	_, _, err = postgres.Migrate(context.Background(), url)
	wantError(t, err, "127.0.0.1:"+port, "connection refused")
}

func TestOpenBadURL(t *testing.T) {
	for _, url := range []string{"", "postgres://u:s3cret-pw@host:notaport/db"} {
		_, err := postgres.Open(context.Background(), postgres.Config{URL: url})
		if err == nil || strings.Contains(err.Error(), "s3cret-pw") {
			t.Errorf("Open(%q) = %v", url, err)
		}
	}
}

func TestOpenWrongPassword(t *testing.T) {
	ctx := context.Background()
	c := pg.Cluster(t)
	db, err := c.CreateDatabase(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Exec(ctx, db, `CREATE ROLE weft_pw LOGIN PASSWORD 'right-pw'`); err != nil && !strings.Contains(err.Error(), "already exists") {
		t.Fatal(err)
	}
	_, err = postgres.Open(ctx, postgres.Config{URL: c.TCPURL(db, "weft_pw", "wr0ng-pw")})
	wantError(t, err, "127.0.0.1:"+strconv.Itoa(c.Port()), "password authentication failed", "weft_pw", "check the user and password")
	if strings.Contains(err.Error(), "wr0ng-pw") {
		t.Errorf("error %q shows the password", err)
	}
	_, err = postgres.Open(ctx, postgres.Config{URL: c.URL("no_such_db")})
	wantError(t, err, "no_such_db", "does not exist")
}

// TestSchemaVersions: a database without weft's schema is refused with
// the advice to run weft migrate; Migrate applies the migrations once;
// a newer schema is refused.
func TestSchemaVersions(t *testing.T) {
	ctx := context.Background()
	url := pg.Database(t)
	_, err := postgres.Open(ctx, postgres.Config{URL: url})
	if !errors.Is(err, postgres.ErrOldSchema) {
		t.Fatalf("Open of an empty database = %v; want ErrOldSchema", err)
	}
	wantError(t, err, "weft migrate", "no weft schema")

	// Two migrators at once apply each step once.
	type result struct{ from, to int }
	res := make([]result, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i := range res {
		wg.Go(func() { res[i].from, res[i].to, errs[i] = postgres.Migrate(ctx, url) })
	}
	wg.Wait()
	if errors.Join(errs...) != nil {
		t.Fatal(errs)
	}
	// latest is the number of migrations this binary carries.
	const latest = 6
	if res[0].to != latest || res[1].to != latest || res[0].from+res[1].from != latest || res[0].from*res[1].from != 0 {
		t.Fatalf("concurrent migrations: %+v; want one from 0 and one from %d, both to %d", res, latest, latest)
	}
	s, err := postgres.Open(ctx, postgres.Config{URL: url})
	if err != nil {
		t.Fatalf("Open after Migrate: %v", err)
	}
	s.Close()

	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var n int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM schema_version`).Scan(&n); err != nil || n != latest {
		t.Fatalf("schema_version rows = %d, %v; want %d", n, err, latest)
	}
	var c5 int
	if err := conn.QueryRow(ctx, `SELECT compatible FROM schema_version WHERE version = 5`).Scan(&c5); err != nil || c5 != 4 {
		t.Fatalf("schema 5 (additive) recorded as compatible with %d, %v; want 4", c5, err)
	}
	// A row an older binary recorded without it is filled in by the
	// next migration.
	if _, err := conn.Exec(ctx, `UPDATE schema_version SET compatible = NULL WHERE version = 5`); err != nil {
		t.Fatal(err)
	}
	if _, _, err := postgres.Migrate(ctx, url); err != nil {
		t.Fatal(err)
	}
	if err := conn.QueryRow(ctx, `SELECT compatible FROM schema_version WHERE version = 5`).Scan(&c5); err != nil || c5 != 4 {
		t.Fatalf("schema 5 after a migration filled it in: %d, %v; want 4", c5, err)
	}
	// A rolling deploy: the next version's additive migration, which
	// says this binary's schema can use it, is accepted; one that needs
	// the next binary is not.
	if _, err := conn.Exec(ctx, `INSERT INTO schema_version (version, name, compatible) VALUES ($1, 'next_additive.sql', $2)`, latest+1, latest); err != nil {
		t.Fatal(err)
	}
	s, err = postgres.Open(ctx, postgres.Config{URL: url})
	if err != nil {
		t.Fatalf("Open of a newer schema that says this one can use it: %v", err)
	}
	s.Close()
	if _, err := conn.Exec(ctx, `INSERT INTO schema_version (version, name, compatible) VALUES ($1, 'then_breaking.sql', $1)`, latest+2); err != nil {
		t.Fatal(err)
	}
	if _, err = postgres.Open(ctx, postgres.Config{URL: url}); !errors.Is(err, postgres.ErrNewerSchema) {
		t.Fatalf("Open of a newer schema that needs a newer binary = %v; want ErrNewerSchema", err)
	}
	if _, err := conn.Exec(ctx, `INSERT INTO schema_version (version, name) VALUES (99, '0099_future.sql')`); err != nil {
		t.Fatal(err)
	}
	_, err = postgres.Open(ctx, postgres.Config{URL: url, Migrate: true})
	if !errors.Is(err, postgres.ErrNewerSchema) {
		t.Fatalf("Open of a newer schema = %v; want ErrNewerSchema", err)
	}
	wantError(t, err, "99", "upgrade weft")
	if _, _, err := postgres.Migrate(ctx, url); !errors.Is(err, postgres.ErrNewerSchema) {
		t.Fatalf("Migrate of a newer schema = %v; want ErrNewerSchema", err)
	}
}

// TestDroppedTable: a database whose tables went missing under an open
// store answers with the advice to migrate, as a storage failure.
func TestDroppedTable(t *testing.T) {
	ctx := context.Background()
	url := pg.Database(t)
	s := openURL(t, url)
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `DROP TABLE receipts`); err != nil {
		t.Fatal(err)
	}
	_, err = s.Receipt(ctx, "k", "m")
	wantError(t, err, "weft migrate")
	if errors.Is(err, store.ErrNotFound) {
		t.Errorf("a missing table is ErrNotFound")
	}
}

// TestNUL: text columns cannot hold NUL: such an ID is refused as
// invalid, not as a storage failure.
func TestNUL(t *testing.T) {
	s := open(t)
	err := s.Append(context.Background(), batch("a\x00b", 1, 1, "x"))
	if !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("Append with a NUL in the session ID = %v; want ErrInvalid", err)
	}
}

// isSentinel reports whether err is one of the store's sentinels, which
// the host maps to something other than storage_unavailable.
func isSentinel(err error) bool {
	for _, s := range []error{store.ErrNotFound, store.ErrSeqConflict, store.ErrInvalid, store.ErrClosed, store.ErrReceiptExists} {
		if errors.Is(err, s) {
			return true
		}
	}
	return false
}

// TestServerRestart: the server stops under an open store; reads and
// writes fail with storage errors that name the database; once it is
// back, the same store works again (the pool reconnects) and nothing
// committed is lost.
func TestServerRestart(t *testing.T) {
	ctx := context.Background()
	c, err := pgtest.New(ctx)
	if errors.Is(err, pgtest.ErrNoServer) {
		pgtest.Skip(t, err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s := openURL(t, c.Database(t))
	if err := s.Append(ctx, batch("s", 1, 3, "before")); err != nil {
		t.Fatal(err)
	}
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	err = s.Append(short, batch("s", 4, 2, "down"))
	if err == nil || isSentinel(err) || short.Err() != nil {
		t.Fatalf("Append while the server is down = %v; want a storage failure", err)
	}
	wantError(t, err, "store postgres://", "append to session s")
	if _, err := s.Read(short, store.ReadParams{SessionID: "s"}); err == nil || isSentinel(err) {
		t.Fatalf("Read while the server is down = %v; want a storage failure", err)
	}
	t.Logf("while down: %v", err)

	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	// The first calls may meet connections the restart cut; the pool
	// drops them and dials anew, as a host retrying with backoff sees.
	deadline := time.Now().Add(15 * time.Second)
	for {
		err := s.Append(ctx, batch("s", 4, 2, "after"))
		if err == nil {
			break
		}
		if isSentinel(err) || time.Now().After(deadline) {
			t.Fatalf("Append after the restart: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	evs, err := s.Read(ctx, store.ReadParams{SessionID: "s"})
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 5 || writerOf(t, evs[2]) != "before" || writerOf(t, evs[3]) != "after" {
		t.Fatalf("after the restart: %d events", len(evs))
	}
}

// TestReadPlan: reads after a cursor are range scans of the primary key,
// with and without MaxBytes, in the plan PostgreSQL picks for the
// prepared statement once it plans generically.
func TestReadPlan(t *testing.T) {
	ctx := context.Background()
	url := pg.Database(t)
	s := openURL(t, url)
	for _, id := range []string{"a", "b", "c"} {
		for first := int64(1); first <= 3000; first += 500 {
			if err := s.Append(ctx, batch(id, first, 500, id)); err != nil {
				t.Fatal(err)
			}
		}
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `ANALYZE events; SET plan_cache_mode = force_generic_plan`); err != nil {
		t.Fatal(err)
	}
	for i, p := range []store.ReadParams{
		{SessionID: "b", After: 1500, Limit: 200},
		{SessionID: "b", After: 1500, Limit: 512, MaxBytes: 64 << 10},
	} {
		query, args := postgres.ReadQuery(p)
		types := []string{"text", "bigint", "bigint", "bigint"}[:len(args)]
		if _, err := conn.Exec(ctx, fmt.Sprintf("PREPARE q%d (%s) AS %s", i, strings.Join(types, ", "), query)); err != nil {
			t.Fatal(err)
		}
		var vals []string
		for _, a := range args {
			vals = append(vals, fmt.Sprintf("'%v'", a))
		}
		rows, err := conn.Query(ctx, fmt.Sprintf("EXPLAIN EXECUTE q%d (%s)", i, strings.Join(vals, ", ")))
		if err != nil {
			t.Fatal(err)
		}
		lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		plan := strings.Join(lines, "\n")
		if !strings.Contains(plan, "Index Scan using events_pkey on events") || strings.Contains(plan, "Seq Scan") || strings.Contains(plan, "Sort") {
			t.Errorf("plan of %s:\n%s\nwant an index scan of events_pkey, no sort", query, plan)
		}
		got, err := s.Read(ctx, p)
		if err != nil || len(got) == 0 || got[0].Seq != 1501 {
			t.Fatalf("Read(%+v) = %d events, %v", p, len(got), err)
		}
	}
}

// TestReadOnly: a database that turned read-only (as a standby is) refuses
// writes with a storage failure that says so; reads go on.
func TestReadOnly(t *testing.T) {
	ctx := context.Background()
	c := pg.Cluster(t)
	url := pg.Database(t)
	s := openURL(t, url)
	if err := s.Append(ctx, batch("s", 1, 1, "x")); err != nil {
		t.Fatal(err)
	}
	db := url[strings.LastIndex(url, "/")+1 : strings.Index(url, "?")]
	if err := c.Exec(ctx, "postgres", "ALTER DATABASE "+db+" SET default_transaction_read_only = on"); err != nil {
		t.Fatal(err)
	}
	ro := openURL(t, url) // new connections take the setting
	err := ro.Append(ctx, batch("s", 2, 1, "x"))
	if err == nil || isSentinel(err) {
		t.Fatalf("Append to a read-only database = %v; want a storage failure", err)
	}
	wantError(t, err, "read-only", "25006")
	if _, err := ro.Read(ctx, store.ReadParams{SessionID: "s"}); err != nil {
		t.Fatalf("Read of a read-only database: %v", err)
	}
}
