package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"weft.dev/weft/event"
)

// TestForkCommand: `weft fork SESSION --at SEQ` makes a fork through a
// host in this process; its events are the session's up to SEQ, then
// session.forked; a seq beyond the log is refused, saying the last.
func TestForkCommand(t *testing.T) {
	e := newEnv(t)
	s := e.script("s.json", `{"loop":true,"steps":[{"text":"hi"}]}`)
	if _, stderr, code := e.weft("", "run", "-m", "scripted:"+s, "-p", "x"); code != 0 {
		t.Fatal(stderr)
	}
	sid := e.onlySession()
	evs := e.events(sid)
	at := 0
	for _, ev := range evs {
		if ev.Type == event.RunCompleted {
			at = int(ev.Seq)
		}
	}
	out, stderr, code := e.weft("", "fork", sid, "--at", strconv.Itoa(at))
	if code != 0 || !strings.Contains(out, "a fork of "+sid+" at event "+strconv.Itoa(at)) {
		t.Fatalf("fork: %d %q %s", code, out, stderr)
	}
	fork, _, _ := strings.Cut(out, " ")
	got := e.events(fork)
	if len(got) != at+1 || got[at].Type != event.SessionForked || got[2].Type != evs[2].Type || got[2].SessionID != fork {
		t.Fatalf("the fork's events: %+v", got)
	}
	if !strings.Contains(stderr, "shares the read-write mounts") {
		t.Errorf("no word of the shared mount: %q", stderr)
	}
	_, stderr, code = e.weft("", "fork", sid, "--at", "999")
	if code != 1 || !strings.Contains(stderr, "has no event 999: its last is") {
		t.Errorf("fork beyond the log: %d %s", code, stderr)
	}
	_, stderr, code = e.weft("", "fork", "ses_nope")
	if code != 1 || !strings.Contains(stderr, "no session ses_nope") {
		t.Errorf("fork of an unknown session: %d %s", code, stderr)
	}
}

// TestTUIFork: /fork continues in a fork of the session shown, which
// says what it shares; the next prompt runs in the fork, whose log holds
// the first session's events and then its own.
func TestTUIFork(t *testing.T) {
	e := newEnv(t)
	script := e.script("echo.json", `{"loop":true,"steps":[{"text":"ANSWER to {{input}}"}]}`)
	v := startVTerm(t, e.cmd("-m", "scripted:"+script), 100, 30)
	v.expect("/help lists the commands")
	v.send("first\r")
	v.wait("the first answer", endsAfter("ANSWER to first", "· completed"))
	src := e.onlySession()
	v.send("/fork\r")
	v.expect("forked " + src + " at event")
	v.send("second\r")
	v.wait("the answer in the fork", endsAfter("ANSWER to second", "· completed"))
	v.send("\x04")
	if code := v.exit(); code != 0 {
		t.Fatalf("exit %d:\n%s", code, v.screen())
	}
	out, _, _ := e.weft("", "sessions", "--json")
	var fork string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if strings.Contains(line, `"fork":{"sessionId":"`+src+`"`) {
			fork = line[strings.Index(line, `"id":"`)+6:]
			fork = fork[:strings.Index(fork, `"`)]
		}
	}
	if fork == "" {
		t.Fatalf("no fork of %s among the sessions:\n%s", src, out)
	}
	var users []string
	for _, ev := range e.events(fork) {
		if ev.Type == event.MessageUser {
			var d event.MessageUserData
			ev.Decode(&d)
			users = append(users, event.Text(d.Content))
		}
	}
	if strings.Join(users, "|") != "first|second" {
		t.Fatalf("the fork's prompts: %q", users)
	}
}

// TestRewindCommand: `weft rewind SESSION --to SEQ --files` takes back
// the conversation and the file a run wrote (through a host in this
// process); a seq beyond the log is refused, saying why.
func TestRewindCommand(t *testing.T) {
	e := newEnv(t)
	s := e.script("w.json", `{"loop":true,"steps":[{"toolCalls":[{"name":"write_file","arguments":{"path":"notes.txt","content":"{{input}}"}}]},{"text":"wrote"}]}`)
	if _, stderr, code := e.weft("", "run", "-m", "scripted:"+s, "-p", "first"); code != 0 {
		t.Fatal(stderr)
	}
	if b, err := os.ReadFile(filepath.Join(e.work, "notes.txt")); err != nil || string(b) != "first" {
		t.Fatalf("notes.txt = %q, %v", b, err)
	}
	sid := e.onlySession()
	out, stderr, code := e.weft("", "rewind", sid, "--to", "1", "--files")
	if code != 0 || !strings.Contains(out, "rewound the conversation and 1 paths of the mounts of "+sid+" to event 1") || !strings.Contains(out, "work/notes.txt") {
		t.Fatalf("rewind: %d %q %s", code, out, stderr)
	}
	if _, err := os.Stat(filepath.Join(e.work, "notes.txt")); !os.IsNotExist(err) {
		t.Fatalf("notes.txt after the rewind: %v", err)
	}
	var rewound int
	for _, ev := range e.events(sid) {
		if ev.Type == event.SessionRewound {
			rewound++
		}
	}
	if rewound != 1 {
		t.Fatalf("%d session.rewound", rewound)
	}
	_, stderr, code = e.weft("", "rewind", sid, "--to", "999")
	if code != 1 || !strings.Contains(stderr, "cannot rewind session "+sid) {
		t.Errorf("rewind beyond the log: %d %s", code, stderr)
	}
}

// TestTUIUndo: /undo takes back the last run, the file it wrote
// included, and a second /undo the run before it.
func TestTUIUndo(t *testing.T) {
	e := newEnv(t)
	script := e.script("w.json", `{"loop":true,"steps":[{"toolCalls":[{"name":"write_file","arguments":{"path":"{{input}}.txt","content":"x"}}]},{"text":"ANSWER to {{input}}"}]}`)
	v := startVTerm(t, e.cmd("-m", "scripted:"+script), 100, 30)
	v.expect("/help lists the commands")
	v.send("first\r")
	v.expect("[a]lways for this session")
	v.send("a")
	v.wait("the first answer", endsAfter("ANSWER to first", "· completed"))
	v.send("second\r")
	v.wait("the second answer", endsAfter("ANSWER to second", "· completed"))
	for _, f := range []string{"first.txt", "second.txt"} {
		if _, err := os.Stat(filepath.Join(e.work, f)); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
	}
	v.send("/undo\r")
	v.expect("1 paths of the mounts put back")
	if _, err := os.Stat(filepath.Join(e.work, "second.txt")); !os.IsNotExist(err) {
		t.Fatalf("second.txt after /undo: %v", err)
	}
	if _, err := os.Stat(filepath.Join(e.work, "first.txt")); err != nil {
		t.Fatalf("first.txt after one /undo: %v", err)
	}
	v.send("/undo\r")
	v.wait("the second undo", func(s string) bool { return strings.Count(s, "1 paths of the mounts put back") == 2 })
	if _, err := os.Stat(filepath.Join(e.work, "first.txt")); !os.IsNotExist(err) {
		t.Fatalf("first.txt after two /undo: %v", err)
	}
	v.send("\x04")
	if code := v.exit(); code != 0 {
		t.Fatalf("exit %d:\n%s", code, v.screen())
	}
}
