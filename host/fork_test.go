package host_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"weft.dev/weft/agent"
	"weft.dev/weft/api"
	"weft.dev/weft/event"
	"weft.dev/weft/host"
	"weft.dev/weft/llm"
	"weft.dev/weft/llm/scripted"
	"weft.dev/weft/store"
	"weft.dev/weft/store/record"
	"weft.dev/weft/tool"
	"weft.dev/weft/tool/builtin"
)

// users returns the user messages of ms.
func users(ms []llm.Message) string {
	var out []string
	for _, m := range ms {
		if m.Role == llm.RoleUser {
			out = append(out, m.Content)
		}
	}
	return strings.Join(out, "|")
}

// withRecorder makes model "scripted:rec" answer as scripted:fast through rec.
func withRecorder(rec *recorder) func(*host.Config) {
	return func(c *host.Config) {
		resolve := c.ResolveModel
		c.ResolveModel = func(name string) (*host.Model, error) {
			if name != "scripted:rec" {
				return resolve(name)
			}
			p, err := scripted.Parse("fast.json", []byte(scripts["fast"]))
			if err != nil {
				return nil, err
			}
			rec.inner = p
			return &host.Model{Name: name, Provider: rec, Model: "fast"}, nil
		}
	}
}

func lastSeq(t *testing.T, h *host.Host, sid string) int64 {
	t.Helper()
	s, err := h.GetSession(context.Background(), api.SessionGetParams{SessionID: sid})
	if err != nil {
		t.Fatal(err)
	}
	return s.LastSeq
}

func allEvents(t *testing.T, h *host.Host, sid string) []event.Event {
	t.Helper()
	var out []event.Event
	after := int64(0)
	for {
		p, err := h.ReadEvents(context.Background(), api.ReadEventsParams{SessionID: sid, After: after, Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, p.Events...)
		if len(p.Events) == 0 {
			return out
		}
		after = p.Events[len(p.Events)-1].Seq
	}
}

// TestForkContinuesFromTheMiddle forks a session after its first run: a
// run in the fork sees only the history up to the fork's seq, the fork
// reads the source's events as its own, and neither the source's later
// runs nor its deletion change the fork.
func TestForkContinuesFromTheMiddle(t *testing.T) {
	rec := &recorder{}
	h, st := newHostWith(t, withRecorder(rec))
	ctx := context.Background()
	src := session(t, h, "scripted:rec")
	run := func(sid, text string) {
		t.Helper()
		r := start(t, h, api.StartRunParams{SessionID: sid, Input: input(text)})
		if got := wait(t, h, r.ID); got.Status != record.RunCompleted {
			t.Fatalf("run %s: %s", r.ID, got.Status)
		}
	}
	run(src, "one")
	at := lastSeq(t, h, src)
	run(src, "two")

	f, err := h.ForkSession(ctx, api.ForkSessionParams{SessionID: src, AtSeq: at})
	if err != nil {
		t.Fatal(err)
	}
	if f.AtSeq != at || f.Session.Fork == nil || *f.Session.Fork != (record.Fork{SessionID: src, Seq: at}) || f.Session.LastSeq != at+1 {
		t.Fatalf("fork = %+v; want a fork of %s at %d", f, src, at)
	}
	if len(f.SharedMounts) != 1 || f.SharedMounts[0] != "work" {
		t.Fatalf("sharedMounts = %v; want [work]", f.SharedMounts)
	}
	fork := f.Session.ID
	srcEvents := allEvents(t, h, src)
	forkEvents := allEvents(t, h, fork)
	for i, e := range forkEvents[:at] {
		want := srcEvents[i]
		want.SessionID = fork
		if e.Seq != want.Seq || e.Type != want.Type || e.SessionID != fork || string(e.Data) != string(want.Data) {
			t.Fatalf("fork event %d = %+v; want the source's %+v", i+1, e, want)
		}
	}
	if e := forkEvents[at]; e.Type != event.SessionForked || e.Seq != at+1 {
		t.Fatalf("fork event %d = %s; want session.forked", at+1, e.Type)
	}

	run(fork, "three")
	if got, want := users(rec.last()), strings.Join([]string{"one", "three"}, "|"); got != want {
		t.Fatalf("the fork's run sent the user messages %q; want %q", got, want)
	}
	run(src, "four")
	if got, want := users(rec.last()), strings.Join([]string{"one", "two", "four"}, "|"); got != want {
		t.Fatalf("the source's run sent %q; want %q", got, want)
	}

	// Deleting the source leaves the fork readable and runnable, also
	// after a restart of the host.
	before := allEvents(t, h, fork)
	if _, err := h.DeleteSession(ctx, api.SessionIDParams{SessionID: src}); err != nil {
		t.Fatal(err)
	}
	if got := allEvents(t, h, fork); len(got) != len(before) {
		t.Fatalf("after deleting the source the fork has %d events; want %d", len(got), len(before))
	}
	h.Close()
	h2, err := host.New(ctx, hostConfig(t, st, withRecorder(rec)))
	if err != nil {
		t.Fatal(err)
	}
	defer h2.Close()
	r := start(t, h2, api.StartRunParams{SessionID: fork, Input: input("five")})
	if got := wait(t, h2, r.ID); got.Status != record.RunCompleted {
		t.Fatalf("run after restart: %s", got.Status)
	}
	if got, want := users(rec.last()), strings.Join([]string{"one", "three", "five"}, "|"); got != want {
		t.Fatalf("the fork's run after a restart sent %q; want %q", got, want)
	}
}

// TestForkRefused: a seq beyond the log is -32016, an unknown or deleted
// source is not found, and nothing is created.
func TestForkRefused(t *testing.T) {
	h, _ := newHost(t)
	ctx := context.Background()
	src := session(t, h, "scripted:fast")
	last := lastSeq(t, h, src)
	_, err := h.ForkSession(ctx, api.ForkSessionParams{SessionID: src, AtSeq: last + 1})
	var ae *api.Error
	if !errors.Is(err, api.ErrCursorInvalid) || !errors.As(err, &ae) || ae.Code != -32016 {
		t.Fatalf("fork beyond the log = %v; want -32016", err)
	}
	if _, err := h.ForkSession(ctx, api.ForkSessionParams{SessionID: "ses_nope"}); !errors.Is(err, api.ErrNotFound) {
		t.Fatalf("fork of an unknown session = %v; want not found", err)
	}
	if _, err := h.ForkSession(ctx, api.ForkSessionParams{SessionID: src, AtSeq: -1}); !errors.Is(err, api.ErrInvalidParams) {
		t.Fatalf("fork at -1 = %v; want invalid params", err)
	}
	list, err := h.ListSessions(ctx, api.ListSessionsParams{})
	if err != nil || len(list.Sessions) != 1 {
		t.Fatalf("sessions after refused forks = %d, %v; want 1", len(list.Sessions), err)
	}
}

// TestForkInsideAStep: a seq inside a run's step starts the fork from
// the step boundary before it.
func TestForkInsideAStep(t *testing.T) {
	h, _ := newHost(t)
	ctx := context.Background()
	src := session(t, h, "scripted:steps")
	r := start(t, h, api.StartRunParams{SessionID: src, Input: input("go")})
	wait(t, h, r.ID)
	evs := allEvents(t, h, src)
	var steps []int64
	var call, done int64
	for _, e := range evs {
		switch e.Type {
		case event.StepStarted:
			steps = append(steps, e.Seq)
		case event.ToolCallStarted:
			call = e.Seq
		case event.RunCompleted:
			done = e.Seq
		}
	}
	if len(steps) != 2 || call == 0 {
		t.Fatalf("the run's log has steps at %v and a call at %d", steps, call)
	}
	for _, tc := range []struct {
		name     string
		at, want int64
	}{
		{"inside the first step", call, steps[0] - 1},
		{"inside the second step", steps[1] + 1, steps[1] - 1},
		{"at the end of the first step", steps[1] - 1, steps[1] - 1},
		{"at the run's end", done, done},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := h.ForkSession(ctx, api.ForkSessionParams{SessionID: src, AtSeq: tc.at})
			if err != nil {
				t.Fatal(err)
			}
			if f.AtSeq != tc.want {
				t.Fatalf("fork at %d starts at %d; want %d", tc.at, f.AtSeq, tc.want)
			}
			forked := sessionEvents(t, h, f.Session.ID, event.SessionForked)
			var d event.SessionForkedData
			if len(forked) != 1 || forked[0].Decode(&d) != nil || d.Seq != tc.want || (tc.at != tc.want) != (d.RequestedSeq == tc.at) {
				t.Fatalf("session.forked = %+v", d)
			}
			// The fork runs on from there.
			r := start(t, h, api.StartRunParams{SessionID: f.Session.ID, Input: input("on")})
			if got := wait(t, h, r.ID); got.Status != record.RunCompleted {
				t.Fatalf("run in the fork: %s %+v", got.Status, got.Error)
			}
		})
	}
}

// hostConfig is newHostWith's configuration over st, for a second host
// over the first one's store.
func hostConfig(t *testing.T, st store.Store, mod func(*host.Config)) host.Config {
	t.Helper()
	reg := tool.NewRegistry()
	if err := builtin.Register(reg, builtin.Options{}); err != nil {
		t.Fatal(err)
	}
	cfg := host.Config{
		Store: st, Tools: reg, DefaultModel: "scripted:fast",
		CoalesceWindow: 2 * time.Millisecond,
		ResolveModel: func(name string) (*host.Model, error) {
			key := strings.TrimPrefix(name, "scripted:")
			src, ok := scripts[key]
			if !ok {
				return nil, fmt.Errorf("unknown model %q", name)
			}
			p, err := scripted.Parse(key+".json", []byte(src))
			if err != nil {
				return nil, err
			}
			return &host.Model{Name: name, Provider: p, Model: key}, nil
		},
	}
	if mod != nil {
		mod(&cfg)
	}
	return cfg
}

// TestForkSharesTheTranscriptSnapshot: a fork gets its source's
// transcript snapshot when it is through a seq the fork holds, so that
// its first run does not read the source's whole log; the run sees the
// same conversation.
func TestForkSharesTheTranscriptSnapshot(t *testing.T) {
	rec := &recorder{}
	h, st := newHostWith(t, withRecorder(rec))
	ctx := context.Background()
	src := session(t, h, "scripted:rec")
	for _, in := range []string{"one", "two"} {
		r := start(t, h, api.StartRunParams{SessionID: src, Input: input(in)})
		wait(t, h, r.ID)
	}
	last := lastSeq(t, h, src)
	b := &agent.TranscriptBuilder{}
	for _, e := range allEvents(t, h, src) {
		if err := b.Add(e); err != nil {
			t.Fatal(err)
		}
	}
	data, err := b.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	if err := st.PutSnapshot(ctx, record.Snapshot{SessionID: src, Kind: record.SnapshotTranscript, Seq: last, Data: data}); err != nil {
		t.Fatal(err)
	}
	f, err := h.ForkSession(ctx, api.ForkSessionParams{SessionID: src})
	if err != nil {
		t.Fatal(err)
	}
	snap, err := st.Snapshot(ctx, f.Session.ID, record.SnapshotTranscript)
	if err != nil || snap.Seq != last {
		t.Fatalf("the fork's snapshot: %+v, %v", snap, err)
	}
	r := start(t, h, api.StartRunParams{SessionID: f.Session.ID, Input: input("three")})
	wait(t, h, r.ID)
	if got := users(rec.last()); got != "one|two|three" {
		t.Fatalf("the fork's run sent %q", got)
	}
	// A fork before the snapshot's seq gets none.
	g, err := h.ForkSession(ctx, api.ForkSessionParams{SessionID: src, AtSeq: 3})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Snapshot(ctx, g.Session.ID, record.SnapshotTranscript); err == nil {
		t.Fatal("a fork before the snapshot's seq got it")
	}
}
