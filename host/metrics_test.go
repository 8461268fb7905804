package host_test

import (
	"context"
	"iter"
	"testing"

	"weft.dev/weft/api"
	"weft.dev/weft/event"
)

// Metrics counts what the host holds (sessions, running and queued runs,
// subscribers) and what it did (runs by status, append latencies).
func TestHostMetrics(t *testing.T) {
	h, _ := newHost(t)
	if m := h.Metrics(); m.SessionsLoaded != 0 || m.RunsStarted != 0 {
		t.Fatalf("a new host's metrics %+v", m)
	}
	sid := session(t, h, "scripted:tool") // its first step runs `sleep 30`
	first := start(t, h, api.StartRunParams{SessionID: sid, Input: input("one")})
	second := start(t, h, api.StartRunParams{SessionID: sid, Input: input("two"), Busy: api.BusyQueue})
	waitFor(t, h, sid, first.ID, func(e event.Event) bool { return e.Type == event.ToolCallStarted })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sub, err := h.Subscribe(ctx, api.SubscribeParams{SessionID: sid})
	if err != nil {
		t.Fatal(err)
	}
	next, stop := iter.Pull2(sub)
	defer stop()
	next() // the subscription is live once it yields
	m := h.Metrics()
	if m.SessionsLoaded != 1 || m.RunsRunning != 1 || m.RunsQueued != 1 || m.Subscribers != 1 || m.RunsStarted != 1 {
		t.Errorf("with one run running and one queued: %+v", m)
	}
	// The queued run first: once the first ends, the second would start
	// and might complete (its script is past its sleep) before a cancel.
	for _, id := range []string{second.ID, first.ID} {
		if _, err := h.CancelRun(context.Background(), api.CancelParams{RunID: id}); err != nil {
			t.Fatal(err)
		}
		wait(t, h, id)
	}
	stop()
	third := start(t, h, api.StartRunParams{SessionID: session(t, h, "scripted:fast"), Input: input("three")})
	wait(t, h, third.ID)
	m = h.Metrics()
	if m.RunsEnded["completed"] != 1 || m.RunsEnded["cancelled"] != 2 || m.RunsRunning != 0 || m.RunsQueued != 0 {
		t.Errorf("after two cancels and one completed run: %+v", m)
	}
	var appends uint64
	for _, n := range m.AppendLatency.Counts {
		appends += n
	}
	if len(m.AppendLatency.Counts) != len(m.AppendLatency.Bounds)+1 || appends == 0 || m.AppendLatency.Sum <= 0 {
		t.Errorf("append latency %+v", m.AppendLatency)
	}
}
