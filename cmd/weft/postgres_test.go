package main

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"weft.dev/weft/internal/pgtest"
)

// TestPostgresStore drives weft over a PostgreSQL store: refused until
// `weft migrate` creates the schema, then runs, sessions and events as
// over SQLite; `weft serve` answers -32019 while the server is down and
// recovers by itself when it is back.
func TestPostgresStore(t *testing.T) {
	ctx := context.Background()
	c, err := pgtest.New(ctx)
	if errors.Is(err, pgtest.ErrNoServer) {
		pgtest.Skip(t, err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	db, err := c.CreateDatabase(ctx)
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t)
	e.store = c.URL(db)

	_, stderr, code := e.weft("", "sessions")
	if code != exitFailed || !strings.Contains(stderr, "weft migrate") {
		t.Fatalf("sessions before migrate: %d %s", code, stderr)
	}
	out, stderr, code := e.weft("", "migrate")
	if code != 0 || !strings.Contains(out, "schema version 6, migrated from 0") {
		t.Fatalf("migrate: %d %q %s", code, out, stderr)
	}
	out, _, code = e.weft("", "migrate")
	if code != 0 || !strings.Contains(out, "schema version 6, up to date") {
		t.Fatalf("migrate again: %d %q", code, out)
	}

	s := e.script("s.json", quickstart)
	out, stderr, code = e.weft("", "run", "-m", "scripted:"+s, "-p", "hello there")
	if code != 0 || out != "Writing.\nWrote it.\n" {
		t.Fatalf("run: %d %q %s", code, out, stderr)
	}
	sid := e.onlySession()
	checkContiguous(t, e.events(sid))

	addr := freeAddr(t)
	srv := e.serve(addr)
	defer func() { srv.Process.Signal(os.Interrupt); srv.Wait() }()
	url, tok := "http://"+addr+"/rpc", e.token()
	create := `{"jsonrpc":"2.0","id":1,"method":"session/create","params":{"model":"scripted:` + s + `"}}`
	if status, body := post(t, url, tok, create); status != 200 || !strings.Contains(body, `"result"`) {
		t.Fatalf("session/create: %d %s", status, body)
	}
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	if status, body := post(t, url, tok, create); !strings.Contains(body, "-32019") {
		t.Fatalf("session/create while PostgreSQL is down: %d %s; want -32019", status, body)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	// The host comes back by itself: the first requests may still meet
	// connections the restart cut.
	ok := poll(20*time.Second, func() bool {
		out, _, code = e.weft("", "--host", addr, "run", "-s", sid, "-p", "after the restart")
		return code == 0
	})
	if !ok || out != "Writing.\nWrote it.\n" {
		t.Fatalf("run through the host after PostgreSQL restarted: %d %q", code, out)
	}
	evs := e.events(sid)
	checkContiguous(t, evs)

	_, stderr, code = e.weft("", "--store", "mysql://u:s3cret@db/weft", "sessions")
	if code == 0 || !strings.Contains(stderr, `scheme "mysql"`) || strings.Contains(stderr, "s3cret") {
		t.Fatalf("another scheme: %d %s", code, stderr)
	}
}
