package main

import (
	"context"
	"errors"
	"os"
	"slices"
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

// TestFailoverAfterSIGSTOP: two `weft serve` on one PostgreSQL database
// with a lease TTL of two seconds. Host A streams a run (an append every
// coalescing window) and is frozen with SIGSTOP, perhaps inside an
// append's transaction, holding the session's lock. B takes the session
// over within the TTL + 2 s (a frozen transaction's connection is cut by
// the timeouts the store derives from the TTL), interrupts A's run and
// runs its own. A is then let go (SIGCONT): its next append is fenced,
// so no event of A's follows B's take-over and the log stays gap-free.
func TestFailoverAfterSIGSTOP(t *testing.T) {
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
		t.Fatalf("migrate: %s", stderr)
	}
	slow := e.script("slow.json", `{"loop":true,"steps":[{"text":"`+strings.Repeat("w ", 5000)+`","delayMs":2}]}`)
	fast := e.script("fast.json", `{"loop":true,"steps":[{"text":"done: {{input}}"}]}`)
	const ttl = 2 * time.Second
	addrA, addrB := freeAddr(t), freeAddr(t)
	srvA := e.serve(addrA, "--lease-ttl", ttl.String())
	defer func() { srvA.Process.Kill(); srvA.Wait() }()
	srvB := e.serve(addrB, "--lease-ttl", ttl.String())
	defer func() { srvB.Process.Signal(os.Interrupt); srvB.Wait() }()
	a, err := client.Dial(ctx, addrA, client.Options{Token: e.token()})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := client.Dial(ctx, addrB, client.Options{Token: e.token()})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	s, err := a.CreateSession(ctx, api.CreateSessionParams{Model: "scripted:" + slow})
	if err != nil {
		t.Fatal(err)
	}
	run, err := a.StartRun(ctx, api.StartRunParams{SessionID: s.ID, Input: api.Input(event.TextParts("go"))})
	if err != nil {
		t.Fatal(err)
	}
	if !poll(10*time.Second, func() bool {
		r, err := a.ReadEvents(ctx, api.ReadEventsParams{SessionID: s.ID, RunID: run.ID})
		return err == nil && slices.ContainsFunc(r.Events, func(e event.Event) bool { return e.Type == event.MessageDelta })
	}) {
		t.Fatal("the run streams nothing")
	}

	if err := srvA.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	var next *api.RunResult
	if !poll(ttl+2*time.Second, func() bool {
		next, err = b.StartRun(ctx, api.StartRunParams{SessionID: s.ID, Input: api.Input(event.TextParts("after")), Model: "scripted:" + fast})
		return err == nil
	}) {
		t.Fatalf("B did not take the session over within TTL + 2s of A's SIGSTOP: %v", err)
	}
	t.Logf("B took the session over %v after A froze (lease TTL %v)", time.Since(stopped).Round(time.Millisecond), ttl)
	w, err := b.WaitRun(ctx, api.WaitRunParams{RunID: next.ID, TimeoutMs: 20000})
	if err != nil || w.Run.Status != record.RunCompleted {
		t.Fatalf("B's run: %+v, %v", w, err)
	}

	// A wakes up: its writes are fenced.
	if err := srvA.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	r, err := b.GetRun(ctx, api.RunIDParams{RunID: run.ID})
	if err != nil || r.Status != record.RunInterrupted {
		t.Fatalf("A's run after the take-over: %+v, %v; want interrupted", r, err)
	}
	var evs []event.Event
	for after := int64(0); ; {
		page, err := b.ReadEvents(ctx, api.ReadEventsParams{SessionID: s.ID, After: after})
		if err != nil {
			t.Fatal(err)
		}
		evs = append(evs, page.Events...)
		if len(page.Events) == 0 {
			break
		}
		after = page.Events[len(page.Events)-1].Seq
	}
	checkContiguous(t, evs)
	interrupted := int64(0)
	for _, e := range evs {
		if e.RunID == run.ID && e.Type == event.RunInterrupted {
			interrupted = e.Seq
		}
		if interrupted > 0 && e.RunID == run.ID && e.Seq > interrupted {
			t.Fatalf("A wrote %s at seq %d, after B interrupted its run at %d", e.Type, e.Seq, interrupted)
		}
	}
	if interrupted == 0 {
		t.Fatal("no run.interrupted for A's run")
	}
}
