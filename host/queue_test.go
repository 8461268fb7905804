package host_test

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"weft.dev/weft/api"
	"weft.dev/weft/event"
	"weft.dev/weft/host"
	"weft.dev/weft/llm"
	"weft.dev/weft/store"
	"weft.dev/weft/store/memory"
	"weft.dev/weft/store/postgres"
	"weft.dev/weft/store/record"
	"weft.dev/weft/store/sqlite"
	"weft.dev/weft/store/storetest"
	"weft.dev/weft/tool"
	"weft.dev/weft/tool/builtin"
)

// turnModel is a model whose answer depends only on the run it serves,
// whatever the session's history: at a run's first step it calls its tool
// (none: it answers "answer to <input>"), and once it has the result it
// answers; with always set it calls the tool at every step. hang never
// answers until cancelled.
type turnModel struct {
	tool, args string
	always     bool
	hang       bool
}

func (m turnModel) Stream(ctx context.Context, req *llm.Request) iter.Seq2[llm.StreamEvent, error] {
	return func(yield func(llm.StreamEvent, error) bool) {
		if m.hang {
			<-ctx.Done()
			yield(llm.StreamEvent{}, ctx.Err())
			return
		}
		last := req.Messages[len(req.Messages)-1]
		if m.tool != "" && (m.always || last.Role == llm.RoleUser) {
			if yield(llm.StreamEvent{ToolCall: &llm.ToolCallDelta{ID: fmt.Sprintf("call_%d", len(req.Messages)), Name: m.tool, Arguments: m.args}}, nil) {
				yield(llm.StreamEvent{Finish: &llm.Finish{Reason: llm.FinishToolCalls}}, nil)
			}
			return
		}
		input := ""
		for _, msg := range req.Messages {
			if msg.Role == llm.RoleUser {
				input = msg.Content
			}
		}
		if yield(llm.StreamEvent{Text: "answer to " + input}, nil) {
			yield(llm.StreamEvent{Finish: &llm.Finish{Reason: llm.FinishStop}}, nil)
		}
	}
}

// queueModels are the models of the queue tests, by name.
var queueModels = map[string]turnModel{
	"fast":  {},
	"hang":  {hang: true},
	"pick":  {tool: "pick", args: `{"n":1}`},
	"ask":   {tool: "write_file", args: `{"path":"a.txt","content":"A"}`},
	"tools": {tool: "list_dir", args: `{}`, always: true},
}

// sqliteAt opens (and reopens) one SQLite file.
func sqliteAt(path string) func(t *testing.T, _ string) (store.Store, store.Leases, func()) {
	return func(t *testing.T, _ string) (store.Store, store.Leases, func()) {
		st, err := sqlite.Open(context.Background(), sqlite.Config{Path: path})
		if err != nil {
			t.Fatal(err)
		}
		return st, nil, func() { st.Close() }
	}
}

// postgresAt opens (and reopens) one PostgreSQL database, with database
// leases held as holder.
func postgresAt(url string, ttl time.Duration) func(t *testing.T, holder string) (store.Store, store.Leases, func()) {
	return func(t *testing.T, holder string) (store.Store, store.Leases, func()) {
		st, err := postgres.Open(context.Background(), postgres.Config{URL: url, Migrate: true})
		if err != nil {
			t.Fatal(err)
		}
		ls, err := postgres.NewLeases(st, postgres.LeaseConfig{Holder: holder, TTL: ttl})
		if err != nil {
			t.Fatal(err)
		}
		return st, ls, func() { ls.Close(); st.Close() }
	}
}

// storesForRestart returns, per kind of store, a function that opens the
// same store again for each host.
func storesForRestart(t *testing.T) map[string]func(t *testing.T, holder string) (store.Store, store.Leases, func()) {
	mem := memory.New()
	return map[string]func(t *testing.T, holder string) (store.Store, store.Leases, func()){
		"memory":   func(*testing.T, string) (store.Store, store.Leases, func()) { return mem, nil, func() {} },
		"sqlite":   sqliteAt(filepath.Join(t.TempDir(), "weft.db")),
		"postgres": nil, // made by the subtest: it needs the cluster
	}
}

// newQueueHost starts a host with cfg (its store, leases, Shared), the
// queue tests' models and the built-in tools.
func newQueueHost(t *testing.T, cfg host.Config) *host.Host {
	t.Helper()
	reg := tool.NewRegistry()
	if err := builtin.Register(reg, builtin.Options{}); err != nil {
		t.Fatal(err)
	}
	cfg.Tools, cfg.DefaultModel, cfg.CoalesceWindow, cfg.StorageRetry = reg, "fast", 2*time.Millisecond, 20*time.Millisecond
	cfg.ResolveModel = func(name string) (*host.Model, error) {
		m, ok := queueModels[name]
		if !ok {
			return nil, fmt.Errorf("unknown model %q", name)
		}
		return &host.Model{Name: name, Provider: m, Model: name}, nil
	}
	h, err := host.New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// eachRestartStore runs f once per kind of store, with a function that
// opens that store again for each host it starts.
func eachRestartStore(t *testing.T, f func(t *testing.T, open func(holder string) (store.Store, store.Leases, func()))) {
	for name, mk := range storesForRestart(t) {
		t.Run(name, func(t *testing.T) {
			if mk == nil {
				mk = postgresAt(pg.Database(t), 10*time.Second)
			}
			f(t, func(holder string) (store.Store, store.Leases, func()) { return mk(t, holder) })
		})
	}
}

// startedOrder returns the runs of sid in the order of their run.started.
func startedOrder(t *testing.T, h *host.Host, sid string) []string {
	t.Helper()
	page, err := h.ReadEvents(context.Background(), api.ReadEventsParams{SessionID: sid, Limit: 10000})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range page.Events {
		if e.Type == event.RunStarted {
			out = append(out, e.RunID)
		}
	}
	return out
}

// openRequest waits until run runID has an open request and returns it.
func openRequest(t *testing.T, h *host.Host, sid, runID string) record.Request {
	t.Helper()
	var got record.Request
	eventually(t, 20*time.Second, "run "+runID+" opens a request", func() bool {
		l, err := h.ListRequests(context.Background(), api.ListRequestsParams{SessionID: sid})
		if err != nil {
			t.Fatal(err)
		}
		for _, q := range l.Requests {
			if q.RunID == runID {
				got = q
				return true
			}
		}
		return false
	})
	return got
}

// Runs queued behind a running one are acknowledged work: when the host
// stops and another starts on the same store, they run, in the order
// they were admitted, each with all its admission parameters (model,
// maxSteps, input, policy, defaultPreset, client tools), without any
// request for the session. Until they run, run/list shows them queued,
// run/cancel cancels them, and a retry of the original run/start replays
// the same run.
func TestQueuedRunsSurviveRestart(t *testing.T) {
	eachRestartStore(t, func(t *testing.T, open func(holder string) (store.Store, store.Leases, func())) {
		ctx := context.Background()
		st, ls, closeStore := open("host-1")
		h := newQueueHost(t, host.Config{Store: st, Leases: ls})
		dir := t.TempDir()
		sess, err := h.CreateSession(ctx, api.CreateSessionParams{Mounts: []event.Mount{{ID: "work", Path: dir, Default: true, DefaultForShell: true}}})
		if err != nil {
			t.Fatal(err)
		}
		sid := sess.ID
		a := start(t, h, api.StartRunParams{SessionID: sid, Input: input("a"), Model: "hang"})
		waitFor(t, h, sid, a.ID, ofType(event.StepStarted))
		queue := []api.StartRunParams{
			{Input: input("one"), Model: "pick", Tools: []api.ToolSpec{pickTool}, IdempotencyKey: "k1"},
			{Input: input("two"), Model: "fast", IdempotencyKey: "k2"},
			{Input: input("three"), Model: "tools", MaxSteps: 2},
			{Input: input("four"), Model: "ask", Policy: &api.Policy{Preset: api.PresetAskAll}},
			{Input: input("five"), Model: "fast"},
			{Input: input("six"), Model: "ask", DefaultPreset: api.PresetAskAll},
		}
		var ids []string
		for i := range queue {
			queue[i].SessionID, queue[i].Busy = sid, api.BusyQueue
			ids = append(ids, start(t, h, queue[i]).ID)
		}
		h.Close()
		closeStore()

		st, ls, closeStore = open("host-2")
		defer closeStore()
		h = newQueueHost(t, host.Config{Store: st, Leases: ls})
		defer h.Close()
		// No request for the session: the host runs its queue by itself.
		q := openRequest(t, h, sid, ids[0])
		if q.Kind != event.RequestTool || q.ToolCall.Name != "pick" {
			t.Fatalf("the first queued run's request: %+v; want its client tool pick", q)
		}
		l, err := h.ListRuns(ctx, api.ListRunsParams{SessionID: sid})
		if err != nil {
			t.Fatal(err)
		}
		status := map[string]string{}
		for _, r := range l.Runs {
			status[r.ID] = r.Status
		}
		for _, id := range ids[1:] {
			if status[id] != record.RunQueued {
				t.Fatalf("run %s after the restart: %s; want queued (runs: %v)", id, status[id], status)
			}
		}
		for i, k := range []int{0, 1} {
			again, err := h.StartRun(ctx, queue[k])
			if err != nil || !again.Replayed || again.ID != ids[k] {
				t.Fatalf("retry %d of run/start after the restart: %+v, %v; want a replay of %s", i, again, err, ids[k])
			}
		}
		if c, err := h.CancelRun(ctx, api.CancelParams{RunID: ids[4], Reason: "not needed"}); err != nil || c.Status != record.RunCancelled {
			t.Fatalf("cancel a queued run after the restart: %+v, %v", c, err)
		}
		if _, err := h.ToolResult(ctx, api.ToolResultParams{RequestID: q.ID, Output: "7"}); err != nil {
			t.Fatal(err)
		}
		for _, k := range []int{3, 5} {
			q := openRequest(t, h, sid, ids[k])
			if q.Kind != event.RequestApproval {
				t.Fatalf("run %d's request: %+v; want an approval (its policy asks for every call)", k, q)
			}
			if _, err := h.DecideApproval(ctx, api.DecideParams{ApprovalID: q.ID, Decision: event.DecisionAllowOnce}); err != nil {
				t.Fatal(err)
			}
		}
		want := map[int]string{0: record.RunCompleted, 1: record.RunCompleted, 2: record.RunFailed, 3: record.RunCompleted, 4: record.RunCancelled, 5: record.RunCompleted}
		for k, id := range ids {
			got := wait(t, h, id)
			if got.Status != want[k] {
				t.Fatalf("queued run %d ended %s (%+v); want %s", k, got.Status, got.Error, want[k])
			}
		}
		if r := wait(t, h, ids[2]); r.Error == nil || r.Error.Kind != "max_steps" || r.Steps != 2 {
			t.Fatalf("run three (maxSteps 2): %d steps, %+v; want failed by max_steps after 2", r.Steps, r.Error)
		}
		page, err := h.ReadEvents(ctx, api.ReadEventsParams{SessionID: sid, RunID: ids[1], Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		text := ""
		for _, e := range page.Events {
			var d event.MessageCompletedData
			if e.Type == event.MessageCompleted && e.Decode(&d) == nil {
				text += d.Text
			}
		}
		if text != "answer to two" {
			t.Fatalf("run two answered %q; want its own input", text)
		}
		got := startedOrder(t, h, sid)
		wantOrder := []string{a.ID, ids[0], ids[1], ids[2], ids[3], ids[5]}
		if strings.Join(got, ",") != strings.Join(wantOrder, ",") {
			t.Fatalf("runs started in the order %v; want %v", got, wantOrder)
		}
	})
}

// Runs queued behind a run that waits for an approval stay queued behind
// it across a restart: the waiting run is restored parked (not
// interrupted, not overtaken), and once it is answered and completes the
// queued run starts.
func TestQueuedBehindWaitingRunSurvivesRestart(t *testing.T) {
	eachRestartStore(t, func(t *testing.T, open func(holder string) (store.Store, store.Leases, func())) {
		ctx := context.Background()
		st, ls, closeStore := open("host-1")
		h := newQueueHost(t, host.Config{Store: st, Leases: ls})
		sess, err := h.CreateSession(ctx, api.CreateSessionParams{Mounts: []event.Mount{{ID: "work", Path: t.TempDir(), Default: true}}})
		if err != nil {
			t.Fatal(err)
		}
		sid := sess.ID
		a := start(t, h, api.StartRunParams{SessionID: sid, Input: input("a"), Model: "ask", Policy: &api.Policy{Preset: api.PresetAskAll}})
		openRequest(t, h, sid, a.ID)
		b := start(t, h, api.StartRunParams{SessionID: sid, Input: input("b"), Busy: api.BusyQueue})
		c := start(t, h, api.StartRunParams{SessionID: sid, Input: input("c"), Busy: api.BusyQueue})
		h.Close()
		closeStore()

		st, ls, closeStore = open("host-2")
		defer closeStore()
		h = newQueueHost(t, host.Config{Store: st, Leases: ls})
		defer h.Close()
		q := openRequest(t, h, sid, a.ID)
		for _, id := range []string{b.ID, c.ID} {
			if r, err := h.GetRun(ctx, api.RunIDParams{RunID: id}); err != nil || r.Status != record.RunQueued {
				t.Fatalf("run %s behind the waiting run after the restart: %+v, %v; want queued", id, r, err)
			}
		}
		if _, err := h.DecideApproval(ctx, api.DecideParams{ApprovalID: q.ID, Decision: event.DecisionAllowOnce}); err != nil {
			t.Fatal(err)
		}
		for _, id := range []string{a.ID, b.ID, c.ID} {
			if got := wait(t, h, id); got.Status != record.RunCompleted {
				t.Fatalf("run %s: %s", id, got.Status)
			}
		}
		if got, want := strings.Join(startedOrder(t, h, sid), ","), strings.Join([]string{a.ID, b.ID, c.ID}, ","); got != want {
			t.Fatalf("runs started in the order %s; want %s", got, want)
		}
	})
}

// On PostgreSQL a host that died keeps its sessions' leases until they
// expire. A host that starts meanwhile cannot recover those sessions at
// once; it tries again until their leases expire and then runs their
// queues, without waiting for a client to ask for the session.
func TestQueuedRunsRecoveredWhenDeadHostsLeaseExpires(t *testing.T) {
	ctx := context.Background()
	url := pg.Database(t)
	open := postgresAt(url, 2*time.Second)
	st, ls, closeStore := open(t, "host-1")
	h := newQueueHost(t, host.Config{Store: st, Leases: ls})
	sess, err := h.CreateSession(ctx, api.CreateSessionParams{})
	if err != nil {
		t.Fatal(err)
	}
	a := start(t, h, api.StartRunParams{SessionID: sess.ID, Input: input("a"), Model: "hang"})
	waitFor(t, h, sess.ID, a.ID, ofType(event.StepStarted))
	b := start(t, h, api.StartRunParams{SessionID: sess.ID, Input: input("b"), Busy: api.BusyQueue})
	h.Close()
	closeStore()
	// As if host-1 had died holding the lease: it runs for two seconds more.
	if err := pg.Cluster(t).Exec(ctx, dbName(url), `UPDATE leases SET holder = 'dead-host', expires_at = now() + interval '2 seconds' WHERE session_id = $1`, sess.ID); err != nil {
		t.Fatal(err)
	}
	st, ls, closeStore = open(t, "host-2")
	defer closeStore()
	h = newQueueHost(t, host.Config{Store: st, Leases: ls})
	defer h.Close()
	eventually(t, 20*time.Second, "the queued run did not run once the dead host's lease expired", func() bool {
		r, err := h.GetRun(ctx, api.RunIDParams{RunID: b.ID})
		return err == nil && r.Status == record.RunCompleted
	})
}

// A shared one-shot host (weft run) that opens a session finds the runs a
// serving host queued and keeps them for it: it starts none of them (it
// would cancel them when it exits), and a run/start with busy reject is
// refused naming the first. A run it queues behind them, or a busy
// steer (taken by the first queued run), starts the queue.
func TestSharedHostHoldsTheQueueItFinds(t *testing.T) {
	ctx := context.Background()
	st := memory.New()
	h := newQueueHost(t, host.Config{Store: st})
	sess, err := h.CreateSession(ctx, api.CreateSessionParams{})
	if err != nil {
		t.Fatal(err)
	}
	sid := sess.ID
	a := start(t, h, api.StartRunParams{SessionID: sid, Input: input("a"), Model: "hang"})
	waitFor(t, h, sid, a.ID, ofType(event.StepStarted))
	b := start(t, h, api.StartRunParams{SessionID: sid, Input: input("b"), Busy: api.BusyQueue})
	c := start(t, h, api.StartRunParams{SessionID: sid, Input: input("c"), Busy: api.BusyQueue})
	h.Close()

	h = newQueueHost(t, host.Config{Store: st, Shared: true})
	defer h.Close()
	_, err = h.StartRun(ctx, api.StartRunParams{SessionID: sid, Input: input("mine")})
	var ae *api.Error
	if !errors.As(err, &ae) || ae.Kind != api.KindRunConflict || ae.Data["activeRunId"] != b.ID {
		t.Fatalf("run/start busy reject on a held queue: %v; want run_conflict naming %s", err, b.ID)
	}
	for _, id := range []string{b.ID, c.ID} {
		if r, err := h.GetRun(ctx, api.RunIDParams{RunID: id}); err != nil || r.Status != record.RunQueued {
			t.Fatalf("run %s on the shared host: %+v, %v; want it held, queued", id, r, err)
		}
	}
	steer, err := h.StartRun(ctx, api.StartRunParams{SessionID: sid, Input: input("also this"), Busy: api.BusySteer})
	if err != nil || steer.Steer == nil || steer.Steer.RunID != b.ID {
		t.Fatalf("run/start busy steer on a held queue: %+v, %v; want a steer into %s", steer, err, b.ID)
	}
	mine := start(t, h, api.StartRunParams{SessionID: sid, Input: input("mine"), Busy: api.BusyQueue})
	for _, id := range []string{b.ID, c.ID, mine.ID} {
		if got := wait(t, h, id); got.Status != record.RunCompleted {
			t.Fatalf("run %s: %s", id, got.Status)
		}
	}
	if got, want := strings.Join(startedOrder(t, h, sid), ","), strings.Join([]string{a.ID, b.ID, c.ID, mine.ID}, ","); got != want {
		t.Fatalf("runs started in the order %s; want %s", got, want)
	}
	page, err := h.ReadEvents(ctx, api.ReadEventsParams{SessionID: sid, RunID: b.ID, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	consumed := false
	for _, e := range page.Events {
		var d event.SteerData
		if e.Type == event.SteerConsumed && e.Decode(&d) == nil && d.SteerID == steer.Steer.SteerID && d.Step == 1 {
			consumed = true
		}
	}
	if !consumed {
		t.Fatalf("run %s did not consume the steer at its first step: %+v", b.ID, page.Events)
	}
}

// A write failure (disk full) while a run waits for an approval does not
// end that run: it has no step in flight for the failure to cut short.
// Once the store takes writes again the run still waits, the run queued
// behind it stays queued, and both complete after the answer.
func TestStorageFailureKeepsWaitingRunAndItsQueue(t *testing.T) {
	ctx := context.Background()
	fst := &storetest.Faulty{Store: memory.New()}
	h := newQueueHost(t, host.Config{Store: fst})
	defer h.Close()
	sess, err := h.CreateSession(ctx, api.CreateSessionParams{Mounts: []event.Mount{{ID: "work", Path: t.TempDir(), Default: true}}})
	if err != nil {
		t.Fatal(err)
	}
	sid := sess.ID
	a := start(t, h, api.StartRunParams{SessionID: sid, Input: input("a"), Model: "ask", Policy: &api.Policy{Preset: api.PresetAskAll}})
	q := openRequest(t, h, sid, a.ID)
	// The request commits before the run parks: a failure between the two
	// cuts a step in flight, which is not what this test is about.
	eventually(t, 10*time.Second, "the run parks", func() bool { return h.Metrics().RunsWaiting == 1 })
	b := start(t, h, api.StartRunParams{SessionID: sid, Input: input("b"), Busy: api.BusyQueue})

	fst.Fail(diskFull)
	if _, err := h.StartRun(ctx, api.StartRunParams{SessionID: sid, Input: input("c"), Busy: api.BusyQueue}); !errors.Is(err, api.ErrStorageUnavailable) {
		t.Fatalf("run/start on a full disk: %v", err)
	}
	fst.Fail(nil)
	eventually(t, 10*time.Second, "the session did not take commands again", func() bool {
		_, err := h.DecideApproval(ctx, api.DecideParams{ApprovalID: q.ID, Decision: event.DecisionAllowOnce})
		return !errors.Is(err, api.ErrStorageUnavailable)
	})
	for _, id := range []string{a.ID, b.ID} {
		if got := wait(t, h, id); got.Status != record.RunCompleted {
			t.Fatalf("run %s after the store came back: %s (%+v)", id, got.Status, got.Error)
		}
	}
}
