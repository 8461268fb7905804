package mcp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"weft.dev/weft/env"
	"weft.dev/weft/env/sandbox"
	"weft.dev/weft/event"
	"weft.dev/weft/internal/testenv"
	"weft.dev/weft/tool"
)

// fake is the configuration of a fake server (the test binary) in mode.
func fake(t testing.TB, mode string) event.MCPServer {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return event.MCPServer{Command: exe, Env: map[string]string{fakeEnv: mode}, Trusted: true}
}

// logBuffer collects log lines. Safe for concurrent use.
type logBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// newManager makes a manager that the test closes.
func newManager(t testing.TB, cfg Config) *Manager {
	t.Helper()
	m, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// tools lists the tools of cfg's servers, failing the test on an error.
func tools(t testing.TB, m *Manager, b *env.Binding) *tool.Registry {
	t.Helper()
	reg, err := m.Tools(context.Background(), nil, b)
	if err != nil {
		t.Fatal(err)
	}
	return reg
}

func call(reg *tool.Registry, name, args string, timeout time.Duration) tool.Result {
	return reg.Call(context.Background(), name, &tool.Call{ID: "c1", Arguments: []byte(args)}, tool.CallOptions{Timeout: timeout})
}

func TestStdioTools(t *testing.T) {
	logs := &logBuffer{}
	m := newManager(t, Config{Servers: map[string]event.MCPServer{"fake": fake(t, "tools")}, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	reg := tools(t, m, nil)
	var names []string
	for _, s := range reg.Specs() {
		names = append(names, s.Name)
	}
	for _, want := range []string{"mcp__fake__echo", "mcp__fake__add", "mcp__fake__crash"} {
		if _, ok := reg.Lookup(want); !ok {
			t.Fatalf("tool %s missing; have %v", want, names)
		}
	}
	tests := []struct {
		name, tool, args string
		want             string
		isError          bool
	}{
		{"echo", "mcp__fake__echo", `{"text":"hello"}`, "hello", false},
		{"add", "mcp__fake__add", `{"a":2,"b":40}`, "42", false},
		{"schema checked by weft", "mcp__fake__add", `{"a":"two"}`, `invalid arguments`, true},
		{"the tool fails", "mcp__fake__fail", `{}`, "the disk is on fire", true},
		{"an image is an attachment", "mcp__fake__image", `{}`, "a picture:\n[image 1 attached: image/png, 71 bytes]\n[image 2 attached: image/png, 8 bytes]\n" +
			"[image: image/svg+xml, 6 bytes, not shown: weft sends only image/png, image/jpeg, image/gif, image/webp images to the model]\n" +
			"[image 2 (image/png, 8 bytes) left out: image does not decode as image/png: png: invalid format: not a PNG file]", false},
		{"structured content said once", "mcp__fake__structured", `{}`, `{"city":"Oslo","tempC":-3.5}`, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := call(reg, tc.tool, tc.args, 10*time.Second)
			if res.IsError != tc.isError || !strings.Contains(res.Output, tc.want) {
				t.Fatalf("result %+v, want %q (isError %v)", res, tc.want, tc.isError)
			}
			if strings.Count(res.Output, "Oslo") > 1 {
				t.Fatalf("structured content shown twice: %q", res.Output)
			}
			// The one good image is attached; the broken one is left
			// out, and the SVG is not weft's to send.
			if tc.tool == "mcp__fake__image" &&
				(len(res.Attachments) != 1 || res.Attachments[0].MediaType != "image/png" || len(res.Attachments[0].Data) != 71) {
				t.Fatalf("attachments %+v, want the one good PNG", res.Attachments)
			}
		})
	}
	// A huge result is cut by the registry's budget.
	res := reg.Call(context.Background(), "mcp__fake__big", &tool.Call{Arguments: []byte(`{"n":1000000}`)}, tool.CallOptions{ResultBudget: 4096})
	if !res.Truncated || len(res.Output) > 4096 {
		t.Fatalf("big result: truncated %v, %d bytes", res.Truncated, len(res.Output))
	}
	if m.running() != 1 {
		t.Fatalf("%d servers running, want 1", m.running())
	}
}

func TestStdioTimeout(t *testing.T) {
	m := newManager(t, Config{Servers: map[string]event.MCPServer{"fake": fake(t, "tools")}})
	reg := tools(t, m, nil)
	t0 := time.Now()
	res := call(reg, "mcp__fake__sleep", `{"ms":60000}`, 200*time.Millisecond)
	if !res.IsError || !strings.Contains(res.Output, "timed out after 200ms") {
		t.Fatalf("result %+v", res)
	}
	if d := time.Since(t0); d > 5*time.Second {
		t.Fatalf("the timeout took %v", d)
	}
	// The server is still up and answers.
	if res := call(reg, "mcp__fake__echo", `{"text":"still here"}`, 10*time.Second); res.Output != "still here" {
		t.Fatalf("after a timeout: %+v", res)
	}
}

func TestStdioCrashMidCall(t *testing.T) {
	m := newManager(t, Config{Servers: map[string]event.MCPServer{"fake": fake(t, "tools")}})
	reg := tools(t, m, nil)
	res := call(reg, "mcp__fake__crash", `{}`, 10*time.Second)
	for _, want := range []string{"mcp server \"fake\"", "ended during the call of crash", "exited with status 2", "the fake server crashes as asked", "started again on next use"} {
		if !res.IsError || !strings.Contains(res.Output, want) {
			t.Fatalf("result %+v, want %q", res, want)
		}
	}
	// The next use starts it again.
	if res := call(reg, "mcp__fake__echo", `{"text":"back"}`, 10*time.Second); res.Output != "back" {
		t.Fatalf("after the crash: %+v", res)
	}
	// A second crash right after: the restart waits out a backoff, and
	// a call meanwhile says why.
	call(reg, "mcp__fake__crash", `{}`, 10*time.Second)
	if res := call(reg, "mcp__fake__echo", `{"text":"x"}`, 10*time.Second); res.Output == "x" {
		// backoff(2) is a second: only a slow machine gets here.
		t.Logf("restarted at once: %+v", res)
	} else if !strings.Contains(res.Output, "failed 2 times in a row") || !strings.Contains(res.Output, "exited with status 2") {
		t.Fatalf("during the backoff: %+v", res)
	}
	// A step during the backoff still offers the tools the server listed
	// last, and names the server's failure: a call answers with the
	// server's last error, not "unknown tool".
	reg, err := m.Tools(context.Background(), nil, nil)
	var se *ServerError
	switch {
	case err == nil:
		t.Logf("restarted at once")
	case !errors.As(err, &se) || se.Server != "fake" || !slices.Contains(se.Tools, "mcp__fake__echo") ||
		!strings.Contains(se.Last.Error(), "exited with status 2") || se.Failures != 2:
		t.Fatalf("Tools during the backoff: err %#v", err)
	default:
		res := call(reg, "mcp__fake__echo", `{"text":"x"}`, 10*time.Second)
		if !res.IsError || strings.Contains(res.Output, "unknown tool") || !strings.Contains(res.Output, "exited with status 2") {
			t.Fatalf("a call of the failed server's tool: %+v", res)
		}
	}
}

func TestStdioDoesNotStart(t *testing.T) {
	tests := []struct {
		name string
		spec event.MCPServer
		want []string
	}{
		{"exits", fake(t, "nostart"), []string{"did not start", "mcp.test", "exited with status 3", "fatal: cannot open /nonexistent/db"}},
		{"not found", event.MCPServer{Command: "weft-no-such-server", Args: []string{"--stdio"}, Trusted: true}, []string{"weft-no-such-server --stdio", `command "weft-no-such-server" not found in PATH`}},
		{"unset variable", event.MCPServer{Command: "/bin/true", Env: map[string]string{"TOKEN": "${WEFT_TEST_UNSET}"}, Trusted: true}, []string{"${WEFT_TEST_UNSET} is not set"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := newManager(t, Config{Servers: map[string]event.MCPServer{"broken": tc.spec}})
			_, err := m.Tools(context.Background(), nil, nil)
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Fatalf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

func TestStdioBadSchema(t *testing.T) {
	m := newManager(t, Config{Servers: map[string]event.MCPServer{"fake": fake(t, "badschema")}})
	reg := tools(t, m, nil)
	if _, ok := reg.Lookup("mcp__fake__bad"); ok {
		t.Fatal("the tool whose schema does not compile is offered")
	}
	if _, ok := reg.Lookup("mcp__fake__echo"); !ok {
		t.Fatal("the other tools are not offered")
	}
	l, err := m.Inspect(context.Background(), "fake", nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Skipped) != 1 || l.Skipped[0].Tool != "bad" || !strings.Contains(l.Skipped[0].Reason, "nowhere") {
		t.Fatalf("skipped %+v", l.Skipped)
	}
}

func TestStdioMalformed(t *testing.T) {
	m := newManager(t, Config{Servers: map[string]event.MCPServer{"garbage": fake(t, "garbage")}})
	_, err := m.Tools(context.Background(), nil, nil)
	if err == nil || !strings.Contains(err.Error(), "did not start") || !strings.Contains(err.Error(), "invalid character") {
		t.Fatalf("error %v", err)
	}
}

func TestStdioHugeToolList(t *testing.T) {
	m := newManager(t, Config{Servers: map[string]event.MCPServer{"huge": fake(t, "hugelist")}, MaxToolsBytes: 256 << 10})
	_, err := m.Tools(context.Background(), nil, nil)
	if err == nil || !strings.Contains(err.Error(), "refused: the tools take more than 262144 bytes") {
		t.Fatalf("error %v", err)
	}
	// A frame over the limit ends the connection.
	m2 := newManager(t, Config{Servers: map[string]event.MCPServer{"huge": fake(t, "hugelist")}, MaxFrameBytes: 64 << 10})
	_, err = m2.Tools(context.Background(), nil, nil)
	if err == nil || !strings.Contains(err.Error(), "frame exceeded") {
		t.Fatalf("error %v", err)
	}
}

// TestStdioSandboxed runs the fake server confined to a session's mount.
func TestStdioSandboxed(t *testing.T) {
	testenv.Landlock(t, 1)
	inside, outside := t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(inside, "in.txt"), []byte("inside"), 0o644)
	os.WriteFile(filepath.Join(outside, "out.txt"), []byte("outside"), 0o644)
	b, err := env.NewBinding(1, []event.Mount{{ID: "work", Kind: event.KindLocal, Path: inside, Mode: event.ModeReadWrite, Default: true, DefaultForShell: true}})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	spec := fake(t, "tools")
	spec.Trusted = false
	spec.ReadOnly = []string{filepath.Dir(spec.Command)}
	m := newManager(t, Config{Sandbox: &sandbox.Config{}, Servers: map[string]event.MCPServer{"fake": spec}})
	reg := tools(t, m, b)
	if res := call(reg, "mcp__fake__readfile", `{"path":"in.txt"}`, 10*time.Second); res.Output != "inside" {
		t.Fatalf("inside the mount (its working directory): %+v", res)
	}
	res := call(reg, "mcp__fake__readfile", `{"path":"`+filepath.Join(outside, "out.txt")+`"}`, 10*time.Second)
	if !res.IsError || !strings.Contains(res.Output, "permission denied") {
		t.Fatalf("outside the mount: %+v", res)
	}
}

// TestStdioSandboxedNetwork: a sandboxed server of a session whose
// network is denied has the same network as its shells: its own
// session's namespace, where nothing of the host's loopback answers —
// neither UDP nor TCP; with the network allowed both are reached.
func TestStdioSandboxedNetwork(t *testing.T) {
	testenv.Landlock(t, 1)
	testenv.NetNamespace(t)
	udp, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer udp.Close()
	go func() {
		buf := make([]byte, 64)
		for {
			n, from, err := udp.ReadFromUDP(buf)
			if err != nil {
				return
			}
			udp.WriteToUDP(buf[:n], from)
		}
	}()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); b := make([]byte, 4); c.Read(b); c.Write(b) }()
		}
	}()
	sessions, err := sandbox.NewSessions(sandbox.SessionsConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer sessions.Close()
	for _, network := range []string{sandbox.NetworkDeny, sandbox.NetworkAllow} {
		t.Run(network, func(t *testing.T) {
			b, err := env.OpenSession("ses_"+network, event.Binding{BindingVersion: 1, Network: network, Mounts: []event.Mount{
				{ID: "work", Kind: event.KindLocal, Path: t.TempDir(), Mode: event.ModeReadWrite, Default: true, DefaultForShell: true}}})
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			spec := fake(t, "tools")
			spec.Trusted = false
			spec.ReadOnly = []string{filepath.Dir(spec.Command)}
			m := newManager(t, Config{Sandbox: &sandbox.Config{Sessions: sessions}, Servers: map[string]event.MCPServer{"fake": spec}})
			reg := tools(t, m, b)
			for _, target := range []struct{ network, addr string }{{"udp", udp.LocalAddr().String()}, {"tcp", ln.Addr().String()}} {
				res := call(reg, "mcp__fake__dial", fmt.Sprintf(`{"network":%q,"addr":%q}`, target.network, target.addr), 10*time.Second)
				// Denied: the namespace's own loopback has nothing
				// listening, so the connection (or the datagram's
				// answer) is refused, not forbidden by a rule.
				want := "reached"
				if network == sandbox.NetworkDeny {
					want = "connection refused"
				}
				if !strings.Contains(res.Output, want) {
					t.Errorf("%s to the host's loopback: %+v", target.network, res)
				}
			}
		})
	}
}

// TestStdioSandboxedWithoutLandlock: on a kernel without Landlock (a
// child test binary that lacks it) a server that would be sandboxed is
// refused with the way out, and never started.
func TestStdioSandboxedWithoutLandlock(t *testing.T) {
	if testenv.Without(t, testenv.NoLandlock) {
		return
	}
	spec := fake(t, "tools")
	spec.Trusted = false
	spec.ReadOnly = []string{filepath.Dir(spec.Command)}
	m := newManager(t, Config{Sandbox: &sandbox.Config{}, Servers: map[string]event.MCPServer{"fake": spec}})
	b, err := env.NewBinding(1, []event.Mount{{ID: "work", Kind: event.KindLocal, Path: t.TempDir(), Mode: event.ModeReadWrite, Default: true, DefaultForShell: true}})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if _, err := m.Tools(context.Background(), nil, b); !errors.Is(err, sandbox.ErrNoLandlock) || !strings.Contains(err.Error(), `set "unsandboxed": true`) {
		t.Fatalf("Tools = %v; want a refusal with the way out", err)
	}
}
