package process_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"weft.dev/weft/api"
	"weft.dev/weft/env"
	"weft.dev/weft/env/sandbox"
	"weft.dev/weft/event"
	"weft.dev/weft/internal/proctest"
	"weft.dev/weft/internal/testenv"
	"weft.dev/weft/process"
	"weft.dev/weft/store"
	"weft.dev/weft/store/memory"
	"weft.dev/weft/store/record"
	"weft.dev/weft/store/sqlite"
	"weft.dev/weft/tool"
	"weft.dev/weft/tool/builtin"
)

const childEnv = "WEFT_PROCESS_TEST_CHILD"

// containEnv makes the child host of childEnv run its shell under the
// sandbox helper: CONTAINMENT:MARKER:TEMPROOT, the shell being
// proctest.Tree marked with MARKER.
const containEnv = "WEFT_PROCESS_TEST_CONTAIN"

func TestMain(m *testing.M) {
	if sandbox.IsHelper(os.Args) {
		sandbox.Main(os.Args)
	}
	if db := os.Getenv(childEnv); db != "" {
		childHost(db)
		return
	}
	goleak.VerifyTestMain(m)
}

// childHost is the "host" the SIGKILL test kills: a Manager on a SQLite
// file running one background shell. It prints the process ID and pgid,
// then waits to be killed.
func childHost(db string) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, sqlite.Config{Path: db})
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	cfg := process.Config{Store: st}
	sp := process.StartParams{SessionID: "s1", Kind: record.ProcessShell, Command: "sleep 300 & sleep 300", Disposition: record.OwnerBound}
	if spec := os.Getenv(containEnv); spec != "" {
		f := strings.SplitN(spec, ":", 3)
		cfg.Sandbox = &sandbox.Config{Unsandboxed: true, Containment: f[0], TempRoot: f[2]}
		sp.Command, sp.Env = proctest.Tree, map[string]string{proctest.MarkerKey: f[1]}
	}
	m, err := process.New(cfg)
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	dir := filepath.Dir(db)
	sp.Binding, err = env.NewBinding(1, []event.Mount{{ID: "work", Path: dir, Mode: event.ModeReadWrite, Kind: event.KindLocal}})
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	p, err := m.Start(ctx, sp)
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	fmt.Println("started", p.ID, p.Pgid)
	select {}
}

type runner struct{ reg *tool.Registry }

func (r runner) RunTool(ctx context.Context, run process.ToolRun) tool.Result {
	return r.reg.Call(ctx, run.Process.Spec.Tool, run.Call, tool.CallOptions{})
}

type echoIn struct {
	Text  string `json:"text"`
	Sleep int    `json:"sleepMs,omitempty"`
}

func newRegistry(t testing.TB) *tool.Registry {
	t.Helper()
	reg := tool.NewRegistry()
	echo, err := tool.Func("echo", "echo text", func(ctx context.Context, c *tool.Call, in echoIn) (tool.Result, error) {
		select {
		case <-time.After(time.Duration(in.Sleep) * time.Millisecond):
		case <-ctx.Done():
			return tool.Result{}, ctx.Err()
		}
		return tool.Result{Output: "echo:" + in.Text}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := reg.Add(echo); err != nil {
		t.Fatal(err)
	}
	return reg
}

type fixture struct {
	m   *process.Manager
	st  store.ProcessLog
	reg *tool.Registry
	b   *env.Binding
	dir string
}

func setup(t *testing.T, cfg process.Config) *fixture { return setupTB(t, cfg) }

func setupTB(t testing.TB, cfg process.Config) *fixture {
	t.Helper()
	f := &fixture{dir: t.TempDir(), reg: newRegistry(t)}
	if cfg.Store == nil {
		// No more of a store than its process log: the manager needs no
		// more.
		cfg.Store = struct{ store.ProcessLog }{memory.New()}
	}
	f.st = cfg.Store
	cfg.Tools = runner{f.reg}
	cfg.KillGrace = 500 * time.Millisecond
	m, err := process.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	f.m = m
	if err := process.RegisterTools(f.reg, m); err != nil {
		t.Fatal(err)
	}
	f.b, err = env.NewBinding(1, []event.Mount{{ID: "work", Path: f.dir, Mode: event.ModeReadWrite, Kind: event.KindLocal}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		m.Close()
		f.b.Close()
		if c, ok := f.st.(io.Closer); ok {
			c.Close()
		}
	})
	return f
}

var owner = process.Caller{SessionID: "s1", RunID: "r1"}

func (f *fixture) shell(t *testing.T, cmd string, mod ...func(*process.StartParams)) record.Process {
	t.Helper()
	sp := process.StartParams{SessionID: "s1", RunID: "r1", Kind: record.ProcessShell, Command: cmd, Binding: f.b, Disposition: record.OwnerBound}
	for _, fn := range mod {
		fn(&sp)
	}
	p, err := f.m.Start(context.Background(), sp)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func (f *fixture) await(t *testing.T, id string) api.AwaitResult {
	t.Helper()
	res, err := f.m.Await(context.Background(), id, 20*time.Second, owner)
	if err != nil {
		t.Fatal(err)
	}
	if res.TimedOut {
		t.Fatalf("process %s still running", id)
	}
	return res
}

func (f *fixture) log(t *testing.T, id string) []record.ProcessEvent {
	t.Helper()
	evs, err := f.st.ReadProcess(context.Background(), store.ReadProcessParams{ProcessID: id})
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

func types(evs []record.ProcessEvent) []string {
	var out []string
	for _, e := range evs {
		out = append(out, string(e.Type))
	}
	return out
}

// waitOutput follows the process's output until it contains s.
func (f *fixture) waitOutput(t *testing.T, id, s string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var out []byte
	for c, err := range f.m.Follow(ctx, id, 0, owner) {
		if err != nil {
			t.Fatalf("output of %s never contained %q (%v): %q", id, s, err, out)
		}
		if out = append(out, c.Data...); strings.Contains(string(out), s) {
			return
		}
	}
	t.Fatalf("%s ended without output %q: %q", id, s, out)
}

func TestParseHandle(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want error
	}{
		{`{"id":"p1"}`, api.ErrHandleNoKind},
		{`{"__handle__":"file","id":"p1"}`, api.ErrHandleKind},
		{`{"__handle__":"process","id":""}`, api.ErrHandleNoID},
		{`{"__handle__":"process"}`, api.ErrHandleNoID},
		{`"p1"`, api.ErrHandleNotObject},
		{`[1]`, api.ErrHandleNotObject},
		{`{"__handle__":"process","id":"p1","x":1}`, api.ErrBadHandle},
		{`{"__handle__":"process","id":7}`, api.ErrBadHandle},
	} {
		_, err := api.ParseHandle(json.RawMessage(tc.in))
		if !errors.Is(err, tc.want) || !errors.Is(err, api.ErrBadHandle) {
			t.Errorf("ParseHandle(%s) = %v; want %v", tc.in, err, tc.want)
		}
	}
	// The distinct errors are distinct.
	if errors.Is(api.ErrHandleNoKind, api.ErrHandleKind) || errors.Is(api.ErrHandleNoID, api.ErrHandleNoKind) {
		t.Error("handle errors are not distinct")
	}
	h, err := api.ParseHandle(json.RawMessage(` {"__handle__":"process","id":"p1"} `))
	if err != nil || h.ID != "p1" {
		t.Fatalf("ParseHandle = %v, %v", h, err)
	}
	b, _ := json.Marshal(h)
	if string(b) != `{"__handle__":"process","id":"p1"}` {
		t.Errorf("Marshal = %s", b)
	}
}

func callTool(t *testing.T, f *fixture, name, id string, args any, c process.Caller) tool.Result {
	t.Helper()
	raw, _ := json.Marshal(args)
	return f.reg.Call(context.Background(), name, &tool.Call{ID: id, SessionID: c.SessionID, RunID: c.RunID, Arguments: raw, Env: f.b, Background: managerStarter{f.m}}, tool.CallOptions{})
}

func handleOf(t *testing.T, res tool.Result) api.Handle {
	t.Helper()
	var out struct {
		Handle api.Handle `json:"handle"`
	}
	if res.IsError || json.Unmarshal([]byte(res.Output), &out) != nil {
		t.Fatalf("no handle in %+v", res)
	}
	return out.Handle
}

func TestStartToolInBackground(t *testing.T) {
	f := setup(t, process.Config{})
	res := callTool(t, f, "start_tool", "call_7", map[string]any{"tool": "echo", "args": map[string]any{"text": "hi", "sleepMs": 50}}, owner)
	h := handleOf(t, res)
	if !strings.HasPrefix(h.ID, "proc_") {
		t.Fatalf("handle id = %q; want an ID of the process's own", h.ID)
	}
	rec, err := f.m.Get(context.Background(), h.ID, owner)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Kind != record.ProcessTool || rec.Spec.Tool != "echo" || !strings.Contains(string(rec.Spec.Args), `"hi"`) || rec.ToolCallID != "call_7" {
		t.Errorf("record = %+v", rec)
	}
	res = callTool(t, f, "process_await", "c2", map[string]any{"handle": h, "timeoutMs": 10000}, owner)
	if res.IsError || !strings.Contains(res.Output, `"completed"`) || !strings.Contains(res.Output, "echo:hi") {
		t.Fatalf("process_await = %+v", res)
	}
	if got := types(f.log(t, h.ID)); !slices.Equal(got, []string{"process.started", "process.output", "process.completed"}) {
		t.Errorf("log = %v", got)
	}
	// Invalid arguments are refused before anything is registered.
	res = callTool(t, f, "start_tool", "call_8", map[string]any{"tool": "echo", "args": map[string]any{"nope": 1}}, owner)
	if !res.IsError {
		t.Fatalf("start_tool with bad args = %+v", res)
	}
	if ps, err := f.st.Processes(context.Background(), store.ListProcessesParams{}); err != nil || len(ps) != 1 {
		t.Errorf("bad call registered: %v, %v", ps, err)
	}
	// Bad handles are error results naming the problem.
	for _, h := range []map[string]any{{"id": "x"}, {"__handle__": "file", "id": "x"}, {"__handle__": "process", "id": ""}, {"__handle__": "process", "id": "unknown"}} {
		res := callTool(t, f, "process_await", "c3", map[string]any{"handle": h, "timeoutMs": 1}, owner)
		if !res.IsError {
			t.Errorf("await %v = %+v; want error", h, res)
		}
	}
}

func TestSignal(t *testing.T) {
	f := setup(t, process.Config{})
	p := f.shell(t, `trap 'echo got-int; exit 3' INT; echo ready; while :; do sleep 0.05; done`)
	f.waitOutput(t, p.ID, "ready")
	seq, err := f.m.Signal(context.Background(), p.ID, "interrupt", json.RawMessage(`{"why":"test"}`), owner)
	if err != nil {
		t.Fatal(err)
	}
	res := f.await(t, p.ID)
	if res.Process.Status != record.ProcessFailed || *res.Process.ExitCode != 3 || !strings.Contains(res.Tail, "got-int") {
		t.Fatalf("after interrupt: %+v", res)
	}
	evs := f.log(t, p.ID)
	i := slices.IndexFunc(evs, func(e record.ProcessEvent) bool { return e.Seq == seq })
	if i < 0 || evs[i].Type != "signal.interrupt" {
		t.Fatalf("signal event seq %d not in %v", seq, types(evs))
	}
	var d process.SignalData
	json.Unmarshal(evs[i].Data, &d)
	if string(d.Payload) != `{"why":"test"}` || d.Posix != "SIGINT" || d.By.SessionID != "s1" {
		t.Errorf("signal data = %+v", d)
	}
	// A custom signal only appends; an ended process refuses signals.
	if _, err := f.m.Signal(context.Background(), p.ID, "custom", nil, owner); !errors.Is(err, process.ErrEnded) {
		t.Errorf("signal after end = %v", err)
	}
	if _, err := f.m.Signal(context.Background(), p.ID, "Bad Name", nil, owner); !errors.Is(err, process.ErrInvalid) {
		t.Errorf("bad name = %v", err)
	}
}

func TestVisibility(t *testing.T) {
	f := setup(t, process.Config{})
	ctx := context.Background()
	p := f.shell(t, "sleep 30")
	other := process.Caller{SessionID: "s2", RunID: "r9"}
	if _, err := f.m.Await(ctx, p.ID, 0, other); !errors.Is(err, process.ErrNotFound) {
		t.Errorf("await by s2 = %v; want ErrNotFound", err)
	}
	if _, err := f.m.Cancel(ctx, p.ID, "x", other); !errors.Is(err, process.ErrNotFound) {
		t.Errorf("cancel by s2 = %v; want ErrNotFound", err)
	}
	if _, err := f.m.Get(ctx, "nope", other); !errors.Is(err, process.ErrNotFound) {
		t.Errorf("get unknown = %v", err)
	}
	evs := f.log(t, p.ID)
	if got := types(evs); !slices.Equal(got, []string{"process.started", "process.access_denied", "process.cancel_requested"}) {
		t.Fatalf("log = %v", got)
	}
	var cr process.CancelRequestedData
	json.Unmarshal(evs[2].Data, &cr)
	if !cr.Denied || cr.By.SessionID != "s2" {
		t.Errorf("cancel_requested = %+v", cr)
	}
	// The creating run sees it from another session.
	if _, err := f.m.Get(ctx, p.ID, process.Caller{SessionID: "s3", RunID: "r1"}); err != nil {
		t.Errorf("creating run: %v", err)
	}
	// Only the owner grants.
	if _, err := f.m.Grant(ctx, p.ID, "s2", other); !errors.Is(err, process.ErrNotFound) {
		t.Errorf("grant by s2 = %v", err)
	}
	if _, err := f.m.Grant(ctx, p.ID, "s2", owner); err != nil {
		t.Fatal(err)
	}
	if res, err := f.m.Await(ctx, p.ID, 0, other); err != nil || !res.TimedOut {
		t.Errorf("await with grant = %+v, %v", res, err)
	}
	if ps, _ := f.m.List(ctx, process.ListParams{}, other); len(ps) != 1 {
		t.Errorf("list with grant = %d", len(ps))
	}
	if _, err := f.m.Revoke(ctx, p.ID, "s2", owner); err != nil {
		t.Fatal(err)
	}
	if _, err := f.m.Await(ctx, p.ID, 0, other); !errors.Is(err, process.ErrNotFound) {
		t.Errorf("await after revoke = %v", err)
	}
	if _, err := f.m.Grant(ctx, p.ID, "s2", owner); err != nil {
		t.Fatal(err)
	}
	rec, err := f.m.Cancel(ctx, p.ID, "done", other)
	if err != nil || rec.Status != record.ProcessCancelled {
		t.Fatalf("cancel with grant = %+v, %v", rec, err)
	}
}

type denyAll struct{}

var errPolicy = errors.New("cancels are frozen")

func (denyAll) AllowCancel(context.Context, record.Process, process.Caller) error { return errPolicy }

func TestDenyingPolicy(t *testing.T) {
	f := setup(t, process.Config{Policy: denyAll{}})
	p := f.shell(t, "sleep 30")
	_, err := f.m.Cancel(context.Background(), p.ID, "please", owner)
	if !errors.Is(err, process.ErrDenied) || !errors.Is(err, errPolicy) {
		t.Fatalf("cancel = %v; want ErrDenied wrapping the policy's error", err)
	}
	evs := f.log(t, p.ID)
	var cr process.CancelRequestedData
	json.Unmarshal(evs[len(evs)-1].Data, &cr)
	if evs[len(evs)-1].Type != process.EventCancelRequested || !cr.Denied || cr.DenyReason != errPolicy.Error() || cr.Reason != "please" {
		t.Errorf("last event = %s %+v", evs[len(evs)-1].Type, cr)
	}
	// Close kills it (owner_bound) and records abandoned.
	f.m.Close()
	rec, _ := f.st.Process(context.Background(), p.ID)
	if rec.Status != record.ProcessAbandoned {
		t.Errorf("after Close: %s", rec.Status)
	}
}

func TestOutputCap(t *testing.T) {
	f := setup(t, process.Config{ChunkBytes: 64, OutputCap: 512})
	p := f.shell(t, `i=0; while [ $i -lt 100 ]; do printf '%049d\n' $i; i=$((i+1)); done`)
	res := f.await(t, p.ID)
	if res.Process.OutputBytes != 5000 || res.Process.DroppedBytes == 0 {
		t.Fatalf("record = %+v", res.Process)
	}
	out, err := f.m.Output(context.Background(), p.ID, 0, 100, owner)
	if err != nil {
		t.Fatal(err)
	}
	if !out.Truncated || out.Offset == 0 || out.Offset > res.Process.DroppedBytes || out.Total != 5000 {
		t.Fatalf("read at 0 = %+v", out)
	}
	// Offsets stay correct: line k starts at 50*k.
	line := out.Offset/50 + 1
	got, err := f.m.Output(context.Background(), p.ID, line*50, 50, owner)
	if err != nil || string(got.Data) != fmt.Sprintf("%049d\n", line) || got.Truncated {
		t.Fatalf("read line %d = %q %+v, %v", line, got.Data, got, err)
	}
	end, _ := f.m.Output(context.Background(), p.ID, 4990, 100, owner)
	if string(end.Data) != "000000099\n" || !end.Ended {
		t.Errorf("tail read = %q %+v", end.Data, end)
	}
	var kept int64
	var dropped int
	for _, e := range f.log(t, p.ID) {
		kept += e.Size
		if e.Type == process.EventOutputDropped {
			dropped++
		}
	}
	if kept > 512+64 || dropped == 0 {
		t.Errorf("kept %d bytes of output in the log, %d drop markers", kept, dropped)
	}
	// Follow from a dropped offset says what it skipped, then yields to the end.
	var n int64
	first := true
	for c, err := range f.m.Follow(context.Background(), p.ID, 0, owner) {
		if err != nil {
			t.Fatal(err)
		}
		if first && c.Skipped == 0 {
			t.Errorf("first chunk skipped nothing: %+v", c)
		}
		first = false
		n = c.Offset + int64(len(c.Data))
	}
	if n != 5000 {
		t.Errorf("follow ended at %d", n)
	}
}

// groupMembers lists the live pids in process group pgid.
func groupMembers(pgid int) []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(b)
		fs := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(fs) > 2 && fs[0] != "Z" && fs[2] == strconv.Itoa(pgid) {
			out = append(out, pid)
		}
	}
	return out
}

// groupRunning lists the live pids in process group pgid whose argv is
// exactly argv.
func groupRunning(pgid int, argv ...string) []int {
	var out []int
	for _, pid := range groupMembers(pgid) {
		b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
		if strings.TrimSuffix(string(b), "\x00") == strings.Join(argv, "\x00") {
			out = append(out, pid)
		}
	}
	return out
}

// waitSleeps waits until n processes of group pgid run "sleep secs".
func waitSleeps(t *testing.T, pgid, n int, secs string) {
	t.Helper()
	proctest.Eventually(t, 5*time.Second, func() string {
		return fmt.Sprintf("group %d never ran %d × sleep %s: %v", pgid, n, secs, groupMembers(pgid))
	}, func() bool {
		return len(groupRunning(pgid, "sleep", secs)) == n
	})
}

func waitGone(t *testing.T, pgid int) {
	t.Helper()
	proctest.Eventually(t, 5*time.Second, func() string { return fmt.Sprintf("group %d survives: %v", pgid, groupMembers(pgid)) }, func() bool {
		return len(groupMembers(pgid)) == 0
	})
}

func TestCancelKillsGroup(t *testing.T) {
	f := setup(t, process.Config{})
	p := f.shell(t, "sleep 100 & sleep 100")
	// Both sleeps run, whether or not the shell execs the last one.
	waitSleeps(t, p.Pgid, 2, "100")
	rec, err := f.m.Cancel(context.Background(), p.ID, "enough", owner)
	if err != nil || rec.Status != record.ProcessCancelled {
		t.Fatalf("cancel = %+v, %v", rec, err)
	}
	waitGone(t, p.Pgid)
	evs := f.log(t, p.ID)
	if last := evs[len(evs)-1]; last.Type != process.EventCancelled {
		t.Errorf("last event %s", last.Type)
	}
}

func TestStdin(t *testing.T) {
	f := setup(t, process.Config{})
	p := f.shell(t, `read line; echo got:$line`)
	if err := f.m.Write(context.Background(), p.ID, []byte("hello\n"), owner); err != nil {
		t.Fatal(err)
	}
	res := f.await(t, p.ID)
	if res.Process.Status != record.ProcessCompleted || !strings.Contains(res.Tail, "got:hello") {
		t.Fatalf("await = %+v", res)
	}
	if err := f.m.Write(context.Background(), p.ID, []byte("x"), owner); !errors.Is(err, process.ErrEnded) {
		t.Errorf("write after end = %v", err)
	}
}

// TestSandboxedShell: with a sandbox configured, a background shell is
// confined like the foreground one, on pipes and on a pty.
func TestSandboxedShell(t *testing.T) {
	testenv.Landlock(t, 1)
	exe, _ := os.Executable()
	secret := filepath.Join(t.TempDir(), "secret")
	os.WriteFile(secret, []byte("top secret"), 0o644)
	f := setup(t, process.Config{Sandbox: &sandbox.Config{Executable: exe}})
	for _, pty := range []bool{false, true} {
		p := f.shell(t, "cat "+secret+"; echo in > inside.txt && echo wrote-inside; echo tmp > $TMPDIR/x && echo wrote-tmp",
			func(sp *process.StartParams) { sp.PTY = pty })
		res := f.await(t, p.ID)
		if strings.Contains(res.Tail, "top secret") {
			t.Fatalf("pty=%v: a sandboxed process read a file outside its mounts: %q", pty, res.Tail)
		}
		if !strings.Contains(res.Tail, "wrote-inside") || !strings.Contains(res.Tail, "wrote-tmp") {
			t.Fatalf("pty=%v: the mount or TMPDIR is not writable: %q", pty, res.Tail)
		}
	}
}

// TestSandboxedShellWithoutLandlock: on a kernel without Landlock a
// sandboxed background shell is refused with the way out, and nothing
// runs; unsandboxed by choice, it runs.
func TestSandboxedShellWithoutLandlock(t *testing.T) {
	if testenv.Without(t, testenv.NoLandlock) {
		return
	}
	exe, _ := os.Executable()
	f := setup(t, process.Config{Sandbox: &sandbox.Config{Executable: exe}})
	sp := process.StartParams{SessionID: "s1", RunID: "r1", Kind: record.ProcessShell, Command: "echo ran > ran.txt", Binding: f.b, Disposition: record.OwnerBound}
	if _, err := f.m.Start(context.Background(), sp); !errors.Is(err, sandbox.ErrNoLandlock) || !strings.Contains(err.Error(), `set "unsandboxed": true`) {
		t.Fatalf("Start = %v; want a refusal with the way out", err)
	}
	if _, err := os.Stat(filepath.Join(f.dir, "ran.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the refused command ran: %v", err)
	}
	f = setup(t, process.Config{Sandbox: &sandbox.Config{Executable: exe, Unsandboxed: true}})
	p := f.shell(t, "echo unsandboxed")
	if res := f.await(t, p.ID); res.Process.Status != record.ProcessCompleted || !strings.Contains(res.Tail, "unsandboxed") {
		t.Fatalf("unsandboxed: %+v", res)
	}
}

func TestPTY(t *testing.T) {
	f := setup(t, process.Config{})
	p := f.shell(t, `tty; test -t 0 && echo is-a-tty`, func(sp *process.StartParams) { sp.PTY = true })
	res := f.await(t, p.ID)
	if !strings.Contains(res.Tail, "/dev/pts/") || !strings.Contains(res.Tail, "is-a-tty") {
		t.Fatalf("pty output = %q", res.Tail)
	}
}

func TestEnvAndCwd(t *testing.T) {
	f := setup(t, process.Config{BaseEnv: []string{"PATH=/usr/bin:/bin", "SECRET=x", "LANG=C"}})
	os.Mkdir(filepath.Join(f.dir, "sub"), 0o755)
	p := f.shell(t, `pwd; env | sort`, func(sp *process.StartParams) { sp.Cwd = "sub"; sp.Env = map[string]string{"FOO": "bar"} })
	res := f.await(t, p.ID)
	for _, want := range []string{"/sub\n", "FOO=bar", "PATH=/usr/bin:/bin", "WEFT_PROCESS_ID=" + p.ID} {
		if !strings.Contains(res.Tail, want) {
			t.Errorf("output lacks %q:\n%s", want, res.Tail)
		}
	}
	if strings.Contains(res.Tail, "SECRET") {
		t.Errorf("SECRET leaked:\n%s", res.Tail)
	}
	if _, err := f.m.Start(context.Background(), process.StartParams{SessionID: "s1", Kind: record.ProcessShell, Command: "true",
		Binding: f.b, Cwd: "/environment/work/../..", Disposition: record.OwnerBound}); !errors.Is(err, env.ErrOutside) {
		t.Errorf("cwd outside = %v", err)
	}
}

func TestLiveByMount(t *testing.T) {
	f := setup(t, process.Config{})
	p := f.shell(t, "sleep 30")
	ids, err := f.m.LiveByMount(context.Background(), "s1", "work")
	if err != nil || !slices.Equal(ids, []string{p.ID}) {
		t.Fatalf("LiveByMount = %v, %v", ids, err)
	}
	if ids, _ := f.m.LiveByMount(context.Background(), "s1", "other"); len(ids) != 0 {
		t.Errorf("other mount: %v", ids)
	}
	f.m.Cancel(context.Background(), p.ID, "", owner)
	if ids, _ := f.m.LiveByMount(context.Background(), "s1", "work"); len(ids) != 0 {
		t.Errorf("after cancel: %v", ids)
	}
}

func TestBackgroundShellTool(t *testing.T) {
	f := setup(t, process.Config{})
	reg := tool.NewRegistry()
	if err := builtin.Register(reg, builtin.Options{Background: process.BackgroundShell{}}); err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(map[string]any{"command": "echo bg", "background": true})
	call := &tool.Call{ID: "call_sh", SessionID: "s1", RunID: "r1", Arguments: raw, Env: f.b, Background: managerStarter{f.m}}
	res := reg.Call(context.Background(), "shell", call, tool.CallOptions{})
	h := handleOf(t, res)
	if !strings.HasPrefix(h.ID, "proc_") {
		t.Fatalf("handle = %v; want an ID of the process's own, not the tool call's", h)
	}
	r := f.await(t, h.ID)
	if !strings.Contains(r.Tail, "bg") {
		t.Errorf("tail = %q", r.Tail)
	}
	if r.Process.ToolCallID != "call_sh" {
		t.Errorf("toolCallId = %q; want call_sh", r.Process.ToolCallID)
	}
	// Without a starter (no session owner), the shell refuses to go to the background.
	call.Background = nil
	if res := reg.Call(context.Background(), "shell", call, tool.CallOptions{}); !res.IsError {
		t.Errorf("background shell without a session owner: %+v", res)
	}
}

// managerStarter starts a tool's background processes on a Manager
// directly, as a session owner would (tool.Background).
type managerStarter struct{ m *process.Manager }

func (s managerStarter) StartProcess(ctx context.Context, call *tool.Call, req tool.BackgroundRequest) (record.Process, error) {
	disp := req.Disposition
	if disp == "" {
		disp = record.OwnerBound
	}
	return s.m.Start(ctx, process.StartParams{
		SessionID: call.SessionID, RunID: call.RunID, ToolCallID: call.ID, Kind: req.Kind, Command: req.Command, Cwd: req.Cwd,
		Binding: call.Env, Tool: req.Tool, Args: req.Args, Disposition: disp, WakeOnExit: req.WakeOnExit, CreatedBy: req.CreatedBy,
	})
}

// TestRecoverAfterSIGKILL kills a host (this test binary re-executed)
// running sh -c 'sleep 300 & sleep 300' with SIGKILL; a new Manager's
// Recover marks the process abandoned and nothing of its group survives.
func TestRecoverAfterSIGKILL(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "weft.db")
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+db)
	stdout, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("child: %q, %v", line, err)
	}
	var id string
	var pgid int
	if _, err := fmt.Sscanf(line, "started %s %d", &id, &pgid); err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("child said %q", line)
	}
	waitSleeps(t, pgid, 2, "300")
	before := groupMembers(pgid)
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	// Pdeathsig kills the shell, the group's leader; the sleeps outlive it
	// until the sweep.
	proctest.Eventually(t, 5*time.Second, func() string { return fmt.Sprintf("the shell %d outlived its host: %v", pgid, groupMembers(pgid)) }, func() bool {
		return !slices.Contains(groupMembers(pgid), pgid)
	})
	survivors := groupMembers(pgid)
	if len(survivors) == 0 {
		t.Fatalf("group %d: nothing outlived the host for the sweep to kill", pgid)
	}
	t.Logf("group %d: %d members before the kill, %d after", pgid, len(before), len(survivors))

	st, err := sqlite.Open(context.Background(), sqlite.Config{Path: db})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	m, err := process.New(process.Config{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	rep, err := m.Recover(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(rep.Abandoned, []string{id}) || rep.Killed != len(survivors) {
		t.Errorf("report = %+v; want %s abandoned, %d killed", rep, id, len(survivors))
	}
	waitGone(t, pgid)
	rec, err := st.Process(context.Background(), id)
	if err != nil || rec.Status != record.ProcessAbandoned {
		t.Fatalf("record = %+v, %v", rec, err)
	}
	evs, _ := st.ReadProcess(context.Background(), store.ReadProcessParams{ProcessID: id})
	last := evs[len(evs)-1]
	var d process.EndedData
	json.Unmarshal(last.Data, &d)
	if last.Type != process.EventAbandoned || d.Evidence == nil || d.Evidence.Writer != "recovery" || d.Evidence.Pgid != pgid {
		t.Errorf("terminal = %s %s", last.Type, last.Data)
	}
}

func TestRecoverDispositions(t *testing.T) {
	ctx := context.Background()
	st := memory.New()
	now := time.Now()
	mk := func(id, disp string) {
		rec := record.Process{ID: id, SessionID: "s1", Kind: record.ProcessTool, Status: record.ProcessRunning, Disposition: disp,
			StartedAt: now, LastSeq: 1, Spec: record.ProcessSpec{Tool: "echo", Args: json.RawMessage(`{"text":"again"}`)}}
		if err := st.AppendProcess(ctx, store.ProcessBatch{ProcessID: id, Record: &rec,
			Events: []record.ProcessEvent{{Seq: 1, ProcessID: id, Type: process.EventStarted, Time: now}}}); err != nil {
			t.Fatal(err)
		}
	}
	mk("rerun", record.Rerunnable)
	mk("bound", record.OwnerBound)
	mk("external", record.ExternallyOwned)
	f := setup(t, process.Config{Store: st})
	rep, err := f.m.Recover(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(rep.Rerun, []string{"rerun"}) || !slices.Equal(rep.Abandoned, []string{"bound"}) || !slices.Equal(rep.Left, []string{"external"}) {
		t.Fatalf("report = %+v", rep)
	}
	res := f.await(t, "rerun")
	if res.Process.Status != record.ProcessCompleted || !strings.Contains(res.Tail, "echo:again") {
		t.Errorf("rerun = %+v", res)
	}
	if got := types(f.log(t, "rerun")); !slices.Equal(got, []string{"process.started", "process.restarted", "process.output", "process.completed"}) {
		t.Errorf("rerun log = %v", got)
	}
	if rec, _ := st.Process(ctx, "external"); rec.Status != record.ProcessRunning {
		t.Errorf("external = %s", rec.Status)
	}
	if rec, _ := st.Process(ctx, "bound"); rec.Status != record.ProcessAbandoned {
		t.Errorf("bound = %s", rec.Status)
	}
}

// TestSandboxedShellResourceLimit: a background shell that runs into its
// processes limit fails, its end naming the limit (resource_limit).
func TestSandboxedShellResourceLimit(t *testing.T) {
	testenv.Landlock(t, 1)
	testenv.Cgroups(t)
	exe, _ := os.Executable()
	f := setup(t, process.Config{Sandbox: &sandbox.Config{Executable: exe, Limits: sandbox.Limits{Processes: 32}}})
	p := f.shell(t, `for i in $(seq 100); do sleep 300 & done; wait`)
	res := f.await(t, p.ID)
	if res.Process.Status != record.ProcessFailed {
		t.Fatalf("status %s", res.Process.Status)
	}
	evs, _ := f.st.ReadProcess(context.Background(), store.ReadProcessParams{ProcessID: p.ID})
	var d process.EndedData
	json.Unmarshal(evs[len(evs)-1].Data, &d)
	if d.Failure == nil || d.Failure.Kind != event.FailureResourceLimit || d.Failure.Limit != sandbox.LimitProcesses || !strings.Contains(d.LimitMessage, "processes limit") {
		t.Errorf("end %s", evs[len(evs)-1].Data)
	}
}

// TestRecoverSession: under fenced leases a host reconciles only the
// processes of the session whose lease it took (epoch 3) that ran under
// an earlier epoch: those become abandoned (or run again) and name it as
// their owner; a process of the current epoch, and the processes of
// other sessions, are left alone.
func TestRecoverSession(t *testing.T) {
	ctx := context.Background()
	st := memory.New()
	now := time.Now()
	mk := func(id, session, disp string, epoch int64) {
		rec := record.Process{ID: id, SessionID: session, Kind: record.ProcessTool, Status: record.ProcessRunning, Disposition: disp,
			StartedAt: now, LastSeq: 1, Host: "old", Epoch: epoch, Spec: record.ProcessSpec{Tool: "echo", Args: json.RawMessage(`{"text":"again"}`)}}
		if err := st.AppendProcess(ctx, store.ProcessBatch{ProcessID: id, Record: &rec, Epoch: epoch,
			Events: []record.ProcessEvent{{Seq: 1, ProcessID: id, Type: process.EventStarted, Time: now}}}); err != nil {
			t.Fatal(err)
		}
	}
	mk("stale", "s1", record.OwnerBound, 2)
	mk("stale-rerun", "s1", record.Rerunnable, 1)
	mk("current", "s1", record.OwnerBound, 3)
	mk("other", "s2", record.OwnerBound, 1)
	f := setup(t, process.Config{Store: st})
	if _, err := f.m.RecoverSession(ctx, "s1", process.Owner{}); err == nil {
		t.Fatal("RecoverSession without an epoch succeeded")
	}
	rep, err := f.m.RecoverSession(ctx, "s1", process.Owner{Host: "new", Epoch: 3})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(rep.Abandoned, []string{"stale"}) || !slices.Equal(rep.Rerun, []string{"stale-rerun"}) {
		t.Fatalf("report = %+v", rep)
	}
	f.await(t, "stale-rerun")
	for id, want := range map[string]struct {
		status, host string
		epoch        int64
	}{
		"stale":       {record.ProcessAbandoned, "new", 3},
		"stale-rerun": {record.ProcessCompleted, "new", 3},
		"current":     {record.ProcessRunning, "old", 3},
		"other":       {record.ProcessRunning, "old", 1},
	} {
		got, err := st.Process(ctx, id)
		if err != nil || got.Status != want.status || got.Host != want.host || got.Epoch != want.epoch {
			t.Errorf("%s: %s host %q epoch %d (%v); want %s host %q epoch %d", id, got.Status, got.Host, got.Epoch, err, want.status, want.host, want.epoch)
		}
	}
}
