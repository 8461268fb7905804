package main

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	"weft.dev/weft/api"
	"weft.dev/weft/client"
	"weft.dev/weft/event"
	"weft.dev/weft/store/record"
)

// TestServeDrainThenRestartContinues: `weft serve` on SQLite gets SIGTERM
// while a run's model streams: the run is handed over, not ended
// (run.suspended, status waiting), and the process exits. Started again
// on the same store, the host's recovery continues the same run from its
// log to completion, then the run queued behind it.
func TestServeDrainThenRestartContinues(t *testing.T) {
	e := newEnv(t)
	e.env = []string{"WEFT_TOKEN=drain-token-0123456789abcdef"}
	slow := e.script("slow.json", `{"loop":true,"steps":[{"text":"`+strings.Repeat("word ", 60)+`end","delayMs":30}]}`)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	addr := freeAddr(t)
	srv := e.serve(addr)
	dial := func() *client.Client {
		c, err := client.Dial(ctx, addr, client.Options{Token: "drain-token-0123456789abcdef"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	c := dial()
	s, err := c.CreateSession(ctx, api.CreateSessionParams{Model: "scripted:" + slow})
	if err != nil {
		t.Fatal(err)
	}
	r, err := c.StartRun(ctx, api.StartRunParams{SessionID: s.ID, Input: api.Input(event.TextParts("go"))})
	if err != nil {
		t.Fatal(err)
	}
	q, err := c.StartRun(ctx, api.StartRunParams{SessionID: s.ID, Input: api.Input(event.TextParts("next")), Busy: api.BusyQueue})
	if err != nil {
		t.Fatal(err)
	}
	if !poll(10*time.Second, func() bool {
		page, err := c.ReadEvents(ctx, api.ReadEventsParams{SessionID: s.ID, RunID: r.ID, Limit: 1000})
		return err == nil && countType(page.Events, event.MessageDelta) > 0
	}) {
		t.Fatal("the model's output did not begin")
	}
	c.Close()
	srv.Process.Signal(syscall.SIGTERM)
	if err := srv.Wait(); err != nil {
		t.Fatalf("weft serve after SIGTERM: %v", err)
	}

	srv = e.serve(addr)
	defer func() { srv.Process.Signal(syscall.SIGTERM); srv.Wait() }()
	c = dial()
	var got *api.RunResult
	if !poll(20*time.Second, func() bool {
		got, err = c.GetRun(ctx, api.RunIDParams{RunID: q.ID})
		return err == nil && record.IsTerminal(got.Status)
	}) {
		t.Fatalf("the queued run did not end after the restart: %+v, %v", got, err)
	}
	if got, err = c.GetRun(ctx, api.RunIDParams{RunID: r.ID}); err != nil || got.Status != record.RunCompleted {
		t.Fatalf("the handed-over run after the restart: %+v, %v; want completed", got, err)
	}
	page, err := c.ReadEvents(ctx, api.ReadEventsParams{SessionID: s.ID, RunID: r.ID, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	var types []event.Type
	for _, ev := range page.Events {
		types = append(types, ev.Type)
	}
	if typeCount(types, event.RunStarted) != 1 || typeCount(types, event.RunSuspended) != 1 || typeCount(types, event.RunResumed) != 1 ||
		typeCount(types, event.MessageCompleted) != 1 || types[len(types)-1] != event.RunCompleted {
		t.Fatalf("the run's events: %v; want started once, suspended, resumed, one message, completed", types)
	}
}
