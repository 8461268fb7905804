package mcp

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"weft.dev/weft/api"
	"weft.dev/weft/env"
	"weft.dev/weft/env/sandbox"
	"weft.dev/weft/event"
	"weft.dev/weft/internal/testenv"
	"weft.dev/weft/tool"
)

// npmPackage returns the directory of an npm package installed where
// .ci/run installs them, and the node binary; without them the test
// skips, or fails under CI (testenv.NPMPackage).
func npmPackage(t *testing.T, name string) (dir, node string) {
	t.Helper()
	return testenv.NPMPackage(t, name)
}

func TestEverythingStdio(t *testing.T) {
	dir, node := npmPackage(t, "@modelcontextprotocol/server-everything")
	m := newManager(t, Config{Servers: map[string]event.MCPServer{
		"everything": {Command: node, Args: []string{filepath.Join(dir, "dist", "index.js"), "stdio"}, Trusted: true},
	}})
	testEverything(t, m)
}

// TestEverythingSandboxed runs server-everything under the sandbox, as a
// session's server would run.
func TestEverythingSandboxed(t *testing.T) {
	dir, node := npmPackage(t, "@modelcontextprotocol/server-everything")
	testenv.Landlock(t, 1)
	work := t.TempDir()
	b, err := env.NewBinding(1, []event.Mount{{ID: "work", Kind: event.KindLocal, Path: work, Mode: event.ModeReadWrite, Default: true, DefaultForShell: true}})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	m := newManager(t, Config{Sandbox: &sandbox.Config{}})
	session := map[string]event.MCPServer{
		"everything": {Command: node, Args: []string{filepath.Join(dir, "dist", "index.js"), "stdio"}, ReadOnly: []string{filepath.Dir(filepath.Dir(filepath.Dir(dir)))}},
	}
	if err := m.CheckSession(session); err != nil {
		t.Fatal(err)
	}
	reg, err := m.Tools(context.Background(), session, b)
	if err != nil {
		t.Fatal(err)
	}
	if res := call(reg, "mcp__everything__echo", `{"message":"boxed"}`, 30*time.Second); res.Output != "Echo: boxed" {
		t.Fatalf("echo: %+v", res)
	}
}

func TestEverythingHTTP(t *testing.T) {
	dir, node := npmPackage(t, "@modelcontextprotocol/server-everything")
	port := freePort(t)
	srv := exec.Command(node, filepath.Join(dir, "dist", "index.js"), "streamableHttp")
	srv.Env = append(os.Environ(), "PORT="+port)
	stderr, err := srv.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	drained := make(chan struct{})
	t.Cleanup(func() {
		srv.Process.Kill()
		srv.Wait()
		<-drained
	})
	listening := make(chan struct{})
	go func() {
		defer close(drained)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if strings.Contains(sc.Text(), "listening on port") {
				close(listening)
			}
		}
	}()
	select {
	case <-listening:
	case <-time.After(30 * time.Second):
		t.Fatal("server-everything did not listen")
	}
	m := newManager(t, Config{
		Servers:   map[string]event.MCPServer{"everything": {URL: "http://127.0.0.1:" + port + "/mcp", Headers: map[string]string{"Authorization": "Bearer ${WEFT_TEST_TOKEN}"}}},
		LookupEnv: func(k string) (string, bool) { return "t0ken", k == "WEFT_TEST_TOKEN" },
	})
	testEverything(t, m)
}

// testEverything calls server-everything's tools: echo, get-sum, the
// long-running operation, a tool that fails, an image and structured
// content.
func testEverything(t *testing.T, m *Manager) {
	t.Helper()
	reg := tools(t, m, nil)
	tests := []struct {
		name, tool, args string
		timeout          time.Duration
		want             string
		isError          bool
	}{
		{"echo", "echo", `{"message":"hello"}`, 0, "Echo: hello", false},
		{"add", "get-sum", `{"a":2,"b":40}`, 0, "42", false},
		{"long running", "trigger-long-running-operation", `{"duration":1,"steps":2}`, 0, "Long running operation completed", false},
		{"long running past its timeout", "trigger-long-running-operation", `{"duration":30,"steps":3}`, 500 * time.Millisecond, "timed out after 500ms", true},
		{"the tool fails", "get-resource-reference", `{"resourceType":"Text","resourceId":-1}`, 0, "Invalid resourceId", true},
		{"schema checked by weft", "get-sum", `{"a":1}`, 0, `missing properties: ["b"]`, true},
		{"an image", "get-tiny-image", `{}`, 0, "[image 1 attached: image/png,", false},
		{"structured content", "get-structured-content", `{"location":"Chicago"}`, 0, "temperature", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			timeout := tc.timeout
			if timeout == 0 {
				timeout = 30 * time.Second
			}
			res := call(reg, "mcp__everything__"+tc.tool, tc.args, timeout)
			if res.IsError != tc.isError || !strings.Contains(res.Output, tc.want) {
				t.Fatalf("result %+v, want %q (isError %v)", res, tc.want, tc.isError)
			}
			if tc.tool == "get-tiny-image" && (len(res.Attachments) != 1 || res.Attachments[0].MediaType != "image/png" || event.CheckImage(res.Attachments[0]) != nil) {
				t.Fatalf("attachments %+v, want the tiny PNG", res.Attachments)
			}
		})
	}
	// The long-running operation's progress notifications reach the
	// call's Progress, in order. (The last may come after the result,
	// which ends the route: notifications are not ordered with it.)
	rec := &progressRecorder{}
	res := reg.Call(context.Background(), "mcp__everything__trigger-long-running-operation",
		&tool.Call{ID: "p1", Arguments: []byte(`{"duration":1,"steps":4}`), Progress: rec}, tool.CallOptions{Timeout: 30 * time.Second})
	got := rec.got()
	if res.IsError || len(got) < 3 || got[0].Progress != 1 {
		t.Fatalf("progress %+v of result %+v, want 1..4 of 4", got, res)
	}
	for i, u := range got {
		if u.Progress != float64(i+1) || u.Total != 4 {
			t.Fatalf("progress %+v, want 1..4 of 4", got)
		}
	}
	testEverythingFeatures(t, m)
	// After the timeout the server still answers.
	if res := call(reg, "mcp__everything__echo", `{"message":"again"}`, 30*time.Second); res.Output != "Echo: again" {
		t.Fatalf("echo after a timeout: %+v", res)
	}
}

// TestFilesystemOnMount runs server-filesystem sandboxed in a session's
// mount, serving ".", its working directory: the mount's root.
func TestFilesystemOnMount(t *testing.T) {
	dir, node := npmPackage(t, "@modelcontextprotocol/server-filesystem")
	work := t.TempDir()
	if err := os.WriteFile(filepath.Join(work, "hello.txt"), []byte("hello from the mount\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	b, err := env.NewBinding(1, []event.Mount{{ID: "work", Kind: event.KindLocal, Path: work, Mode: event.ModeReadWrite, Default: true, DefaultForShell: true}})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	spec := event.MCPServer{Command: node, Args: []string{filepath.Join(dir, "dist", "index.js"), "."}, ReadOnly: []string{filepath.Dir(filepath.Dir(filepath.Dir(dir)))}}
	testenv.Landlock(t, 1)
	m := newManager(t, Config{Sandbox: &sandbox.Config{}})
	session := map[string]event.MCPServer{"fs": spec}
	reg, err := m.Tools(context.Background(), session, b)
	if err != nil {
		t.Fatal(err)
	}
	if res := call(reg, "mcp__fs__read_text_file", `{"path":"`+filepath.Join(work, "hello.txt")+`"}`, 30*time.Second); res.Output != "hello from the mount\n" {
		t.Fatalf("read: %+v", res)
	}
	if res := call(reg, "mcp__fs__write_file", `{"path":"`+filepath.Join(work, "new.txt")+`","content":"written"}`, 30*time.Second); res.IsError {
		t.Fatalf("write: %+v", res)
	}
	if got, _ := os.ReadFile(filepath.Join(work, "new.txt")); string(got) != "written" {
		t.Fatalf("new.txt holds %q", got)
	}
	res := call(reg, "mcp__fs__read_text_file", `{"path":"/etc/hostname"}`, 30*time.Second)
	if !res.IsError {
		t.Fatalf("read outside the mount: %+v", res)
	}
}

func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return fmt.Sprint(l.Addr().(*net.TCPAddr).Port)
}

// progressRecorder is a tool.Progress that keeps every report.
type progressRecorder struct {
	mu      sync.Mutex
	updates []tool.ProgressUpdate
}

func (r *progressRecorder) Report(_ context.Context, u tool.ProgressUpdate) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.updates = append(r.updates, u)
}

func (r *progressRecorder) got() []tool.ProgressUpdate {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.updates)
}

// testEverythingFeatures lists and reads server-everything's resources
// and prompts; an unknown server or resource is an error.
func testEverythingFeatures(t *testing.T, m *Manager) {
	t.Helper()
	ctx := context.Background()
	rs, err := m.Resources(ctx, "", nil, nil)
	if err != nil || len(rs.Failed) > 0 || len(rs.Resources) == 0 {
		t.Fatalf("resources %+v, %v", rs, err)
	}
	var text api.MCPResource
	for _, r := range rs.Resources {
		if r.Server != "everything" || r.URI == "" {
			t.Fatalf("resource %+v", r)
		}
		if strings.HasPrefix(r.MIMEType, "text/") && text.URI == "" {
			text = r
		}
	}
	if text.URI == "" {
		t.Fatalf("no text resource in %+v", rs.Resources)
	}
	got, err := m.ReadResource(ctx, "everything", text.URI, nil, nil)
	if err != nil || len(got.Contents) == 0 || got.Contents[0].Text == "" {
		t.Fatalf("read %s: %+v, %v", text.URI, got, err)
	}
	if _, err := m.ReadResource(ctx, "everything", "demo://no/such/thing", nil, nil); err == nil {
		t.Errorf("reading an unknown resource: no error")
	}
	if _, err := m.Resources(ctx, "nope", nil, nil); !errors.Is(err, ErrNoServer) {
		t.Errorf("an unknown server: err = %v", err)
	}

	ps, err := m.Prompts(ctx, "everything", nil, nil)
	if err != nil || len(ps.Failed) > 0 || len(ps.Prompts) == 0 {
		t.Fatalf("prompts %+v, %v", ps, err)
	}
	var simple api.MCPPrompt
	for _, p := range ps.Prompts {
		required := false
		for _, a := range p.Arguments {
			required = required || a.Required
		}
		if !required && simple.Name == "" {
			simple = p
		}
	}
	pr, err := m.GetPrompt(ctx, "everything", simple.Name, nil, nil, nil)
	if err != nil || len(pr.Messages) == 0 || len(pr.Messages[0].Content) == 0 || event.Text(pr.Messages[0].Content) == "" {
		t.Fatalf("prompt %s: %+v, %v", simple.Name, pr, err)
	}
	if _, err := m.GetPrompt(ctx, "everything", "no-such-prompt", nil, nil, nil); err == nil {
		t.Errorf("an unknown prompt: no error")
	}
}
