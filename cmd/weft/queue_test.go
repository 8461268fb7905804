package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"weft.dev/weft/api"
	"weft.dev/weft/client"
	"weft.dev/weft/event"
	"weft.dev/weft/internal/pgtest"
	"weft.dev/weft/store/record"
)

// Runs queued behind a running one survive a SIGKILL of `weft serve`:
// after the restart only the run that was mid-flight is interrupted; the
// five queued runs run by themselves (no client asks for the session),
// in the order they were acknowledged, each with its own input, and a
// retry of a run/start whose reply the kill swallowed replays the same
// run. On PostgreSQL the restarted host waits out the dead host's lease.
func TestQueuedRunsSurviveSIGKILL(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) { testQueuedRunsSurviveSIGKILL(t, newEnv(t)) })
	t.Run("postgres", func(t *testing.T) {
		ctx := context.Background()
		c, err := pgtest.New(ctx)
		if errors.Is(err, pgtest.ErrNoServer) {
			pgtest.Skip(t, err)
		}
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		db, err := c.CreateDatabase(ctx)
		if err != nil {
			t.Fatal(err)
		}
		e := newEnv(t)
		e.store = c.URL(db)
		if _, stderr, code := e.weft("", "migrate"); code != 0 {
			t.Fatalf("migrate: %d %s", code, stderr)
		}
		testQueuedRunsSurviveSIGKILL(t, e, "--lease-ttl", "2s")
	})
}

func testQueuedRunsSurviveSIGKILL(t *testing.T, e *testEnv, flags ...string) {
	hang := e.script("hang.json", `{"steps":[{"text":"never","delayMs":3600000}]}`)
	echo := e.script("echo.json", `{"loop":true,"steps":[{"text":"echo {{input}}","delayMs":1}]}`)
	addr := freeAddr(t)
	srv := e.serve(addr, flags...)
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
	s, err := c.CreateSession(ctx, api.CreateSessionParams{Model: "scripted:" + echo})
	if err != nil {
		t.Fatal(err)
	}
	active, err := c.StartRun(ctx, api.StartRunParams{SessionID: s.ID, Input: api.Input(event.TextParts("first")), Model: "scripted:" + hang})
	if err != nil {
		t.Fatal(err)
	}
	params := func(i int) api.StartRunParams {
		return api.StartRunParams{SessionID: s.ID, Input: api.Input(event.TextParts(fmt.Sprintf("queued-%d", i))),
			Busy: api.BusyQueue, IdempotencyKey: fmt.Sprintf("q-%d", i)}
	}
	var queued []string
	for i := range 5 {
		r, err := c.StartRun(ctx, params(i))
		if err != nil {
			t.Fatal(err)
		}
		if r.Status != record.RunQueued {
			t.Fatalf("run %d: %s; want queued behind %s", i, r.Status, active.ID)
		}
		queued = append(queued, r.ID)
	}
	if !poll(10*time.Second, func() bool {
		r, err := c.GetRun(ctx, api.RunIDParams{RunID: active.ID})
		return err == nil && r.Status == record.RunRunning
	}) {
		t.Fatal("the first run did not start")
	}
	c.Close()
	srv.Process.Signal(syscall.SIGKILL)
	srv.Wait()

	srv = e.serve(addr, flags...)
	defer func() { srv.Process.Signal(os.Interrupt); srv.Wait() }()
	c = dial()
	defer c.Close()
	// Nothing asks for the session (run/get reads the store) until its
	// queue has run.
	if !poll(60*time.Second, func() bool {
		r, err := c.GetRun(ctx, api.RunIDParams{RunID: queued[4]})
		return err == nil && record.IsTerminal(r.Status)
	}) {
		t.Fatal("the queued runs did not run after the restart")
	}
	l, err := c.ListRuns(ctx, api.ListRunsParams{SessionID: s.ID})
	if err != nil {
		t.Fatal(err)
	}
	status := map[string]string{}
	for _, r := range l.Runs {
		status[r.ID] = r.Status
	}
	if status[active.ID] != record.RunInterrupted {
		t.Fatalf("the run that was mid-flight: %s; want interrupted", status[active.ID])
	}
	for i, id := range queued {
		if status[id] != record.RunCompleted {
			t.Fatalf("queued run %d (%s): %s; want completed (runs: %v)", i, id, status[id], status)
		}
		again, err := c.StartRun(ctx, params(i))
		if err != nil || !again.Replayed || again.ID != id {
			t.Fatalf("retry of queued run %d's run/start: %+v, %v; want a replay of %s", i, again, err, id)
		}
	}
	page, err := c.ReadEvents(ctx, api.ReadEventsParams{SessionID: s.ID, Limit: 10000})
	if err != nil {
		t.Fatal(err)
	}
	checkContiguous(t, page.Events)
	var order []string
	text := map[string]string{}
	for _, ev := range page.Events {
		switch ev.Type {
		case event.RunStarted:
			order = append(order, ev.RunID)
		case event.MessageCompleted:
			var d event.MessageCompletedData
			if ev.Decode(&d) == nil {
				text[ev.RunID] += d.Text
			}
		}
	}
	if got, want := strings.Join(order, " "), strings.Join(append([]string{active.ID}, queued...), " "); got != want {
		t.Fatalf("runs started in the order\n%s\nwant\n%s", got, want)
	}
	for i, id := range queued {
		if want := fmt.Sprintf("echo queued-%d", i); text[id] != want {
			t.Fatalf("queued run %d answered %q; want %q", i, text[id], want)
		}
	}
}
