package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"

	"weft.dev/weft/api"
	"weft.dev/weft/event"
)

// term is a program running in a pseudo-terminal, with everything it
// printed.
type term struct {
	t    *testing.T
	c    *exec.Cmd
	ptmx *os.File
	done chan struct{} // closed when the terminal's output ends

	mu  sync.Mutex
	out bytes.Buffer
	off int // where the next expect looks from
}

// startTerm starts c with a new pseudo-terminal as its controlling
// terminal, stdin, stdout and stderr.
func startTerm(t *testing.T, c *exec.Cmd) *term {
	t.Helper()
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Fatal(err)
	}
	if err := pty.Setsize(ptmx, &pty.Winsize{Rows: 40, Cols: 200}); err != nil {
		t.Fatal(err)
	}
	c.Stdin, c.Stdout, c.Stderr = tty, tty, tty
	c.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	tty.Close()
	tm := &term{t: t, c: c, ptmx: ptmx, done: make(chan struct{})}
	go func() {
		defer close(tm.done)
		b := make([]byte, 4096)
		for {
			n, err := ptmx.Read(b)
			tm.mu.Lock()
			tm.out.Write(b[:n])
			tm.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() {
		c.Process.Kill()
		c.Wait()
		ptmx.Close()
		<-tm.done
	})
	return tm
}

// expect waits until the terminal shows want after what the last expect
// matched, and moves past it.
func (tm *term) expect(want string) {
	tm.t.Helper()
	found := poll(30*time.Second, func() bool {
		tm.mu.Lock()
		defer tm.mu.Unlock()
		i := strings.Index(tm.out.String()[tm.off:], want)
		if i < 0 {
			return false
		}
		tm.off += i + len(want)
		return true
	})
	if !found {
		tm.mu.Lock()
		defer tm.mu.Unlock()
		tm.t.Fatalf("the terminal never showed %q after offset %d; it shows:\n%s", want, tm.off, tm.out.String())
	}
}

// since is what the terminal showed after offset off.
func (tm *term) since(off int) string {
	tm.mu.Lock()
	defer tm.mu.Unlock()
	return tm.out.String()[off:]
}

func (tm *term) mark() int {
	tm.mu.Lock()
	defer tm.mu.Unlock()
	return tm.off
}

// send types s.
func (tm *term) send(s string) {
	tm.t.Helper()
	if _, err := tm.ptmx.Write([]byte(s)); err != nil {
		tm.t.Fatal(err)
	}
}

// exit waits for the program to end and returns its exit code.
func (tm *term) exit() int {
	tm.t.Helper()
	ended := make(chan error, 1)
	go func() { ended <- tm.c.Wait() }()
	select {
	case err := <-ended:
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode()
		} else if err != nil {
			tm.t.Fatal(err)
		}
		return 0
	case <-time.After(30 * time.Second):
		tm.t.Fatalf("the program did not exit; the terminal shows:\n%s", tm.since(0))
	}
	return -1
}

// chatScript answers the prompts of TestInteractive in order (the
// scripted model picks its step by the number of assistant messages).
const chatScript = `{"steps":[
 {"text":"Hello, human."},
 {"text":"Writing.","toolCalls":[{"name":"shell","arguments":{"command":"echo approved > approved.txt"}}]},
 {"text":"Wrote it."},
 {"text":"Trying.","toolCalls":[{"name":"shell","arguments":{"command":"echo denied > denied.txt"}}]},
 {"text":"Understood, I will not."},
 {"toolCalls":[{"name":"ask_user","arguments":{"question":"Which colour?","choices":["red","blue"]}}]},
 {"text":"Noted."},
 {"toolCalls":[{"name":"shell","arguments":{"command":"echo again >> always.txt"}}]},
 {"toolCalls":[{"name":"shell","arguments":{"command":"echo again >> always.txt"}}]},
 {"text":"Both written."},
 {"text":"` + "slow " + `SLOWSTART ` + "%s" + `","delayMs":10}
]}`

// TestInteractive drives `weft` in a pseudo-terminal: a streamed answer,
// an approval allowed (the command's file appears) and one denied with a
// message (no file; the model reads the message), a question answered by
// its number, "always for this session", Ctrl-C cancelling a slow run
// while the program goes on, /rename, /history, and Ctrl-D exiting 0.
func TestInteractive(t *testing.T) {
	e := newEnv(t)
	script := e.script("chat.json", strings.Replace(chatScript, "%s", strings.Repeat("word ", 2000), 1))
	c := e.cmd() // weft alone on a terminal is the interactive session
	c.Env = append(c.Env, "WEFT_MODEL=scripted:"+script)
	tm := startTerm(t, c)
	tm.expect("/help lists the commands")
	tm.expect("› ")

	tm.send("hello\r")
	tm.expect("Hello, human.")
	tm.expect("· completed")
	tm.send("/rename greetings\r")
	tm.expect(": greetings")
	tm.send("/sessions\r")
	tm.expect("greetings")

	// Approved: the shell runs.
	tm.send("write a file\r")
	tm.expect("echo approved > approved.txt")
	tm.expect("runs a shell command")
	tm.expect("[y]es / [a]lways for this session / [n]o, with a message")
	tm.send("y\r")
	tm.expect("allowed once")
	tm.expect("Wrote it.")
	tm.expect("· completed")
	if b, err := os.ReadFile(filepath.Join(e.work, "approved.txt")); err != nil || string(b) != "approved\n" {
		t.Fatalf("the approved command did not run: %q %v", b, err)
	}

	// Denied with a message: no file, and the model reads the message.
	tm.send("try again\r")
	tm.expect("echo denied > denied.txt")
	tm.expect("[y]es / [a]lways")
	tm.send("n\r")
	tm.expect("message to the model")
	tm.send("not that file\r")
	tm.expect("denied")
	tm.expect("Understood, I will not.")
	tm.expect("· completed")
	if _, err := os.Stat(filepath.Join(e.work, "denied.txt")); !os.IsNotExist(err) {
		t.Fatalf("the denied command ran: %v", err)
	}

	// A question, answered by the number of a choice.
	tm.send("ask me\r")
	tm.expect("Which colour?")
	tm.expect("2) blue")
	tm.send("2\r")
	tm.expect("Noted.")
	tm.expect("· completed")

	// Always for this session: the second command is not asked.
	from := tm.mark()
	tm.send("write twice\r")
	tm.expect("echo again >> always.txt")
	tm.expect("always for this session allows this exact command again")
	tm.expect("[y]es / [a]lways")
	tm.send("a\r")
	tm.expect("Both written.")
	tm.expect("· completed")
	if n := strings.Count(tm.since(from), "? shell"); n != 1 {
		t.Errorf("asked %d times after an always answer:\n%s", n, tm.since(from))
	}
	if b, _ := os.ReadFile(filepath.Join(e.work, "always.txt")); string(b) != "again\nagain\n" {
		t.Errorf("always.txt holds %q", b)
	}

	// Ctrl-C cancels the run, not the program.
	tm.send("go slowly\r")
	tm.expect("SLOWSTART")
	tm.send("\x03")
	tm.expect("· cancelled")
	tm.expect("› ")
	tm.send("/history\r")
	tm.expect("  6  go slowly")

	tm.send("\x04")
	if code := tm.exit(); code != 0 {
		t.Fatalf("Ctrl-D: exit %d:\n%s", code, tm.since(0))
	}

	// The log: the deny's message reached the model, the answer was the
	// choice, the slow run was cancelled.
	evs := e.events(e.onlySession())
	checkContiguous(t, evs)
	var denyResult, answer string
	var lastEnd event.Type
	for _, ev := range evs {
		switch ev.Type {
		case event.ToolCallCompleted:
			var d event.ToolCallCompletedData
			ev.Decode(&d)
			if strings.Contains(d.Output, "not that file") {
				denyResult = d.Output
			}
		case event.InputResolved:
			var d event.InputResolvedData
			ev.Decode(&d)
			answer = d.Text
		}
		if event.IsTerminalRun(ev.Type) {
			lastEnd = ev.Type
		}
	}
	if denyResult == "" {
		t.Error("the deny's message is not in any tool result")
	}
	if answer != "blue" {
		t.Errorf("the question's answer is %q, want blue", answer)
	}
	if lastEnd != event.RunCancelled {
		t.Errorf("the slow run ended %s", lastEnd)
	}
}

// TestAttachAsksOpenRequests: `weft attach` on a terminal asks an
// approval that was open before it attached, then says so when the next
// one is answered elsewhere first, and exits 0 when the run completes.
// `weft run` on a terminal asks too.
func TestAttachAsksOpenRequests(t *testing.T) {
	e := newEnv(t)
	addr := freeAddr(t)
	srv := e.serve(addr)
	defer func() { srv.Process.Signal(os.Interrupt); srv.Wait() }()
	script := e.script("two.json", `{"steps":[
	 {"toolCalls":[{"name":"shell","arguments":{"command":"echo one > one.txt"}}]},
	 {"toolCalls":[{"name":"write_file","arguments":{"path":"two.txt","content":"two"}}]},
	 {"text":"done"}]}`)
	out, stderr, code := e.weft("", "--host", addr, "run", "--detach", "--approve", "ask-writes", "-m", "scripted:"+script, "-p", "go")
	if code != 0 {
		t.Fatalf("run --detach: %d %s", code, stderr)
	}
	rid := strings.Fields(out)[1]
	e.openRequest(addr, event.RequestApproval)

	tm := startTerm(t, e.cmd("--host", addr, "attach", rid))
	tm.expect("echo one > one.txt")
	tm.expect("[y]es / [a]lways")
	tm.send("y\r")
	tm.expect("allowed once")
	tm.expect("two.txt (3 bytes)")
	q := e.openRequest(addr, event.RequestApproval)
	if _, stderr, code := e.weft("", "--host", addr, "approve", q.ID); code != 0 {
		t.Fatalf("approve: %s", stderr)
	}
	tm.expect("already answered by weft approve: allow_once")
	tm.expect("done")
	if code := tm.exit(); code != 0 {
		t.Fatalf("attach: exit %d:\n%s", code, tm.since(0))
	}
	if b, _ := os.ReadFile(filepath.Join(e.work, "two.txt")); string(b) != "two" {
		t.Fatalf("two.txt: %q", b)
	}

	// weft run on a terminal asks by default (ask-writes).
	shell := e.script("shell.json", `{"steps":[{"toolCalls":[{"name":"shell","arguments":{"command":"echo three > three.txt"}}]},{"text":"ok"}]}`)
	tm = startTerm(t, e.cmd("--host", addr, "run", "-m", "scripted:"+shell, "-p", "go"))
	tm.expect("echo three > three.txt")
	tm.expect("[y]es / [a]lways")
	tm.send("n no thanks\r")
	tm.expect("denied")
	tm.expect("ok")
	if code := tm.exit(); code != 0 {
		t.Fatalf("run: exit %d:\n%s", code, tm.since(0))
	}
	if _, err := os.Stat(filepath.Join(e.work, "three.txt")); !os.IsNotExist(err) {
		t.Fatalf("the denied command ran: %v", err)
	}
}

// TestChatThroughHostAlways: through `weft serve`, whose config file names
// no preset, the approval mode is each run's defaultPreset; an "always for
// this session" answer is a session rule above it, so the host asks no
// more about that command for the rest of the run and for the next runs.
func TestChatThroughHostAlways(t *testing.T) {
	e := newEnv(t)
	addr := freeAddr(t)
	srv := e.serve(addr)
	defer func() { srv.Process.Signal(os.Interrupt); srv.Wait() }()
	script := e.script("always.json", `{"steps":[
	 {"toolCalls":[{"name":"shell","arguments":{"command":"echo hi >> log.txt"}}]},
	 {"toolCalls":[{"name":"shell","arguments":{"command":"echo hi >> log.txt"}}]},
	 {"text":"first done"},
	 {"toolCalls":[{"name":"shell","arguments":{"command":"echo hi >> log.txt"}}]},
	 {"text":"second done"}]}`)
	tm := startTerm(t, e.cmd("--host", addr, "chat", "-m", "scripted:"+script))
	tm.expect("through the host at " + addr + " (weft " + version + " in " + e.work + ")")
	tm.send("go\r")
	tm.expect("echo hi >> log.txt")
	tm.expect("[y]es / [a]lways")
	tm.send("a\r")
	tm.expect("first done")
	tm.expect("· completed")
	tm.send("again\r")
	tm.expect("second done")
	tm.expect("· completed")
	tm.send("/quit\r")
	if code := tm.exit(); code != 0 {
		t.Fatalf("exit %d:\n%s", code, tm.since(0))
	}
	if n := strings.Count(tm.since(0), "[y]es / [a]lways"); n == 0 || strings.Count(tm.since(0), "? shell") != 1 {
		t.Errorf("asked more than once:\n%s", tm.since(0))
	}
	asked, presets := 0, 0
	for _, ev := range e.events(e.latestSession()) {
		var q event.RunQueuedData
		switch {
		case ev.Type == event.ApprovalRequested:
			asked++
		case ev.Type == event.RunQueued && ev.Decode(&q) == nil && q.DefaultPreset == api.PresetAskWrites && q.Policy == nil:
			presets++
		}
	}
	if asked != 1 || presets != 2 {
		t.Errorf("the host asked %d times; %d runs queued with defaultPreset ask-writes and no policy", asked, presets)
	}
	if b, _ := os.ReadFile(filepath.Join(e.work, "log.txt")); string(b) != "hi\nhi\nhi\n" {
		t.Errorf("log.txt: %q", b)
	}
}
