package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"weft.dev/weft/api"
	"weft.dev/weft/client"
	"weft.dev/weft/event"
	"weft.dev/weft/internal/testenv"
	"weft.dev/weft/store/record"
)

func freeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// serve starts `weft serve` on addr, with more flags, and waits until it
// answers.
func (e *testEnv) serve(addr string, flags ...string) *exec.Cmd {
	e.t.Helper()
	return e.serveIn(e.work, addr, flags...)
}

// serveIn is serve with dir as the host's working directory.
func (e *testEnv) serveIn(dir, addr string, flags ...string) *exec.Cmd {
	e.t.Helper()
	c := e.cmd(append([]string{"serve", "--listen", addr}, flags...)...)
	c.Dir = dir
	c.Stderr = os.Stderr
	if err := c.Start(); err != nil {
		e.t.Fatal(err)
	}
	up := poll(10*time.Second, func() bool {
		resp, err := http.Get("http://" + addr + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return true
	})
	if up {
		return c
	}
	c.Process.Kill()
	c.Wait()
	e.t.Fatal("weft serve did not come up")
	return nil
}

// stateDir is the test's $XDG_STATE_HOME/weft.
func (e *testEnv) stateDir() string { return filepath.Join(e.dir, ".local", "state", "weft") }

func (e *testEnv) token() string {
	b, err := os.ReadFile(filepath.Join(e.stateDir(), "token"))
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
	if code != 0 || out != "› detached\nWriting.\nWrote it.\n" {
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

// refused runs a weft command that must exit at once (within 20 s; a
// server that came up is killed) and returns its stderr and exit code.
func (e *testEnv) refused(env []string, args ...string) (string, int) {
	e.t.Helper()
	return e.refusedWithout(0, env, args...)
}

// refusedWithout is refused with weft lacking what lack names (nothing
// when 0; see testenv.StartWithout).
func (e *testEnv) refusedWithout(lack testenv.Lack, env []string, args ...string) (string, int) {
	e.t.Helper()
	c := e.cmd(args...)
	c.Env = append(c.Env, env...)
	var stderr strings.Builder
	c.Stderr = &stderr
	start := c.Start
	if lack != 0 {
		start = func() error { return testenv.StartWithout(e.t, c, lack) }
	}
	if err := start(); err != nil {
		e.t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- c.Wait() }()
	select {
	case err := <-done:
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			e.t.Fatalf("weft %s exited with %v, want a refusal\n%s", strings.Join(args, " "), err, stderr.String())
		}
		return stderr.String(), ee.ExitCode()
	case <-time.After(20 * time.Second):
		c.Process.Kill()
		<-done
		e.t.Fatalf("weft %s did not refuse to start\n%s", strings.Join(args, " "), stderr.String())
		return "", 0
	}
}

// TestServeRefusesBadToken: a token file that is empty, blank, open to
// others, a link or in a directory others can write, and a blank
// WEFT_TOKEN, each stop `weft serve` before it listens, with the fix.
func TestServeRefusesBadToken(t *testing.T) {
	for _, tt := range []struct {
		name  string
		setup func(t *testing.T, dir string)
		env   []string
		want  string
	}{
		{"empty", func(t *testing.T, dir string) { writeFile(t, filepath.Join(dir, "token"), "", 0o600) }, nil,
			"is empty (a disk-full start?): remove it and start `weft serve` again to make a new one, or set WEFT_TOKEN"},
		{"whitespace", func(t *testing.T, dir string) { writeFile(t, filepath.Join(dir, "token"), " \n\t\n", 0o600) }, nil,
			"is empty (a disk-full start?)"},
		{"world-readable", func(t *testing.T, dir string) {
			writeFile(t, filepath.Join(dir, "token"), strings.Repeat("ab", 32)+"\n", 0o644)
		}, nil, "is open to other users (mode 0644)"},
		{"group-readable", func(t *testing.T, dir string) {
			writeFile(t, filepath.Join(dir, "token"), strings.Repeat("ab", 32)+"\n", 0o640)
		}, nil, "is open to other users (mode 0640)"},
		{"symlink", func(t *testing.T, dir string) {
			writeFile(t, filepath.Join(dir, "real"), strings.Repeat("ab", 32)+"\n", 0o600)
			if err := os.Symlink("real", filepath.Join(dir, "token")); err != nil {
				t.Fatal(err)
			}
		}, nil, "is a symbolic link"},
		{"directory", func(t *testing.T, dir string) {
			if err := os.Mkdir(filepath.Join(dir, "token"), 0o700); err != nil {
				t.Fatal(err)
			}
		}, nil, "is not a regular file"},
		{"unreadable", func(t *testing.T, dir string) {
			writeFile(t, filepath.Join(dir, "token"), strings.Repeat("ab", 32)+"\n", 0o200)
		}, nil, "cannot read token file"},
		{"open state directory", func(t *testing.T, dir string) {
			writeFile(t, filepath.Join(dir, "token"), strings.Repeat("ab", 32)+"\n", 0o600)
			if err := os.Chmod(dir, 0o777); err != nil {
				t.Fatal(err)
			}
		}, nil, "is writable by other users (mode 0777): chmod 700 it"},
		{"blank WEFT_TOKEN", func(*testing.T, string) {}, []string{"WEFT_TOKEN= "},
			"WEFT_TOKEN is blank"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			if err := os.MkdirAll(e.stateDir(), 0o700); err != nil {
				t.Fatal(err)
			}
			tt.setup(t, e.stateDir())
			addr := freeAddr(t)
			var lack testenv.Lack
			if tt.name == "unreadable" {
				lack = testenv.NoDACOverride // root reads any file, unless it lacks CAP_DAC_OVERRIDE
			}
			stderr, code := e.refusedWithout(lack, tt.env, "serve", "--listen", addr)
			if code == 0 || !strings.Contains(stderr, tt.want) || strings.Contains(stderr, "weft serving") {
				t.Fatalf("exit %d, stderr:\n%s\nwant a refusal saying %q", code, stderr, tt.want)
			}
			if resp, err := http.Get("http://" + addr + "/healthz"); err == nil {
				resp.Body.Close()
				t.Fatalf("something listens on %s", addr)
			}
		})
	}
}

func writeFile(t *testing.T, path, content string, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil { // past the umask
		t.Fatal(err)
	}
}

// TestServeWritesToken: the first start writes a private token file, with
// nothing left beside it, that the next start and the clients use.
func TestServeWritesToken(t *testing.T) {
	e := newEnv(t)
	addr := freeAddr(t)
	srv := e.serve(addr)
	srv.Process.Signal(os.Interrupt)
	srv.Wait()
	entries, err := os.ReadDir(e.stateDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, de := range entries {
		if de.Name() == "hosts" {
			// The host files' directory, empty after a clean exit.
			if hs, _ := os.ReadDir(filepath.Join(e.stateDir(), "hosts")); len(hs) != 0 {
				t.Errorf("host files left after a clean exit: %v", hs)
			}
			continue
		}
		if de.Name() != "token" && de.Name() != "scratch" {
			t.Errorf("%s left in the state directory", de.Name())
		}
	}
	path := filepath.Join(e.stateDir(), "token")
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode() != 0o600 {
		t.Errorf("token file mode %v, want -rw-------", fi.Mode())
	}
	b, _ := os.ReadFile(path)
	if !regexp.MustCompile(`^[0-9a-f]{64}\n$`).Match(b) {
		t.Errorf("token file holds %q, want 64 hex digits and a newline", b)
	}
	dir, err := os.Stat(e.stateDir())
	if err != nil || dir.Mode().Perm() != 0o700 {
		t.Errorf("state directory: %v %v", dir.Mode(), err)
	}
	// The next start keeps it.
	srv = e.serve(addr)
	defer func() { srv.Process.Signal(os.Interrupt); srv.Wait() }()
	if again, _ := os.ReadFile(path); string(again) != string(b) {
		t.Errorf("the second start changed the token")
	}
}

// TestServeTokenDiskFull: a first start that cannot write the token (here
// a file size limit of 0, as on a full disk) fails and leaves no token
// file; the next start makes a good one and requires it.
func TestServeTokenDiskFull(t *testing.T) {
	e := newEnv(t)
	addr := freeAddr(t)
	c := e.cmd()
	c.Path, c.Args = "/bin/sh", []string{"sh", "-c", `ulimit -f 0 && exec "$0" serve --listen "$1"`, weftBin, addr}
	var errb strings.Builder
	c.Stderr = &errb
	if err := c.Run(); err == nil || !strings.Contains(errb.String(), "token file") {
		t.Fatalf("a start that cannot write the token: %v\n%s", err, errb.String())
	}
	if entries, _ := os.ReadDir(e.stateDir()); len(entries) != 0 {
		t.Fatalf("the failed start left %v in the state directory", entries)
	}
	srv := e.serve(addr)
	defer func() { srv.Process.Signal(os.Interrupt); srv.Wait() }()
	status, _ := post(t, "http://"+addr+"/rpc", "", `{"jsonrpc":"2.0","id":1,"method":"session/list","params":{}}`)
	if status != 401 {
		t.Fatalf("the next start without a token: %d, want 401", status)
	}
	if status, body := post(t, "http://"+addr+"/rpc", e.token(), `{"jsonrpc":"2.0","id":1,"method":"session/list","params":{}}`); status != 200 {
		t.Fatalf("the next start with its token: %d %s", status, body)
	}
}

// post sends one JSON-RPC request body, with a bearer token when tok is
// not empty, and returns the status and body.
func post(t *testing.T, url, tok, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestServeInsecureNoAuth: --insecure-no-auth serves a loopback address
// without a token (and checks Host), and is refused on any other.
func TestServeInsecureNoAuth(t *testing.T) {
	e := newEnv(t)
	addr := freeAddr(t)
	srv := e.serve(addr, "--insecure-no-auth")
	defer func() { srv.Process.Signal(os.Interrupt); srv.Wait() }()
	call := func(host string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/rpc", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"session/list","params":{}}`))
		req.Host = host
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if status, body := call(addr); status != 200 || !strings.Contains(body, `"result"`) {
		t.Fatalf("without a token: %d %s", status, body)
	}
	if status, body := call("evil.example:7878"); status != 403 || !strings.Contains(body, `"kind":"unauthorized"`) {
		t.Fatalf("rebound Host: %d %s", status, body)
	}
	if _, err := os.Stat(filepath.Join(e.stateDir(), "token")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("--insecure-no-auth made a token file: %v", err)
	}
	stderr, code := e.refused(nil, "serve", "--listen", "0.0.0.0:0", "--insecure-no-auth")
	if code != 2 || !strings.Contains(stderr, "--insecure-no-auth is allowed only on a loopback address") {
		t.Fatalf("--insecure-no-auth on 0.0.0.0: %d %s", code, stderr)
	}
}

// TestServeLoopbackChecksHost: a loopback host with a token refuses a
// request whose Host is a foreign name, even with the right token.
func TestServeLoopbackChecksHost(t *testing.T) {
	e := newEnv(t)
	addr := freeAddr(t)
	srv := e.serve(addr)
	defer func() { srv.Process.Signal(os.Interrupt); srv.Wait() }()
	for _, tt := range []struct {
		host   string
		status int
	}{{addr, 200}, {"evil.example:7878", 403}} {
		req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/rpc", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"session/list","params":{}}`))
		req.Host = tt.host
		req.Header.Set("Authorization", "Bearer "+e.token())
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tt.status {
			t.Errorf("Host %s: %d, want %d", tt.host, resp.StatusCode, tt.status)
		}
	}
	if status, _ := httpGet(t, "http://"+addr+"/healthz", "evil.example"); status != 403 {
		t.Errorf("healthz with a foreign Host: %d", status)
	}
}

func httpGet(t *testing.T, url, host string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req.Host = host
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestSecondHostRefused: while `weft serve` serves a store with a
// background process running, a second `weft serve` and a `weft rpc` on
// the same store exit at once naming the first host, and the process
// lives on.
func TestSecondHostRefused(t *testing.T) {
	e := newEnv(t)
	addr := freeAddr(t)
	srv := e.serve(addr)
	defer func() { srv.Process.Signal(os.Interrupt); srv.Wait() }()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, addr, client.Options{Token: e.token()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, err := c.CreateSession(ctx, api.CreateSessionParams{Mounts: mountsFor(e)})
	if err != nil {
		t.Fatal(err)
	}
	p, err := c.StartProcess(ctx, api.ProcessStartParams{SessionID: s.ID, Command: "sleep 300"})
	if err != nil {
		t.Fatal(err)
	}
	if !poll(10*time.Second, func() bool { return len(markedProcesses(p.ID)) > 0 }) {
		t.Fatal("the background process did not start")
	}
	want := fmt.Sprintf("host pid %d (weft serve) already serves this store: %s", srv.Process.Pid, e.store)
	addr2 := freeAddr(t)
	for _, args := range [][]string{{"serve", "--listen", addr2}, {"rpc"}} {
		stderr, code := e.refused(nil, args...)
		if code == 0 || !strings.Contains(stderr, want) {
			t.Fatalf("weft %s: exit %d\n%s\nwant %q", args[0], code, stderr, want)
		}
	}
	if resp, err := http.Get("http://" + addr2 + "/healthz"); err == nil {
		resp.Body.Close()
		t.Fatalf("the second host listened on %s", addr2)
	}
	// A one-shot run in its own process refuses while a host serves the
	// store, and touches nothing: no reconciliation under the host.
	before, err := c.GetSession(ctx, api.SessionGetParams{SessionID: s.ID})
	if err != nil {
		t.Fatal(err)
	}
	stderr, code := e.refused(nil, "run", "--local", "-s", s.ID, "-p", "hi")
	if code == 0 || !strings.Contains(stderr, want) || !strings.Contains(stderr, "without --local") {
		t.Fatalf("weft run --local: exit %d\n%s\nwant %q and a hint", code, stderr, want)
	}
	if after, err := c.GetSession(ctx, api.SessionGetParams{SessionID: s.ID}); err != nil || after.LastSeq != before.LastSeq {
		t.Fatalf("the refused local run wrote to the session: %+v, %v", after, err)
	}
	got, err := c.GetProcess(ctx, api.ProcessIDParams{ID: p.ID})
	if err != nil || got.Status != record.ProcessRunning {
		t.Fatalf("the first host's process after the refusals: %+v %v", got, err)
	}
	if len(markedProcesses(p.ID)) == 0 {
		t.Fatal("the first host's process was killed")
	}
}

// An interrupt ends `weft serve` promptly even while an SSE client (and a
// WebSocket subscriber) is connected: the listener stops first and the
// streams end with the RPC server, instead of holding the shutdown for
// its whole timeout.
func TestServeShutdownWithOpenStreams(t *testing.T) {
	e := newEnv(t)
	addr := freeAddr(t)
	srv := e.serve(addr)
	tok := e.token()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, addr, client.Options{Token: tok})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, err := c.CreateSession(ctx, api.CreateSessionParams{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Subscribe(ctx, api.SubscribeParams{SessionID: s.ID}); err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/v1/sessions/"+s.ID+"/events", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("SSE: %s", resp.Status)
	}
	srv.Process.Signal(os.Interrupt)
	exited := make(chan error, 1)
	go func() { exited <- srv.Wait() }()
	select {
	case <-exited:
	case <-time.After(5 * time.Second):
		srv.Process.Kill()
		<-exited
		t.Fatal("weft serve took more than 5 s to shut down with an SSE client connected (its shutdown timeout is 10 s)")
	}
	if _, err := io.Copy(io.Discard, resp.Body); err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Logf("SSE body ended with %v", err)
	}
}
