package main

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
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

// TestClusterSettlesOrphanedProcesses: two hosts on one PostgreSQL; host
// A starts a background `sleep 600` in a session with no run, and is
// SIGKILLed. Without any client touching the session, host B settles the
// process within the lease TTL + 5 s: its record is no longer running,
// it names B's lease (a later epoch), and the sleep is gone from this
// machine (B swept A's leftover, as recovery does).
func TestClusterSettlesOrphanedProcesses(t *testing.T) {
	const ttl = 2 * time.Second
	cl := newCluster(t, 2, ttl)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	a := cl.dial(ctx, 0)
	s, err := a.CreateSession(ctx, api.CreateSessionParams{Mounts: mountsFor(cl.envs[0])})
	if err != nil {
		t.Fatal(err)
	}
	p, err := a.StartProcess(ctx, api.ProcessStartParams{SessionID: s.ID, Command: "sleep 600"})
	if err != nil {
		t.Fatal(err)
	}
	st, err := postgres.Open(ctx, postgres.Config{URL: cl.envs[0].store})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	before, err := st.Process(ctx, p.ID)
	if err != nil || before.Status != record.ProcessRunning || before.Epoch < 1 {
		t.Fatalf("the process before the kill: %+v, %v; want running under a lease", before, err)
	}
	a.Close()
	cl.srvs[0].Signal(syscall.SIGKILL)
	<-cl.exited[0]
	killed := time.Now()
	var rec record.Process
	if !poll(ttl+5*time.Second, func() bool {
		rec, err = st.Process(ctx, p.ID)
		return err == nil && rec.Status != record.ProcessRunning
	}) {
		t.Fatalf("the process %v after the kill: %s (%v); want settled by the surviving host", time.Since(killed).Round(time.Millisecond), rec.Status, err)
	}
	t.Logf("the process was settled (%s) %v after the kill (lease TTL %v)", rec.Status, time.Since(killed).Round(time.Millisecond), ttl)
	if rec.Epoch <= before.Epoch || rec.Host == before.Host {
		t.Fatalf("the settled record names host %q epoch %d; want the surviving host's later lease (was %q epoch %d)", rec.Host, rec.Epoch, before.Host, before.Epoch)
	}
	if !poll(5*time.Second, func() bool { return len(markedProcesses(p.ID)) == 0 }) {
		t.Fatalf("the sleep still runs: %v", markedProcesses(p.ID))
	}
}
