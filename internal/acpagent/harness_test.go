package acpagent_test

import (
	"context"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	acp "github.com/coder/acp-go-sdk"
	"go.uber.org/goleak"

	"weft.dev/weft/api"
	"weft.dev/weft/client"
	"weft.dev/weft/event"
	"weft.dev/weft/host"
	"weft.dev/weft/internal/acpagent"
	"weft.dev/weft/llm/scripted"
	"weft.dev/weft/rpc"
	"weft.dev/weft/store"
	"weft.dev/weft/store/memory"
	"weft.dev/weft/tool"
	"weft.dev/weft/tool/builtin"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// scripts are the scripted models the tests' hosts know, by name
// (scripted:NAME).
var scripts = map[string]string{
	"plain": `{"steps": [{"reasoning": "Thinking it over.", "text": "Hello {{input}}"}], "loop": true}`,
	"gated": `{"steps": [
		{"text": "I'll write the file.", "toolCalls": [{"name": "write_file", "arguments": {"path": "hello.txt", "content": "hi"}}]},
		{"text": "Done."}]}`,
	"wide": wideScript(),
	"question": `{"steps": [
		{"toolCalls": [{"name": "ask_user", "arguments": {"question": "Which color?", "choices": ["red", "blue"]}}]},
		{"text": "Noted."}]}`,
	"slow": `{"steps": [{"text": "one two three four five six seven eight nine ten eleven twelve", "delayMs": 80}], "loop": true}`,
}

// testHost is a weft host in the test, served over WebSocket as `weft
// serve` serves it, so that the agent drives it through the Go client.
type testHost struct {
	h   *host.Host
	url string
	cwd string
}

func newTestHost(t testing.TB) *testHost {
	t.Helper()
	return newTestHostOn(t, memory.New())
}

// newTestHostOn is newTestHost over st.
func newTestHostOn(t testing.TB, st store.Store) *testHost {
	t.Helper()
	reg := tool.NewRegistry()
	if err := builtin.Register(reg, builtin.Options{}); err != nil {
		t.Fatal(err)
	}
	resolve := func(name string) (*host.Model, error) {
		src, ok := scripts[strings.TrimPrefix(name, "scripted:")]
		if !ok {
			return nil, api.Errorf(api.KindInvalidParams, "unknown model %q", name)
		}
		p, err := scripted.Parse(name, []byte(src))
		if err != nil {
			return nil, err
		}
		return &host.Model{Name: name, Provider: p, Model: name}, nil
	}
	h, err := host.New(context.Background(), host.Config{Store: st, Tools: reg, ResolveModel: resolve, DefaultModel: "scripted:plain"})
	if err != nil {
		t.Fatal(err)
	}
	srv := rpc.NewHostServer(h, rpc.HostConfig{Config: rpc.Config{NoAuth: true}})
	hs := httptest.NewServer(rpc.HTTPHandler(srv, h, rpc.SSEOptions{}))
	t.Cleanup(func() {
		hs.Close()
		srv.Close()
		h.Close()
	})
	cwd, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return &testHost{h: h, url: hs.URL, cwd: cwd}
}

// dial connects a Go client to the host.
func (th *testHost) dial(ctx context.Context) (*client.Client, error) {
	return client.Dial(ctx, th.url, client.Options{})
}

// peer is an ACP client (an editor) connected to a `weft acp` agent
// that drives the test host through the Go client.
type peer struct {
	t         testing.TB
	closeOnce sync.Once
	conn      *acp.ClientSideConnection
	in        io.Closer // what the agent reads
	out       io.Closer // what the client reads
	done      chan struct{}
	cl        *client.Client

	mu      sync.Mutex
	updates []acp.SessionNotification
	changed chan struct{}
	// permit answers a permission request; nil leaves it unanswered
	// until its ctx ends (the agent cancels it).
	permit func(acp.RequestPermissionRequest) string
	asked  []acp.RequestPermissionRequest
	// cancelled counts the permission requests the agent withdrew.
	cancelled int
}

// connect starts an agent over th with cfg's other fields and returns
// the client side.
func (th *testHost) connect(t testing.TB, cfg acpagent.Config) *peer {
	t.Helper()
	cl, err := th.dial(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	cfg.Host = cl
	cfg.Follow = func(ctx context.Context, sessionID string, after int64) iter.Seq2[event.Event, error] {
		return client.Follow(ctx, th.dial, sessionID, after, "")
	}
	return startPeer(t, cfg, cl)
}

func startPeer(t testing.TB, cfg acpagent.Config, cl *client.Client) *peer {
	t.Helper()
	c2aR, c2aW := io.Pipe()
	a2cR, a2cW := io.Pipe()
	p := &peer{t: t, in: c2aW, out: a2cR, done: make(chan struct{}), cl: cl, changed: make(chan struct{})}
	go func() {
		defer close(p.done)
		if err := acpagent.Serve(context.Background(), cfg, c2aR, a2cW); err != nil {
			t.Error(err)
		}
		a2cW.Close()
	}()
	p.conn = acp.NewClientSideConnection(p, c2aW, a2cR)
	p.conn.SetLogger(discardLogger())
	t.Cleanup(p.close)
	return p
}

// close ends the connection as an editor that exits does, and waits for
// the agent.
func (p *peer) close() { p.closeOnce.Do(p.doClose) }

func (p *peer) doClose() {
	p.in.Close()
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		p.t.Error("the agent did not stop after its client closed the connection")
	}
	p.out.Close()
	<-p.conn.Done()
	if p.cl != nil {
		p.cl.Close()
	}
}

func (p *peer) initialize(t testing.TB) acp.InitializeResponse {
	t.Helper()
	res, err := p.conn.Initialize(t.Context(), acp.InitializeRequest{ProtocolVersion: acp.ProtocolVersionNumber,
		ClientCapabilities: acp.ClientCapabilities{}})
	if err != nil {
		t.Fatalf("initialize: %v", err)
	}
	return res
}

func (p *peer) newSession(t *testing.T, cwd string) acp.NewSessionResponse {
	t.Helper()
	res, err := p.conn.NewSession(t.Context(), acp.NewSessionRequest{Cwd: cwd, McpServers: []acp.McpServer{}})
	if err != nil {
		t.Fatalf("session/new: %v", err)
	}
	return res
}

func (p *peer) prompt(ctx context.Context, sid acp.SessionId, text string) (acp.PromptResponse, error) {
	return p.conn.Prompt(ctx, acp.PromptRequest{SessionId: sid, Prompt: []acp.ContentBlock{acp.TextBlock(text)}})
}

// SessionUpdate records an update.
func (p *peer) SessionUpdate(_ context.Context, n acp.SessionNotification) error {
	p.mu.Lock()
	p.updates = append(p.updates, n)
	close(p.changed)
	p.changed = make(chan struct{})
	p.mu.Unlock()
	return nil
}

// RequestPermission answers with p.permit, or waits until the agent
// withdraws the request.
func (p *peer) RequestPermission(ctx context.Context, r acp.RequestPermissionRequest) (acp.RequestPermissionResponse, error) {
	p.mu.Lock()
	p.asked = append(p.asked, r)
	permit := p.permit
	close(p.changed)
	p.changed = make(chan struct{})
	p.mu.Unlock()
	if permit == nil {
		<-ctx.Done()
		p.mu.Lock()
		p.cancelled++
		close(p.changed)
		p.changed = make(chan struct{})
		p.mu.Unlock()
		return acp.RequestPermissionResponse{}, ctx.Err()
	}
	id := permit(r)
	return acp.RequestPermissionResponse{Outcome: acp.RequestPermissionOutcome{Selected: &acp.RequestPermissionOutcomeSelected{OptionId: acp.PermissionOptionId(id), Outcome: "selected"}}}, nil
}

// waitFor waits until cond, read under the peer's lock, holds.
func (p *peer) waitFor(t *testing.T, what string, cond func(p *peer) bool) {
	t.Helper()
	deadline := time.After(15 * time.Second)
	for {
		p.mu.Lock()
		ok, ch := cond(p), p.changed
		p.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-ch:
		case <-deadline:
			p.mu.Lock()
			defer p.mu.Unlock()
			t.Fatalf("timed out waiting for %s; updates:\n%s", what, describe(p.updates))
		}
	}
}

// snapshot returns the updates so far.
func (p *peer) snapshot() []acp.SessionNotification {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]acp.SessionNotification(nil), p.updates...)
}

func (p *peer) askedCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.asked)
}

// describe prints updates one a line, for failures and comparisons.
func describe(ups []acp.SessionNotification) string {
	var b strings.Builder
	for _, n := range ups {
		b.WriteString(line(n.Update) + "\n")
	}
	return b.String()
}

// line is one update in a short form: its kind and its text, tool call
// or status.
func line(u acp.SessionUpdate) string {
	switch {
	case u.UserMessageChunk != nil:
		return "user: " + text(u.UserMessageChunk.Content)
	case u.AgentMessageChunk != nil:
		return "agent: " + text(u.AgentMessageChunk.Content)
	case u.AgentThoughtChunk != nil:
		return "thought: " + text(u.AgentThoughtChunk.Content)
	case u.ToolCall != nil:
		return fmt.Sprintf("tool_call %s %q %s %s", u.ToolCall.ToolCallId, u.ToolCall.Title, u.ToolCall.Kind, u.ToolCall.Status)
	case u.ToolCallUpdate != nil:
		s := ""
		if u.ToolCallUpdate.Status != nil {
			s = string(*u.ToolCallUpdate.Status)
		}
		return fmt.Sprintf("tool_call_update %s %s", u.ToolCallUpdate.ToolCallId, s)
	case u.SessionInfoUpdate != nil && u.SessionInfoUpdate.Title != nil:
		return "title: " + *u.SessionInfoUpdate.Title
	}
	return "other"
}

func text(c acp.ContentBlock) string {
	if c.Text != nil {
		return c.Text.Text
	}
	return "?"
}

// joined is the concatenated text of the updates of one kind ("user",
// "agent", "thought").
func joined(ups []acp.SessionNotification, kind string) string {
	var b strings.Builder
	for _, n := range ups {
		if l := line(n.Update); strings.HasPrefix(l, kind+": ") {
			b.WriteString(strings.TrimPrefix(l, kind+": "))
		}
	}
	return b.String()
}

// toolStatus is the last status the updates gave tool call id.
func toolStatus(ups []acp.SessionNotification, id string) string {
	st := ""
	for _, n := range ups {
		switch u := n.Update; {
		case u.ToolCall != nil && string(u.ToolCall.ToolCallId) == id:
			st = string(u.ToolCall.Status)
		case u.ToolCallUpdate != nil && string(u.ToolCallUpdate.ToolCallId) == id && u.ToolCallUpdate.Status != nil:
			st = string(*u.ToolCallUpdate.Status)
		}
	}
	return st
}

// Unused parts of acp.Client: weft uses its own tools, not the editor's.

func (p *peer) ReadTextFile(context.Context, acp.ReadTextFileRequest) (acp.ReadTextFileResponse, error) {
	return acp.ReadTextFileResponse{}, acp.NewMethodNotFound(acp.ClientMethodFsReadTextFile)
}
func (p *peer) WriteTextFile(context.Context, acp.WriteTextFileRequest) (acp.WriteTextFileResponse, error) {
	return acp.WriteTextFileResponse{}, acp.NewMethodNotFound(acp.ClientMethodFsWriteTextFile)
}
func (p *peer) CreateTerminal(context.Context, acp.CreateTerminalRequest) (acp.CreateTerminalResponse, error) {
	return acp.CreateTerminalResponse{}, acp.NewMethodNotFound(acp.ClientMethodTerminalCreate)
}
func (p *peer) KillTerminal(context.Context, acp.KillTerminalRequest) (acp.KillTerminalResponse, error) {
	return acp.KillTerminalResponse{}, acp.NewMethodNotFound(acp.ClientMethodTerminalKill)
}
func (p *peer) TerminalOutput(context.Context, acp.TerminalOutputRequest) (acp.TerminalOutputResponse, error) {
	return acp.TerminalOutputResponse{}, acp.NewMethodNotFound(acp.ClientMethodTerminalOutput)
}
func (p *peer) ReleaseTerminal(context.Context, acp.ReleaseTerminalRequest) (acp.ReleaseTerminalResponse, error) {
	return acp.ReleaseTerminalResponse{}, acp.NewMethodNotFound(acp.ClientMethodTerminalRelease)
}
func (p *peer) WaitForTerminalExit(context.Context, acp.WaitForTerminalExitRequest) (acp.WaitForTerminalExitResponse, error) {
	return acp.WaitForTerminalExitResponse{}, acp.NewMethodNotFound(acp.ClientMethodTerminalWaitForExit)
}

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// readFile is the content of a file of the host's working directory.
func (th *testHost) readFile(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(th.cwd, name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
