package main

import (
	"context"
	"encoding/json"
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

// TestFailoverAfterSIGKILL: two `weft serve` on one PostgreSQL database
// (each with its own state directory, as on two machines), with a lease
// TTL of one second. Host A owns a session and streams a run in it; B
// forwards a run/start to A (the hosts share a token), which answers
// that the session is busy. A is SIGKILLed mid-run: after the TTL,
// B's next request for the session takes it over, reconciles A's run
// (run.interrupted, as after a crash) and runs the new one. `weft nodes`
// shows B holding the session.
func TestFailoverAfterSIGKILL(t *testing.T) {
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
	ea, eb := newEnv(t), newEnv(t)
	ea.store, eb.store = c.URL(db), c.URL(db)
	ea.env = []string{"WEFT_TOKEN=failover-token-0123456789"}
	eb.env = ea.env
	if _, stderr, code := ea.weft("", "migrate"); code != 0 {
		t.Fatalf("migrate: %s", stderr)
	}
	out, stderr, code := eb.weft("", "nodes")
	if code != 0 || !strings.Contains(out, "no host holds a session lease") {
		t.Fatalf("weft nodes on an idle database: %d %q %s", code, out, stderr)
	}
	slow := ea.script("slow.json", `{"loop":true,"steps":[{"text":"`+strings.Repeat("w ", 3000)+`","delayMs":10}]}`)
	fast := ea.script("fast.json", `{"loop":true,"steps":[{"text":"done: {{input}}"}]}`)

	addrA, addrB := freeAddr(t), freeAddr(t)
	srvA := ea.serve(addrA, "--lease-ttl", "1s")
	defer func() { srvA.Process.Kill(); srvA.Wait() }()
	srvB := eb.serve(addrB, "--lease-ttl", "1s")
	defer func() { srvB.Process.Signal(os.Interrupt); srvB.Wait() }()
	a, err := client.Dial(ctx, addrA, client.Options{Token: "failover-token-0123456789"})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := client.Dial(ctx, addrB, client.Options{Token: "failover-token-0123456789"})
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
	// B forwards run/start to A, which refuses it: busy.
	_, err = b.StartRun(ctx, api.StartRunParams{SessionID: s.ID, Input: api.Input(event.TextParts("refused")), Model: "scripted:" + fast})
	if err == nil || !strings.Contains(err.Error(), "busy with run "+run.ID) {
		t.Fatalf("B's run/start while A owns the session and runs: %v; want A's answer, busy", err)
	}
	out, _, _ = eb.weft("", "nodes", "--sessions")
	if !strings.Contains(out, "(weft serve)") || !strings.Contains(out, s.ID) {
		t.Fatalf("weft nodes while A owns the session:\n%s", out)
	}

	srvA.Process.Signal(syscall.SIGKILL)
	srvA.Wait()
	killed := time.Now()
	var next *api.RunResult
	if !poll(15*time.Second, func() bool {
		next, err = b.StartRun(ctx, api.StartRunParams{SessionID: s.ID, Input: api.Input(event.TextParts("after")), Model: "scripted:" + fast})
		return err == nil
	}) {
		t.Fatalf("B never took the session over: %v", err)
	}
	failover := time.Since(killed)
	t.Logf("B took the session over %v after A was killed (lease TTL 1s)", failover)
	if failover < 500*time.Millisecond {
		t.Errorf("B took the session over %v after the kill, before A's lease can have expired", failover)
	}
	w, err := b.WaitRun(ctx, api.WaitRunParams{RunID: next.ID, TimeoutMs: 20000})
	if err != nil || w.Run.Status != record.RunCompleted {
		t.Fatalf("B's run: %+v, %v", w, err)
	}
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
	last := ""
	for _, e := range evs {
		if e.RunID == run.ID {
			last = string(e.Type)
		}
	}
	if last != string(event.RunInterrupted) {
		t.Fatalf("A's run's last event is %s; want run.interrupted", last)
	}
	out, _, code = eb.weft("", "nodes", "--json")
	var l struct {
		SessionID, Holder string
		Epoch             int64
	}
	if code != 0 || json.Unmarshal([]byte(strings.TrimSpace(out)), &l) != nil || l.SessionID != s.ID || l.Epoch != 2 {
		t.Fatalf("weft nodes --json after the take-over: %q", out)
	}
}
