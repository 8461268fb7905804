package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"weft.dev/weft/api"
	"weft.dev/weft/client"
	"weft.dev/weft/event"
	"weft.dev/weft/store/record"
)

// Subagents survive a SIGKILL of `weft serve`: a parent run spawns two
// children, one that answers at once and one still streaming when the
// host is killed. After the restart the finished child keeps its answer;
// the one that was mid-run ends interrupted, typed, and its parent
// session is told (process.exited in its log); `weft ps` and `weft
// sessions` show the children under their parent.
func TestSubagentsSurviveSIGKILL(t *testing.T) {
	e := newEnv(t)
	fast := e.script("fast.json", `{"steps":[{"text":"quick answer"}]}`)
	// The slow child streams a word a second for minutes.
	slow := e.script("slow.json", `{"steps":[{"text":"`+strings.Repeat("word ", 300)+`","delayMs":1000}]}`)
	parent := e.script("parent.json", fmt.Sprintf(`{"steps":[
		{"toolCalls":[
			{"name":"spawn_agent","arguments":{"prompt":"fast","model":"scripted:%s"}},
			{"name":"spawn_agent","arguments":{"prompt":"slow","model":"scripted:%s"}}]},
		{"text":"waiting for ever","delayMs":3600000}]}`, fast, slow))
	addr := freeAddr(t)
	srv := e.serve(addr)
	tok := e.token()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	dial := func() *client.Client {
		c, err := client.Dial(ctx, addr, client.Options{Token: tok})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	c := dial()
	s, err := c.CreateSession(ctx, api.CreateSessionParams{Model: "scripted:" + parent, Title: "the parent"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.StartRun(ctx, api.StartRunParams{SessionID: s.ID, Input: api.Input(event.TextParts("go"))}); err != nil {
		t.Fatal(err)
	}
	kids := func() (done, running *record.Process) {
		l, err := c.ListProcesses(ctx, api.ProcessListParams{SessionID: s.ID})
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range l.Processes {
			if p.Kind != record.ProcessAgent {
				continue
			}
			switch p.Spec.Agent.Prompt {
			case "fast":
				done = &p
			case "slow":
				running = &p
			}
		}
		return done, running
	}
	var slowID, fastID string
	if !poll(20*time.Second, func() bool {
		done, running := kids()
		if done == nil || running == nil || done.Status != record.ProcessCompleted || running.OutputBytes == 0 {
			return false
		}
		fastID, slowID = done.ID, running.ID
		return true
	}) {
		done, running := kids()
		t.Fatalf("the children did not start (or the fast one did not end): %+v %+v", done, running)
	}
	c.Close()
	srv.Process.Signal(syscall.SIGKILL)
	srv.Wait()

	srv = e.serve(addr)
	defer func() { srv.Process.Signal(os.Interrupt); srv.Wait() }()
	c = dial()
	defer c.Close()
	var done, interrupted *record.Process
	if !poll(30*time.Second, func() bool {
		done, interrupted = kids()
		return interrupted != nil && record.IsProcessTerminal(interrupted.Status)
	}) {
		t.Fatalf("the mid-run child did not end after the restart: %+v", interrupted)
	}
	if done.ID != fastID || done.Status != record.ProcessCompleted || done.Result != "quick answer" {
		t.Fatalf("the finished child: %+v", done)
	}
	if interrupted.ID != slowID || interrupted.Status != record.ProcessFailed || interrupted.Failure == nil || interrupted.Failure.Kind != event.FailureSubagentInterrupted {
		t.Fatalf("the mid-run child: %+v", interrupted)
	}
	r, err := c.AwaitProcess(ctx, api.ProcessAwaitParams{ID: slowID, SessionID: s.ID})
	if err != nil || r.Process.Failure == nil || r.Process.Failure.Kind != event.FailureSubagentInterrupted {
		t.Fatalf("the parent's await: %+v %v", r, err)
	}
	child, err := c.GetRun(ctx, api.RunIDParams{RunID: interrupted.Spec.Agent.RunID})
	if err != nil || child.Status != record.RunInterrupted {
		t.Fatalf("the child's run: %+v %v", child, err)
	}
	// The parent session was told.
	told := false
	if !poll(10*time.Second, func() bool {
		evs, err := c.ReadEvents(ctx, api.ReadEventsParams{SessionID: s.ID, Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range evs.Events {
			var d event.ProcessData
			if e.Type == event.ProcessExited && e.Decode(&d) == nil && d.ProcessID == slowID {
				told = true
			}
		}
		return told
	}) {
		t.Fatal("the parent session's log has no process.exited for the interrupted child")
	}

	// The tree: children under their parent.
	out, stderr, code := e.weft("", "sessions")
	if code != 0 {
		t.Fatalf("weft sessions: %d %s", code, stderr)
	}
	lines := strings.Split(out, "\n")
	pi := -1
	for i, l := range lines {
		if strings.Contains(l, s.ID) {
			pi = i
		}
	}
	if pi < 0 || pi+2 >= len(lines) || !strings.Contains(lines[pi+1], "└") && !strings.Contains(lines[pi+1], "├") {
		t.Fatalf("weft sessions does not show the children under the parent:\n%s", out)
	}
	out, stderr, code = e.weft("", "ps", "--all", "-s", s.ID)
	if code != 0 || !strings.Contains(out, slowID) || !strings.Contains(out, interrupted.Spec.Agent.SessionID) {
		t.Fatalf("weft ps: %d %s\n%s", code, stderr, out)
	}
}
