package main

import (
	"fmt"
	"strings"
	"testing"

	"weft.dev/weft/event"
)

// TestCompactCommand: `weft run` past a scripted model's small window
// says when it compacts; `weft compact SESSION` compacts on demand, and
// an unknown session is refused, saying so.
func TestCompactCommand(t *testing.T) {
	e := newEnv(t)
	var steps []string
	for i := range 8 {
		steps = append(steps, fmt.Sprintf(`{"toolCalls":[{"name":"write_file","arguments":{"path":"f%d.txt","content":%q}}]}`, i, strings.Repeat("z", 3000)))
	}
	steps = append(steps, `{"text":"done"}`)
	s := e.script("s.json", `{"loop":true,"contextWindow":5000,"steps":[`+strings.Join(steps, ",")+`]}`)
	_, stderr, code := e.weft("", "run", "-m", "scripted:"+s, "-p", "write")
	if code != 0 || !strings.Contains(stderr, "context compacted (threshold)") {
		t.Fatalf("run: %d %s", code, stderr)
	}
	sid := e.onlySession()
	out, stderr, code := e.weft("", "compact", sid)
	if code != 0 || !strings.Contains(out, sid+" compacted through seq") || !strings.Contains(out, "[scripted summary of") {
		t.Fatalf("compact: %d %q %s", code, out, stderr)
	}
	n := 0
	for _, ev := range e.events(sid) {
		if ev.Type == event.ContextCompacted {
			n++
		}
	}
	if n < 2 {
		t.Fatalf("%d context.compacted events", n)
	}
	if _, stderr, code := e.weft("", "compact", "ses_nope"); code != 1 || !strings.Contains(stderr, "no session ses_nope") {
		t.Fatalf("compact an unknown session: %d %s", code, stderr)
	}
}

// TestCompactInTheTUI: /compact in the terminal UI compacts the current
// session and shows the summary; before any prompt it says there is
// nothing to compact.
func TestCompactInTheTUI(t *testing.T) {
	e := newEnv(t)
	s := e.script("chat.json", `{"loop":true,"summary":"We said hello.","steps":[{"text":"Hello, human."}]}`)
	c := e.cmd()
	c.Env = append(c.Env, "WEFT_MODEL=scripted:"+s)
	v := startVTerm(t, c, 100, 40)
	v.expect("/help lists the commands")
	v.send("/compact\r")
	v.expect("nothing to compact")
	v.send("hello\r")
	v.expect("Hello, human.")
	v.expect("· completed")
	v.send("/compact\r")
	v.expect("compacted: about")
	v.expect("We said hello.")
	v.send("\x04")
}
