package main

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"weft.dev/weft/api"
	"weft.dev/weft/client"
	"weft.dev/weft/event"
	"weft.dev/weft/internal/pgtest"
	"weft.dev/weft/process"
	"weft.dev/weft/store"
	"weft.dev/weft/store/postgres"
	"weft.dev/weft/store/record"
)

// TestJoiningHostLeavesProcessesAlone: a `weft serve` on PostgreSQL runs
// a background loop that prints a line every 50 ms. A second `weft
// serve` (a state directory of its own, as on another machine) joins the
// same database: it touches none of the first host's processes. The loop
// keeps running, its output keeps arriving through the first host, its
// record names the first host and its lease epoch, and its log has no
// process.abandoned.
func TestJoiningHostLeavesProcessesAlone(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
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
	if _, stderr, code := e.weft("", "migrate"); code != 0 {
		t.Fatalf("migrate: %s", stderr)
	}
	addr := freeAddr(t)
	srv := e.serve(addr)
	defer func() { srv.Process.Signal(os.Interrupt); srv.Wait() }()
	cl, err := client.Dial(ctx, addr, client.Options{Token: e.token()})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	s, err := cl.CreateSession(ctx, api.CreateSessionParams{Mounts: mountsFor(e)})
	if err != nil {
		t.Fatal(err)
	}
	p, err := cl.StartProcess(ctx, api.ProcessStartParams{SessionID: s.ID, Command: `i=0; while true; do echo line $i; i=$((i+1)); sleep 0.05; done`})
	if err != nil {
		t.Fatal(err)
	}
	output := func() int64 {
		t.Helper()
		out, err := cl.ProcessOutput(ctx, api.ProcessOutputParams{ID: p.ID, SessionID: s.ID})
		if err != nil {
			t.Fatal(err)
		}
		return out.Next
	}
	if !poll(10*time.Second, func() bool { return output() > 0 }) {
		t.Fatal("the loop printed nothing")
	}

	// The second host joins, with a state directory of its own.
	addr2 := freeAddr(t)
	srv2 := e.cmd("serve", "--listen", addr2)
	srv2.Dir = e.work
	srv2.Env = append(srv2.Env, "XDG_STATE_HOME="+filepath.Join(e.dir, "state2"))
	srv2.Stderr = os.Stderr
	if err := srv2.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { srv2.Process.Signal(os.Interrupt); srv2.Wait() }()
	if !poll(20*time.Second, func() bool {
		resp, err := http.Get("http://" + addr2 + "/healthz")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil
	}) {
		t.Fatal("the second weft serve did not come up")
	}
	joined := output()
	time.Sleep(2 * time.Second) // let the loop print through the first host
	if len(markedProcesses(p.ID)) == 0 {
		t.Fatal("the loop was killed when the second host joined")
	}
	if after := output(); after <= joined {
		t.Fatalf("no output arrived after the second host joined (offset %d, then %d)", joined, after)
	}
	got, err := cl.GetProcess(ctx, api.ProcessIDParams{ID: p.ID, SessionID: s.ID})
	if err != nil || got.Process.Status != record.ProcessRunning {
		t.Fatalf("the process after the second host joined: %+v, %v; want running", got, err)
	}

	st, err := postgres.Open(ctx, postgres.Config{URL: e.store})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	rec, err := st.Process(ctx, p.ID)
	if err != nil || rec.Epoch < 1 || !strings.Contains(rec.Host, "(weft serve)") {
		t.Fatalf("record: host %q epoch %d (%v); want the first host's lease", rec.Host, rec.Epoch, err)
	}
	evs, err := st.ReadProcess(ctx, store.ReadProcessParams{ProcessID: p.ID, Types: []event.Type{process.EventAbandoned}})
	if err != nil || len(evs) != 0 {
		t.Fatalf("process.abandoned in the log: %v (%v)", evs, err)
	}
}
