package host_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"weft.dev/weft/api"
	"weft.dev/weft/event"
	"weft.dev/weft/host"
	"weft.dev/weft/llm/scripted"
	"weft.dev/weft/process"
	"weft.dev/weft/store/memory"
	"weft.dev/weft/store/record"
	"weft.dev/weft/tool"
	"weft.dev/weft/tool/builtin"
)

// newProcHost is a host with a process manager and the process tools.
func newProcHost(t *testing.T, extra map[string]string) *host.Host {
	t.Helper()
	st := memory.New()
	m, err := process.New(process.Config{Store: st, KillGrace: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	reg := tool.NewRegistry()
	if err := builtin.Register(reg, builtin.Options{Background: process.BackgroundShell{}}); err != nil {
		t.Fatal(err)
	}
	if err := process.RegisterTools(reg, m); err != nil {
		t.Fatal(err)
	}
	h, err := host.New(context.Background(), host.Config{
		Store: st, Tools: reg, DefaultModel: "scripted:fast", CoalesceWindow: 2 * time.Millisecond, Processes: m,
		ResolveModel: func(name string) (*host.Model, error) {
			key := strings.TrimPrefix(name, "scripted:")
			src, ok := extra[key]
			if !ok {
				src, ok = scripts[key]
			}
			if !ok {
				return nil, fmt.Errorf("unknown model %q", name)
			}
			p, err := scripted.Parse(key+".json", []byte(src))
			if err != nil {
				return nil, err
			}
			return &host.Model{Name: name, Provider: p, Model: key}, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

func sessionEvents(t *testing.T, h *host.Host, sid string, types ...event.Type) []event.Event {
	t.Helper()
	p, err := h.ReadEvents(context.Background(), api.ReadEventsParams{SessionID: sid, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	var out []event.Event
	for _, e := range p.Events {
		for _, ty := range types {
			if e.Type == ty {
				out = append(out, e)
			}
		}
	}
	return out
}

func TestProcessLifecycleInSessionLog(t *testing.T) {
	h := newProcHost(t, nil)
	ctx := context.Background()
	sid := session(t, h, "scripted:fast")
	p, err := h.StartProcess(ctx, api.ProcessStartParams{SessionID: sid, Command: "echo hello; exit 3"})
	if err != nil {
		t.Fatal(err)
	}
	if p.Handle.ID != p.ID {
		t.Fatalf("handle %+v", p.Handle)
	}
	r, err := h.AwaitProcess(ctx, api.ProcessAwaitParams{ID: p.ID, TimeoutMs: 5000})
	if err != nil || r.TimedOut || r.Process.Status != record.ProcessFailed || *r.Process.ExitCode != 3 || !strings.Contains(r.Tail, "hello") {
		t.Fatalf("await: %+v %v", r, err)
	}
	waitFor(t, h, sid, "", ofType(event.ProcessExited))
	evs := sessionEvents(t, h, sid, event.ProcessStarted, event.ProcessExited)
	if len(evs) != 2 {
		t.Fatalf("session log: %+v", evs)
	}
	var d event.ProcessData
	evs[1].Decode(&d)
	if evs[0].Type != event.ProcessStarted || d.ProcessID != p.ID || d.Status != record.ProcessFailed || !strings.Contains(d.Tail, "hello") {
		t.Fatalf("session log: %+v %+v", evs, d)
	}
	out, err := h.ProcessOutput(ctx, api.ProcessOutputParams{ID: p.ID})
	if err != nil || string(out.Data) != "hello\n" {
		t.Fatalf("output: %+v %v", out, err)
	}
	// Another session cannot see it; a grant lets it.
	other := session(t, h, "scripted:fast")
	if _, err := h.GetProcess(ctx, api.ProcessIDParams{ID: p.ID, SessionID: other}); !errors.Is(err, api.ErrNotFound) {
		t.Fatalf("other session: %v", err)
	}
	if _, err := h.GrantProcess(ctx, api.ProcessGrantParams{ID: p.ID, SessionID: sid, ToSessionID: other}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.GetProcess(ctx, api.ProcessIDParams{ID: p.ID, SessionID: other}); err != nil {
		t.Fatalf("granted session: %v", err)
	}
}

func TestProcessStartIdempotentAndBadInput(t *testing.T) {
	h := newProcHost(t, nil)
	ctx := context.Background()
	sid := session(t, h, "scripted:fast")
	a, err := h.StartProcess(ctx, api.ProcessStartParams{SessionID: sid, Command: "sleep 0.1", IdempotencyKey: "p1"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := h.StartProcess(ctx, api.ProcessStartParams{SessionID: sid, Command: "sleep 0.1", IdempotencyKey: "p1"})
	if err != nil || b.ID != a.ID || !b.Replayed {
		t.Fatalf("replay: %+v %v", b, err)
	}
	if _, err := h.StartProcess(ctx, api.ProcessStartParams{SessionID: sid, Command: "sleep 1", IdempotencyKey: "p1"}); !errors.Is(err, api.ErrIdempotencyConflict) {
		t.Fatalf("conflict: %v", err)
	}
	for name, p := range map[string]api.ProcessStartParams{
		"neither":     {SessionID: sid},
		"both":        {SessionID: sid, Command: "x", Tool: "read_file"},
		"bad tool":    {SessionID: sid, Tool: "nope"},
		"bad args":    {SessionID: sid, Tool: "read_file", Args: []byte(`{"nope":1}`)},
		"bad disp":    {SessionID: sid, Command: "true", Disposition: "forever"},
		"outside cwd": {SessionID: sid, Command: "true", Cwd: "../.."},
	} {
		if _, err := h.StartProcess(ctx, p); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := h.StartProcess(ctx, api.ProcessStartParams{SessionID: "ses_nope", Command: "true"}); !errors.Is(err, api.ErrNotFound) {
		t.Errorf("unknown session: %v", err)
	}
	if _, err := h.AwaitProcess(ctx, api.ProcessAwaitParams{ID: "proc_nope", TimeoutMs: 1}); !errors.Is(err, api.ErrNotFound) {
		t.Errorf("unknown process: %v", err)
	}
}

// TestProcessEndTellsActiveRun: a process that ends while a run is active
// reaches the model at the next step boundary.
func TestProcessEndTellsActiveRun(t *testing.T) {
	h := newProcHost(t, map[string]string{
		"bg": `{"steps":[
			{"toolCalls":[{"name":"shell","arguments":{"command":"echo done-in-bg","background":true}}]},
			{"toolCalls":[{"name":"shell","arguments":{"command":"sleep 0.5"}}]},
			{"text":"saw: {{input}}"},
			{"text":"saw late: {{input}}"}]}`,
	})
	sid := session(t, h, "scripted:bg")
	r := start(t, h, api.StartRunParams{SessionID: sid, Input: input("go")})
	if got := wait(t, h, r.ID); got.Status != record.RunCompleted {
		t.Fatalf("run: %+v", got)
	}
	c := sessionEvents(t, h, sid, event.SteerConsumed)
	if len(c) != 1 {
		t.Fatalf("%d steers consumed", len(c))
	}
	var d event.SteerData
	c[0].Decode(&d)
	if !strings.Contains(event.Text(d.Input), "<process-exited") || !strings.Contains(event.Text(d.Input), "done-in-bg") {
		t.Fatalf("the model was told %q", event.Text(d.Input))
	}
}

func TestWakeOnExitStartsFollowUpRun(t *testing.T) {
	h := newProcHost(t, nil)
	ctx := context.Background()
	sid := session(t, h, "scripted:fast")
	p, err := h.StartProcess(ctx, api.ProcessStartParams{SessionID: sid, Command: "sleep 0.05; echo built", WakeOnExit: true})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, h, sid, "", func(e event.Event) bool { return event.IsTerminalRun(e.Type) })
	runs, err := h.ListRuns(ctx, api.ListRunsParams{SessionID: sid})
	if err != nil || len(runs.Runs) != 1 || runs.Runs[0].Status != record.RunCompleted {
		t.Fatalf("follow-up runs: %+v, %v; want one, completed", runs, err)
	}
	msgs := sessionEvents(t, h, sid, event.MessageUser)
	var d event.MessageUserData
	msgs[0].Decode(&d)
	if !strings.Contains(event.Text(d.Content), p.ID) || !strings.Contains(event.Text(d.Content), "built") {
		t.Fatalf("follow-up input %q", event.Text(d.Content))
	}
}

func TestDeleteSessionCancelsOwnerBoundProcesses(t *testing.T) {
	h := newProcHost(t, nil)
	ctx := context.Background()
	sid := session(t, h, "scripted:fast")
	p, err := h.StartProcess(ctx, api.ProcessStartParams{SessionID: sid, Command: "sleep 300"})
	if err != nil {
		t.Fatal(err)
	}
	ext, err := h.StartProcess(ctx, api.ProcessStartParams{SessionID: sid, Tool: "list_dir", Args: []byte(`{"path":"."}`), Disposition: record.ExternallyOwned})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.DeleteSession(ctx, api.SessionIDParams{SessionID: sid}); err != nil {
		t.Fatal(err)
	}
	got, err := h.GetProcess(ctx, api.ProcessIDParams{ID: p.ID})
	if err != nil || got.Status != record.ProcessCancelled {
		t.Fatalf("owner-bound process after delete: %+v %v", got, err)
	}
	if _, err := h.GetProcess(ctx, api.ProcessIDParams{ID: ext.ID}); err != nil {
		t.Fatal(err)
	}
}

func TestUnmountRefusedWhileProcessRuns(t *testing.T) {
	h := newProcHost(t, nil)
	ctx := context.Background()
	s, err := h.CreateSession(ctx, api.CreateSessionParams{Mounts: []event.Mount{
		{ID: "work", Path: t.TempDir(), Default: true}, {ID: "side", Path: t.TempDir()}}})
	if err != nil {
		t.Fatal(err)
	}
	p, err := h.StartProcess(ctx, api.ProcessStartParams{SessionID: s.ID, Command: "sleep 300", MountID: "side"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = h.Unmount(ctx, api.UnmountParams{SessionID: s.ID, MountID: "side"})
	if !errors.Is(err, api.ErrRunConflict) || !strings.Contains(err.Error(), "side:"+p.ID) {
		t.Fatalf("unmount with a live process: %v", err)
	}
	if _, err := h.CancelProcess(ctx, api.ProcessCancelParams{ID: p.ID}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Unmount(ctx, api.UnmountParams{SessionID: s.ID, MountID: "side"}); err != nil {
		t.Fatalf("unmount after cancel: %v", err)
	}
}

// TestAwaitedProcessNeedsNoNotice: a run that awaits its process learns of
// its end from process_await, and is not told again.
func TestAwaitedProcessNeedsNoNotice(t *testing.T) {
	h := newProcHost(t, map[string]string{
		"await": `{"steps":[
			{"toolCalls":[{"name":"shell","arguments":{"command":"sleep 0.2; echo built","background":true}}]},
			{"toolCalls":[{"name":"process_await","arguments":{"handle":{"__handle__":"process","id":"call_0_0"},"timeoutMs":5000}}]},
			{"text":"done"}]}`,
	})
	sid := session(t, h, "scripted:await")
	r := start(t, h, api.StartRunParams{SessionID: sid, Input: input("go")})
	if got := wait(t, h, r.ID); got.Status != record.RunCompleted || got.Steps != 3 {
		t.Fatalf("run: %+v", got)
	}
	if c := sessionEvents(t, h, sid, event.SteerConsumed, event.SteerAccepted); len(c) != 0 {
		t.Fatalf("the model was told again of a process it awaited: %+v", c)
	}
	waitFor(t, h, sid, "", ofType(event.ProcessExited))
	if evs := sessionEvents(t, h, sid, event.ProcessExited); len(evs) != 1 {
		t.Fatalf("%d process.exited events", len(evs))
	}
}
