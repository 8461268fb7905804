package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"weft.dev/weft/api"
	"weft.dev/weft/client"
	"weft.dev/weft/event"
	"weft.dev/weft/store/record"
)

// A run that waits on an approval, a question and a client tool call
// survives a SIGKILL of `weft serve`: after the restart it is still
// waiting, its three requests are listed and re-delivered to a client
// that subscribes, and the answers (given to the new host) resume it; the
// approved shell command runs exactly once.
func TestWaitingRunSurvivesSIGKILL(t *testing.T) {
	e := newEnv(t)
	src := `{"steps":[{"toolCalls":[
		{"name":"shell","arguments":{"command":"echo ran >> ran.txt"}},
		{"name":"ask_user","arguments":{"question":"colour?","choices":["red","blue"]}},
		{"name":"pick","arguments":{"n":1}}]},
		{"text":"done"}]}`
	script := e.script("asks.json", src)
	addr := freeAddr(t)
	srv := e.serve(addr)
	tok := e.token()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dial := func() *client.Client {
		c, err := client.Dial(ctx, addr, client.Options{Token: tok})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	c := dial()
	s, err := c.CreateSession(ctx, api.CreateSessionParams{Model: "scripted:" + script, Mounts: mountsFor(e),
		Policy: &api.Policy{Preset: api.PresetAskAll},
		Tools:  []api.ToolSpec{{Name: "pick", InputSchema: []byte(`{"type":"object"}`)}}})
	if err != nil {
		t.Fatal(err)
	}
	r, err := c.StartRun(ctx, api.StartRunParams{SessionID: s.ID, Input: api.Input(event.TextParts("go"))})
	if err != nil {
		t.Fatal(err)
	}
	open := func(c *client.Client) []record.Request {
		var l *api.ListRequestsResult
		ok := poll(20*time.Second, func() bool {
			var err error
			l, err = c.ListRequests(ctx, api.ListRequestsParams{SessionID: s.ID})
			return err == nil && len(l.Requests) == 3
		})
		if !ok {
			t.Fatalf("the run did not wait on three requests: %+v", l)
		}
		return l.Requests
	}
	before := open(c)
	c.Close()
	srv.Process.Signal(syscall.SIGKILL)
	srv.Wait()

	srv = e.serve(addr)
	defer func() { srv.Process.Signal(os.Interrupt); srv.Wait() }()
	c = dial()
	defer c.Close()
	after := open(c)
	for i := range before {
		if after[i].ID != before[i].ID || after[i].Status != record.RequestOpen {
			t.Fatalf("request %d after the restart: %+v; before: %+v", i, after[i], before[i])
		}
	}
	got, err := c.GetRun(ctx, api.RunIDParams{RunID: r.ID})
	if err != nil || got.Status != record.RunWaiting {
		t.Fatalf("run after the restart: %+v, %v; want waiting, not interrupted", got, err)
	}
	// A client that subscribes from the start is told of the open requests.
	seq, err := c.Subscribe(ctx, api.SubscribeParams{SessionID: s.ID})
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for ev, err := range seq {
		if err != nil {
			t.Fatal(err)
		}
		switch ev.Type {
		case event.ApprovalRequested, event.InputRequested, event.ToolCallRequested:
			seen++
		}
		if seen == 3 {
			break
		}
	}
	for _, q := range after {
		var err error
		switch q.Kind {
		case event.RequestApproval:
			_, err = c.DecideApproval(ctx, api.DecideParams{ApprovalID: q.ID, Decision: event.DecisionAllowOnce})
		case event.RequestInput:
			_, err = c.AnswerInput(ctx, api.AnswerParams{RequestID: q.ID, Choice: ptrInt(0)})
		case event.RequestTool:
			_, err = c.ToolResult(ctx, api.ToolResultParams{RequestID: q.ID, Output: "4"})
		}
		if err != nil {
			t.Fatalf("answer %s: %v", q.ID, err)
		}
	}
	w, err := c.WaitRun(ctx, api.WaitRunParams{RunID: r.ID, TimeoutMs: 20_000})
	if err != nil || w.Run.Status != record.RunCompleted {
		t.Fatalf("run after its answers: %+v, %v", w, err)
	}
	b, err := os.ReadFile(filepath.Join(e.work, "ran.txt"))
	if err != nil || strings.Count(string(b), "ran") != 1 {
		t.Fatalf("the approved command ran %q, %v; want exactly once", b, err)
	}
}

func ptrInt(i int) *int { return &i }
