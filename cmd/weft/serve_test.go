package main

import (
	"context"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"weft.dev/weft/api"
	"weft.dev/weft/client"
	"weft.dev/weft/event"
)

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// serve starts `weft serve` and waits until it answers.
func (e *testEnv) serve(addr string) *exec.Cmd {
	e.t.Helper()
	c := e.cmd("serve", "--listen", addr)
	c.Stderr = os.Stderr
	if err := c.Start(); err != nil {
		e.t.Fatal(err)
	}
	for range 200 {
		resp, err := http.Get("http://" + addr + "/healthz")
		if err == nil {
			resp.Body.Close()
			return c
		}
		time.Sleep(20 * time.Millisecond)
	}
	c.Process.Kill()
	c.Wait()
	e.t.Fatal("weft serve did not come up")
	return nil
}

func (e *testEnv) token() string {
	b, err := os.ReadFile(filepath.Join(e.dir, ".local", "state", "weft", "token"))
	if err != nil {
		e.t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// TestServeSIGKILLAndResume kills `weft serve` while a run streams, starts
// it again, and checks that a client resuming from its cursor sees the
// rest of the log exactly once, the run interrupted, and that the session
// goes on.
func TestServeSIGKILLAndResume(t *testing.T) {
	e := newEnv(t)
	slow := e.script("slow.json", `{"loop":true,"steps":[{"text":"`+strings.Repeat("tok ", 500)+`","delayMs":4}]}`)
	addr := freeAddr(t)
	srv := e.serve(addr)
	tok := e.token()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dial := func(ctx context.Context) (*client.Client, error) {
		return client.Dial(ctx, addr, client.Options{Token: tok})
	}
	c, err := dial(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s, err := c.CreateSession(ctx, api.CreateSessionParams{Model: "scripted:" + slow})
	if err != nil {
		t.Fatal(err)
	}
	r, err := c.StartRun(ctx, api.StartRunParams{SessionID: s.ID, Input: api.Input(event.TextParts("go")), IdempotencyKey: "start-1"})
	if err != nil {
		t.Fatal(err)
	}
	seq, err := c.Subscribe(ctx, api.SubscribeParams{SessionID: s.ID})
	if err != nil {
		t.Fatal(err)
	}
	var seen []event.Event
	deltas := 0
	for ev, err := range seq {
		if err != nil {
			t.Fatal(err)
		}
		seen = append(seen, ev)
		if ev.Type == event.MessageDelta {
			deltas++
		}
		if deltas == 3 {
			srv.Process.Signal(syscall.SIGKILL)
			srv.Wait()
			break
		}
	}
	c.Close()
	cursor := seen[len(seen)-1].Seq

	srv = e.serve(addr)
	defer func() { srv.Process.Signal(os.Interrupt); srv.Wait() }()
	var after []event.Event
	for ev, err := range client.Follow(ctx, dial, s.ID, cursor, "") {
		if err != nil {
			t.Fatal(err)
		}
		after = append(after, ev)
		if ev.RunID == r.ID && event.IsTerminalRun(ev.Type) {
			break
		}
	}
	for i, ev := range after {
		if ev.Seq != cursor+int64(i)+1 {
			t.Fatalf("after restart, position %d has seq %d", i, ev.Seq)
		}
	}
	if last := after[len(after)-1]; last.Type != event.RunInterrupted {
		t.Fatalf("the killed run ended %s", last.Type)
	}
	c, err = dial(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// Nothing delivered before the kill is missing from the log.
	page, err := c.ReadEvents(ctx, api.ReadEventsParams{SessionID: s.ID, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range seen {
		if int(ev.Seq) > len(page.Events) || page.Events[ev.Seq-1].Type != ev.Type {
			t.Fatalf("delivered event %d (%s) is missing after the restart", ev.Seq, ev.Type)
		}
	}
	// The retried start is a replay, not a second run.
	again, err := c.StartRun(ctx, api.StartRunParams{SessionID: s.ID, Input: api.Input(event.TextParts("go")), IdempotencyKey: "start-1"})
	if err != nil || !again.Replayed || again.ID != r.ID {
		t.Fatalf("retried start after restart: %+v %v", again, err)
	}
	fast := e.script("fast.json", `{"loop":true,"steps":[{"text":"fine"}]}`)
	r2, err := c.StartRun(ctx, api.StartRunParams{SessionID: s.ID, Input: api.Input(event.TextParts("again")), Model: "scripted:" + fast})
	if err != nil {
		t.Fatal(err)
	}
	w, err := c.WaitRun(ctx, api.WaitRunParams{RunID: r2.ID, TimeoutMs: 20000})
	if err != nil || w.Run.Status != "completed" {
		t.Fatalf("run after restart: %+v %v", w, err)
	}
}

// TestRunThroughHost: with a host up, `weft run` goes through it, and
// --detach prints the IDs; `weft attach`, `status` and `cancel` work.
func TestRunThroughHost(t *testing.T) {
	e := newEnv(t)
	addr := freeAddr(t)
	srv := e.serve(addr)
	defer func() { srv.Process.Signal(os.Interrupt); srv.Wait() }()
	fast := e.script("fast.json", quickstart)
	out, stderr, code := e.weft("", "--host", addr, "run", "-m", "scripted:"+fast, "-p", "via host")
	if code != 0 || out != "Writing.\nWrote it.\n" {
		t.Fatalf("run via host: %d %q %s", code, out, stderr)
	}
	out, stderr, code = e.weft("", "--host", addr, "run", "--detach", "-m", "scripted:"+fast, "-p", "detached")
	if code != 0 {
		t.Fatalf("detach: %d %s", code, stderr)
	}
	ids := strings.Fields(out)
	if len(ids) != 2 || !strings.HasPrefix(ids[0], "ses_") || !strings.HasPrefix(ids[1], "run_") {
		t.Fatalf("detach printed %q", out)
	}
	out, _, code = e.weft("", "--host", addr, "attach", ids[1])
	if code != 0 || out != "Writing.\nWrote it.\n" {
		t.Fatalf("attach: %d %q", code, out)
	}
	out, _, _ = e.weft("", "--host", addr, "status", ids[1])
	if !strings.Contains(out, "completed") {
		t.Fatalf("status: %q", out)
	}
	out, _, _ = e.weft("", "--host", addr, "cancel", ids[1])
	if !strings.Contains(out, "completed") {
		t.Fatalf("cancel of a finished run: %q", out)
	}
	_, stderr, code = e.weft("", "--host", addr, "steer", ids[1], "more")
	if code == 0 || !strings.Contains(stderr, "not active") {
		t.Fatalf("steer of a finished run: %d %s", code, stderr)
	}
}

// TestRPCStdio drives `weft rpc` over its stdin and stdout.
func TestRPCStdio(t *testing.T) {
	e := newEnv(t)
	fast := e.script("fast.json", `{"loop":true,"steps":[{"text":"hi {{input}}"}]}`)
	c := e.cmd("rpc")
	stdin, _ := c.StdinPipe()
	stdout, _ := c.StdoutPipe()
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	cl := client.NewStdio(stdout, stdin, client.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, err := cl.CreateSession(ctx, api.CreateSessionParams{Model: "scripted:" + fast})
	if err != nil {
		t.Fatal(err)
	}
	r, err := cl.StartRun(ctx, api.StartRunParams{SessionID: s.ID, Input: api.Input(event.TextParts("stdio"))})
	if err != nil {
		t.Fatal(err)
	}
	w, err := cl.WaitRun(ctx, api.WaitRunParams{RunID: r.ID, TimeoutMs: 10000})
	if err != nil || w.Run.Status != "completed" {
		t.Fatalf("%+v %v", w, err)
	}
	cl.Close()
	if err := c.Wait(); err != nil {
		t.Fatalf("weft rpc exited with %v", err)
	}
}
