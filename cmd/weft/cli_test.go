package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"weft.dev/weft/api"
	"weft.dev/weft/event"
)

// TestErrorsSayWhatToDo: errors name the flags the user typed, a host
// that is down in one line with what to do, a broken config file with
// its line and column, and a key the host lacks with the fix.
func TestErrorsSayWhatToDo(t *testing.T) {
	e := newEnv(t)
	down := freeAddr(t)
	_, stderr, code := e.weft("", "--host", down, "attach", "ses_x")
	if code != 1 || !strings.Contains(stderr, "no weft host at "+down+" (--host): start `weft serve`") || strings.Count(stderr, ":") > 6 {
		t.Errorf("attach without a host: %d %s", code, stderr)
	}
	_, stderr, code = e.weft("", "--host", down, "ps")
	if code != 1 || !strings.Contains(stderr, "no weft host at "+down+" (--host): start `weft serve`") || strings.Count(stderr, ":") > 6 {
		t.Errorf("ps without a host: %d %s", code, stderr)
	}
	_, stderr, code = e.weft("", "--host", down, "approve", "apr_x")
	if code != 1 || !strings.Contains(stderr, "answered through `weft serve`") {
		t.Errorf("approve without a host: %d %s", code, stderr)
	}
	_, stderr, code = e.weft("", "run", "--max-steps=-1", "-m", "scripted:x", "-p", "x")
	if code != 2 || !strings.Contains(stderr, "--max-steps -1") {
		t.Errorf("negative --max-steps: %d %s", code, stderr)
	}

	// A broken config file.
	cfg := filepath.Join(e.dir, "config", "weft", "config.json")
	os.MkdirAll(filepath.Dir(cfg), 0o700)
	os.WriteFile(cfg, []byte("{\n  \"maxSteps\": 5,\n"), 0o600)
	_, stderr, code = e.weft("", "sessions")
	if code != 1 || !strings.Contains(stderr, cfg+":3:1:") {
		t.Errorf("a truncated config: %d %s", code, stderr)
	}
	os.WriteFile(cfg, []byte("{\"maxStep\": 5}"), 0o600)
	_, stderr, _ = e.weft("", "sessions")
	if !strings.Contains(stderr, cfg+`:1:2: unknown key "maxStep"`) {
		t.Errorf("an unknown key: %s", stderr)
	}
	// The host's default model needs a key it lacks.
	os.WriteFile(cfg, []byte(`{"defaultModel": "openai:gpt-x"}`), 0o600)

	// Through a host started in another directory.
	hostDir := filepath.Join(e.dir, "hostdir")
	os.Mkdir(hostDir, 0o755)
	addr := freeAddr(t)
	srv := e.serveIn(hostDir, addr)
	defer func() { srv.Process.Signal(os.Interrupt); srv.Wait() }()
	c := e.cmd("--host", addr, "run", "-m", "anthropic:claude-x", "-p", "x")
	c.Env = append(c.Env, "ANTHROPIC_API_KEY=sk-test")
	var errb strings.Builder
	c.Stderr = &errb
	if err := c.Run(); err == nil {
		t.Fatal("a run with a key the host lacks succeeded")
	}
	if want := "the host (started in " + hostDir + ") lacks ANTHROPIC_API_KEY"; !strings.Contains(errb.String(), want) ||
		!strings.Contains(errb.String(), "restart `weft serve`") {
		t.Errorf("missing key on the host: %s", errb.String())
	}
	before, _, _ := e.weft("", "sessions", "--json")
	_, stderr, code = e.weft("", "--host", addr, "run", "-p", "x")
	if want := "weft: the host (started in " + hostDir + ") lacks OPENAI_API_KEY: restart `weft serve` with it (OPENAI_API_KEY=… weft serve)\n"; code != 1 || stderr != want {
		t.Errorf("the host's default model lacks its key: %d %q", code, stderr)
	}
	if after, _, _ := e.weft("", "sessions", "--json"); after != before {
		t.Errorf("a refused run left a session: %q", after)
	}

	slow := e.script("slow.json", `{"loop":true,"steps":[{"text":"`+strings.Repeat("w ", 3000)+`","delayMs":10}]}`)
	out, stderr, code := e.weft("", "--host", addr, "run", "--detach", "-m", "scripted:"+slow, "-p", "x")
	if code != 0 {
		t.Fatalf("detach: %d %s", code, stderr)
	}
	ids := strings.Fields(out)
	_, stderr, _ = e.weft("", "--host", addr, "run", "-s", ids[0], "-p", "more")
	if !strings.Contains(stderr, "--busy queue") || strings.Contains(stderr, "with busy queue") {
		t.Errorf("a busy session: %s", stderr)
	}
	e.weft("", "--host", addr, "cancel", ids[1])
	docs := filepath.Join(e.dir, "docs")
	os.Mkdir(docs, 0o755)
	if _, stderr, code := e.weft("", "--host", addr, "mount", ids[0], docs); code != 0 {
		t.Fatalf("mount: %d %s", code, stderr)
	}
	_, stderr, _ = e.weft("", "--host", addr, "mount", ids[0], docs)
	if !strings.Contains(stderr, "--replace") || strings.Contains(stderr, "replace: true") {
		t.Errorf("mount twice: %s", stderr)
	}
	_, stderr, _ = e.weft("", "--host", addr, "unmount", ids[0], "work")
	if !strings.Contains(stderr, "--new-default") || strings.Contains(stderr, "newDefaultMountId") {
		t.Errorf("unmount the default: %s", stderr)
	}

	// sessions rm through the host.
	out, stderr, code = e.weft("", "--host", addr, "sessions", "rm", ids[0])
	if code != 0 || !strings.Contains(out, "deleted "+ids[0]) {
		t.Fatalf("sessions rm: %d %q %s", code, out, stderr)
	}
	_, stderr, code = e.weft("", "--host", addr, "sessions", "rm", "ses_nope")
	if code != 1 || !strings.Contains(stderr, "no session ses_nope") {
		t.Errorf("sessions rm of an unknown session: %d %s", code, stderr)
	}
	if out, _, _ := e.weft("", "sessions"); strings.Contains(out, ids[0]) {
		t.Errorf("a deleted session is listed: %q", out)
	}
}

// TestSessionsRmLocal: without a host, `weft sessions rm` deletes through
// a host in its own process.
func TestSessionsRmLocal(t *testing.T) {
	e := newEnv(t)
	s := e.script("s.json", `{"steps":[{"text":"hi"}]}`)
	if _, stderr, code := e.weft("", "run", "-m", "scripted:"+s, "-p", "x"); code != 0 {
		t.Fatal(stderr)
	}
	sid := e.onlySession()
	out, stderr, code := e.weft("", "sessions", "rm", sid)
	if code != 0 || !strings.Contains(out, "deleted "+sid) {
		t.Fatalf("sessions rm: %d %q %s", code, out, stderr)
	}
	if out, _, _ := e.weft("", "sessions", "--json"); out != "" {
		t.Fatalf("sessions after rm: %q", out)
	}
}

// TestSessionsRename: `weft sessions rename` gives a session a new title
// through a host in this process and through `weft serve`; an unknown
// session and a title over the limit are refused, saying so.
func TestSessionsRename(t *testing.T) {
	e := newEnv(t)
	s := e.script("s.json", `{"steps":[{"text":"hi"}]}`)
	if _, stderr, code := e.weft("", "run", "-m", "scripted:"+s, "-p", "x"); code != 0 {
		t.Fatal(stderr)
	}
	sid := e.onlySession()
	out, stderr, code := e.weft("", "sessions", "rename", sid, "my notes")
	if code != 0 || out != sid+"  my notes\n" {
		t.Fatalf("rename: %d %q %s", code, out, stderr)
	}
	if out, _, _ := e.weft("", "sessions"); !strings.Contains(out, "my notes") {
		t.Errorf("sessions after the rename: %q", out)
	}

	addr := freeAddr(t)
	srv := e.serve(addr)
	defer func() { srv.Process.Signal(os.Interrupt); srv.Wait() }()
	if out, stderr, code := e.weft("", "--host", addr, "sessions", "rename", sid, "through the host"); code != 0 || !strings.Contains(out, "through the host") {
		t.Fatalf("rename through the host: %d %q %s", code, out, stderr)
	}
	_, stderr, code = e.weft("", "--host", addr, "sessions", "rename", "ses_nope", "x")
	if code != 1 || !strings.Contains(stderr, "no session ses_nope") {
		t.Errorf("rename an unknown session: %d %s", code, stderr)
	}
	_, stderr, code = e.weft("", "--host", addr, "sessions", "rename", sid, strings.Repeat("t", 2000))
	if code != 1 || !strings.Contains(stderr, "the title is too long: at most 1024 bytes") {
		t.Errorf("a long title: %d %s", code, stderr)
	}
	evs := e.events(sid)
	var titles []string
	for _, ev := range evs {
		if ev.Type == event.SessionUpdated {
			var d event.SessionUpdatedData
			ev.Decode(&d)
			titles = append(titles, *d.Title)
		}
	}
	if strings.Join(titles, "|") != "my notes|through the host" {
		t.Errorf("session.updated titles: %q", titles)
	}
}
func TestWithFlags(t *testing.T) {
	cases := []struct{ cmd, msg, want string }{
		{"mount", "session s already has mount docs (replace it with --replace, or replace: true)", "session s already has mount docs (replace it with --replace)"},
		{"unmount", "mount work is the default mount: name the new default (--new-default, or newDefaultMountId)", "mount work is the default mount: name the new default (--new-default)"},
		{"run", "session s is busy with run r (start with busy queue, interrupt or steer)", "session s is busy with run r (start with --busy queue, interrupt or steer)"},
		{"run", "nothing to map", "nothing to map"},
	}
	for _, c := range cases {
		err := withFlags(c.cmd, api.Errorf(api.KindInvalidParams, "%s", c.msg))
		var ae *api.Error
		if !errors.As(err, &ae) || ae.Message != c.want {
			t.Errorf("%s: %q, want %q", c.cmd, err, c.want)
		}
	}
	plain := errors.New("busy queue")
	if withFlags("run", plain) != plain {
		t.Error("an error that is not the host's was changed")
	}
}

// TestNoCommand: weft with no command (and the terminal UI's flags, as
// the README writes them) without a terminal prints a short usage and
// exits 2; an unknown flag is still refused.
func TestNoCommand(t *testing.T) {
	e := newEnv(t)
	for _, args := range [][]string{nil, {"-m", "scripted:examples/quickstart.json"}, {"-c"}} {
		out, stderr, code := e.weft("", args...)
		if code != exitUsage || out != "" || !strings.Contains(stderr, "weft [-m PROVIDER:MODEL]") || !strings.Contains(stderr, "weft run -p PROMPT") {
			t.Errorf("weft %q: %d %q %q", args, code, out, stderr)
		}
	}
	if _, stderr, code := e.weft("", "chat", "-m", "scripted:x"); code != exitUsage || !strings.Contains(stderr, "needs a terminal") {
		t.Errorf("weft chat without a terminal: %d %q", code, stderr)
	}
	if _, stderr, code := e.weft("", "--bogus"); code != exitUsage || !strings.Contains(stderr, "unknown flag --bogus") {
		t.Errorf("weft --bogus: %d %q", code, stderr)
	}
}
