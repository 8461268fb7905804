package host_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"weft.dev/weft/agent"
	"weft.dev/weft/api"
	"weft.dev/weft/event"
	"weft.dev/weft/host"
	"weft.dev/weft/store"
	"weft.dev/weft/store/memory"
	"weft.dev/weft/store/record"
	"weft.dev/weft/store/sqlite"
)

// runEvents returns the events of run runID in session sid.
func runEvents(t *testing.T, h *host.Host, sid, runID string) []event.Event {
	t.Helper()
	page, err := h.ReadEvents(context.Background(), api.ReadEventsParams{SessionID: sid, RunID: runID, Limit: 10000})
	if err != nil {
		t.Fatal(err)
	}
	return page.Events
}

// count returns how many of evs have type typ.
func count(evs []event.Event, typ event.Type) int {
	n := 0
	for _, e := range evs {
		if e.Type == typ {
			n++
		}
	}
	return n
}

// suspended returns the data of the run's last run.suspended.
func suspended(t *testing.T, evs []event.Event) event.RunSuspendedData {
	t.Helper()
	for i := len(evs) - 1; i >= 0; i-- {
		if evs[i].Type == event.RunSuspended {
			var d event.RunSuspendedData
			if err := evs[i].Decode(&d); err != nil {
				t.Fatal(err)
			}
			return d
		}
	}
	t.Fatalf("no run.suspended among %v", types(evs))
	return event.RunSuspendedData{}
}

// TestDrainHandsOverMidStreamAndRestartContinues: a run whose model is
// streaming when its host (SQLite) drains is not ended: the model call is
// cut, run.suspended records the cut step, and the run waits. The host
// restarts on the same file and its recovery continues the same run from
// its log, with a new step, to completion; the run behind it runs next.
// The transcript holds one assistant message: the cut step's deltas are
// not part of it.
func TestDrainHandsOverMidStreamAndRestartContinues(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "weft.db")
	st, err := sqlite.Open(ctx, sqlite.Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	h, _ := newRecoveryHost(t, st)
	sid := recoverySession(t, h)
	r := start(t, h, api.StartRunParams{SessionID: sid, Input: input("go"), Model: "stream"})
	q := start(t, h, api.StartRunParams{SessionID: sid, Input: input("next"), Model: "fast", Busy: api.BusyQueue})
	eventually(t, 10*time.Second, "the model's output began", func() bool {
		return count(runEvents(t, h, sid, r.Run.ID), event.MessageDelta) > 0
	})
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := h.Drain(dctx); err != nil {
		t.Fatalf("drain: %v", err)
	}
	if _, err := h.StartRun(ctx, api.StartRunParams{SessionID: sid, Input: input("late"), Busy: api.BusyQueue}); !errors.Is(err, host.ErrClosed) {
		t.Fatalf("a drained host took a run: %v", err)
	}
	st.Close()

	st, err = sqlite.Open(ctx, sqlite.Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	evs := func() []event.Event {
		page, err := st.Read(ctx, store.ReadParams{SessionID: sid, RunID: r.Run.ID, Limit: 10000})
		if err != nil {
			t.Fatal(err)
		}
		return page
	}
	before := evs()
	d := suspended(t, before)
	if d.Reason != host.DrainReason || d.Step != 1 || d.CutStep != 1 || count(before, event.MessageCompleted) != 0 {
		t.Fatalf("run.suspended %+v after %v; want step 1 cut", d, types(before))
	}
	if got, err := st.Run(ctx, r.Run.ID); err != nil || got.Status != record.RunWaiting {
		t.Fatalf("the handed-over run: %+v, %v; want waiting", got, err)
	}
	if got, err := st.Run(ctx, q.Run.ID); err != nil || got.Status != record.RunQueued {
		t.Fatalf("the run behind it: %+v, %v; want queued", got, err)
	}

	h2, _ := newRecoveryHost(t, st)
	done := wait(t, h2, r.Run.ID)
	if done.Status != record.RunCompleted || done.Steps != 2 {
		t.Fatalf("the run after the restart: %+v; want completed in step 2", done)
	}
	if got := wait(t, h2, q.Run.ID); got.Status != record.RunCompleted {
		t.Fatalf("the run behind it: %+v", got)
	}
	all := runEnd(t, h2, sid, r.Run.ID, event.RunCompleted)
	if n := count(all, event.RunStarted); n != 1 {
		t.Fatalf("run.started %d times: %v", n, types(all))
	}
	if count(all, event.RunResumed) != 1 || count(all, event.MessageCompleted) != 1 {
		t.Fatalf("the run's events: %v; want one run.resumed, one message.completed", types(all))
	}
}

// TestDrainLetsToolCallFinish: a run in a tool call when its host drains
// keeps running it; once the call's result is committed the run stops at
// the step boundary (run.suspended, no cut step). A second host on the
// store continues it without calling the tool again.
func TestDrainLetsToolCallFinish(t *testing.T) {
	ctx := context.Background()
	st := memory.New()
	h, ht := newRecoveryHost(t, st)
	sid := recoverySession(t, h)
	r := start(t, h, api.StartRunParams{SessionID: sid, Input: input("go"), Model: "hold"})
	<-ht.entered
	drained := make(chan error, 1)
	dctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	go func() { drained <- h.Drain(dctx) }()
	// The drain waits for the call, which ends only when released.
	eventually(t, 10*time.Second, "the host stopped taking sessions", func() bool {
		_, err := h.CreateSession(ctx, api.CreateSessionParams{})
		return errors.Is(err, host.ErrClosed)
	})
	select {
	case err := <-drained:
		t.Fatalf("the drain returned (%v) while a tool call ran", err)
	default:
	}
	close(ht.release)
	if err := <-drained; err != nil {
		t.Fatalf("drain: %v", err)
	}

	h2, ht2 := newRecoveryHost(t, st)
	done := wait(t, h2, r.Run.ID)
	if done.Status != record.RunCompleted {
		t.Fatalf("the run on the second host: %+v", done)
	}
	all := runEnd(t, h2, sid, r.Run.ID, event.RunCompleted)
	if d := suspended(t, all); d.Step != 1 || d.CutStep != 0 {
		t.Fatalf("run.suspended %+v; want after step 1, nothing cut", d)
	}
	if n := count(all, event.ToolCallStarted); n != 1 {
		t.Fatalf("the tool call started %d times: %v", n, types(all))
	}
	select {
	case <-ht2.entered:
		t.Fatal("the second host called the tool again")
	default:
	}
}

// TestDrainGraceEndsInterrupted: a tool call that outlasts the drain's
// grace is cancelled and closed, and the run ends interrupted with an
// error of kind drain_timeout, as a host that stops without a grace
// would end it; Drain reports the grace's end. A second host leaves the
// run ended.
func TestDrainGraceEndsInterrupted(t *testing.T) {
	ctx := context.Background()
	st := memory.New()
	h, ht := newRecoveryHost(t, st)
	sid := recoverySession(t, h)
	r := start(t, h, api.StartRunParams{SessionID: sid, Input: input("go"), Model: "hold"})
	<-ht.entered
	dctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if err := h.Drain(dctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("drain: %v; want the grace's end", err)
	}
	h2, _ := newRecoveryHost(t, st)
	got, err := h2.GetRun(ctx, api.RunIDParams{RunID: r.Run.ID})
	if err != nil || got.Status != record.RunInterrupted || got.Error == nil || got.Error.Kind != agent.KindDrainTimeout {
		t.Fatalf("the run: %+v, %v; want interrupted, drain_timeout", got, err)
	}
	all := runEnd(t, h2, sid, r.Run.ID, event.RunInterrupted)
	if count(all, event.RunSuspended) != 0 {
		t.Fatalf("the run's events: %v", types(all))
	}
}
