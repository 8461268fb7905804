package main

import (
	"encoding/json"
	"errors"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// hostFiles lists the host files of the test's state directory.
func (e *testEnv) hostFiles() []string {
	e.t.Helper()
	m, err := filepath.Glob(filepath.Join(e.stateDir(), "hosts", "*.json"))
	if err != nil {
		e.t.Fatal(err)
	}
	return m
}

// stop interrupts a `weft serve` and waits for it to exit.
func stop(t *testing.T, c interface {
	Signal(os.Signal) error
	Wait() (*os.ProcessState, error)
}) {
	t.Helper()
	c.Signal(os.Interrupt)
	c.Wait()
}

// TestClientFindsHost: `weft serve` on a random port records its address
// in the state directory (0600 in a 0700 directory, naming the token's
// path, never the token), and every client command finds it without
// --host; with two hosts, a client asks which, listing them; a dead
// host's file is ignored and removed; a clean exit removes the file; a
// file another user could have written is not trusted; and "no host"
// names --host, WEFT_HOST and the state directory.
func TestClientFindsHost(t *testing.T) {
	e := newEnv(t)
	script := e.script("s.json", `{"steps":[{"text":"hello from the host"}]}`)

	// No host at all: the message says how to point at one.
	_, stderr, code := e.weft("", "attach", "ses_x")
	if code != 1 || !strings.Contains(stderr, "--host") || !strings.Contains(stderr, "WEFT_HOST") || !strings.Contains(stderr, filepath.Join(e.stateDir(), "hosts")) {
		t.Errorf("attach without a host: %d %s", code, stderr)
	}

	addr := freeAddr(t)
	srv := e.serve(addr)
	t.Cleanup(func() { srv.Process.Kill() }) // a failed test leaves no host behind
	files := e.hostFiles()
	if len(files) != 1 {
		t.Fatalf("host files %v, want one", files)
	}
	fi, err := os.Stat(files[0])
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("host file mode %v, %v; want 0600", fi.Mode(), err)
	}
	if di, err := os.Stat(filepath.Dir(files[0])); err != nil || di.Mode().Perm() != 0o700 {
		t.Fatalf("hosts directory mode %v, %v; want 0700", di.Mode(), err)
	}
	b, _ := os.ReadFile(files[0])
	if strings.Contains(string(b), e.token()) {
		t.Fatalf("the host file holds the token: %s", b)
	}
	var rec struct {
		Addr, TokenFile string
		PID             int
	}
	if err := json.Unmarshal(b, &rec); err != nil || rec.Addr != addr || rec.TokenFile != filepath.Join(e.stateDir(), "token") || rec.PID != srv.Process.Pid {
		t.Fatalf("host file %s: %+v %v", b, rec, err)
	}

	// Every client command finds it.
	out, stderr, code := e.weft("", "run", "--detach", "-m", "scripted:"+script, "-p", "hi")
	if code != 0 {
		t.Fatalf("run --detach: %d %s", code, stderr)
	}
	session, run := strings.Fields(out)[0], strings.Fields(out)[1]
	for _, args := range [][]string{
		{"attach", run},
		{"status", run},
		{"ps", "-s", session},
		{"mounts", session},
		{"approvals"},
	} {
		if _, stderr, code := e.weft("", args...); code != 0 {
			t.Errorf("weft %s: %d %s", strings.Join(args, " "), code, stderr)
		}
	}
	if _, stderr, _ := e.weft("", "approve", "apr_x"); strings.Contains(stderr, "no weft host") {
		t.Errorf("approve: %s", stderr)
	}

	// A second host: a client asks which, listing both.
	addr2 := freeAddr(t)
	store2 := filepath.Join(e.dir, "second.db")
	c2 := e.cmd("serve", "--listen", addr2)
	c2.Env = append(c2.Env, "WEFT_STORE="+store2)
	c2.Dir = e.work
	if err := c2.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c2.Process.Kill() })
	if !poll(10*time.Second, func() bool { return len(e.hostFiles()) == 2 }) {
		c2.Process.Kill()
		c2.Wait()
		t.Fatalf("the second host wrote no file: %v", e.hostFiles())
	}
	_, stderr, code = e.weft("", "ps", "-s", session)
	if code == 0 || !strings.Contains(stderr, addr) || !strings.Contains(stderr, addr2) || !strings.Contains(stderr, "--host") || !strings.Contains(stderr, "WEFT_HOST") {
		t.Errorf("ps with two hosts: %d %s", code, stderr)
	}
	c := e.cmd("ps", "-s", session)
	c.Env = append(c.Env, "WEFT_HOST="+addr)
	if out, err := c.CombinedOutput(); err != nil {
		t.Errorf("ps with WEFT_HOST: %v %s", err, out)
	}

	// A host killed without a clean exit: its file is ignored and removed.
	c2.Process.Kill()
	c2.Wait()
	if _, stderr, code := e.weft("", "ps", "-s", session); code != 0 {
		t.Errorf("ps with a dead host's file: %d %s", code, stderr)
	}
	if files := e.hostFiles(); len(files) != 1 {
		t.Errorf("host files after a dead host: %v", files)
	}

	// A host file that another user could have written is not trusted.
	// (It names a live process and an address that accepts: trusted, it
	// would be a second host.)
	trap, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer trap.Close()
	forged := filepath.Join(e.stateDir(), "hosts", "1.json")
	os.WriteFile(forged, []byte(`{"pid":`+strconv.Itoa(os.Getpid())+`,"addr":"`+trap.Addr().String()+`"}`), 0o666)
	os.Chmod(forged, 0o666)
	if _, stderr, code := e.weft("", "ps", "-s", session); code != 0 {
		t.Errorf("ps with a forged host file: %d %s", code, stderr)
	}
	os.Remove(forged)

	// A clean exit removes the file.
	stop(t, srv.Process)
	if files := e.hostFiles(); len(files) != 0 {
		t.Errorf("host files after a clean exit: %v", files)
	}
}

// TestServeBindsFirst: a `weft serve` on a busy port fails at once,
// without creating the store or recovering anything, and says what to
// do; --addr and --port suggest --listen.
func TestServeBindsFirst(t *testing.T) {
	e := newEnv(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	stderr, code := e.refused(nil, "serve", "--listen", ln.Addr().String())
	if code == 0 || !strings.Contains(stderr, "listen on "+ln.Addr().String()) {
		t.Errorf("serve on a busy port: %d %s", code, stderr)
	}
	if _, err := os.Stat(e.store); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("serve on a busy port made the store: %v", err)
	}
	for _, flag := range []string{"--addr", "--port", "--bind"} {
		_, stderr, code := e.weft("", "serve", flag, "7879")
		if code != 2 || !strings.Contains(stderr, "--listen") {
			t.Errorf("serve %s: %d %s", flag, code, stderr)
		}
	}
}

// TestClientFindsHostWithoutTokenFile: a host started with
// --insecure-no-auth, or with WEFT_TOKEN, makes no token file; a client
// that finds it talks to the first without a token, and for the second
// says to set WEFT_TOKEN rather than that no host runs.
func TestClientFindsHostWithoutTokenFile(t *testing.T) {
	e := newEnv(t)
	srv := e.serve(freeAddr(t), "--insecure-no-auth")
	t.Cleanup(func() { srv.Process.Kill() })
	if _, stderr, code := e.weft("", "ps"); code != 0 {
		t.Errorf("ps with an --insecure-no-auth host: %d %s", code, stderr)
	}
	stop(t, srv.Process)

	e = newEnv(t)
	addr := freeAddr(t)
	c := e.cmd("serve", "--listen", addr)
	c.Env = append(c.Env, "WEFT_TOKEN=sesame")
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	defer stop(t, c.Process)
	if !poll(10*time.Second, func() bool { return len(e.hostFiles()) == 1 }) {
		t.Fatal("no host file")
	}
	if _, stderr, code := e.weft("", "ps"); code == 0 || !strings.Contains(stderr, "WEFT_TOKEN") || !strings.Contains(stderr, addr) {
		t.Errorf("ps with a WEFT_TOKEN host: %d %s", code, stderr)
	}
	// One-call commands (one HTTP POST each) say a refused token as the
	// WebSocket ones do, and work with the right one.
	for _, tc := range []struct{ token, want string }{{"not-sesame", "refused this token"}, {"sesame", ""}} {
		for _, args := range [][]string{{"ps"}, {"approvals"}, {"status", "run_x"}} {
			c := e.cmd(args...)
			c.Env = append(c.Env, "WEFT_TOKEN="+tc.token)
			var stderr strings.Builder
			c.Stderr = &stderr
			err := c.Run()
			switch {
			case tc.want != "" && (err == nil || !strings.Contains(stderr.String(), tc.want) || !strings.Contains(stderr.String(), addr)):
				t.Errorf("weft %s with a wrong token: %v %s", strings.Join(args, " "), err, stderr.String())
			case tc.want == "" && args[0] != "status" && err != nil:
				t.Errorf("weft %s with the token: %v %s", strings.Join(args, " "), err, stderr.String())
			case tc.want == "" && args[0] == "status" && !strings.Contains(stderr.String(), "run_x"):
				t.Errorf("weft status of no run: %v %s", err, stderr.String())
			}
		}
	}
}
