package main

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"

	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"weft.dev/weft/api"
	"weft.dev/weft/event"
	"weft.dev/weft/internal/testenv"
	"weft.dev/weft/mcpserver"
)

// mcpSpawn starts `weft ARGS...` (a weft mcp-server) as an agent does,
// speaking MCP on its stdin and stdout, and returns the client's session.
func (e *testEnv) mcpSpawn(args ...string) *mcp.ClientSession {
	e.t.Helper()
	c := e.cmd(args...)
	c.Stderr = os.Stderr
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test-agent", Version: "1"}, nil).
		Connect(ctx, &mcp.CommandTransport{Command: c, TerminateDuration: 5 * time.Second}, nil)
	if err != nil {
		e.t.Fatalf("connect to weft mcp-server: %v", err)
	}
	return cs
}

// mcpCall calls tool name with args on cs; the call must succeed; its
// structured result is decoded into out.
func mcpCall(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any, out any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if res.IsError {
		t.Fatalf("%s: error result %v", name, res.Content[0].(*mcp.TextContent).Text)
	}
	b, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, out); err != nil {
		t.Fatalf("%s: %s: %v", name, b, err)
	}
}

// mcpKind calls tool name with args on cs, which must fail, and returns
// the error's kind.
func mcpKind(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) api.Kind {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if !res.IsError {
		t.Fatalf("%s: succeeded, want an error", name)
	}
	b, _ := json.Marshal(res.Meta[mcpserver.ErrorMetaKey])
	var info struct {
		Kind api.Kind `json:"kind"`
	}
	json.Unmarshal(b, &info)
	return info.Kind
}

// An agent spawns `weft mcp-server` (a host in its own process), starts
// a run, awaits it, and gets typed errors for bad calls.
func TestMCPServerStdio(t *testing.T) {
	e := newEnv(t)
	fast := e.script("fast.json", `{"loop":true,"steps":[{"text":"hi {{input}}"}]}`)
	cs := e.mcpSpawn("mcp-server", "--local")
	var r mcpserver.RunOutput
	mcpCall(t, cs, "start_run", map[string]any{"prompt": "over stdio", "model": "scripted:" + fast}, &r)
	if len(r.RunID) < 5 || !r.SessionCreated {
		t.Fatalf("start_run = %+v", r)
	}
	var done mcpserver.RunOutput
	mcpCall(t, cs, "await_run", map[string]any{"runId": r.RunID, "timeoutSeconds": 20}, &done)
	if done.Status != "completed" || done.Answer != "hi over stdio" {
		t.Fatalf("await_run = %+v", done)
	}
	var ses mcpserver.ListSessionsOutput
	mcpCall(t, cs, "list_sessions", map[string]any{}, &ses)
	if len(ses.Sessions) != 1 || len(ses.Sessions[0].Mounts) != 1 || ses.Sessions[0].Mounts[0].Path != e.work {
		t.Errorf("list_sessions = %+v, want one session working in %s", ses, e.work)
	}
	if k := mcpKind(t, cs, "await_run", map[string]any{"runId": "run_nope"}); k != api.KindNotFound {
		t.Errorf("await_run of an unknown run: %s, want not_found", k)
	}
	if k := mcpKind(t, cs, "start_run", map[string]any{"prompt": 3}); k != api.KindInvalidParams {
		t.Errorf("start_run with a number for a prompt: %s, want invalid_params", k)
	}
	if err := cs.Close(); err != nil {
		t.Errorf("weft mcp-server exited with %v", err)
	}
	// The run is in the store, for every other command.
	evs := e.events(r.SessionID)
	if last := evs[len(evs)-1]; last.Type != event.RunCompleted || last.RunID != r.RunID {
		t.Errorf("the log ends with %s of %s, want the run's run.completed", last.Type, last.RunID)
	}
}

// Through `weft serve`, a run outlives the agent's MCP server: one
// `weft mcp-server` starts it and exits, another awaits the same run ID;
// a restart of the host is bridged by the next call.
func TestMCPServerDurableHandle(t *testing.T) {
	e := newEnv(t)
	addr := freeAddr(t)
	srv := e.serve(addr)
	defer func() { srv.Process.Signal(os.Interrupt); srv.Wait() }()
	slow := e.script("slow.json", `{"loop":true,"steps":[{"text":"one two three four five six seven eight nine ten","delayMs":40}]}`)
	first := e.mcpSpawn("--host", addr, "mcp-server")
	var r mcpserver.RunOutput
	mcpCall(t, first, "start_run", map[string]any{"prompt": "go", "model": "scripted:" + slow}, &r)
	if r.Done {
		t.Fatalf("start_run = %+v, want a run that goes on", r)
	}
	first.Close()
	second := e.mcpSpawn("--host", addr, "mcp-server")
	defer second.Close()
	var done mcpserver.RunOutput
	mcpCall(t, second, "await_run", map[string]any{"runId": r.RunID, "timeoutSeconds": 20}, &done)
	if done.Status != "completed" || !strings.HasPrefix(done.Answer, "one two") {
		t.Fatalf("await_run from a new mcp-server = %+v", done)
	}

	// The host restarts; the same mcp-server dials it again.
	srv.Process.Signal(os.Interrupt)
	srv.Wait()
	if k := mcpKind(t, second, "get_run", map[string]any{"runId": r.RunID}); k != api.KindOverloaded {
		t.Errorf("get_run while the host is down: %s, want overloaded (retryable)", k)
	}
	srv = e.serve(addr)
	var got mcpserver.RunOutput
	mcpCall(t, second, "get_run", map[string]any{"runId": r.RunID}, &got)
	if got.Status != "completed" {
		t.Errorf("get_run after the host's restart = %+v", got)
	}
}

// bearer adds a bearer token to every request.
type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

// `weft serve` serves the MCP tools at /mcp as streamable HTTP behind its
// token: with it an agent starts and awaits a run; without it nothing.
func TestServeMCPHTTP(t *testing.T) {
	e := newEnv(t)
	addr := freeAddr(t)
	srv := e.serve(addr)
	defer func() { srv.Process.Signal(os.Interrupt); srv.Wait() }()
	fast := e.script("fast.json", `{"loop":true,"steps":[{"text":"hi {{input}}"}]}`)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	endpoint := "http://" + addr + "/mcp"

	for _, tok := range []string{"", "wrong"} {
		hc := &http.Client{Transport: bearer{tok, http.DefaultTransport}}
		if tok == "" {
			hc = http.DefaultClient
		}
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "intruder"}, nil).
			Connect(ctx, &mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: hc, MaxRetries: -1}, nil)
		if err == nil {
			cs.Close()
			t.Fatalf("token %q: connected to /mcp", tok)
		}
	}
	resp, err := http.Post(endpoint, "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("POST /mcp without a token: %s, want 401", resp.Status)
	}

	hc := &http.Client{Transport: bearer{e.token(), http.DefaultTransport}}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test-agent"}, nil).
		Connect(ctx, &mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: hc}, nil)
	if err != nil {
		t.Fatalf("connect with the token: %v", err)
	}
	defer cs.Close()
	var r mcpserver.RunOutput
	mcpCall(t, cs, "start_run", map[string]any{"prompt": "over http", "model": "scripted:" + fast}, &r)
	var done mcpserver.RunOutput
	mcpCall(t, cs, "await_run", map[string]any{"runId": r.RunID, "timeoutSeconds": 20}, &done)
	if done.Answer != "hi over http" {
		t.Fatalf("await_run = %+v", done)
	}
	if k := mcpKind(t, cs, "get_run", map[string]any{"runId": "run_nope"}); k != api.KindNotFound {
		t.Errorf("get_run of an unknown run: %s, want not_found", k)
	}
}

// An agent awaiting a run over /mcp does not hold `weft serve`'s
// shutdown: await_run answers (timed out, the run where it stands) and
// the host exits at once.
func TestServeShutdownWithMCPAwait(t *testing.T) {
	e := newEnv(t)
	addr := freeAddr(t)
	srv := e.serve(addr)
	slow := e.script("slow.json", `{"loop":true,"steps":[{"text":"a b c d e f g h i j k l m n o p q r s t u v w x y z","delayMs":500}]}`)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	hc := &http.Client{Transport: bearer{e.token(), http.DefaultTransport}}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test-agent"}, nil).
		Connect(ctx, &mcp.StreamableClientTransport{Endpoint: "http://" + addr + "/mcp", HTTPClient: hc, MaxRetries: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	var r mcpserver.RunOutput
	mcpCall(t, cs, "start_run", map[string]any{"prompt": "go", "model": "scripted:" + slow}, &r)
	awaited := make(chan *mcp.CallToolResult, 1)
	go func() {
		res, _ := cs.CallTool(ctx, &mcp.CallToolParams{Name: "await_run", Arguments: map[string]any{"runId": r.RunID, "timeoutSeconds": 60}})
		awaited <- res
	}()
	// The await is in the host once the run streams; give it its first
	// deltas.
	if !poll(10*time.Second, func() bool {
		for _, e := range e.events(r.SessionID) {
			if e.Type == "message.delta" {
				return true
			}
		}
		return false
	}) {
		t.Fatal("the run did not stream")
	}
	srv.Process.Signal(os.Interrupt)
	exited := make(chan error, 1)
	go func() { exited <- srv.Wait() }()
	select {
	case <-exited:
	case <-time.After(8 * time.Second):
		// Below the shutdown's 10 s timeout, with room for a loaded
		// machine: the host's close cancels the run first.
		srv.Process.Kill()
		<-exited
		t.Fatal("weft serve took more than 8 s to shut down with an await_run in flight (its shutdown timeout is 10 s)")
	}
	select {
	case res := <-awaited:
		if res != nil && !res.IsError {
			var out mcpserver.RunOutput
			b, _ := json.Marshal(res.StructuredContent)
			json.Unmarshal(b, &out)
			if out.Done || !out.TimedOut {
				t.Errorf("await_run at shutdown = %+v, want timed out", out)
			}
		}
	case <-time.After(10 * time.Second):
		t.Fatal("await_run did not answer when the host shut down")
	}
}

// The official TypeScript SDK's client drives `weft mcp-server` as an
// agent written in it would: every tool has an output schema, and every
// structured result passes the SDK's check against it.
func TestMCPServerTypeScriptClient(t *testing.T) {
	sdk, node := testenv.NPMPackage(t, "@modelcontextprotocol/sdk")
	e := newEnv(t)
	fast := e.script("fast.json", `{"loop":true,"steps":[{"text":"hi {{input}}"}]}`)
	script, err := filepath.Abs("testdata/mcp_ts_client.mjs")
	if err != nil {
		t.Fatal(err)
	}
	c := exec.Command(node, script, sdk, weftBin, "scripted:"+fast)
	c.Dir, c.Env, c.Stderr = e.work, e.cmd().Env, os.Stderr
	b, err := c.Output()
	if err != nil {
		t.Fatalf("the TypeScript client failed: %v\n%s", err, b)
	}
	var got struct {
		Tools            []string `json:"tools"`
		WithOutputSchema int      `json:"withOutputSchema"`
		Status, Answer   string
		Types            []string `json:"types"`
		BadIsError       bool     `json:"badIsError"`
		BadText          string   `json:"badText"`
		BadKind          string   `json:"badKind"`
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	if len(got.Tools) != 11 || got.WithOutputSchema != len(got.Tools) {
		t.Errorf("tools %v, %d with an output schema", got.Tools, got.WithOutputSchema)
	}
	if got.Status != "completed" || got.Answer != "hi from typescript" {
		t.Errorf("the run: %s %q", got.Status, got.Answer)
	}
	if strings.Join(got.Types, " ") != "run.queued run.started run.completed" {
		t.Errorf("read_events types %v", got.Types)
	}
	if !got.BadIsError || got.BadKind != "not_found" || !strings.HasPrefix(got.BadText, "not_found: ") {
		t.Errorf("an unknown run: isError %v, kind %q, text %q", got.BadIsError, got.BadKind, got.BadText)
	}
}
