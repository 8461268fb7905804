package host_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"weft.dev/weft/api"
	"weft.dev/weft/env/sandbox"
	"weft.dev/weft/event"
	"weft.dev/weft/host"
	"weft.dev/weft/internal/lease"
	"weft.dev/weft/llm/scripted"
	"weft.dev/weft/store"
	"weft.dev/weft/store/memory"
	"weft.dev/weft/store/record"
	"weft.dev/weft/tool"
	"weft.dev/weft/tool/builtin"
)

func TestMain(m *testing.M) {
	// Sandboxed shells re-execute the test binary as the helper.
	if sandbox.IsHelper(os.Args) {
		sandbox.Main(os.Args)
	}
	if mode := os.Getenv(fakeMCPEnv); mode != "" {
		os.Exit(fakeMCPServer(mode))
	}
	code := m.Run()
	if err := pg.Close(); err != nil {
		fmt.Fprintln(os.Stderr, "close the test cluster:", err)
		code = 1
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	}
	os.Exit(code)
}

// scripts the tests use, by model name.
var scripts = map[string]string{
	"fast":   `{"loop":true,"steps":[{"text":"answer to {{input}}"}]}`,
	"slow":   `{"loop":true,"steps":[{"text":"` + strings.Repeat("tok ", 400) + `{{input}}","delayMs":2}]}`,
	"tool":   `{"loop":true,"steps":[{"toolCalls":[{"name":"shell","arguments":{"command":"sleep 30"}}]},{"text":"done"}]}`,
	"steps":  `{"loop":true,"steps":[{"toolCalls":[{"name":"list_dir","arguments":{"path":"."}}],"delayMs":1},{"text":"echo {{input}}","delayMs":1}]}`,
	"broken": `{"steps":[{"error":{"kind":"auth","status":401}}]}`,
	"ticks":  `{"loop":true,"steps":[{"text":"one two three","delayMs":1}]}`,
	"pause":  `{"loop":true,"steps":[{"text":"paused","delayMs":40}]}`,
	"long":   `{"loop":true,"steps":[{"text":"` + strings.Repeat("tok ", 3000) + `{{input}}","delayMs":2}]}`,
}

func newHost(t *testing.T) (*host.Host, store.Store) {
	t.Helper()
	return newHostWith(t, nil)
}

// newHostWith is newHost with its configuration changed by mod.
func newHostWith(t *testing.T, mod func(*host.Config)) (*host.Host, store.Store) {
	t.Helper()
	st := memory.New()
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
	h, err := host.New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h, st
}

func session(t *testing.T, h *host.Host, model string) string {
	t.Helper()
	s, err := h.CreateSession(context.Background(), api.CreateSessionParams{Model: model, Mounts: []event.Mount{{ID: "work", Path: t.TempDir()}}})
	if err != nil {
		t.Fatal(err)
	}
	return s.ID
}

func start(t *testing.T, h *host.Host, p api.StartRunParams) *api.RunResult {
	t.Helper()
	r, err := h.StartRun(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func wait(t *testing.T, h *host.Host, runID string) record.Run {
	t.Helper()
	w, err := h.WaitRun(context.Background(), api.WaitRunParams{RunID: runID, TimeoutMs: 20000})
	if err != nil {
		t.Fatal(err)
	}
	if w.TimedOut {
		t.Fatalf("run %s still %s", runID, w.Run.Status)
	}
	return w.Run
}

func input(s string) api.Input { return api.Input(event.TextParts(s)) }

// waitFor follows session sid's log from its start (only run runID's
// events, if runID is set) until an event satisfies match, and returns it.
func waitFor(t *testing.T, h *host.Host, sid, runID string, match func(event.Event) bool) event.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	seq, err := h.Subscribe(ctx, api.SubscribeParams{SessionID: sid, RunID: runID})
	if err != nil {
		t.Fatal(err)
	}
	var last event.Event
	for e, err := range seq {
		if err != nil {
			t.Fatalf("session %s, last event %d %s: %v", sid, last.Seq, last.Type, err)
		}
		if match(e) {
			return e
		}
		last = e
	}
	t.Fatalf("session %s: the log ended at %d %s", sid, last.Seq, last.Type)
	return event.Event{}
}

func ofType(typ event.Type) func(event.Event) bool {
	return func(e event.Event) bool { return e.Type == typ }
}

func TestRunCompletes(t *testing.T) {
	h, _ := newHost(t)
	sid := session(t, h, "scripted:fast")
	r := start(t, h, api.StartRunParams{SessionID: sid, Input: input("hi")})
	if got := wait(t, h, r.ID); got.Status != record.RunCompleted {
		t.Fatalf("status %s", got.Status)
	}
	evs, err := h.ReadEvents(context.Background(), api.ReadEventsParams{SessionID: sid})
	if err != nil {
		t.Fatal(err)
	}
	if evs.Events[0].Seq != 1 || evs.HasMore || evs.NextCursor != evs.Events[len(evs.Events)-1].Seq {
		t.Fatalf("page %+v", evs)
	}
}

func TestBusyPolicies(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, _ := newHost(t)
		ctx := context.Background()
		sid := session(t, h, "scripted:slow")
		first := start(t, h, api.StartRunParams{SessionID: sid, Input: input("one")})

		_, err := h.StartRun(ctx, api.StartRunParams{SessionID: sid, Input: input("two")})
		var he *api.Error
		if !errors.Is(err, api.ErrRunConflict) || !errors.As(err, &he) || he.Data["activeRunId"] != first.ID {
			t.Fatalf("reject: %v", err)
		}

		queued := start(t, h, api.StartRunParams{SessionID: sid, Input: input("three"), Busy: api.BusyQueue})
		if queued.Status != record.RunQueued {
			t.Fatalf("queued run is %s", queued.Status)
		}
		steered := start(t, h, api.StartRunParams{SessionID: sid, Input: input("four"), Busy: api.BusySteer})
		if steered.Steer == nil || steered.ID != first.ID || steered.Steer.Status != "accepted" {
			t.Fatalf("steer: %+v", steered)
		}
		if got := wait(t, h, first.ID); got.Status != record.RunCompleted {
			t.Fatalf("first: %s", got.Status)
		}
		if got := wait(t, h, queued.ID); got.Status != record.RunCompleted || got.StartedAt == nil {
			t.Fatalf("queued: %+v", got)
		}

		// interrupt cancels the active run and starts the new one.
		a := start(t, h, api.StartRunParams{SessionID: sid, Input: input("five")})
		b := start(t, h, api.StartRunParams{SessionID: sid, Input: input("six"), Busy: api.BusyInterrupt})
		if got := wait(t, h, a.ID); got.Status != record.RunCancelled {
			t.Fatalf("interrupted run: %s %+v", got.Status, got.Error)
		}
		if got := wait(t, h, b.ID); got.Status != record.RunCompleted {
			t.Fatalf("interrupting run: %s", got.Status)
		}
		// Queued runs start in order.
		runs, _ := h.ListRuns(ctx, api.ListRunsParams{SessionID: sid})
		for i := 1; i < len(runs.Runs); i++ {
			if runs.Runs[i].StartedAt != nil && runs.Runs[i-1].StartedAt != nil && runs.Runs[i].StartedAt.Before(*runs.Runs[i-1].StartedAt) && runs.Runs[i].ID != b.ID {
				t.Fatalf("runs started out of order: %+v", runs.Runs)
			}
		}
	})
}

func TestSteerConsumedAndErrors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, _ := newHost(t)
		ctx := context.Background()
		sid := session(t, h, "scripted:slow")
		r := start(t, h, api.StartRunParams{SessionID: sid, Input: input("one")})
		rc, err := h.SteerRun(ctx, api.SteerParams{RunID: r.ID, Input: input("more"), IdempotencyKey: "k1"})
		if err != nil {
			t.Fatal(err)
		}
		again, err := h.SteerRun(ctx, api.SteerParams{RunID: r.ID, Input: input("more"), IdempotencyKey: "k1"})
		if err != nil || !again.Replayed || again.SteerID != rc.SteerID || again.EventCursor != rc.EventCursor {
			t.Fatalf("replayed steer: %+v %v (first %+v)", again, err, rc)
		}
		if _, err := h.SteerRun(ctx, api.SteerParams{RunID: r.ID, Input: input("other"), IdempotencyKey: "k1"}); !errors.Is(err, api.ErrIdempotencyConflict) {
			t.Fatalf("conflicting steer: %v", err)
		}
		if _, err := h.SteerRun(ctx, api.SteerParams{RunID: r.ID, ExpectedRunID: "run_other", Input: input("x")}); !errors.Is(err, api.ErrRunConflict) {
			t.Fatalf("wrong expected run: %v", err)
		}
		wait(t, h, r.ID)
		_, err = h.SteerRun(ctx, api.SteerParams{RunID: r.ID, Input: input("late")})
		var he *api.Error
		if !errors.As(err, &he) || !errors.Is(err, api.ErrRunConflict) || he.Data["status"] != record.RunCompleted {
			t.Fatalf("steer after end: %v", err)
		}
		evs, _ := h.ReadEvents(ctx, api.ReadEventsParams{SessionID: sid, Limit: 1000})
		consumed := false
		for _, e := range evs.Events {
			if e.Type == event.SteerConsumed {
				var d event.SteerData
				e.Decode(&d)
				consumed = consumed || d.SteerID == rc.SteerID
			}
		}
		if !consumed {
			t.Fatal("accepted steer never consumed")
		}
	})
}

// TestSteerRacesCompletion: a steer either is refused, or is accepted and
// then consumed; it is never accepted and lost. The run streams three
// tokens a millisecond apart; on the bubble's clock the steer lands at
// every half millisecond from the start to after the end, so both between
// tokens and at the very instant of a token or of the run's completion,
// where it races the run's goroutine.
func TestSteerRacesCompletion(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, _ := newHost(t)
		ctx := context.Background()
		sid := session(t, h, "scripted:ticks")
		outcomes := map[bool]int{}
		for i := range 40 {
			r := start(t, h, api.StartRunParams{SessionID: sid, Input: input(fmt.Sprint("go ", i))})
			time.Sleep(time.Duration(i%10) * 500 * time.Microsecond)
			rc, err := h.SteerRun(ctx, api.SteerParams{RunID: r.ID, Input: input("steer")})
			wait(t, h, r.ID)
			outcomes[err == nil]++
			if err != nil {
				if !errors.Is(err, api.ErrRunConflict) {
					t.Fatal(err)
				}
				continue
			}
			evs, _ := h.ReadEvents(ctx, api.ReadEventsParams{SessionID: sid, RunID: r.ID, Limit: 1000})
			ok := false
			for _, e := range evs.Events {
				if e.Type == event.SteerConsumed || e.Type == event.SteerDropped {
					var d event.SteerData
					e.Decode(&d)
					ok = ok || d.SteerID == rc.SteerID
				}
			}
			if !ok {
				t.Fatalf("iteration %d: accepted steer %s neither consumed nor dropped", i, rc.SteerID)
			}
		}
		if outcomes[true] == 0 || outcomes[false] == 0 {
			t.Fatalf("steers accepted/refused: %d/%d; want both", outcomes[true], outcomes[false])
		}
	})
}

func TestCancel(t *testing.T) {
	h, _ := newHost(t)
	ctx := context.Background()
	sid := session(t, h, "scripted:tool")
	r := start(t, h, api.StartRunParams{SessionID: sid, Input: input("run a tool")})
	// Wait for the tool, a real sleep 30, to start.
	waitFor(t, h, sid, r.ID, ofType(event.ToolCallStarted))
	t0 := time.Now()
	c, err := h.CancelRun(ctx, api.CancelParams{RunID: r.ID, Reason: "stop"})
	if err != nil || c.Status != record.RunCancelled {
		t.Fatalf("cancel: %+v %v", c, err)
	}
	if d := time.Since(t0); d > 5*time.Second {
		t.Fatalf("cancel took %v", d)
	}
	again, err := h.CancelRun(ctx, api.CancelParams{RunID: r.ID})
	if err != nil || again.Status != record.RunCancelled {
		t.Fatalf("cancel of a terminal run: %+v %v", again, err)
	}
	evs, _ := h.ReadEvents(ctx, api.ReadEventsParams{SessionID: sid, RunID: r.ID, Limit: 1000})
	last := evs.Events[len(evs.Events)-1]
	if last.Type != event.RunCancelled {
		t.Fatalf("last event %s", last.Type)
	}
	// The next run is valid (scripted:fast answers text).
	r2 := start(t, h, api.StartRunParams{SessionID: sid, Input: input("next"), Model: "scripted:fast"})
	if got := wait(t, h, r2.ID); got.Status != record.RunCompleted {
		t.Fatalf("next run: %+v", got)
	}
}

func TestCancelQueuedRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, _ := newHost(t)
		ctx := context.Background()
		sid := session(t, h, "scripted:slow")
		a := start(t, h, api.StartRunParams{SessionID: sid, Input: input("a")})
		b := start(t, h, api.StartRunParams{SessionID: sid, Input: input("b"), Busy: api.BusyQueue})
		c, err := h.CancelRun(ctx, api.CancelParams{RunID: b.ID})
		if err != nil || c.Status != record.RunCancelled {
			t.Fatalf("%+v %v", c, err)
		}
		if got := wait(t, h, a.ID); got.Status != record.RunCompleted {
			t.Fatal(got.Status)
		}
	})
}

func TestIdempotentStartAndCreate(t *testing.T) {
	h, _ := newHost(t)
	ctx := context.Background()
	s1, err := h.CreateSession(ctx, api.CreateSessionParams{Title: "x", IdempotencyKey: "c1"})
	if err != nil {
		t.Fatal(err)
	}
	s2, err := h.CreateSession(ctx, api.CreateSessionParams{Title: "x", IdempotencyKey: "c1"})
	if err != nil || s2.ID != s1.ID || !s2.Replayed {
		t.Fatalf("replayed create: %+v %v", s2, err)
	}
	if _, err := h.CreateSession(ctx, api.CreateSessionParams{Title: "y", IdempotencyKey: "c1"}); !errors.Is(err, api.ErrIdempotencyConflict) {
		t.Fatalf("conflicting create: %v", err)
	}
	p := api.StartRunParams{SessionID: s1.ID, Input: input("once"), IdempotencyKey: "r1"}
	var wg sync.WaitGroup
	ids := make([]string, 8)
	for i := range ids {
		wg.Go(func() {
			r, err := h.StartRun(ctx, p)
			if err != nil {
				t.Error(err)
				return
			}
			ids[i] = r.ID
		})
	}
	wg.Wait()
	for _, id := range ids {
		if id != ids[0] {
			t.Fatalf("concurrent retries made different runs: %v", ids)
		}
	}
	runs, _ := h.ListRuns(ctx, api.ListRunsParams{SessionID: s1.ID})
	if len(runs.Runs) != 1 {
		t.Fatalf("%d runs for one key", len(runs.Runs))
	}
	p.Input = input("other")
	if _, err := h.StartRun(ctx, p); !errors.Is(err, api.ErrIdempotencyConflict) {
		t.Fatalf("same key, other params: %v", err)
	}
}

func TestBadInput(t *testing.T) {
	h, _ := newHost(t)
	ctx := context.Background()
	sid := session(t, h, "scripted:fast")
	cases := []struct {
		name string
		err  error
		call func() error
	}{
		{"unknown session", api.ErrNotFound, func() error {
			_, err := h.StartRun(ctx, api.StartRunParams{SessionID: "ses_nope", Input: input("x")})
			return err
		}},
		{"empty input", api.ErrInvalidParams, func() error {
			_, err := h.StartRun(ctx, api.StartRunParams{SessionID: sid, Input: input(" ")})
			return err
		}},
		{"bad busy", api.ErrInvalidParams, func() error {
			_, err := h.StartRun(ctx, api.StartRunParams{SessionID: sid, Input: input("x"), Busy: "maybe"})
			return err
		}},
		{"unknown model", api.ErrInvalidParams, func() error {
			_, err := h.StartRun(ctx, api.StartRunParams{SessionID: sid, Input: input("x"), Model: "nope:x"})
			return err
		}},
		{"unknown run", api.ErrNotFound, func() error {
			_, err := h.GetRun(ctx, api.RunIDParams{RunID: "run_nope"})
			return err
		}},
		{"cursor ahead", api.ErrCursorInvalid, func() error {
			_, err := h.ReadEvents(ctx, api.ReadEventsParams{SessionID: sid, After: 999})
			return err
		}},
		{"negative cursor", api.ErrCursorInvalid, func() error {
			_, err := h.ReadEvents(ctx, api.ReadEventsParams{SessionID: sid, After: -1})
			return err
		}},
		{"subscribe ahead", api.ErrCursorInvalid, func() error {
			_, err := h.Subscribe(ctx, api.SubscribeParams{SessionID: sid, After: 999})
			return err
		}},
		{"bad mount", api.ErrInvalidParams, func() error {
			_, err := h.CreateSession(ctx, api.CreateSessionParams{Mounts: []event.Mount{{ID: "Bad Id!", Path: "/tmp"}}})
			return err
		}},
	}
	for _, c := range cases {
		if err := c.call(); !errors.Is(err, c.err) {
			t.Errorf("%s: got %v, want %v", c.name, err, c.err)
		}
	}
}

func TestDeleteSession(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, _ := newHost(t)
		ctx := context.Background()
		sid := session(t, h, "scripted:slow")
		r := start(t, h, api.StartRunParams{SessionID: sid, Input: input("a")})
		if _, err := h.DeleteSession(ctx, api.SessionIDParams{SessionID: sid}); !errors.Is(err, api.ErrRunConflict) {
			t.Fatalf("delete with an active run: %v", err)
		}
		wait(t, h, r.ID)
		if _, err := h.DeleteSession(ctx, api.SessionIDParams{SessionID: sid}); err != nil {
			t.Fatal(err)
		}
		if _, err := h.GetSession(ctx, api.SessionGetParams{SessionID: sid}); !errors.Is(err, api.ErrNotFound) {
			t.Fatalf("get after delete: %v", err)
		}
	})
}

// TestSubscribeSeesTheLog: subscribers attached at several moments of a
// running session (from before the run streams to well into it) see
// exactly the log after their cursor.
func TestSubscribeSeesTheLog(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, _ := newHost(t)
		ctx := context.Background()
		sid := session(t, h, "scripted:slow")
		r := start(t, h, api.StartRunParams{SessionID: sid, Input: input("a")})
		var wg sync.WaitGroup
		results := make([][]int64, 6)
		for i := range results {
			wg.Go(func() {
				time.Sleep(time.Duration(i) * 15 * time.Millisecond)
				after := int64(i % 3)
				seq, err := h.Subscribe(ctx, api.SubscribeParams{SessionID: sid, After: after})
				if err != nil {
					t.Error(err)
					return
				}
				for e, err := range seq {
					if err != nil {
						t.Error(err)
						return
					}
					results[i] = append(results[i], e.Seq)
					if e.RunID == r.ID && event.IsTerminalRun(e.Type) {
						return
					}
				}
			})
		}
		wg.Wait()
		last := wait(t, h, r.ID).LastSeq
		for i, got := range results {
			if want := last - int64(i%3); int64(len(got)) != want {
				t.Errorf("subscriber %d: got %d events, want %d", i, len(got), want)
			}
			for k, s := range got {
				if s != int64(i%3)+int64(k)+1 {
					t.Fatalf("subscriber %d: got seq %d at %d", i, s, k)
				}
			}
		}
	})
}

// TestIdleSessionsUnload: an idle session keeps its lease until it has
// been idle for IdleUnload, then gives it back (another process could take
// it) and loads again on its next request.
func TestIdleSessionsUnload(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const idle = 20 * time.Millisecond
		locks := t.TempDir()
		reg := tool.NewRegistry()
		h, err := host.New(context.Background(), host.Config{
			Store: memory.New(), Tools: reg, DefaultModel: "scripted:fast", CoalesceWindow: 2 * time.Millisecond,
			Leases: lease.Dir{Path: locks}, IdleUnload: idle, MaxLoadedSessions: 1,
			ResolveModel: func(name string) (*host.Model, error) {
				p, err := scripted.Parse("fast.json", []byte(scripts["fast"]))
				return &host.Model{Name: name, Provider: p, Model: "fast"}, err
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		defer h.Close()
		ctx := context.Background()
		a := session(t, h, "scripted:fast")
		r := start(t, h, api.StartRunParams{SessionID: a, Input: input("one")})
		touched := time.Now() // wait's request uses the session at this time or later
		wait(t, h, r.ID)
		held := func(when string) {
			t.Helper()
			if l, err := lease.Acquire(locks, a); !errors.Is(err, lease.ErrHeld) {
				if err == nil {
					l.Release()
				}
				t.Fatalf("%s, the session's lease was free: %v", when, err)
			}
		}
		held("once the run ended")
		time.Sleep(time.Until(touched.Add(idle - time.Nanosecond)))
		synctest.Wait()
		held(fmt.Sprintf("idle for less than %v", idle))
		time.Sleep(2 * idle) // past the idle period and the next unload tick
		synctest.Wait()
		l, err := lease.Acquire(locks, a)
		if err != nil {
			t.Fatalf("the idle session kept its lease: %v", err)
		}
		l.Release()
		r = start(t, h, api.StartRunParams{SessionID: a, Input: input("two")})
		if got := wait(t, h, r.ID); got.Status != record.RunCompleted {
			t.Fatalf("run after reload: %+v", got)
		}
		if evs, _ := h.ReadEvents(ctx, api.ReadEventsParams{SessionID: a, Limit: 1000}); evs.Events[len(evs.Events)-1].Type != event.RunCompleted {
			t.Fatal("log after reload")
		}
	})
}

// TestCrowdedHostUnloadsLeastRecentlyUsed: beyond MaxLoadedSessions the
// host unloads the least recently used idle sessions at once (not after
// IdleUnload), down to seven eighths of the limit; a session with a run
// stays loaded however old its last request.
func TestCrowdedHostUnloadsLeastRecentlyUsed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		locks := t.TempDir()
		h, err := host.New(context.Background(), host.Config{
			Store: memory.New(), DefaultModel: "scripted:fast", CoalesceWindow: 2 * time.Millisecond,
			Leases: lease.Dir{Path: locks}, IdleUnload: time.Hour, MaxLoadedSessions: 8,
			ResolveModel: func(name string) (*host.Model, error) {
				key := strings.TrimPrefix(name, "scripted:")
				p, err := scripted.Parse(key+".json", []byte(scripts[key]))
				return &host.Model{Name: name, Provider: p, Model: key}, err
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		defer h.Close()
		busy := session(t, h, "scripted:slow")
		r := start(t, h, api.StartRunParams{SessionID: busy, Input: input("long")})
		var ids []string
		for range 20 {
			time.Sleep(time.Millisecond) // distinct last-use times
			ids = append(ids, session(t, h, "scripted:fast"))
		}
		synctest.Wait()
		loaded := func(id string) bool {
			l, err := lease.Acquire(locks, id)
			if err == nil {
				l.Release()
			}
			return errors.Is(err, lease.ErrHeld)
		}
		if !loaded(busy) {
			t.Fatal("the session with a run was unloaded")
		}
		n := 0
		for i, id := range ids {
			if loaded(id) {
				n++
			} else if i >= len(ids)-6 {
				t.Errorf("session %d of %d (recently used) was unloaded", i+1, len(ids))
			}
		}
		if n+1 > 8 {
			t.Fatalf("%d sessions loaded, want at most 8", n+1)
		}
		if _, err := h.CancelRun(context.Background(), api.CancelParams{RunID: r.ID}); err != nil {
			t.Fatal(err)
		}
		// An unloaded session loads again on its next request.
		if got := wait(t, h, start(t, h, api.StartRunParams{SessionID: ids[0], Input: input("again")}).ID); got.Status != record.RunCompleted {
			t.Fatalf("run after reload: %+v", got)
		}
	})
}

func TestSessionNetworkPolicy(t *testing.T) {
	h, _ := newHost(t)
	ctx := context.Background()
	s, err := h.CreateSession(ctx, api.CreateSessionParams{Network: "allow", Mounts: []event.Mount{{ID: "work", Path: t.TempDir()}}})
	if err != nil {
		t.Fatal(err)
	}
	if s.Binding.Network != "allow" {
		t.Fatalf("binding %+v", s.Binding)
	}
	// A mount change keeps the policy.
	if _, err := h.Mount(ctx, api.MountParams{SessionID: s.ID, Mount: event.Mount{ID: "more", Path: t.TempDir()}}); err != nil {
		t.Fatal(err)
	}
	got, _ := h.GetSession(ctx, api.SessionGetParams{SessionID: s.ID})
	if got.Binding.Network != "allow" || got.Binding.BindingVersion != 2 {
		t.Fatalf("after mount: %+v", got.Binding)
	}
	if _, err := h.CreateSession(ctx, api.CreateSessionParams{Network: "sometimes"}); !errors.Is(err, api.ErrInvalidParams) {
		t.Fatalf("bad network: %v", err)
	}
}

// TestSessionLimits: a session's own limits of each command are kept
// through mount changes, and refused over the host's ceiling or negative.
func TestSessionLimits(t *testing.T) {
	h, _ := newHostWith(t, func(c *host.Config) {
		c.MaxCommandLimits = event.Limits{Processes: 100, MemoryBytes: 1 << 30}
	})
	ctx := context.Background()
	l := &event.Limits{Processes: 50, CPUTimeMs: 60000, FileSizeBytes: 1 << 20}
	s, err := h.CreateSession(ctx, api.CreateSessionParams{Limits: l, Mounts: []event.Mount{{ID: "work", Path: t.TempDir()}}})
	if err != nil {
		t.Fatal(err)
	}
	if s.Binding.Limits == nil || *s.Binding.Limits != *l {
		t.Fatalf("binding %+v", s.Binding)
	}
	if _, err := h.Mount(ctx, api.MountParams{SessionID: s.ID, Mount: event.Mount{ID: "more", Path: t.TempDir()}}); err != nil {
		t.Fatal(err)
	}
	if got, _ := h.GetSession(ctx, api.SessionGetParams{SessionID: s.ID}); got.Binding.Limits == nil || *got.Binding.Limits != *l {
		t.Fatalf("after mount: %+v", got.Binding)
	}
	for _, bad := range []event.Limits{{Processes: 101}, {MemoryBytes: 2 << 30}, {Processes: -1}, {FileSizeBytes: 100}} {
		_, err := h.CreateSession(ctx, api.CreateSessionParams{Limits: &bad})
		var ae *api.Error
		if !errors.As(err, &ae) || ae.Kind != api.KindInvalidParams || !strings.Contains(ae.Message, "limits.") {
			t.Errorf("limits %+v: %v", bad, err)
		}
	}
}
