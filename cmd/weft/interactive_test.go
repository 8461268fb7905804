package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"weft.dev/weft/api"
	"weft.dev/weft/event"
)

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

// TestInteractive drives `weft` (the terminal UI) in a pseudo-terminal:
// a streamed answer, /rename, the session picker, an approval allowed
// with one key (the command's file appears) and one denied with a
// message (no file; the model reads the message), a question answered by
// its number, "always for this session" (asked once), Ctrl-C cancelling
// a slow run while the program goes on, /history, and Ctrl-D exiting 0.
func TestInteractive(t *testing.T) {
	e := newEnv(t)
	script := e.script("chat.json", strings.Replace(chatScript, "%s", strings.Repeat("word ", 2000), 1))
	c := e.cmd() // weft alone on a terminal is the terminal UI
	c.Env = append(c.Env, "WEFT_MODEL=scripted:"+script)
	v := startVTerm(t, c, 100, 40)
	v.expect("/help lists the commands")

	v.send("hello\r")
	v.expect("Hello, human.")
	v.expect("· completed")
	v.send("/rename greetings\r")
	v.expect(": greetings")
	v.send("/sessions\r")
	v.expect("sessions (↑↓, Enter switches, Esc closes)")
	v.expect("greetings")
	v.send("\x1b")
	v.wait("the picker closed", func(s string) bool { return !strings.Contains(s, "Enter switches") })

	// Approved with one key: the shell runs.
	v.send("write a file\r")
	v.expect("echo approved > approved.txt")
	v.expect("runs a shell command")
	v.expect("[y]es / [a]lways for this session / [n]o, with a message")
	v.send("y")
	v.expect("✓ allowed once")
	v.expect("Wrote it.")
	if !poll(10*time.Second, func() bool {
		b, err := os.ReadFile(filepath.Join(e.work, "approved.txt"))
		return err == nil && string(b) == "approved\n"
	}) {
		t.Fatal("the approved command did not run")
	}

	// Denied with a message: no file, and the model reads the message.
	v.send("try again\r")
	v.expect("echo denied > denied.txt")
	v.expect("[y]es / [a]lways")
	v.send("n")
	v.expect("message to the model")
	v.send("not that file\r")
	v.expect(`✗ denied: "not that file"`)
	v.expect("Understood, I will not.")
	if _, err := os.Stat(filepath.Join(e.work, "denied.txt")); !os.IsNotExist(err) {
		t.Fatalf("the denied command ran: %v", err)
	}

	// A question, answered by the number of a choice; a number that is
	// no choice says why.
	v.send("ask me\r")
	v.expect("Which colour?")
	v.expect("2) blue")
	v.send("7\r")
	v.expect("there is no choice 7")
	v.send("\x15") // Ctrl-U: the answer typed goes
	v.send("2\r")
	v.expect("Noted.")

	// Always for this session: the second command is not asked.
	v.send("write twice\r")
	v.expect("echo again >> always.txt")
	v.expect("always for this session allows this exact command again")
	v.send("a")
	v.expect("Both written.")
	if !poll(10*time.Second, func() bool {
		b, _ := os.ReadFile(filepath.Join(e.work, "always.txt"))
		return string(b) == "again\nagain\n"
	}) {
		t.Error("always.txt does not hold both lines")
	}

	// Ctrl-C cancels the run, not the program.
	v.send("go slowly\r")
	v.expect("SLOWSTART")
	v.send("\x03")
	v.expect("· cancelled")
	v.send("/history\r")
	v.expect("  6  go slowly")

	v.send("\x04")
	if code := v.exit(); code != 0 {
		t.Fatalf("Ctrl-D: exit %d:\n%s", code, v.screen())
	}

	// The log: the deny's message reached the model, the answer was the
	// choice, the slow run was cancelled.
	evs := e.events(e.onlySession())
	checkContiguous(t, evs)
	var denyResult, answer string
	var lastEnd event.Type
	askedAgain := 0
	for _, ev := range evs {
		switch ev.Type {
		case event.ApprovalRequested:
			var d event.ApprovalRequestedData
			ev.Decode(&d)
			if strings.Contains(d.ToolCall.Arguments, "echo again") {
				askedAgain++
			}
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
	if askedAgain != 1 {
		t.Errorf("asked %d times about a command allowed for the session", askedAgain)
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

	v := startVTerm(t, e.cmd("--host", addr, "attach", rid), 100, 30)
	v.expect("echo one > one.txt")
	v.expect("[y]es / [a]lways")
	v.send("y")
	v.expect("✓ allowed once")
	v.expect("two.txt (3 bytes)")
	q := e.openRequest(addr, event.RequestApproval)
	if _, stderr, code := e.weft("", "--host", addr, "approve", q.ID); code != 0 {
		t.Fatalf("approve: %s", stderr)
	}
	v.expect("already answered by weft approve: allowed once")
	if code := v.exit(); code != 0 {
		t.Fatalf("attach: exit %d:\n%s", code, v.screen())
	}
	v.expect("done") // the transcript stays on the screen
	if b, _ := os.ReadFile(filepath.Join(e.work, "two.txt")); string(b) != "two" {
		t.Fatalf("two.txt: %q", b)
	}

	// weft run on a terminal asks by default (ask-writes), one request
	// at a time, each answer under its request.
	shell := e.script("shell.json", `{"steps":[{"toolCalls":[{"name":"shell","arguments":{"command":"echo three > three.txt"}},{"name":"shell","arguments":{"command":"echo four > four.txt"}}]},{"text":"ok"}]}`)
	v = startVTerm(t, e.cmd("--host", addr, "run", "-m", "scripted:"+shell, "-p", "go"), 100, 30)
	v.expect("echo three > three.txt")
	v.expect("[y]es / [a]lways")
	v.send("z")
	v.expect(`"z" is not an answer`)
	v.send("n")
	v.expect("message to the model")
	v.send("no thanks\r")
	s := v.expect("echo four > four.txt")
	if l := lineAfter(s, "? shell echo three > three.txt"); !strings.Contains(l, `→ denied: "no thanks"`) {
		t.Fatalf("the answer is not under its request (%q):\n%s", l, s)
	}
	v.send("y")
	v.expect("ok")
	if code := v.exit(); code != 0 {
		t.Fatalf("run: exit %d:\n%s", code, v.screen())
	}
	s = v.screen()
	if l := lineAfter(s, "? shell echo four > four.txt"); !strings.Contains(l, "→ allowed once") {
		t.Fatalf("the answer is not under its request (%q):\n%s", l, s)
	}
	if _, err := os.Stat(filepath.Join(e.work, "three.txt")); !os.IsNotExist(err) {
		t.Fatalf("the denied command ran: %v", err)
	}
	if _, err := os.Stat(filepath.Join(e.work, "four.txt")); err != nil {
		t.Fatalf("the allowed command did not run: %v", err)
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
	v := startVTerm(t, e.cmd("--host", addr, "chat", "-m", "scripted:"+script), 200, 30)
	v.expect("through the host at " + addr + " (weft " + version + " in " + e.work + ")")
	v.send("go\r")
	v.expect("echo hi >> log.txt")
	v.expect("[y]es / [a]lways")
	v.send("a")
	v.expect("first done")
	v.send("again\r")
	v.expect("second done")
	v.send("/quit\r")
	if code := v.exit(); code != 0 {
		t.Fatalf("exit %d:\n%s", code, v.screen())
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
