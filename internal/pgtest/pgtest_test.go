package pgtest_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"go.uber.org/goleak"

	"weft.dev/weft/internal/pgtest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// TestCluster starts a cluster, checks that the server does not run as
// root, uses a database over the socket and over TCP, stops and restarts
// it, and closes it.
func TestCluster(t *testing.T) {
	ctx := context.Background()
	c, err := pgtest.New(ctx)
	if errors.Is(err, pgtest.ErrNoServer) {
		pgtest.Skip(t, err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := c.Close(); err != nil {
			t.Error(err)
		}
		if _, err := os.Stat(c.SocketDir()); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("Close left %s: %v", c.SocketDir(), err)
		}
	}()
	db := c.Database(t)
	conn, err := pgx.Connect(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	var pid int
	if err := conn.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
		t.Fatal(err)
	}
	conn.Close(ctx)
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(status)) {
		if uids, ok := strings.CutPrefix(line, "Uid:"); ok {
			uid, _ := strconv.Atoi(strings.Fields(uids)[0])
			if uid == 0 {
				t.Errorf("the server runs as root")
			}
			if os.Geteuid() != 0 && uid != os.Geteuid() {
				t.Errorf("the server runs as uid %d, not as the test's user", uid)
			}
		}
	}

	name := db[strings.LastIndex(db, "/")+1 : strings.Index(db, "?")]
	tcp := c.TCPURL(name, pgtest.Superuser, c.Password())
	conn, err = pgx.Connect(ctx, tcp)
	if err != nil {
		t.Fatalf("over TCP: %v", err)
	}
	if _, err := conn.Exec(ctx, "CREATE TABLE t (x int); INSERT INTO t VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	conn.Close(ctx)
	if _, err := pgx.Connect(ctx, c.TCPURL(name, pgtest.Superuser, "wrong")); err == nil || !strings.Contains(err.Error(), "password authentication failed") {
		t.Fatalf("wrong password over TCP: %v", err)
	}

	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := pgx.Connect(ctx, db); err == nil {
		t.Fatal("connected to a stopped server")
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	conn, err = pgx.Connect(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var x int
	if err := conn.QueryRow(ctx, "SELECT x FROM t").Scan(&x); err != nil || x != 1 {
		t.Fatalf("after restart: %d, %v", x, err)
	}
}
