package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"weft.dev/weft/agent"
	"weft.dev/weft/event"
	"weft.dev/weft/store/record"
)

// weftBin is the weft binary built once for the end-to-end tests.
var weftBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "weft-e2e")
	if err != nil {
		panic(err)
	}
	weftBin = filepath.Join(dir, "weft")
	// The real thing: one static binary, as users build it.
	build := exec.Command("go", "build", "-o", weftBin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := build.CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "build weft: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	}
	os.Exit(code)
}

// testEnv is a sandbox for one test: a store, a work dir, a config home.
type testEnv struct {
	t     testing.TB
	dir   string
	work  string
	store string
	// env is added to the environment of every command (WEFT_TOKEN for
	// hosts that share one).
	env []string
}

func newEnv(t testing.TB) *testEnv {
	t.Helper()
	dir := t.TempDir()
	e := &testEnv{t: t, dir: dir, work: filepath.Join(dir, "work"), store: filepath.Join(dir, "weft.db")}
	if err := os.Mkdir(e.work, 0o755); err != nil {
		t.Fatal(err)
	}
	return e
}

func (e *testEnv) script(name, body string) string {
	p := filepath.Join(e.dir, name)
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		e.t.Fatal(err)
	}
	return p
}

func (e *testEnv) cmd(args ...string) *exec.Cmd {
	c := exec.Command(weftBin, args...)
	c.Dir = e.work
	c.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + e.dir, "XDG_CONFIG_HOME=" + filepath.Join(e.dir, "config"), "WEFT_STORE=" + e.store}
	c.Env = append(c.Env, e.env...)
	return c
}

// weft runs weft to completion and returns stdout, stderr and the exit code.
func (e *testEnv) weft(stdin string, args ...string) (string, string, int) {
	e.t.Helper()
	c := e.cmd(args...)
	c.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	c.Stdout, c.Stderr = &out, &errb
	err := c.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		e.t.Fatal(err)
	}
	return out.String(), errb.String(), code
}

// events reads a session's log through `weft events --json`.
func (e *testEnv) events(session string) []event.Event {
	e.t.Helper()
	out, stderr, code := e.weft("", "events", session, "--json")
	if code != 0 {
		e.t.Fatalf("weft events: %d %s", code, stderr)
	}
	var evs []event.Event
	for line := range strings.Lines(out) {
		var ev event.Event
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			e.t.Fatalf("bad event line %q: %v", line, err)
		}
		evs = append(evs, ev)
	}
	return evs
}

func (e *testEnv) onlySession() string {
	e.t.Helper()
	out, _, _ := e.weft("", "sessions", "--json")
	var s record.Session
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 1 || json.Unmarshal([]byte(lines[0]), &s) != nil {
		e.t.Fatalf("want one session, got %q", out)
	}
	return s.ID
}

// poll checks cond every 10ms until it holds, and reports whether it did
// within limit. It is for conditions outside the test binary (processes,
// files, a server coming up) that nothing signals.
func poll(limit time.Duration, cond func() bool) bool {
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	deadline := time.NewTimer(limit)
	defer deadline.Stop()
	for !cond() {
		select {
		case <-tick.C:
		case <-deadline.C:
			return cond()
		}
	}
	return true
}

// startStreaming starts c, a `weft run` without --json, and returns once
// the run streams (its first byte is on stdout): the session exists and
// this process holds it. The rest of stdout is left in the pipe.
func startStreaming(t *testing.T, c *exec.Cmd) io.Reader {
	t.Helper()
	out, err := c.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(out, make([]byte, 1)); err != nil {
		c.Process.Kill()
		c.Wait()
		t.Fatalf("weft run printed nothing: %v", err)
	}
	return out
}

func checkContiguous(t testing.TB, evs []event.Event) {
	t.Helper()
	for i, ev := range evs {
		if ev.Seq != int64(i+1) {
			t.Fatalf("event %d has seq %d: the log has a gap", i, ev.Seq)
		}
	}
}

const quickstart = `{"loop":true,"steps":[
 {"text":"Writing.","toolCalls":[{"name":"write_file","arguments":{"path":"out.txt","content":"{{input}}"}}]},
 {"text":"Wrote it."}]}`

func TestRunQuickstart(t *testing.T) {
	e := newEnv(t)
	s := e.script("s.json", quickstart)
	out, stderr, code := e.weft("", "run", "-m", "scripted:"+s, "-p", "hello there")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if out != "Writing.\nWrote it.\n" {
		t.Fatalf("stdout %q", out)
	}
	if !strings.Contains(stderr, "→ write_file") || !strings.Contains(stderr, "← write_file ok") {
		t.Fatalf("tool calls not shown on stderr: %s", stderr)
	}
	b, _ := os.ReadFile(filepath.Join(e.work, "out.txt"))
	if string(b) != "hello there" {
		t.Fatalf("file %q", b)
	}
	sid := e.onlySession()
	evs := e.events(sid)
	checkContiguous(t, evs)
	if evs[len(evs)-1].Type != event.RunCompleted {
		t.Fatalf("last event %s", evs[len(evs)-1].Type)
	}
	// -s continues with the whole transcript: the scripted model counts
	// the assistant messages it is sent, so step 3 is step 0 again.
	out, stderr, code = e.weft("second", "run", "-s", sid)
	if code != 0 || out != "Writing.\nWrote it.\n" {
		t.Fatalf("continue: %d %q %s", code, out, stderr)
	}
	b, _ = os.ReadFile(filepath.Join(e.work, "out.txt"))
	if string(b) != "second" {
		t.Fatalf("prompt from stdin not used: %q", b)
	}
	// --json prints the events exactly as stored.
	out, _, code = e.weft("", "run", "-s", sid, "--json", "-p", "third")
	if code != 0 {
		t.Fatal(code)
	}
	all := e.events(sid)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	tail := all[len(all)-len(lines):]
	for i, l := range lines {
		want, _ := json.Marshal(tail[i])
		if l != string(want) {
			t.Fatalf("--json line %d\n got %s\nwant %s", i, l, want)
		}
	}
}

func TestRunExitCodes(t *testing.T) {
	e := newEnv(t)
	fail := e.script("fail.json", `{"steps":[{"error":{"kind":"auth","status":401,"message":"bad key"}}]}`)
	_, stderr, code := e.weft("", "run", "-m", "scripted:"+fail, "-p", "x")
	if code != 1 || !strings.Contains(stderr, "failed") {
		t.Fatalf("failed run: exit %d %s", code, stderr)
	}
	slow := e.script("slow.json", `{"steps":[{"text":"`+strings.Repeat("w ", 500)+`","delayMs":10}]}`)
	c := e.cmd("run", "-m", "scripted:"+slow, "-p", "x")
	var errb bytes.Buffer
	c.Stderr = &errb
	out := startStreaming(t, c) // the run has 5s left
	c.Process.Signal(os.Interrupt)
	io.Copy(io.Discard, out)
	err := c.Wait()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 130 {
		t.Fatalf("interrupted run: %v %s", err, errb.String())
	}
	evs := e.events(e.latestSession())
	if evs[len(evs)-1].Type != event.RunCancelled {
		t.Fatalf("Ctrl-C did not record run.cancelled: last is %s", evs[len(evs)-1].Type)
	}
}

func (e *testEnv) latestSession() string {
	out, _, _ := e.weft("", "sessions", "--json")
	var s record.Session
	json.Unmarshal([]byte(strings.SplitN(out, "\n", 2)[0]), &s)
	return s.ID
}

func TestBadInput(t *testing.T) {
	e := newEnv(t)
	bad := e.script("bad.json", `{"steps":[{"toolCalls":[{"arguments":{}}]}]}`)
	notDB := filepath.Join(e.dir, "not.db")
	os.WriteFile(notDB, bytes.Repeat([]byte("garbage!"), 1000), 0o644)
	cases := []struct {
		name  string
		args  []string
		env   []string
		code  int
		wants []string
	}{
		{"empty prompt", []string{"run", "-m", "scripted:" + bad, "-p", " "}, nil, 2, []string{"empty prompt"}},
		{"malformed script", []string{"run", "-m", "scripted:" + bad, "-p", "x"}, nil, 1, []string{"bad.json", "steps[0].toolCalls[0].name"}},
		{"unknown provider", []string{"run", "-m", "nope:x", "-p", "x"}, nil, 1, []string{"unknown provider", "anthropic, gemini, openai, openai-chat, scripted"}},
		{"missing key", []string{"run", "-m", "anthropic:claude", "-p", "x"}, nil, 1, []string{"ANTHROPIC_API_KEY"}},
		{"missing openai key", []string{"run", "-m", "openai:gpt", "-p", "x"}, nil, 1, []string{"OPENAI_API_KEY"}},
		{"no model", []string{"run", "-p", "x"}, nil, 1, []string{"no model configured", "WEFT_MODEL"}},
		{"not a database", []string{"--store", notDB, "sessions"}, nil, 1, []string{notDB}},
		{"store is a directory", []string{"--store", e.dir, "sessions"}, nil, 1, []string{e.dir}},
		{"unknown session", []string{"run", "-s", "ses_nope", "-m", "scripted:" + bad, "-p", "x"}, nil, 1, []string{"ses_nope", "not found"}},
		{"events cursor ahead", []string{"events", "ses_nope"}, nil, 1, []string{"ses_nope"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, stderr, code := e.weft("", c.args...)
			if code != c.code {
				t.Fatalf("exit %d, want %d: %s", code, c.code, stderr)
			}
			for _, w := range c.wants {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr %q lacks %q", stderr, w)
				}
			}
		})
	}
}

func TestSessionInUse(t *testing.T) {
	e := newEnv(t)
	slow := e.script("slow.json", `{"loop":true,"steps":[{"text":"`+strings.Repeat("w ", 300)+`","delayMs":10}]}`)
	c := e.cmd("run", "-m", "scripted:"+slow, "-p", "x")
	startStreaming(t, c) // the run has 3s left
	defer c.Wait()
	defer c.Process.Kill()
	sid := e.latestSession()
	if sid == "" {
		t.Fatal("a streaming run has no session")
	}
	_, stderr, code := e.weft("", "run", "-s", sid, "-p", "y")
	if code != 1 || !strings.Contains(stderr, "in use by another weft process") {
		t.Fatalf("second writer: %d %s", code, stderr)
	}
}

// TestFollowSeesDeltasLive: `weft events --follow` in another process sees
// text deltas while the run is still streaming.
func TestFollowSeesDeltasLive(t *testing.T) {
	e := newEnv(t)
	slow := e.script("slow.json", `{"steps":[{"text":"`+strings.Repeat("word ", 150)+`","delayMs":10}]}`)
	run := e.cmd("run", "-m", "scripted:"+slow, "-p", "x")
	runOut := startStreaming(t, run) // the run has 1.5s left
	// The run's stdout ends when its process does.
	ended := make(chan struct{})
	go func() {
		io.Copy(io.Discard, runOut)
		close(ended)
	}()
	defer run.Wait()
	defer func() { <-ended }()
	sid := e.latestSession()
	f := e.cmd("events", sid, "--follow", "--json")
	out, _ := f.StdoutPipe()
	if err := f.Start(); err != nil {
		t.Fatal(err)
	}
	defer f.Wait()
	defer f.Process.Signal(os.Interrupt)
	sc := bufio.NewScanner(out)
	deltasBeforeEnd := 0
	for sc.Scan() {
		var ev event.Event
		json.Unmarshal(sc.Bytes(), &ev)
		if ev.Type == event.MessageDelta {
			select {
			case <-ended:
			default:
				deltasBeforeEnd++
			}
		}
		if ev.Type == event.RunCompleted {
			break
		}
	}
	if deltasBeforeEnd < 3 {
		t.Fatalf("only %d deltas arrived while the run was going", deltasBeforeEnd)
	}
}

// killDuring starts `weft run --json`, reads the events it prints (each
// committed before it is printed), SIGKILLs it when stop says so, and
// returns what it had printed.
func (e *testEnv) killDuring(args []string, stop func(event.Event) bool) []event.Event {
	e.t.Helper()
	c := e.cmd(args...)
	out, _ := c.StdoutPipe()
	if err := c.Start(); err != nil {
		e.t.Fatal(err)
	}
	var seen []event.Event
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var ev event.Event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			e.t.Fatal(err)
		}
		seen = append(seen, ev)
		if stop(ev) {
			break
		}
	}
	c.Process.Signal(syscall.SIGKILL)
	io.Copy(io.Discard, out)
	c.Wait()
	return seen
}

func (e *testEnv) checkRecovered(sid string, seen []event.Event, killedRun string) {
	t := e.t
	t.Helper()
	// Before recovery: nothing printed is missing and the log is contiguous.
	evs := e.events(sid)
	checkContiguous(t, evs)
	for _, s := range seen {
		if s.Seq > int64(len(evs)) || evs[s.Seq-1].Type != s.Type {
			t.Fatalf("committed event %d (%s) is missing after the kill", s.Seq, s.Type)
		}
	}
	// Continue the session: recovery closes the run, then a new run works.
	_, stderr, code := e.weft("", "run", "-s", sid, "-m", "scripted:"+filepath.Join(e.dir, "after.json"), "-p", "go on")
	if code != 0 {
		t.Fatalf("continue after kill: %d %s", code, stderr)
	}
	if !strings.Contains(stderr, killedRun) {
		t.Errorf("recovery did not report run %s: %s", killedRun, stderr)
	}
	evs = e.events(sid)
	checkContiguous(t, evs)
	var status string
	for _, ev := range evs {
		if ev.RunID == killedRun && event.IsTerminalRun(ev.Type) {
			status = string(ev.Type)
		}
	}
	if status != string(event.RunInterrupted) {
		t.Fatalf("killed run ended %q, want run.interrupted", status)
	}
	var tr []event.Event
	for _, ev := range evs {
		for _, ty := range agent.TranscriptTypes() {
			if ev.Type == ty {
				tr = append(tr, ev)
			}
		}
	}
	msgs, err := agent.Transcript(tr)
	if err != nil {
		t.Fatal(err)
	}
	open := map[string]bool{}
	for _, m := range msgs {
		for _, c := range m.ToolCalls {
			open[c.ID] = true
		}
		if m.ToolCallID != "" {
			delete(open, m.ToolCallID)
		}
	}
	if len(open) > 0 {
		t.Fatalf("tool calls left unanswered: %v", open)
	}
	last := evs[len(evs)-1]
	if last.Type != event.RunCompleted {
		t.Fatalf("continued run ended %s", last.Type)
	}
}

func TestSIGKILLWhileTextStreams(t *testing.T) {
	for i := range 3 {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			e := newEnv(t)
			slow := e.script("slow.json", `{"steps":[{"text":"`+strings.Repeat("tok ", 400)+`","delayMs":2}]}`)
			e.script("after.json", `{"loop":true,"steps":[{"text":"resumed"}]}`)
			deltas := 0
			want := 2 + i*3
			seen := e.killDuring([]string{"run", "--json", "-m", "scripted:" + slow, "-p", "x"}, func(ev event.Event) bool {
				if ev.Type == event.MessageDelta {
					deltas++
				}
				return deltas >= want
			})
			e.checkRecovered(seen[0].SessionID, seen, seen[len(seen)-1].RunID)
		})
	}
}

func TestSIGKILLWhileToolRuns(t *testing.T) {
	e := newEnv(t)
	tool := e.script("tool.json", `{"steps":[{"text":"running","toolCalls":[
		{"name":"shell","arguments":{"command":"echo started > marker; sleep 30"}},
		{"name":"write_file","arguments":{"path":"x.txt","content":"x"}}]},{"text":"never"}]}`)
	e.script("after.json", `{"loop":true,"steps":[{"text":"resumed"}]}`)
	started := false
	seen := e.killDuring([]string{"run", "--json", "-m", "scripted:" + tool, "-p", "x"}, func(ev event.Event) bool {
		if ev.Type != event.ToolCallCompleted {
			return false
		}
		// The write_file call finished; kill once the shell sleeps.
		started = poll(10*time.Second, func() bool {
			_, err := os.Stat(filepath.Join(e.work, "marker"))
			return err == nil
		})
		return true
	})
	if !started {
		t.Fatal("the shell never started")
	}
	e.checkRecovered(seen[0].SessionID, seen, seen[len(seen)-1].RunID)
	// The foreground shell died with weft (the sandbox helper contains it).
	out, _ := exec.CommandContext(context.Background(), "pgrep", "-f", "echo started > marker; sleep 30").Output()
	if len(bytes.TrimSpace(out)) > 0 {
		t.Errorf("the killed weft's shell survived: pids %s", out)
	}
}
