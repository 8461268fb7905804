package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"weft.dev/weft/event"
)

// tuiWidths are the terminal widths the UI is tested at.
var tuiWidths = []int{40, 80, 200}

// tuiScript answers the prompts of TestTUI in order (the scripted model
// picks its step by the number of assistant messages).
func tuiScript() string {
	return `{"steps":[
 {"text":"STREAMING ` + strings.Repeat("word ", 60) + `END1","delayMs":25},
 {"text":"Sleeping.","toolCalls":[{"name":"shell","arguments":{"command":"sleep 3; echo slept"}}]},
 {"text":"Noted: {{input}}"},
 {"text":"Two calls.","toolCalls":[{"name":"shell","arguments":{"command":"echo one > one.txt"}},{"name":"shell","arguments":{"command":"echo two > two.txt"}}]},
 {"text":"Both asked."},
 {"text":"SLOWSTART ` + strings.Repeat("slow ", 3000) + `","delayMs":10}
]}`
}

// TestTUI drives `weft -m MODEL` (the terminal UI) in a pseudo-terminal
// at 40, 80 and 200 columns: a long prompt shown once and wrapped, text
// typed while a run streams kept in the input, Enter during a run
// steering it (shown until the model reads it, then in the transcript),
// two approvals in one step each answered with one key under its own
// call (a key that is no answer says why), Ctrl-C cancelling a run with
// no text after it, a resize, and Ctrl-D exiting 0.
func TestTUI(t *testing.T) {
	for _, cols := range tuiWidths {
		t.Run(fmt.Sprint(cols), func(t *testing.T) { testTUI(t, cols) })
	}
}

func testTUI(t *testing.T, cols int) {
	e := newEnv(t)
	script := e.script("tui.json", tuiScript())
	v := startVTerm(t, e.cmd("-m", "scripted:"+script), cols, 30)
	v.expect("/help lists the commands")
	v.expect("› ")

	// A long prompt: shown once, wrapped, however wide the terminal.
	long := "LONGPROMPT " + strings.Repeat("a prompt that goes on ", 8) + "TAIL"
	v.send(long)
	s := v.expect("TAIL")
	if n := strings.Count(s, "LONGPROMPT"); n != 1 {
		t.Fatalf("the prompt being typed shows %d times:\n%s", n, s)
	}
	v.send("\r")
	v.expect("STREAMING")

	// Typed while the answer streams: kept in the input.
	v.send("typed ahead")
	v.expect("END1")
	s = v.wait("the run's end", func(s string) bool { return strings.Contains(s, "· completed") })
	if !strings.Contains(s, "› typed ahead") {
		t.Fatalf("the text typed during the run is gone:\n%s", s)
	}
	if n := strings.Count(s, "› LONGPROMPT"); n != 1 {
		t.Fatalf("the prompt shows %d times in the transcript:\n%s", n, s)
	}
	if !strings.Contains(strings.Join(strings.Fields(s), " "), strings.Join(strings.Fields(long), " ")) {
		t.Fatalf("the long prompt is not shown whole:\n%s", s)
	}

	// Enter sends it; during the next run, Enter steers.
	v.send("\r")
	v.expect("? shell sleep 3; echo slept")
	v.send("y")
	v.expect("… running")
	v.send("use tabs\r")
	v.expect("steer (next step): use tabs")
	s = v.expect("Noted: use tabs")
	if !strings.Contains(s, "⇢ steer: use tabs") {
		t.Fatalf("the steer is not in the transcript when consumed:\n%s", s)
	}
	v.wait("the run's end", endsAfter("Noted: use tabs", "· completed"))

	// Two approvals in one step: each answered under its own call.
	v.send("two\r")
	v.expect("1 more waiting")
	v.send("x")
	v.expect(`"x" is not an answer: press y, a or n`)
	v.send("y")
	v.expect("? shell echo two > two.txt")
	v.send("n")
	v.expect("message to the model")
	v.send("no thanks\r")
	s = v.expect("Both asked.")
	if l := lineAfter(s, "→ shell echo one > one.txt"); !strings.Contains(l, "✓ allowed once") {
		t.Fatalf("the first call's answer is not under it (%q):\n%s", l, s)
	}
	if l := lineAfter(s, "→ shell echo two > two.txt"); !strings.Contains(l, "✗ denied") {
		t.Fatalf("the second call's answer is not under it (%q):\n%s", l, s)
	}
	if _, err := os.Stat(filepath.Join(e.work, "one.txt")); err != nil {
		t.Fatalf("the allowed call did not run: %v", err)
	}
	if _, err := os.Stat(filepath.Join(e.work, "two.txt")); !os.IsNotExist(err) {
		t.Fatalf("the denied call ran: %v", err)
	}
	v.wait("the run's end", endsAfter("Both asked.", "· completed"))

	// Ctrl-C cancels a run; nothing it streamed after shows.
	v.send("go slowly\r")
	v.expect("SLOWSTART")
	v.send("\x03")
	s = v.expect("· cancelled")
	after := s[strings.LastIndex(s, "cancelling the run"):strings.LastIndex(s, "· cancelled")]
	if strings.Contains(after, "slow") {
		t.Fatalf("text streamed after Ctrl-C:\n%s", s)
	}

	// A resize: everything is drawn again at the new width.
	other := 100
	if cols == 200 {
		other = 40
	}
	v.resize(other, 30)
	s = v.wait("the UI drawn again at the new width", func(s string) bool {
		return strings.Contains(s, "· cancelled") && strings.Contains(s, "enter sends") && strings.Contains(s, "· scripted:tui.json")
	})
	for l := range strings.Lines(s) {
		if n := len([]rune(strings.TrimRight(l, "\n"))); n > other {
			t.Fatalf("a line of %d columns at %d:\n%s", n, other, s)
		}
	}

	v.send("\x04")
	if code := v.exit(); code != 0 {
		t.Fatalf("Ctrl-D: exit %d:\n%s", code, v.screen())
	}
	// The log has the steer, consumed.
	consumed := false
	for _, ev := range e.events(e.onlySession()) {
		if ev.Type == event.SteerConsumed {
			consumed = true
		}
	}
	if !consumed {
		t.Error("no steer.consumed in the log")
	}
}

// TestTUIReconnect: the host restarts under the UI while an answer
// streams: the UI says so on lines of its own (never glued to the
// streamed text), shows the run the restart interrupted, and the next
// prompt goes through the new host.
func TestTUIReconnect(t *testing.T) {
	for _, cols := range tuiWidths {
		t.Run(fmt.Sprint(cols), func(t *testing.T) { testTUIReconnect(t, cols) })
	}
}

func testTUIReconnect(t *testing.T, cols int) {
	e := newEnv(t)
	addr := freeAddr(t)
	srv := e.serve(addr)
	defer func() { srv.Process.Signal(os.Interrupt); srv.Wait() }()
	script := e.script("slow.json", `{"loop":true,"steps":[{"text":"SLOWSTART `+strings.Repeat("w ", 150)+`END","delayMs":20}]}`)
	v := startVTerm(t, e.cmd("--host", addr, "-m", "scripted:"+script), cols, 30)
	v.expect("through the host at")
	v.send("go\r")
	v.expect("SLOWSTART")
	srv.Process.Signal(syscall.SIGKILL)
	srv.Wait()
	s := v.expect("reconnecting…")
	for l := range strings.Lines(s) {
		if strings.Contains(l, "weft: the host") && !strings.HasPrefix(l, "weft: the host") {
			t.Fatalf("the notice is glued to other text: %q\n%s", l, s)
		}
	}
	srv = e.serve(addr)
	v.expect("weft: reconnected")
	v.expect("interrupted")
	v.send("again\r")
	v.wait("the next run's end", endsAfter("END", "· completed"))
	v.send("\x04")
	if code := v.exit(); code != 0 {
		t.Fatalf("exit %d:\n%s", code, v.screen())
	}
}

// endsAfter is a condition on the screen: it shows first, and then
// below it, then.
func endsAfter(first, then string) func(string) bool {
	return func(s string) bool {
		i := strings.LastIndex(s, first)
		return i >= 0 && strings.Contains(s[i:], then)
	}
}

// TestTUIRefusedRun: when the host refuses the first run of a session
// the UI created for it, the UI says why, puts the prompt back in the
// input and leaves no empty session behind, as `weft run` does.
func TestTUIRefusedRun(t *testing.T) {
	e := newEnv(t)
	addr := freeAddr(t)
	srv := e.serve(addr)
	defer func() { srv.Process.Signal(os.Interrupt); srv.Wait() }()
	// A session of its own, with a run, shown first.
	script := e.script("hi.json", `{"steps":[{"text":"HELLO"}]}`)
	out, stderr, code := e.weft("", "--host", addr, "run", "--detach", "-m", "scripted:"+script, "-p", "hi")
	if code != 0 {
		t.Fatalf("run --detach: %d %s", code, stderr)
	}
	before, _, _ := e.weft("", "sessions", "--json")
	v := startVTerm(t, e.cmd("--host", addr, "-s", strings.Fields(out)[0]), 80, 30)
	v.expect("HELLO")
	v.send("/new\r")
	v.expect("a new session starts with your next prompt")
	// The host has no default model: the session is created, its run
	// refused.
	v.send("REFUSED prompt\r")
	s := v.expect("no model configured")
	v.wait("the prompt back in the input", func(s string) bool { return strings.Contains(s, "› REFUSED prompt") })
	if strings.Contains(s, "⇢") {
		t.Fatalf("the refused prompt still shows as sent:\n%s", s)
	}
	if !poll(10*time.Second, func() bool {
		after, _, _ := e.weft("", "sessions", "--json")
		return after == before
	}) {
		after, _, _ := e.weft("", "sessions", "--json")
		t.Errorf("a refused run left a session: %q", after)
	}
	v.send("\x03") // clears the input
	v.send("\x04")
	if code := v.exit(); code != 0 {
		t.Fatalf("exit %d:\n%s", code, v.screen())
	}
}

// TestTUIKeys: Alt+Enter and Ctrl+J insert newlines (the prompt is sent
// whole, on its lines), Tab during a run queues the text as the next
// run, and an approval that a final rule of the host's config asks
// offers no "always" and says why when a is pressed.
func TestTUIKeys(t *testing.T) {
	e := newEnv(t)
	cfg := filepath.Join(e.dir, "config", "weft")
	if err := os.MkdirAll(cfg, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(cfg, "config.json"), []byte(`{"policy":{"rules":[
	 {"tool":"shell","match":{"command":"rm"},"action":"ask","final":true,"reason":"removing is checked"}]}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	script := e.script("keys.json", `{"steps":[
 {"text":"MULTI seen"},
 {"text":"SLOWSTART `+strings.Repeat("slow ", 100)+`SLOWEND","delayMs":20},
 {"text":"Queued: {{input}}"},
 {"toolCalls":[{"name":"shell","arguments":{"command":"rm -f gone.txt"}}]},
 {"text":"removed"}
]}`)
	v := startVTerm(t, e.cmd("-m", "scripted:"+script), 80, 30)
	v.expect("/help lists the commands")

	// A paste goes in whole, newlines and all, and sends nothing.
	v.send("\x1b[200~pasted one\npasted two\x1b[201~")
	v.wait("the paste in the input", func(s string) bool { return strings.Contains(s, "› pasted one\n  pasted two") })
	v.send("\x03") // Ctrl-C clears the input
	v.wait("the input cleared", func(s string) bool { return !strings.Contains(s, "pasted") })

	v.send("line one\x1b\r") // Alt+Enter
	v.send("line two\n")     // Ctrl+J
	v.send("line three")
	v.wait("three lines in the input", func(s string) bool {
		return strings.Contains(s, "› line one\n  line two\n  line three")
	})
	v.send("\r")
	v.wait("the prompt sent on its lines", endsAfter("› line one\n  line two\n  line three", "MULTI seen"))

	v.send("go slowly\r")
	v.expect("SLOWSTART")
	v.send("after this\t")
	v.expect("⇢ queued as the next run: after this")
	s := v.expect("Queued: after this")
	if !strings.Contains(s, "SLOWEND") {
		t.Fatalf("the queued run did not wait for the first:\n%s", s)
	}
	v.wait("the queued run's end", endsAfter("Queued: after this", "· completed"))

	v.send("remove it\r")
	v.expect("? shell rm -f gone.txt")
	v.expect("removing is checked")
	s = v.expect("[y]es / [n]o, with a message")
	if strings.Contains(s, "[a]lways") || !strings.Contains(s, "no “always” for this call") {
		t.Fatalf("a final rule offers always:\n%s", s)
	}
	v.send("a")
	v.expect("“always” is not offered")
	v.send("y")
	v.expect("removed")
	v.send("\x04")
	if code := v.exit(); code != 0 {
		t.Fatalf("exit %d:\n%s", code, v.screen())
	}

	var users []string
	for _, ev := range e.events(e.onlySession()) {
		if ev.Type == event.MessageUser {
			var d event.MessageUserData
			ev.Decode(&d)
			users = append(users, event.Text(d.Content))
		}
	}
	if want := []string{"line one\nline two\nline three", "go slowly", "after this", "remove it"}; !slices.Equal(users, want) {
		t.Errorf("the prompts in the log: %q, want %q", users, want)
	}
}

// TestAttachReconnect: `weft attach RUN` on a terminal (the UI) follows
// a run that streams; the host is killed and started again: the UI says
// so on lines of its own, reconnects, shows the run the restart
// interrupted and exits with its code.
func TestAttachReconnect(t *testing.T) {
	e := newEnv(t)
	addr := freeAddr(t)
	srv := e.serve(addr)
	defer func() { srv.Process.Signal(os.Interrupt); srv.Wait() }()
	script := e.script("slow.json", `{"steps":[{"text":"SLOWSTART `+strings.Repeat("w ", 3000)+`END","delayMs":20}]}`)
	out, stderr, code := e.weft("", "--host", addr, "run", "--detach", "-m", "scripted:"+script, "-p", "go")
	if code != 0 {
		t.Fatalf("run --detach: %d %s", code, stderr)
	}
	rid := strings.Fields(out)[1]
	v := startVTerm(t, e.cmd("--host", addr, "attach", rid), 80, 30)
	v.expect("SLOWSTART")
	v.expect("ctrl+c detaches")
	srv.Process.Signal(syscall.SIGKILL)
	srv.Wait()
	s := v.expect("reconnecting…")
	for l := range strings.Lines(s) {
		if strings.Contains(l, "weft: the host") && !strings.HasPrefix(l, "weft: the host") {
			t.Fatalf("the notice is glued to other text: %q\n%s", l, s)
		}
	}
	srv = e.serve(addr)
	v.expect("weft: reconnected")
	v.expect("· interrupted")
	if code := v.exit(); code != exitFailed {
		t.Fatalf("attach of an interrupted run: exit %d, want %d:\n%s", code, exitFailed, v.screen())
	}
}

// TestTUIHoldsKeysTypedOn: an approval that appears while the person
// types a draft during a run takes none of the keys typed on as an
// answer (the "y" of a word is no approval) until they pause; the draft
// stays.
func TestTUIHoldsKeysTypedOn(t *testing.T) {
	e := newEnv(t)
	script := e.script("held.json", `{"steps":[
 {"text":"STREAM `+strings.Repeat("w ", 30)+`DONE","delayMs":30,"toolCalls":[{"name":"shell","arguments":{"command":"echo held > held.txt"}}]},
 {"text":"after"}
]}`)
	v := startVTerm(t, e.cmd("-m", "scripted:"+script), 80, 30)
	v.expect("/help lists the commands")
	v.send("go\r")
	v.expect("STREAM")
	v.send("draft ")
	// Typing on, as the approval appears.
	if !poll(30*time.Second, func() bool {
		v.send("y")
		return strings.Contains(v.screen(), `"y" is not taken`)
	}) {
		t.Fatalf("a key typed on was not held:\n%s", v.screen())
	}
	s := v.screen()
	if strings.Contains(s, "allowed once") {
		t.Fatalf("a key typed on approved the call:\n%s", s)
	}
	if !strings.Contains(s, "› draft") {
		t.Fatalf("the draft is gone:\n%s", s)
	}
	// After a pause, a key answers.
	v.wait("the keys no longer held", func(s string) bool {
		return strings.Contains(s, "? shell echo held") && !strings.Contains(s, "you were typing")
	})
	if _, err := os.Stat(filepath.Join(e.work, "held.txt")); !os.IsNotExist(err) {
		t.Fatalf("the call ran before it was answered: %v", err)
	}
	v.send("y")
	v.expect("✓ allowed once")
	v.wait("the run's end", endsAfter("after", "· completed"))
	if _, err := os.Stat(filepath.Join(e.work, "held.txt")); err != nil {
		t.Fatalf("the allowed call did not run: %v", err)
	}
	v.send("\x15\x04") // Ctrl-U clears the draft; Ctrl-D exits
	if code := v.exit(); code != 0 {
		t.Fatalf("exit %d:\n%s", code, v.screen())
	}
}

// TestTUISwitch: /new starts another session with the next prompt; the
// picker switches back to the first, whose transcript is drawn again
// and whose prompts are the history; /switch with an unknown id says so
// and keeps the session shown.
func TestTUISwitch(t *testing.T) {
	e := newEnv(t)
	script := e.script("echo.json", `{"loop":true,"steps":[{"text":"ANSWER to {{input}}"}]}`)
	v := startVTerm(t, e.cmd("-m", "scripted:"+script), 80, 30)
	v.expect("/help lists the commands")
	v.send("first\r")
	v.wait("the first answer", endsAfter("ANSWER to first", "· completed"))
	v.send("/new\r")
	v.expect("a new session starts with your next prompt")
	v.send("second\r")
	v.wait("the second answer", endsAfter("ANSWER to second", "· completed"))

	v.send("/sessions\r")
	v.expect("Enter switches")
	v.send("\x1b[B") // ↓: the older session
	v.send("\r")
	s := v.wait("the first session drawn again", func(s string) bool {
		return strings.Contains(s, ": first") && strings.Contains(s, "ANSWER to first")
	})
	if strings.Contains(s, "ANSWER to second") {
		t.Fatalf("the other session's transcript is still shown:\n%s", s)
	}
	v.send("\x1b[A") // ↑: the session's last prompt
	v.expect("› first\n")
	v.send("\x03") // clears the input
	v.send("/switch ses_nosuchsession\r")
	v.expect("ses_nosuchsession")
	v.send("again\r")
	v.wait("the answer in the first session", endsAfter("ANSWER to again", "· completed"))
	v.send("\x04")
	if code := v.exit(); code != 0 {
		t.Fatalf("exit %d:\n%s", code, v.screen())
	}
	out, _, _ := e.weft("", "sessions")
	if n := strings.Count(out, "ses_"); n != 2 {
		t.Fatalf("%d sessions, want 2:\n%s", n, out)
	}
}

// TestChatHostModelAtStart: through a host with no default model, `weft`
// says so when it starts (model/check), before the UI opens or anything
// is written, and `weft run` does too.
func TestChatHostModelAtStart(t *testing.T) {
	e := newEnv(t)
	addr := freeAddr(t)
	srv := e.serve(addr)
	defer func() { srv.Process.Signal(os.Interrupt); srv.Wait() }()
	before, _, _ := e.weft("", "sessions", "--json")
	v := startVTerm(t, e.cmd("--host", addr), 80, 30)
	v.expect("no model configured")
	if code := v.exit(); code != 1 {
		t.Fatalf("exit %d:\n%s", code, v.screen())
	}
	if strings.Contains(v.screen(), "›") {
		t.Fatalf("the UI opened:\n%s", v.screen())
	}
	_, stderr, code := e.weft("", "--host", addr, "run", "-p", "x")
	if code != 1 || !strings.Contains(stderr, "no model configured") {
		t.Fatalf("weft run: %d %s", code, stderr)
	}
	if after, _, _ := e.weft("", "sessions", "--json"); after != before {
		t.Errorf("a refused start left a session: %q", after)
	}
}
