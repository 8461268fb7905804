package main

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"weft.dev/weft/event"
	"weft.dev/weft/store/record"
)

// openRequest waits until `weft approvals --json` lists an open request
// of kind and returns it.
func (e *testEnv) openRequest(addr, kind string) record.Request {
	e.t.Helper()
	var found record.Request
	ok := poll(20*time.Second, func() bool {
		out, _, _ := e.weft("", "--host", addr, "approvals", "--json")
		for line := range strings.Lines(out) {
			var q record.Request
			if json.Unmarshal([]byte(line), &q) == nil && q.Kind == kind {
				found = q
				return true
			}
		}
		return false
	})
	if !ok {
		e.t.Fatalf("no open %s request appeared", kind)
	}
	return found
}

// TestRequestCommands: a run through `weft serve` (started in another
// directory, so the relative script path must reach it absolute) waits
// for an approval, a question and another approval, which
// `weft approvals`, `approve`, `answer` and `deny` list and answer; a
// second answer is refused naming who answered; `weft attach` replays
// the run with the user's prompt and exits 0 when it completes.
func TestRequestCommands(t *testing.T) {
	e := newEnv(t)
	hostDir := filepath.Join(e.dir, "hostdir")
	if err := os.Mkdir(hostDir, 0o755); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	srv := e.serveIn(hostDir, addr)
	defer func() { srv.Process.Signal(os.Interrupt); srv.Wait() }()
	e.script("ask.json", `{"steps":[
	 {"toolCalls":[{"name":"shell","arguments":{"command":"echo hi > hi.txt"}}]},
	 {"toolCalls":[{"name":"ask_user","arguments":{"question":"Which colour?","choices":["red","blue"]}}]},
	 {"toolCalls":[{"name":"shell","arguments":{"command":"echo no > no.txt"}}]},
	 {"text":"done"}]}`)
	out, stderr, code := e.weft("", "--host", addr, "run", "--detach", "--approve", "ask-writes", "-m", "scripted:../ask.json", "-p", "go")
	if code != 0 {
		t.Fatalf("run --detach: %d %s", code, stderr)
	}
	ids := strings.Fields(out)
	if len(ids) != 2 {
		t.Fatalf("run --detach printed %q", out)
	}
	sid, rid := ids[0], ids[1]

	q := e.openRequest(addr, event.RequestApproval)
	out, _, code = e.weft("", "--host", addr, "approvals")
	if code != 0 || !strings.HasPrefix(out, "ID ") || !strings.Contains(out, "SESSION") || !strings.Contains(out, "AGE") ||
		!strings.Contains(out, q.ID) || !strings.Contains(out, sid) || !strings.Contains(out, "echo hi > hi.txt") {
		t.Fatalf("weft approvals: %d %q", code, out)
	}
	out, stderr, code = e.weft("", "--host", addr, "approve", q.ID)
	if code != 0 || !strings.Contains(out, "allowed once") {
		t.Fatalf("weft approve: %d %q %s", code, out, stderr)
	}
	_, stderr, code = e.weft("", "--host", addr, "deny", q.ID, "-m", "too late")
	if code != 1 || !strings.Contains(stderr, "already answered by weft approve") {
		t.Fatalf("a second answer: %d %s", code, stderr)
	}

	in := e.openRequest(addr, event.RequestInput)
	out, _, _ = e.weft("", "--host", addr, "approvals")
	if !strings.Contains(out, "Which colour?") || !strings.Contains(out, "2) blue") {
		t.Fatalf("weft approvals does not show the question: %q", out)
	}
	_, stderr, code = e.weft("", "--host", addr, "answer", in.ID, "3")
	if code != 2 || !strings.Contains(stderr, "choices 1 to 2") {
		t.Fatalf("answer with a choice out of range: %d %s", code, stderr)
	}
	out, stderr, code = e.weft("", "--host", addr, "answer", in.ID, "2")
	if code != 0 || !strings.Contains(out, "blue") {
		t.Fatalf("weft answer: %d %q %s", code, out, stderr)
	}

	q2 := e.openRequest(addr, event.RequestApproval)
	out, stderr, code = e.weft("", "--host", addr, "deny", q2.ID, "-m", "not now")
	if code != 0 || !strings.Contains(out, "denied") {
		t.Fatalf("weft deny: %d %q %s", code, out, stderr)
	}
	out, stderr, code = e.weft("", "--host", addr, "attach", rid)
	if code != 0 || !strings.HasPrefix(out, "› go\n") || !strings.HasSuffix(out, "done\n") {
		t.Fatalf("weft attach: %d %q %s", code, out, stderr)
	}
	if b, _ := os.ReadFile(filepath.Join(e.work, "hi.txt")); string(b) != "hi\n" {
		t.Errorf("the approved command's file: %q", b)
	}
	if _, err := os.Stat(filepath.Join(e.work, "no.txt")); !os.IsNotExist(err) {
		t.Errorf("the denied command ran: %v", err)
	}
	out, _, _ = e.weft("", "--host", addr, "approvals", "--all", "-s", sid)
	if strings.Count(out, sid) != 3 || !strings.Contains(out, "resolved (deny)") {
		t.Errorf("weft approvals --all: %q", out)
	}
	out, stderr, _ = e.weft("", "--host", addr, "approvals")
	if out != "" || !strings.Contains(stderr, "nothing waits") {
		t.Errorf("weft approvals with nothing open: %q %s", out, stderr)
	}
}

// TestNonInteractiveRequests: a run without a terminal never hangs on a
// request: it is cancelled at once, saying why (exit 1); the run's log
// shows the request and the cancel.
func TestNonInteractiveRequests(t *testing.T) {
	e := newEnv(t)
	ask := e.script("ask.json", `{"steps":[{"toolCalls":[{"name":"ask_user","arguments":{"question":"Which colour?"}}]},{"text":"done"}]}`)
	_, stderr, code := e.weft("", "run", "-m", "scripted:"+ask, "-p", "x")
	if code != 1 || !strings.Contains(stderr, `"Which colour?"`) || !strings.Contains(stderr, "no one is at a terminal") {
		t.Fatalf("a question without a terminal: %d %s", code, stderr)
	}
	evs := e.events(e.latestSession())
	if last := evs[len(evs)-1]; last.Type != event.RunCancelled {
		t.Fatalf("the run ended %s", last.Type)
	}
	shell := e.script("shell.json", `{"steps":[{"toolCalls":[{"name":"shell","arguments":{"command":"echo x > x.txt"}}]},{"text":"done"}]}`)
	_, stderr, code = e.weft("", "run", "--approve", "ask-writes", "--json", "-m", "scripted:"+shell, "-p", "x")
	if code != 1 || !strings.Contains(stderr, "approval of shell echo x > x.txt") {
		t.Fatalf("an approval without a terminal: %d %s", code, stderr)
	}
	// never-ask, the default without a terminal, runs the shell.
	_, stderr, code = e.weft("", "run", "-m", "scripted:"+shell, "-p", "x")
	if code != 0 {
		t.Fatalf("never-ask: %d %s", code, stderr)
	}
	if _, err := os.Stat(filepath.Join(e.work, "x.txt")); err != nil {
		t.Fatal(err)
	}
	_, stderr, code = e.weft("", "run", "--local", "--wait-for-answers", "-m", "scripted:"+shell, "-p", "x")
	if code != 2 || !strings.Contains(stderr, "needs `weft serve`") {
		t.Fatalf("--wait-for-answers --local: %d %s", code, stderr)
	}
}

// syncBuffer is a bytes.Buffer for a process's output that the test
// reads while the process writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestAttachExitAndDetach: `weft attach RUN` exits like `weft run` (130
// for a cancelled run, 1 for one a host crash interrupted); it says
// "reconnecting…" while the host is down; an interrupt detaches, and the
// run goes on.
func TestAttachExitAndDetach(t *testing.T) {
	e := newEnv(t)
	addr := freeAddr(t)
	srv := e.serve(addr)
	defer func() { srv.Process.Signal(os.Interrupt); srv.Wait() }()
	slow := e.script("slow.json", `{"steps":[{"text":"`+strings.Repeat("w ", 3000)+`","delayMs":10}]}`)
	out, stderr, code := e.weft("", "--host", addr, "run", "--detach", "-m", "scripted:"+slow, "-p", "x")
	if code != 0 {
		t.Fatalf("detach: %d %s", code, stderr)
	}
	rid := strings.Fields(out)[1]

	// Detach with an interrupt.
	a := e.cmd("--host", addr, "attach", rid)
	var aerr strings.Builder
	a.Stderr = &aerr
	aout := startStreaming(t, a)
	a.Process.Signal(os.Interrupt)
	io.Copy(io.Discard, aout)
	if err := a.Wait(); err != nil {
		t.Fatalf("attach after an interrupt: %v %s", err, aerr.String())
	}
	if !strings.Contains(aerr.String(), "detached; the run continues") {
		t.Fatalf("attach said %q", aerr.String())
	}
	out, _, _ = e.weft("", "--host", addr, "status", rid)
	if !strings.Contains(out, "running") {
		t.Fatalf("the run stopped with the detach: %q", out)
	}

	// A cancelled run: exit 130.
	a = e.cmd("--host", addr, "attach", rid)
	aout = startStreaming(t, a)
	if _, stderr, code := e.weft("", "--host", addr, "cancel", rid); code != 0 {
		t.Fatalf("cancel: %d %s", code, stderr)
	}
	io.Copy(io.Discard, aout)
	err := a.Wait()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 130 {
		t.Fatalf("attach of a cancelled run: %v", err)
	}

	// The host dies under a run: attach reconnects, and the run ends
	// interrupted (exit 1).
	out, stderr, code = e.weft("", "--host", addr, "run", "--detach", "-m", "scripted:"+slow, "-p", "y")
	if code != 0 {
		t.Fatalf("detach: %d %s", code, stderr)
	}
	a = e.cmd("--host", addr, "attach", strings.Fields(out)[1])
	var errs syncBuffer
	a.Stderr = &errs
	aout = startStreaming(t, a)
	go io.Copy(io.Discard, aout)
	srv.Process.Signal(syscall.SIGKILL)
	srv.Wait()
	if !poll(20*time.Second, func() bool { return strings.Contains(errs.String(), "reconnecting…") }) {
		t.Fatalf("attach did not say it reconnects: %s", errs.String())
	}
	srv = e.serve(addr)
	err = a.Wait()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || !strings.Contains(errs.String(), "reconnected") ||
		!strings.Contains(errs.String(), "interrupted") {
		t.Fatalf("attach of a run the host's crash interrupted: %v %s", err, errs.String())
	}
}
