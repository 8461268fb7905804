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
