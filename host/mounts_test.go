package host_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
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
)

// gate is a tool that blocks until the test releases it, so that a test
// can change the binding while a tool call is running. Once released it
// stats "." through the binding it was given, which fails if that binding
// was closed under it.
type gate struct {
	entered chan struct{} // receives once per call, when the call starts
	release chan struct{} // closed by the test
}

func (g *gate) tool(t *testing.T) tool.Tool {
	tl, err := tool.Func("gate", "Block until released.", func(ctx context.Context, c *tool.Call, _ struct{}) (tool.Result, error) {
		g.entered <- struct{}{}
		select {
		case <-g.release:
		case <-ctx.Done():
			return tool.Result{}, ctx.Err()
		}
		if _, err := c.Env.Stat("."); err != nil {
			return tool.Result{Output: fmt.Sprintf("v%d err: %v", c.Env.Version(), err), IsError: true}, nil
		}
		return tool.Result{Output: fmt.Sprintf("v%d ok", c.Env.Version())}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return tl
}

type probeArgs struct {
	Path string `json:"path"`
}

// probe stats a path through the call's binding and reports the binding
// version with the outcome.
func probe(t *testing.T) tool.Tool {
	tl, err := tool.Func("probe", "Stat a path.", func(ctx context.Context, c *tool.Call, in probeArgs) (tool.Result, error) {
		if _, err := c.Env.Stat(in.Path); err != nil {
			return tool.Result{Output: fmt.Sprintf("v%d err: %v", c.Env.Version(), err)}, nil
		}
		return tool.Result{Output: fmt.Sprintf("v%d ok", c.Env.Version())}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return tl
}

// mountScripts are the models of the mount tests.
func mountScripts(name string) (string, bool) {
	switch name {
	case "fast":
		return `{"loop":true,"steps":[{"text":"ok"}]}`, true
	case "gated": // one gate call, then an answer
		return `{"steps":[{"toolCalls":[{"name":"gate","arguments":{}}]},{"text":"done"}]}`, true
	case "probe": // each run: one probe of the scratch mount, then an answer
		return `{"loop":true,"steps":[{"toolCalls":[{"name":"probe","arguments":{"path":"/environment/scratch"}}]},{"text":"done"}]}`, true
	case "live": // probe beside a gate, probe again, answer
		return `{"steps":[
			{"toolCalls":[{"name":"probe","arguments":{"path":"/environment/scratch"}},{"name":"gate","arguments":{}}]},
			{"toolCalls":[{"name":"probe","arguments":{"path":"/environment/scratch"}}],"delayMs":1},
			{"text":"done"}]}`, true
	}
	return "", false
}

type mountEnv struct {
	h    *host.Host
	gate *gate
}

func newMountHost(t *testing.T) *mountEnv {
	t.Helper()
	e := &mountEnv{gate: &gate{entered: make(chan struct{}, 4), release: make(chan struct{})}}
	reg := tool.NewRegistry()
	for _, tl := range []tool.Tool{e.gate.tool(t), probe(t)} {
		if err := reg.Add(tl); err != nil {
			t.Fatal(err)
		}
	}
	st := memory.New()
	pm, err := process.New(process.Config{Store: st, KillGrace: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	h, err := host.New(context.Background(), host.Config{
		Store: st, Tools: reg, DefaultModel: "fast", CoalesceWindow: 2 * time.Millisecond, ScratchDir: t.TempDir(), Processes: pm,
		ResolveModel: func(name string) (*host.Model, error) {
			src, ok := mountScripts(name)
			if !ok {
				return nil, fmt.Errorf("unknown model %q", name)
			}
			p, err := scripted.Parse(name+".json", []byte(src))
			if err != nil {
				return nil, err
			}
			return &host.Model{Name: name, Provider: p, Model: name}, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		select {
		case <-e.gate.release:
		default:
			close(e.gate.release)
		}
		h.Close()
	})
	e.h = h
	return e
}

func (e *mountEnv) session(t *testing.T, model string, mounts ...event.Mount) string {
	t.Helper()
	s, err := e.h.CreateSession(context.Background(), api.CreateSessionParams{Model: model, Mounts: mounts})
	if err != nil {
		t.Fatal(err)
	}
	return s.ID
}

func (e *mountEnv) list(t *testing.T, sid string) *api.ListEnvResult {
	t.Helper()
	l, err := e.h.ListEnv(context.Background(), api.ListEnvParams{SessionID: sid})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func local(t *testing.T, id string) event.Mount {
	return event.Mount{ID: id, Kind: event.KindLocal, Path: t.TempDir(), Mode: event.ModeReadWrite}
}

func version(v int64) *int64 { return &v }

func ids(ms []event.Mount) string {
	var s []string
	for _, m := range ms {
		s = append(s, m.ID)
	}
	return strings.Join(s, ",")
}

func wantErr(t *testing.T, err, kind error, contains ...string) *api.Error {
	t.Helper()
	var he *api.Error
	if !errors.Is(err, kind) || !errors.As(err, &he) {
		t.Fatalf("got %v, want %v", err, kind)
	}
	for _, c := range contains {
		if !strings.Contains(err.Error(), c) {
			t.Fatalf("%q does not contain %q", err, c)
		}
	}
	return he
}

// events returns the session's events of type ty.
func (e *mountEnv) events(t *testing.T, sid string, ty event.Type) []event.Event {
	t.Helper()
	page, err := e.h.ReadEvents(context.Background(), api.ReadEventsParams{SessionID: sid, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	var out []event.Event
	for _, ev := range page.Events {
		if ev.Type == ty {
			out = append(out, ev)
		}
	}
	return out
}

// TestMountScratchBesideLocal is the scenario: a scratch mount
// beside a local one, with steering, idempotent replays, an unmount.
func TestMountScratchBesideLocal(t *testing.T) {
	e := newMountHost(t)
	ctx := context.Background()
	sid := e.session(t, "gated", local(t, "local"))
	r := start(t, e.h, api.StartRunParams{SessionID: sid, Input: input("go")})
	<-e.gate.entered // the run is active, in a tool call

	l := e.list(t, sid)
	if l.BindingVersion != 1 || l.DefaultMountID != "local" || l.DefaultShellMountID != "local" || l.LatestEnvironmentCursor != 1 {
		t.Fatalf("env/list before: %+v", l)
	}
	sub, cancel := context.WithCancel(ctx)
	defer cancel()
	events, err := e.h.Subscribe(sub, api.SubscribeParams{SessionID: sid, After: l.LatestEnvironmentCursor})
	if err != nil {
		t.Fatal(err)
	}

	p := api.MountParams{SessionID: sid, Mount: event.Mount{ID: "scratch", Kind: event.KindScratch}, ExpectedBindingVersion: version(1), InjectContext: true, IdempotencyKey: "k-mount"}
	res, err := e.h.Mount(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Applied || res.PreviousBindingVersion != 1 || res.BindingVersion != 2 || res.MountID != "scratch" ||
		res.Mount == nil || res.Mount.Kind != event.KindScratch || res.Mount.Mode != event.ModeReadWrite || res.Mount.Default ||
		res.CurrentDefaultMountID != "local" || res.PreviousDefaultMountID != "local" ||
		res.CurrentDefaultShellMountID != "local" || res.PreviousDefaultShellMountID != "local" ||
		res.Environment.BindingVersion != 2 || ids(res.Environment.Mounts) != "local,scratch" ||
		res.EventCursor == 0 || res.SteeringCursor != res.EventCursor+1 || len(res.Warnings) != 0 {
		t.Fatalf("mount result: %+v", res)
	}
	if fi, err := os.Stat(res.Mount.Path); err != nil || !fi.IsDir() {
		t.Fatalf("scratch directory: %v", err)
	}

	// The lifecycle event is streamed, names the mount, and its seq is the cursor.
	for ev, err := range events {
		if err != nil {
			t.Fatal(err)
		}
		if ev.Type != event.MountAdded {
			continue
		}
		var d event.MountChangeData
		if err := ev.Decode(&d); err != nil {
			t.Fatal(err)
		}
		if ev.Seq != res.EventCursor || d.Mount.ID != "scratch" || d.BindingVersion != 2 || d.OperationID != res.OperationID || ids(d.Mounts) != "local,scratch" {
			t.Fatalf("mount.added seq %d: %+v", ev.Seq, d)
		}
		break
	}
	// The steering says what changed.
	steers := e.events(t, sid, event.SteerAccepted)
	if len(steers) != 1 || steers[0].Seq != res.SteeringCursor || steers[0].RunID != r.ID {
		t.Fatalf("steer.accepted: %+v", steers)
	}
	var sd event.SteerData
	steers[0].Decode(&sd)
	if txt := event.Text(sd.Input); !strings.Contains(txt, `mount="scratch"`) || !strings.Contains(txt, `action="mounted"`) ||
		!strings.Contains(txt, `root="/environment/scratch"`) || !strings.Contains(txt, `mode="rw"`) {
		t.Fatalf("steering text %q", txt)
	}

	// An exact retry returns the first result, not applied again.
	again, err := e.h.Mount(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	want := *res
	want.Applied = false
	if !reflect.DeepEqual(*again, want) {
		t.Fatalf("replay:\n got %+v\nwant %+v", again, &want)
	}
	if l := e.list(t, sid); l.BindingVersion != 2 || len(e.events(t, sid, event.MountAdded)) != 1 {
		t.Fatalf("replay applied again: %+v", l)
	}
	// The same key with another mount is an idempotency conflict.
	other := p
	other.Mount = event.Mount{ID: "scratch2", Kind: event.KindScratch}
	_, err = e.h.Mount(ctx, other)
	wantErr(t, err, api.ErrIdempotencyConflict)

	close(e.gate.release)
	if got := wait(t, e.h, r.ID); got.Status != record.RunCompleted {
		t.Fatalf("run %s: %+v", got.Status, got.Error)
	}
	if c := e.events(t, sid, event.SteerConsumed); len(c) != 1 {
		t.Fatalf("steer.consumed: %+v", c)
	}

	// Unmount with the expected version; the retry is not applied again.
	up := api.UnmountParams{SessionID: sid, MountID: "scratch", ExpectedBindingVersion: version(2), IdempotencyKey: "k-unmount"}
	un, err := e.h.Unmount(ctx, up)
	if err != nil {
		t.Fatal(err)
	}
	if !un.Applied || un.PreviousBindingVersion != 2 || un.BindingVersion != 3 || un.RemovedMount == nil || un.RemovedMount.ID != "scratch" ||
		un.Mount != nil || ids(un.Environment.Mounts) != "local" || un.EventCursor <= res.EventCursor || un.SteeringCursor != 0 {
		t.Fatalf("unmount result: %+v", un)
	}
	un2, err := e.h.Unmount(ctx, up)
	if err != nil {
		t.Fatal(err)
	}
	if un2.Applied || un2.BindingVersion != 3 || un2.EventCursor != un.EventCursor {
		t.Fatalf("unmount replay: %+v", un2)
	}
	l = e.list(t, sid)
	if l.BindingVersion != 3 || ids(l.Mounts) != "local" || l.LatestEnvironmentCursor != un.EventCursor || len(e.events(t, sid, event.MountRemoved)) != 1 {
		t.Fatalf("after unmount: %+v", l)
	}
	// The same key used for a mount is a different action: no conflict.
	if _, err := e.h.Mount(ctx, api.MountParams{SessionID: sid, Mount: local(t, "k"), IdempotencyKey: "k-unmount"}); err != nil {
		t.Fatal(err)
	}
}

func TestUnmountRefusedWithLiveProcess(t *testing.T) {
	e := newMountHost(t)
	ctx := context.Background()
	sid := e.session(t, "fast", local(t, "local"))
	if _, err := e.h.Mount(ctx, api.MountParams{SessionID: sid, Mount: event.Mount{ID: "scratch", Kind: event.KindScratch}}); err != nil {
		t.Fatal(err)
	}
	p, err := e.h.StartProcess(ctx, api.ProcessStartParams{SessionID: sid, Command: "sleep 300", Cwd: "/environment/scratch"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.h.Unmount(ctx, api.UnmountParams{SessionID: sid, MountID: "scratch", ExpectedBindingVersion: version(2)})
	he := wantErr(t, err, api.ErrRunConflict, "scratch:"+p.ID)
	if he.Data["mountId"] != "scratch" {
		t.Fatalf("data %v", he.Data)
	}
	if l := e.list(t, sid); l.BindingVersion != 2 || ids(l.Mounts) != "local,scratch" {
		t.Fatalf("binding changed: %+v", l)
	}
	if _, err := e.h.CancelProcess(ctx, api.ProcessCancelParams{ID: p.ID}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.h.Unmount(ctx, api.UnmountParams{SessionID: sid, MountID: "scratch", ExpectedBindingVersion: version(2)}); err != nil {
		t.Fatal(err)
	}
}

// An unmount racing process starts on the same mount: either the start
// comes first and the unmount is refused, or the unmount comes first and
// the start fails; never an unmounted mount with a live process on it.
func TestUnmountNeverRacesAProcessStart(t *testing.T) {
	e := newMountHost(t)
	ctx := context.Background()
	for i := range 20 {
		def := local(t, "local")
		def.Default = true
		sid := e.session(t, "fast", def, local(t, "other"))
		var wg sync.WaitGroup
		var started *api.ProcessResult
		var startErr, unmountErr error
		wg.Go(func() {
			started, startErr = e.h.StartProcess(ctx, api.ProcessStartParams{SessionID: sid, Command: "sleep 300", Cwd: "/environment/other"})
		})
		wg.Go(func() {
			_, unmountErr = e.h.Unmount(ctx, api.UnmountParams{SessionID: sid, MountID: "other"})
		})
		wg.Wait()
		if startErr == nil && unmountErr == nil {
			t.Fatalf("round %d: process %s started on mount other, and other was unmounted", i, started.ID)
		}
		if startErr == nil {
			e.h.CancelProcess(ctx, api.ProcessCancelParams{ID: started.ID})
		}
	}
}
func TestMountRules(t *testing.T) {
	e := newMountHost(t)
	ctx := context.Background()
	mount := func(sid string, m event.Mount, mod ...func(*api.MountParams)) (*api.MountResult, error) {
		p := api.MountParams{SessionID: sid, Mount: m}
		for _, f := range mod {
			f(&p)
		}
		return e.h.Mount(ctx, p)
	}
	must := func(r *api.MountResult, err error) *api.MountResult {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	replace := func(p *api.MountParams) { p.Replace = true }

	t.Run("existing id", func(t *testing.T) {
		sid := e.session(t, "fast", local(t, "local"))
		_, err := mount(sid, local(t, "local"))
		he := wantErr(t, err, api.ErrAlreadyExists, "local")
		if he.Data["mountId"] != "local" {
			t.Fatalf("data %v", he.Data)
		}
	})
	t.Run("replace keeps the default flags", func(t *testing.T) {
		sid := e.session(t, "fast", local(t, "local"))
		must(mount(sid, local(t, "data")))
		m := local(t, "local")
		r := must(mount(sid, m, replace))
		if r.Mount.Path != m.Path || !r.Mount.Default || !r.Mount.DefaultForShell || r.BindingVersion != 3 || ids(r.Environment.Mounts) != "local,data" {
			t.Fatalf("replace: %+v", r)
		}
		// A read-only replacement of the shell default loses the shell flag, with a warning.
		ro := local(t, "local")
		ro.Mode = event.ModeReadOnly
		r = must(mount(sid, ro, replace))
		if !r.Mount.Default || r.Mount.DefaultForShell || r.CurrentDefaultShellMountID != "" || r.PreviousDefaultShellMountID != "local" ||
			len(r.Warnings) != 1 || r.Warnings[0].Code != api.WarnShellDefaultDropped {
			t.Fatalf("ro replace: %+v", r)
		}
		// Replacing a non-default mount with default set moves the default.
		d := local(t, "data")
		d.Default = true
		r = must(mount(sid, d, replace))
		if r.CurrentDefaultMountID != "data" || r.PreviousDefaultMountID != "local" || r.CurrentDefaultShellMountID != "data" {
			t.Fatalf("default moved: %+v", r)
		}
	})
	t.Run("expected binding version", func(t *testing.T) {
		sid := e.session(t, "fast", local(t, "local"))
		_, err := mount(sid, local(t, "data"), func(p *api.MountParams) { p.ExpectedBindingVersion = version(5) })
		he := wantErr(t, err, api.ErrRunConflict, "5", "1")
		if he.Data["expectedBindingVersion"] != int64(5) || he.Data["bindingVersion"] != int64(1) {
			t.Fatalf("data %v", he.Data)
		}
		_, err = e.h.Unmount(ctx, api.UnmountParams{SessionID: sid, MountID: "local", ExpectedBindingVersion: version(0)})
		wantErr(t, err, api.ErrRunConflict)
		if l := e.list(t, sid); l.BindingVersion != 1 {
			t.Fatalf("version %d", l.BindingVersion)
		}
	})
	t.Run("one default", func(t *testing.T) {
		// Several flagged: the last wins.
		a, b := local(t, "a"), local(t, "b")
		a.Default, b.Default = true, true
		sid := e.session(t, "fast", a, b)
		if l := e.list(t, sid); l.DefaultMountID != "b" || l.DefaultShellMountID != "b" {
			t.Fatalf("last flagged: %+v", l)
		}
		c := local(t, "c")
		c.Default = true
		if r := must(mount(sid, c)); r.CurrentDefaultMountID != "c" || r.PreviousDefaultMountID != "b" || r.CurrentDefaultShellMountID != "b" {
			t.Fatalf("mounted default: %+v", r)
		}
		// None flagged and one mount: it is the default.
		sid = e.session(t, "fast", local(t, "only"))
		if l := e.list(t, sid); l.DefaultMountID != "only" {
			t.Fatalf("single: %+v", l)
		}
		// None flagged and several: invalid.
		_, err := e.h.CreateSession(ctx, api.CreateSessionParams{Mounts: []event.Mount{local(t, "a"), local(t, "b")}})
		wantErr(t, err, api.ErrInvalidParams)
		// A session without mounts takes its first as the default.
		sid = e.session(t, "fast")
		if r := must(mount(sid, local(t, "first"))); r.CurrentDefaultMountID != "first" || r.CurrentDefaultShellMountID != "first" || r.BindingVersion != 2 {
			t.Fatalf("first mount: %+v", r)
		}
	})
	t.Run("shell default", func(t *testing.T) {
		sid := e.session(t, "fast", local(t, "local"))
		ro := local(t, "ro")
		ro.Mode, ro.DefaultForShell = event.ModeReadOnly, true
		_, err := mount(sid, ro)
		wantErr(t, err, api.ErrInvalidParams, "read-write")
		rw := local(t, "rw")
		rw.DefaultForShell = true
		if r := must(mount(sid, rw)); r.CurrentDefaultShellMountID != "rw" || r.CurrentDefaultMountID != "local" {
			t.Fatalf("shell moved: %+v", r)
		}
		// A read-only default does not take the shell.
		d := local(t, "d")
		d.Mode, d.Default = event.ModeReadOnly, true
		sid = e.session(t, "fast", d)
		if l := e.list(t, sid); l.DefaultShellMountID != "" {
			t.Fatalf("ro default is the shell: %+v", l)
		}
	})
	t.Run("bad mounts", func(t *testing.T) {
		sid := e.session(t, "fast", local(t, "local"))
		for _, m := range []event.Mount{
			{ID: "Bad Id", Path: t.TempDir()},
			{ID: "gone", Path: filepath.Join(t.TempDir(), "missing")},
			{ID: "rel", Path: "relative/dir"},
			{ID: "mode", Path: t.TempDir(), Mode: "rx"},
			{ID: ""},
		} {
			if _, err := mount(sid, m); !errors.Is(err, api.ErrInvalidParams) {
				t.Errorf("mount %+v: %v", m, err)
			}
		}
		if _, err := mount("ses_missing", local(t, "x")); !errors.Is(err, api.ErrNotFound) {
			t.Errorf("unknown session: %v", err)
		}
		if l := e.list(t, sid); l.BindingVersion != 1 {
			t.Fatalf("version %d", l.BindingVersion)
		}
	})
	t.Run("inject without a run", func(t *testing.T) {
		sid := e.session(t, "fast", local(t, "local"))
		r := must(mount(sid, local(t, "data"), func(p *api.MountParams) { p.InjectContext = true }))
		if r.SteeringCursor != 0 || len(r.Warnings) != 1 || r.Warnings[0].Code != api.WarnNoActiveRun {
			t.Fatalf("inject: %+v", r)
		}
	})
}

func TestUnmountRules(t *testing.T) {
	e := newMountHost(t)
	ctx := context.Background()
	setup := func() string {
		ro := local(t, "ro")
		ro.Mode = event.ModeReadOnly
		main := local(t, "main")
		main.Default = true
		return e.session(t, "fast", main, local(t, "other"), ro)
	}
	un := func(p api.UnmountParams) (*api.MountResult, error) { return e.h.Unmount(ctx, p) }

	sid := setup()
	if l := e.list(t, sid); l.DefaultMountID != "main" || l.DefaultShellMountID != "main" {
		t.Fatalf("setup: %+v", l)
	}
	_, err := un(api.UnmountParams{SessionID: sid, MountID: "main"})
	wantErr(t, err, api.ErrInvalidParams, "newDefaultMountId")
	_, err = un(api.UnmountParams{SessionID: sid, MountID: "main", NewDefaultMountID: "nope"})
	wantErr(t, err, api.ErrInvalidParams, "nope")
	_, err = un(api.UnmountParams{SessionID: sid, MountID: "main", NewDefaultMountID: "main"})
	wantErr(t, err, api.ErrInvalidParams)
	_, err = un(api.UnmountParams{SessionID: sid, MountID: "main", NewDefaultMountID: "other", NewDefaultShellMountID: "ro"})
	wantErr(t, err, api.ErrInvalidParams, "read-only")
	_, err = un(api.UnmountParams{SessionID: sid, MountID: "nope"})
	wantErr(t, err, api.ErrInvalidParams, "nope")
	if l := e.list(t, sid); l.BindingVersion != 1 {
		t.Fatalf("refusals changed the binding: %+v", l)
	}

	// The default (and shell default) moves to the named mount; with no
	// shell default named, the read-write default takes it.
	r, err := un(api.UnmountParams{SessionID: sid, MountID: "main", NewDefaultMountID: "other"})
	if err != nil {
		t.Fatal(err)
	}
	if r.CurrentDefaultMountID != "other" || r.PreviousDefaultMountID != "main" || r.CurrentDefaultShellMountID != "other" ||
		r.RemovedMount.ID != "main" || !r.RemovedMount.Default || ids(r.Environment.Mounts) != "other,ro" {
		t.Fatalf("unmount default: %+v", r)
	}
	// A read-only default leaves no shell default.
	r, err = un(api.UnmountParams{SessionID: sid, MountID: "other", NewDefaultMountID: "ro"})
	if err != nil {
		t.Fatal(err)
	}
	if r.CurrentDefaultMountID != "ro" || r.CurrentDefaultShellMountID != "" || r.BindingVersion != 3 {
		t.Fatalf("ro default: %+v", r)
	}
	// The last mount stays.
	_, err = un(api.UnmountParams{SessionID: sid, MountID: "ro"})
	wantErr(t, err, api.ErrInvalidParams, "at least one")

	// Unmounting a shell default that is not the default names a new one
	// or leaves the default to take it.
	sid = setup()
	if _, err := un(api.UnmountParams{SessionID: sid, MountID: "ro", NewDefaultShellMountID: "other"}); err != nil {
		t.Fatal(err)
	}
	r, err = un(api.UnmountParams{SessionID: sid, MountID: "other"})
	if err != nil {
		t.Fatal(err)
	}
	if r.PreviousDefaultShellMountID != "other" || r.CurrentDefaultShellMountID != "main" {
		t.Fatalf("shell default removed: %+v", r)
	}
}

// TestLiveSwitch: a tool call after a mount sees it; a call that began
// before does not, and the binding it holds stays open until it ends.
func TestLiveSwitch(t *testing.T) {
	e := newMountHost(t)
	ctx := context.Background()
	sid := e.session(t, "live", local(t, "local"))
	r := start(t, e.h, api.StartRunParams{SessionID: sid, Input: input("go")})
	<-e.gate.entered
	if _, err := e.h.Mount(ctx, api.MountParams{SessionID: sid, Mount: event.Mount{ID: "scratch", Kind: event.KindScratch}}); err != nil {
		t.Fatal(err)
	}
	close(e.gate.release)
	if got := wait(t, e.h, r.ID); got.Status != record.RunCompleted {
		t.Fatalf("run %s: %+v", got.Status, got.Error)
	}
	var outs []string
	for _, ev := range e.events(t, sid, event.ToolCallCompleted) {
		var d event.ToolCallCompletedData
		ev.Decode(&d)
		outs = append(outs, d.Name+": "+d.Output)
	}
	// The first step's two calls run in parallel and may finish in either order.
	if len(outs) == 3 && strings.HasPrefix(outs[1], "probe:") {
		outs[0], outs[1] = outs[1], outs[0]
	}
	if len(outs) != 3 || !strings.HasPrefix(outs[0], "probe: v1 err:") || !strings.Contains(outs[0], "no such mount") ||
		outs[1] != "gate: v1 ok" || outs[2] != "probe: v2 ok" {
		t.Fatalf("tool results:\n%s", strings.Join(outs, "\n"))
	}
	// The next run starts with the new binding.
	infos := e.events(t, sid, event.MountInfo)
	var b event.Binding
	infos[0].Decode(&b)
	if len(infos) != 1 || b.BindingVersion != 1 {
		t.Fatalf("mount.info: %+v", b)
	}
}

// TestMountBetweenRuns: the binding belongs to the session and applies to
// its next run.
func TestMountBetweenRuns(t *testing.T) {
	e := newMountHost(t)
	ctx := context.Background()
	sid := e.session(t, "probe", local(t, "local"))
	r := start(t, e.h, api.StartRunParams{SessionID: sid, Input: input("one")})
	wait(t, e.h, r.ID)
	if _, err := e.h.Mount(ctx, api.MountParams{SessionID: sid, Mount: event.Mount{ID: "scratch", Kind: event.KindScratch}}); err != nil {
		t.Fatal(err)
	}
	r = start(t, e.h, api.StartRunParams{SessionID: sid, Input: input("two")})
	if got := wait(t, e.h, r.ID); got.Status != record.RunCompleted {
		t.Fatalf("run %s: %+v", got.Status, got.Error)
	}
	infos := e.events(t, sid, event.MountInfo)
	if len(infos) != 2 {
		t.Fatalf("mount.info events: %d", len(infos))
	}
	var b event.Binding
	infos[1].Decode(&b)
	if b.BindingVersion != 2 || ids(b.Mounts) != "local,scratch" {
		t.Fatalf("second run's binding: %+v", b)
	}
	var outs []string
	for _, ev := range e.events(t, sid, event.ToolCallCompleted) {
		var d event.ToolCallCompletedData
		ev.Decode(&d)
		outs = append(outs, d.Output)
	}
	if len(outs) != 2 || !strings.HasPrefix(outs[0], "v1 err:") || outs[1] != "v2 ok" {
		t.Fatalf("probes: %q", outs)
	}
	// The scratch directory goes with the session.
	l := e.list(t, sid)
	dir := l.Mounts[1].Path
	if _, err := e.h.DeleteSession(ctx, api.SessionIDParams{SessionID: sid}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("scratch directory after delete: %v", err)
	}
}
