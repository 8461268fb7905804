package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"iter"
	"os"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"weft.dev/weft/api"
	"weft.dev/weft/client"
	"weft.dev/weft/event"
	"weft.dev/weft/internal/pgtest"
	"weft.dev/weft/store"
	"weft.dev/weft/store/postgres"
	"weft.dev/weft/store/record"
)

// cluster is three `weft serve` hosts on one PostgreSQL database, each
// with a state directory of its own and one shared token.
type cluster struct {
	t     testing.TB
	envs  []*testEnv
	addrs []string
	srvs  []*os.Process
	token string
	ttl   time.Duration
	// tls verifies the hosts' certificates when addrs are https://.
	tls *tls.Config
	// flags are the flags each host was started with after --listen.
	flags [][]string
	// exited closes when host i's process has exited.
	exited []chan struct{}
}

// newCluster starts PostgreSQL, migrates a database and starts n hosts
// on it with lease TTL ttl.
func newCluster(t testing.TB, n int, ttl time.Duration) *cluster {
	t.Helper()
	return newClusterWith(t, n, ttl, nil)
}

// newClusterWith is newCluster with more flags for host i, from flags
// (nil: none), which may also add to the host's environment e.env.
func newClusterWith(t testing.TB, n int, ttl time.Duration, flags func(i int, e *testEnv, addr string) []string) *cluster {
	t.Helper()
	ctx := context.Background()
	c, err := pgtest.New(ctx)
	if errors.Is(err, pgtest.ErrNoServer) {
		pgtest.Skip(t, err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	db, err := c.CreateDatabase(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cl := &cluster{t: t, token: "cluster-token-0123456789abcdef", ttl: ttl}
	for i := range n {
		e := newEnv(t)
		e.store = c.URL(db)
		e.env = []string{"WEFT_TOKEN=" + cl.token}
		if i == 0 {
			if _, stderr, code := e.weft("", "migrate"); code != 0 {
				t.Fatalf("migrate: %d %s", code, stderr)
			}
		}
		addr := freeAddr(t)
		more := []string{"--lease-ttl", ttl.String()}
		if flags != nil {
			more = append(more, flags(i, e, addr)...)
		}
		srv := e.serve(addr, more...)
		exited := make(chan struct{})
		go func() { srv.Wait(); close(exited) }()
		cl.envs, cl.addrs, cl.srvs = append(cl.envs, e), append(cl.addrs, addr), append(cl.srvs, srv.Process)
		cl.flags = append(cl.flags, more)
		cl.exited = append(cl.exited, exited)
		t.Cleanup(func() { srv.Process.Signal(os.Interrupt); <-exited })
	}
	return cl
}

// dial connects a client to host i.
func (cl *cluster) dial(ctx context.Context, i int) *client.Client {
	cl.t.Helper()
	c, err := client.Dial(ctx, cl.addrs[i], client.Options{Token: cl.token, TLSConfig: cl.tls})
	if err != nil {
		cl.t.Fatal(err)
	}
	cl.t.Cleanup(func() { c.Close() })
	return c
}

// TestClusterTakeOverQueuedRuns: three hosts on one PostgreSQL; the owner
// of a session is SIGKILLed mid-run with four runs queued behind it.
// Within the lease TTL + 5 s another host has interrupted the mid-flight
// run and completed every queued run, in the order they were queued,
// each once, without a client asking for the session: the runs' River
// jobs woke a surviving host. A client attached through the third host
// (which never owned the session when it subscribed) received every
// event exactly once, in order, identical to the log. The runs are
// queued through all three hosts: those that do not own the session
// forward run/start to its owner, with the owner's receipts and errors.
func TestClusterTakeOverQueuedRuns(t *testing.T) {
	const ttl = 2 * time.Second
	cl := newCluster(t, 3, ttl)
	e := cl.envs[0]
	hang := e.script("hang.json", `{"steps":[{"text":"never","delayMs":3600000}]}`)
	echo := e.script("echo.json", `{"loop":true,"steps":[{"text":"echo {{input}}","delayMs":1}]}`)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	a, b, c := cl.dial(ctx, 0), cl.dial(ctx, 1), cl.dial(ctx, 2)
	s, err := a.CreateSession(ctx, api.CreateSessionParams{Model: "scripted:" + echo})
	if err != nil {
		t.Fatal(err)
	}
	sub, err := c.Subscribe(ctx, api.SubscribeParams{SessionID: s.ID})
	if err != nil {
		t.Fatalf("subscribe through a host that does not own the session: %v", err)
	}
	type result struct {
		evs []event.Event
		err error
	}
	attached := make(chan result, 1)
	var lastQueued string
	ready := make(chan struct{})
	go func() {
		var r result
		defer func() { attached <- r }()
		<-ready
		for ev, err := range sub {
			if err != nil {
				r.err = err
				return
			}
			r.evs = append(r.evs, ev)
			if ev.RunID == lastQueued && event.IsTerminalRun(ev.Type) {
				return
			}
		}
	}()
	active, err := a.StartRun(ctx, api.StartRunParams{SessionID: s.ID, Input: api.Input(event.TextParts("first")), Model: "scripted:" + hang})
	if err != nil {
		t.Fatal(err)
	}
	// The runs are queued through every host: B and C forward them to A,
	// which owns the session; a retry through another host replays.
	var queued []string
	params := func(i int) api.StartRunParams {
		return api.StartRunParams{SessionID: s.ID, Input: api.Input(event.TextParts(fmt.Sprintf("queued-%d", i))),
			Busy: api.BusyQueue, IdempotencyKey: fmt.Sprintf("q-%d", i)}
	}
	through := []*client.Client{b, c, a, b}
	for i := range 4 {
		r, err := through[i].StartRun(ctx, params(i))
		if err != nil {
			t.Fatalf("run/start %d through host %d: %v", i, []int{1, 2, 0, 1}[i], err)
		}
		if r.Status != record.RunQueued {
			t.Fatalf("run %d: %s; want queued", i, r.Status)
		}
		queued = append(queued, r.ID)
	}
	if again, err := c.StartRun(ctx, params(0)); err != nil || !again.Replayed || again.ID != queued[0] {
		t.Fatalf("a retry through host C of run/start sent through B: %+v, %v; want a replay of %s", again, err, queued[0])
	}
	if _, err := b.StartRun(ctx, api.StartRunParams{SessionID: s.ID, Input: api.Input(event.TextParts("x"))}); err == nil || !strings.Contains(err.Error(), "busy") {
		t.Fatalf("run/start with busy reject through host B: %v; want the owner's run_conflict (busy)", err)
	}
	lastQueued = queued[len(queued)-1]
	close(ready)
	if !poll(10*time.Second, func() bool {
		r, err := b.GetRun(ctx, api.RunIDParams{RunID: active.ID})
		return err == nil && r.Status == record.RunRunning
	}) {
		t.Fatal("the first run did not start")
	}
	a.Close()
	cl.srvs[0].Signal(syscall.SIGKILL)
	killed := time.Now()
	// Nothing asks for the session: run/get reads the store.
	if !poll(ttl+5*time.Second, func() bool {
		r, err := b.GetRun(ctx, api.RunIDParams{RunID: queued[len(queued)-1]})
		return err == nil && record.IsTerminal(r.Status)
	}) {
		t.Fatalf("the queued runs did not all run within the TTL + 5s of the kill")
	}
	t.Logf("the last queued run ended %v after the kill (lease TTL %v)", time.Since(killed).Round(time.Millisecond), ttl)
	page, err := b.ReadEvents(ctx, api.ReadEventsParams{SessionID: s.ID, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	checkContiguous(t, page.Events)
	var got result
	select {
	case got = <-attached:
	case <-time.After(10 * time.Second):
		t.Fatal("the client attached through the third host did not see the last queued run end")
	}
	if got.err != nil {
		t.Fatalf("the subscription through the third host ended: %v", got.err)
	}
	if len(got.evs) != len(page.Events) {
		t.Fatalf("the client attached through the third host received %d events; the log holds %d", len(got.evs), len(page.Events))
	}
	for i := range got.evs {
		want, have := page.Events[i], got.evs[i]
		if have.Seq != want.Seq || have.Type != want.Type || have.RunID != want.RunID || string(have.Data) != string(want.Data) {
			t.Fatalf("event %d through the third host: %+v; the log has %+v", i, have, want)
		}
	}
	var order []string
	ends := map[string][]event.Type{}
	text := map[string]string{}
	for _, ev := range page.Events {
		switch ev.Type {
		case event.RunStarted:
			order = append(order, ev.RunID)
		case event.RunCompleted, event.RunFailed, event.RunCancelled, event.RunInterrupted:
			ends[ev.RunID] = append(ends[ev.RunID], ev.Type)
		case event.MessageCompleted:
			var d event.MessageCompletedData
			if ev.Decode(&d) == nil {
				text[ev.RunID] += d.Text
			}
		}
	}
	if got, want := strings.Join(order, " "), strings.Join(append([]string{active.ID}, queued...), " "); got != want {
		t.Fatalf("runs started in the order\n%s\nwant each once, in order\n%s", got, want)
	}
	if got := ends[active.ID]; len(got) != 1 || got[0] != event.RunInterrupted {
		t.Fatalf("the mid-flight run ended with %v; want one run.interrupted", got)
	}
	for i, id := range queued {
		if got := ends[id]; len(got) != 1 || got[0] != event.RunCompleted {
			t.Fatalf("queued run %d ended with %v; want one run.completed", i, got)
		}
		if want := fmt.Sprintf("echo queued-%d", i); text[id] != want {
			t.Fatalf("queued run %d answered %q; want %q", i, text[id], want)
		}
	}
	// weft nodes shows each host's queued runs and River's jobs: the
	// job of every run that ended completes at its next look (the one
	// the killed host was working, if any, stays running until River's
	// rescuer takes it back).
	var out, stderr string
	var code int
	done := func() bool {
		return strings.Contains(out, "QUEUED") && strings.Contains(out, "River: leader ") && strings.Contains(out, "completed ") &&
			!strings.Contains(out, "available") && !strings.Contains(out, "scheduled")
	}
	poll(ttl+time.Second, func() bool {
		out, stderr, code = cl.envs[1].weft("", "nodes")
		return done()
	})
	if code != 0 || !done() {
		t.Fatalf("weft nodes: %d\n%s%s", code, out, stderr)
	}
}

// TestClusterDrainOnSIGTERM: a host stopped with SIGTERM drains: it
// stops taking commands, hands its runs over and releases its leases at
// once, so another host continues long before the lease TTL (30 s here)
// would have let it. The run whose model is mid-stream when the SIGTERM
// comes is not ended: its model call is cut, run.suspended records it,
// and the other host continues the same run (same ID, run.resumed, a new
// step) to completion, then the queued runs in order. A client attached
// through the other host before the SIGTERM receives every event once,
// identical to the log.
func TestClusterDrainOnSIGTERM(t *testing.T) {
	const ttl = 30 * time.Second
	cl := newCluster(t, 2, ttl)
	e := cl.envs[0]
	// slow streams its answer for about 3 s: the SIGTERM comes mid-stream.
	slow := e.script("slow.json", `{"loop":true,"steps":[{"text":"`+strings.Repeat("word ", 60)+`end","delayMs":50}]}`)
	echo := e.script("echo.json", `{"loop":true,"steps":[{"text":"echo {{input}}","delayMs":1}]}`)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	a, b := cl.dial(ctx, 0), cl.dial(ctx, 1)
	s, err := a.CreateSession(ctx, api.CreateSessionParams{Model: "scripted:" + echo})
	if err != nil {
		t.Fatal(err)
	}
	sub, err := b.Subscribe(ctx, api.SubscribeParams{SessionID: s.ID})
	if err != nil {
		t.Fatal(err)
	}
	active, err := a.StartRun(ctx, api.StartRunParams{SessionID: s.ID, Input: api.Input(event.TextParts("first")), Model: "scripted:" + slow})
	if err != nil {
		t.Fatal(err)
	}
	var queued []string
	for i := range 3 {
		r, err := a.StartRun(ctx, api.StartRunParams{SessionID: s.ID, Input: api.Input(event.TextParts(fmt.Sprintf("queued-%d", i))), Busy: api.BusyQueue})
		if err != nil {
			t.Fatal(err)
		}
		queued = append(queued, r.ID)
	}
	attached := subscribeUntil(sub, queued[len(queued)-1])
	// Mid-stream: the first words are in the log.
	if !poll(10*time.Second, func() bool {
		page, err := b.ReadEvents(ctx, api.ReadEventsParams{SessionID: s.ID, RunID: active.ID, Limit: 1000})
		return err == nil && countType(page.Events, event.MessageDelta) > 0
	}) {
		t.Fatal("the first run's model output did not begin")
	}
	a.Close()
	stopped := time.Now()
	cl.srvs[0].Signal(syscall.SIGTERM)
	exitAt := make(chan time.Time, 1)
	go func() {
		<-cl.exited[0]
		exitAt <- time.Now()
	}()
	if !poll(20*time.Second, func() bool {
		r, err := b.GetRun(ctx, api.RunIDParams{RunID: queued[len(queued)-1]})
		return err == nil && record.IsTerminal(r.Status)
	}) {
		t.Fatalf("the runs did not run on the other host within 20 s of the SIGTERM (lease TTL %v)", ttl)
	}
	t.Logf("the last queued run ended %v after the SIGTERM (lease TTL %v)", time.Since(stopped).Round(time.Millisecond), ttl)
	select {
	case at := <-exitAt:
		t.Logf("figure: the drained host exited %v after the SIGTERM", at.Sub(stopped).Round(time.Millisecond))
	case <-time.After(10 * time.Second):
		t.Fatal("the drained host did not exit")
	}
	page, err := b.ReadEvents(ctx, api.ReadEventsParams{SessionID: s.ID, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	checkContiguous(t, page.Events)
	checkAttached(t, attached, page.Events)
	for _, ev := range page.Events {
		if ev.Type == event.RunResumed && ev.RunID == active.ID {
			t.Logf("figure: the handed-over run resumed on the other host %v after the SIGTERM", ev.Time.Sub(stopped).Round(time.Millisecond))
		}
	}
	var order []string
	ends := map[string][]event.Type{}
	var runEvs []event.Type
	for _, ev := range page.Events {
		if ev.RunID == active.ID {
			runEvs = append(runEvs, ev.Type)
		}
		switch ev.Type {
		case event.RunStarted:
			order = append(order, ev.RunID)
		case event.RunCompleted, event.RunFailed, event.RunCancelled, event.RunInterrupted:
			ends[ev.RunID] = append(ends[ev.RunID], ev.Type)
		case event.RunSuspended:
			var d event.RunSuspendedData
			if err := ev.Decode(&d); err != nil || d.CutStep != 1 || d.Host == "" {
				t.Fatalf("run.suspended %+v, %v; want step 1 cut, naming the host", d, err)
			}
		}
	}
	if got, want := strings.Join(order, " "), strings.Join(append([]string{active.ID}, queued...), " "); got != want {
		t.Fatalf("runs started in the order\n%s\nwant each once, in order\n%s", got, want)
	}
	if got := ends[active.ID]; len(got) != 1 || got[0] != event.RunCompleted {
		t.Fatalf("the handed-over run ended with %v; want one run.completed (its events: %v)", got, runEvs)
	}
	if typeCount(runEvs, event.RunSuspended) != 1 || typeCount(runEvs, event.RunResumed) != 1 || typeCount(runEvs, event.MessageCompleted) != 1 {
		t.Fatalf("the handed-over run's events: %v; want one run.suspended, run.resumed and message.completed", runEvs)
	}
	for i, id := range queued {
		if got := ends[id]; len(got) != 1 || got[0] != event.RunCompleted {
			t.Fatalf("queued run %d ended with %v; want one run.completed", i, got)
		}
	}
}

// startToolRun creates a session through a whose model is the scripted
// script, with work as its default mount, starts a run that asks nothing
// and returns once b sees its tool call started.
func startToolRun(t *testing.T, ctx context.Context, a, b *client.Client, script, work string) (*api.SessionResult, *api.RunResult) {
	t.Helper()
	s, err := a.CreateSession(ctx, api.CreateSessionParams{Model: "scripted:" + script, Mounts: []event.Mount{{ID: "work", Path: work, Default: true}}})
	if err != nil {
		t.Fatal(err)
	}
	r, err := a.StartRun(ctx, api.StartRunParams{SessionID: s.ID, Input: api.Input(event.TextParts("go")), Policy: &api.Policy{Preset: api.PresetNeverAsk}})
	if err != nil {
		t.Fatal(err)
	}
	if !poll(10*time.Second, func() bool {
		page, err := b.ReadEvents(ctx, api.ReadEventsParams{SessionID: s.ID, RunID: r.ID, Limit: 1000})
		return err == nil && countType(page.Events, event.ToolCallStarted) > 0
	}) {
		t.Fatal("the tool call did not start")
	}
	return s, r
}

// TestClusterDrainLetsToolFinish: a run in a tool call (a shell that
// writes a line then sleeps a second) when its host gets SIGTERM finishes
// the call on that host, stops at the step boundary, and continues on the
// other host without running the call again; a run whose tool call
// outlasts the drain grace (--drain-timeout) ends interrupted, its call
// closed, the event saying why.
func TestClusterDrainLetsToolFinish(t *testing.T) {
	const ttl = 30 * time.Second
	cl := newCluster(t, 2, ttl)
	e := cl.envs[0]
	work := t.TempDir()
	tool := e.script("tool.json", `{"steps":[{"toolCalls":[{"name":"shell","arguments":{"command":"echo ran >> ran.txt; sleep 1"}}]},{"text":"done"}]}`)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	a, b := cl.dial(ctx, 0), cl.dial(ctx, 1)
	s, r := startToolRun(t, ctx, a, b, tool, work)
	a.Close()
	cl.srvs[0].Signal(syscall.SIGTERM)
	var (
		got *api.RunResult
		err error
	)
	if !poll(20*time.Second, func() bool {
		got, err = b.GetRun(ctx, api.RunIDParams{RunID: r.ID})
		return err == nil && record.IsTerminal(got.Status)
	}) {
		t.Fatalf("the run did not end on the other host: %+v", got)
	}
	page, err := b.ReadEvents(ctx, api.ReadEventsParams{SessionID: s.ID, RunID: r.ID, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	var evs []event.Type
	for _, ev := range page.Events {
		evs = append(evs, ev.Type)
	}
	if got.Status != record.RunCompleted || typeCount(evs, event.ToolCallStarted) != 1 || typeCount(evs, event.ToolCallCompleted) != 1 ||
		typeCount(evs, event.RunSuspended) != 1 || typeCount(evs, event.RunResumed) != 1 {
		t.Fatalf("the run: %s, events %v; want completed, its call run once, handed over once", got.Status, evs)
	}
	if data, err := os.ReadFile(work + "/ran.txt"); err != nil || string(data) != "ran\n" {
		t.Fatalf("ran.txt: %q, %v; want the call run once", data, err)
	}

	// A second session on the surviving host, stopped with a grace shorter than its tool call.
	short := freeAddr(t)
	e2 := cl.envs[0]
	srv := e2.serve(short, "--lease-ttl", ttl.String(), "--drain-timeout", "300ms")
	t.Cleanup(func() { srv.Process.Signal(os.Interrupt); srv.Wait() })
	c, err := client.Dial(ctx, short, client.Options{Token: cl.token})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	long := e.script("long.json", `{"steps":[{"toolCalls":[{"name":"shell","arguments":{"command":"sleep 30"}}]},{"text":"done"}]}`)
	s2, err := c.CreateSession(ctx, api.CreateSessionParams{Model: "scripted:" + long, Mounts: []event.Mount{{ID: "work", Path: t.TempDir(), Default: true}}})
	if err != nil {
		t.Fatal(err)
	}
	r2, err := c.StartRun(ctx, api.StartRunParams{SessionID: s2.ID, Input: api.Input(event.TextParts("go")), Policy: &api.Policy{Preset: api.PresetNeverAsk}})
	if err != nil {
		t.Fatal(err)
	}
	if !poll(10*time.Second, func() bool {
		page, err := b.ReadEvents(ctx, api.ReadEventsParams{SessionID: s2.ID, RunID: r2.ID, Limit: 1000})
		return err == nil && countType(page.Events, event.ToolCallStarted) > 0
	}) {
		t.Fatal("the long tool call did not start")
	}
	c.Close()
	srv.Process.Signal(syscall.SIGTERM)
	if err := srv.Wait(); err != nil {
		t.Fatalf("weft serve after SIGTERM: %v", err)
	}
	got2, err := b.GetRun(ctx, api.RunIDParams{RunID: r2.ID})
	// The message names the grace the drain had, from its start: the
	// 300 ms less the moments between the signal and the drain.
	if err != nil || got2.Status != record.RunInterrupted || got2.Error == nil || got2.Error.Kind != "drain_timeout" ||
		!regexp.MustCompile(`grace of [1-3][0-9]0ms`).MatchString(got2.Error.Message) {
		t.Fatalf("the run whose tool outlasted the grace: %+v, %v, %+v; want interrupted, drain_timeout, naming the grace", got2, err, got2.Error)
	}
	page, err = b.ReadEvents(ctx, api.ReadEventsParams{SessionID: s2.ID, RunID: r2.ID, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if countType(page.Events, event.ToolCallCompleted) != 1 || countType(page.Events, event.RunSuspended) != 0 {
		t.Fatalf("the interrupted run's events: %d tool.call.completed, %d run.suspended; want its call closed, no handover",
			countType(page.Events, event.ToolCallCompleted), countType(page.Events, event.RunSuspended))
	}
}

// subscribeUntil collects sub's events in a goroutine until the terminal
// event of run last, and delivers them (or the error that ended sub).
func subscribeUntil(sub iter.Seq2[event.Event, error], last string) <-chan subscribed {
	out := make(chan subscribed, 1)
	go func() {
		var r subscribed
		defer func() { out <- r }()
		for ev, err := range sub {
			if err != nil {
				r.err = err
				return
			}
			r.evs = append(r.evs, ev)
			if ev.RunID == last && event.IsTerminalRun(ev.Type) {
				return
			}
		}
	}()
	return out
}

// subscribed is what a subscription received.
type subscribed struct {
	evs []event.Event
	err error
}

// checkAttached checks that the subscription delivered exactly the log.
func checkAttached(t *testing.T, attached <-chan subscribed, log []event.Event) {
	t.Helper()
	var got subscribed
	select {
	case got = <-attached:
	case <-time.After(10 * time.Second):
		t.Fatal("the attached client did not see the last run end")
	}
	if got.err != nil {
		t.Fatalf("the subscription ended: %v", got.err)
	}
	if len(got.evs) != len(log) {
		t.Fatalf("the attached client received %d events; the log holds %d", len(got.evs), len(log))
	}
	for i := range got.evs {
		want, have := log[i], got.evs[i]
		if have.Seq != want.Seq || have.Type != want.Type || have.RunID != want.RunID || string(have.Data) != string(want.Data) {
			t.Fatalf("event %d received: %+v; the log has %+v", i, have, want)
		}
	}
}

func countType(evs []event.Event, typ event.Type) int {
	n := 0
	for _, e := range evs {
		if e.Type == typ {
			n++
		}
	}
	return n
}

func typeCount(ts []event.Type, typ event.Type) int {
	n := 0
	for _, t := range ts {
		if t == typ {
			n++
		}
	}
	return n
}

// TestClusterDrainKilledHalfWay: a host SIGKILLed half-way through its
// drain (a tool call of its run still running) leaves the lease the
// source of truth: another host takes the session once the lease expires
// and ends the run interrupted, as after any crash; the tool call is
// closed once and never runs again.
func TestClusterDrainKilledHalfWay(t *testing.T) {
	const ttl = 2 * time.Second
	cl := newCluster(t, 2, ttl)
	e := cl.envs[0]
	work := t.TempDir()
	tool := e.script("tool.json", `{"steps":[{"toolCalls":[{"name":"shell","arguments":{"command":"echo ran >> ran.txt; sleep 5"}}]},{"text":"done"}]}`)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	a, b := cl.dial(ctx, 0), cl.dial(ctx, 1)
	s, r := startToolRun(t, ctx, a, b, tool, work)
	a.Close()
	cl.srvs[0].Signal(syscall.SIGTERM)
	time.Sleep(500 * time.Millisecond) // half-way: the drain waits for the call
	cl.srvs[0].Signal(syscall.SIGKILL)
	var (
		got *api.RunResult
		err error
	)
	if !poll(ttl+10*time.Second, func() bool {
		got, err = b.GetRun(ctx, api.RunIDParams{RunID: r.ID})
		return err == nil && record.IsTerminal(got.Status)
	}) {
		t.Fatalf("the run did not end on the other host: %+v, %v", got, err)
	}
	page, err := b.ReadEvents(ctx, api.ReadEventsParams{SessionID: s.ID, RunID: r.ID, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != record.RunInterrupted || countType(page.Events, event.ToolCallStarted) != 1 ||
		countType(page.Events, event.ToolCallCompleted) != 1 || countType(page.Events, event.RunSuspended) != 0 {
		t.Fatalf("the run: %s with %d calls started, %d closed, %d run.suspended; want interrupted, its call closed once",
			got.Status, countType(page.Events, event.ToolCallStarted), countType(page.Events, event.ToolCallCompleted), countType(page.Events, event.RunSuspended))
	}
	if data, err := os.ReadFile(work + "/ran.txt"); err != nil || string(data) != "ran\n" {
		t.Fatalf("ran.txt: %q, %v; want the call run once", data, err)
	}
}

// TestClusterForwardToRestartedOwner: the owner of a session is
// SIGKILLed and restarted at the same address, as an operator restarts
// a host. Until the dead process's lease expires, a command another host
// forwards there reaches a process that does not own the session: it
// must answer a retryable error (not the run_conflict of a busy session,
// which tells the client not to retry), and the client's retry after the
// TTL is served.
func TestClusterForwardToRestartedOwner(t *testing.T) {
	const ttl = 3 * time.Second
	cl := newCluster(t, 2, ttl)
	e := cl.envs[0]
	hang := e.script("hang.json", `{"steps":[{"text":"never","delayMs":3600000}]}`)
	echo := e.script("echo.json", `{"loop":true,"steps":[{"text":"echo {{input}}","delayMs":1}]}`)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	a, b := cl.dial(ctx, 0), cl.dial(ctx, 1)
	s, err := a.CreateSession(ctx, api.CreateSessionParams{Model: "scripted:" + echo})
	if err != nil {
		t.Fatal(err)
	}
	first, err := a.StartRun(ctx, api.StartRunParams{SessionID: s.ID, Input: api.Input(event.TextParts("first")), Model: "scripted:" + hang})
	if err != nil {
		t.Fatal(err)
	}
	if !poll(10*time.Second, func() bool {
		r, err := b.GetRun(ctx, api.RunIDParams{RunID: first.ID})
		return err == nil && r.Status == record.RunRunning
	}) {
		t.Fatal("the first run did not start")
	}
	a.Close()
	cl.srvs[0].Signal(syscall.SIGKILL)
	cl.srvs[0].Wait()
	srv := e.serve(cl.addrs[0], "--lease-ttl", ttl.String())
	t.Cleanup(func() { srv.Process.Signal(os.Interrupt); srv.Wait() })
	params := api.StartRunParams{SessionID: s.ID, Input: api.Input(event.TextParts("queued")), Busy: api.BusyQueue, IdempotencyKey: "q"}
	_, err = b.StartRun(ctx, params)
	var ae *api.Error
	if !errors.As(err, &ae) || !ae.Retryable {
		t.Fatalf("run/start forwarded to the restarted owner's address while the dead owner's lease lives: %v; want a retryable error", err)
	}
	var run *api.RunResult
	if !poll(ttl+10*time.Second, func() bool {
		run, err = b.StartRun(ctx, params)
		return err == nil
	}) {
		t.Fatalf("run/start retried after the lease TTL: %v", err)
	}
	w, err := b.WaitRun(ctx, api.WaitRunParams{RunID: run.ID, TimeoutMs: 10000})
	if err != nil || w.Run.Status != record.RunCompleted {
		t.Fatalf("the queued run: %+v, %v; want completed", w, err)
	}
}

// TestClusterForwardToUnregisteredHolder: a session held by a process
// that registered no address (a one-shot `weft run`, or, as the torture
// test found, a host that took sessions as it started, before it
// registered its address) is answered through a serving host with a
// retryable error, not with the run_conflict of a busy session; the
// retry once the holder let go is served.
func TestClusterForwardToUnregisteredHolder(t *testing.T) {
	const ttl = 2 * time.Second
	cl := newCluster(t, 2, ttl)
	e := cl.envs[0]
	echo := e.script("echo.json", `{"loop":true,"steps":[{"text":"echo {{input}}","delayMs":1}]}`)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	a, b := cl.dial(ctx, 0), cl.dial(ctx, 1)
	s, err := a.CreateSession(ctx, api.CreateSessionParams{Model: "scripted:" + echo})
	if err != nil {
		t.Fatal(err)
	}
	a.Close()
	cl.srvs[0].Signal(syscall.SIGKILL)
	cl.srvs[0].Wait()
	st, err := postgres.Open(ctx, postgres.Config{URL: e.store, MaxConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	leases, err := postgres.NewLeases(st, postgres.LeaseConfig{Holder: postgres.HolderName("weft run"), TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	defer leases.Close()
	var ls store.Lease
	if !poll(ttl+5*time.Second, func() bool {
		ls, err = leases.Acquire(ctx, s.ID)
		return err == nil
	}) {
		t.Fatalf("take the dead host's session: %v", err)
	}
	params := api.StartRunParams{SessionID: s.ID, Input: api.Input(event.TextParts("hi")), IdempotencyKey: "k"}
	_, err = b.StartRun(ctx, params)
	var ae *api.Error
	if !errors.As(err, &ae) || !ae.Retryable {
		t.Fatalf("run/start of a session held by a process with no address: %v; want a retryable error", err)
	}
	if err := ls.Release(ctx); err != nil {
		t.Fatal(err)
	}
	r, err := b.StartRun(ctx, params)
	if err != nil {
		t.Fatalf("run/start retried once the holder let go: %v", err)
	}
	if w, err := b.WaitRun(ctx, api.WaitRunParams{RunID: r.ID, TimeoutMs: 10000}); err != nil || w.Run.Status != record.RunCompleted {
		t.Fatalf("the run: %+v, %v; want completed", w, err)
	}
}
