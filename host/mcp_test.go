package host_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"weft.dev/weft/api"
	"weft.dev/weft/event"
	"weft.dev/weft/host"
	"weft.dev/weft/llm/scripted"
	"weft.dev/weft/store"
	"weft.dev/weft/store/memory"
	"weft.dev/weft/store/record"
	"weft.dev/weft/tool"
	"weft.dev/weft/tool/mcp"
)

// echoServer serves an MCP server with an echo tool over streamable HTTP.
func echoServer(t *testing.T) string {
	t.Helper()
	srv := sdk.NewServer(&sdk.Implementation{Name: "echo", Version: "1"}, nil)
	type in struct {
		Text string `json:"text"`
	}
	sdk.AddTool(srv, &sdk.Tool{Name: "echo", Description: "Echoes text."}, func(_ context.Context, _ *sdk.CallToolRequest, a in) (*sdk.CallToolResult, any, error) {
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "echo: " + a.Text}}}, nil, nil
	})
	ts := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, nil))
	t.Cleanup(ts.Close)
	return ts.URL
}

// mcpHost is a host over st whose MCP manager is closed after it, its
// model a script that calls mcp__web__echo with the input.
func mcpHost(t *testing.T, st store.Store) *host.Host {
	t.Helper()
	return mcpScriptHost(t, st, `{"steps":[{"toolCalls":[{"name":"mcp__web__echo","arguments":{"text":"{{input}}"}}]},{"text":"done"}],"loop":true}`)
}

// mcpScriptHost is a host over st with an MCP manager (closed after it)
// whose default model plays script.
func mcpScriptHost(t *testing.T, st store.Store, script string) *host.Host {
	t.Helper()
	m, err := mcp.New(mcp.Config{})
	if err != nil {
		t.Fatal(err)
	}
	h, err := host.New(context.Background(), host.Config{
		Store: st, Tools: tool.NewRegistry(), MCP: m, DefaultModel: "scripted:mcp",
		ResolveModel: func(name string) (*host.Model, error) {
			p, err := scripted.Parse("mcp.json", []byte(script))
			if err != nil {
				return nil, err
			}
			return &host.Model{Name: name, Provider: p, Model: "mcp"}, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		h.Close()
		m.Close()
	})
	return h
}

// TestSessionMCPServers: a session's servers are in its session.created
// event, so a host started anew over the same store offers their tools.
func TestSessionMCPServers(t *testing.T) {
	url := echoServer(t)
	st := memory.New()
	servers := map[string]event.MCPServer{"web": {URL: url}}
	h := mcpHost(t, st)
	s, err := h.CreateSession(context.Background(), api.CreateSessionParams{MCPServers: servers, Mounts: []event.Mount{{ID: "work", Path: t.TempDir()}}})
	if err != nil {
		t.Fatal(err)
	}
	if got := s.MCPServers["web"].URL; got != url {
		t.Fatalf("record: %+v", s.MCPServers)
	}
	run := func(h *host.Host, text string) {
		t.Helper()
		r := start(t, h, api.StartRunParams{SessionID: s.ID, Input: input(text)})
		if got := wait(t, h, r.ID); got.Status != record.RunCompleted {
			t.Fatalf("status %s", got.Status)
		}
		evs, err := h.ReadEvents(context.Background(), api.ReadEventsParams{SessionID: s.ID, RunID: r.ID})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range evs.Events {
			if e.Type == event.ToolCallCompleted {
				var d event.ToolCallCompletedData
				e.Decode(&d)
				if d.Name != "mcp__web__echo" || d.Output != "echo: "+text || d.IsError {
					t.Fatalf("tool call %+v", d)
				}
				return
			}
		}
		t.Fatal("no tool call in the log")
	}
	run(h, "first")
	h.Close()
	evs, err := st.Read(context.Background(), store.ReadParams{SessionID: s.ID, Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	var created event.SessionCreatedData
	if err := evs[0].Decode(&created); err != nil || created.MCPServers["web"].URL != url {
		t.Fatalf("session.created: %+v %v", created, err)
	}
	run(mcpHost(t, st), "after a restart")
}

// TestMCPToolApproval: an MCP tool goes through the approval policy like
// a built-in; the approved call runs when the run resumes (and restarts
// nothing: the server stayed up).
func TestMCPToolApproval(t *testing.T) {
	url := echoServer(t)
	h := mcpHost(t, memory.New())
	s, err := h.CreateSession(context.Background(), api.CreateSessionParams{
		MCPServers: map[string]event.MCPServer{"web": {URL: url}},
		Policy:     &api.Policy{Rules: []api.Rule{{Tool: "mcp__web__*", Action: api.ActionAsk, Reason: "talks to the web server"}}},
		Mounts:     []event.Mount{{ID: "work", Path: t.TempDir()}},
	})
	if err != nil {
		t.Fatal(err)
	}
	r := start(t, h, api.StartRunParams{SessionID: s.ID, Input: input("approved")})
	e := waitFor(t, h, s.ID, r.ID, ofType(event.ApprovalRequested))
	var d event.ApprovalRequestedData
	if err := e.Decode(&d); err != nil || d.ToolCall.Name != "mcp__web__echo" || d.Rule.Reason != "talks to the web server" {
		t.Fatalf("approval %+v %v", d, err)
	}
	if _, err := h.DecideApproval(context.Background(), api.DecideParams{ApprovalID: d.ApprovalID, Decision: event.DecisionAllowOnce}); err != nil {
		t.Fatal(err)
	}
	if got := wait(t, h, r.ID); got.Status != record.RunCompleted {
		t.Fatalf("status %s", got.Status)
	}
	e = waitFor(t, h, s.ID, r.ID, ofType(event.ToolCallCompleted))
	var c event.ToolCallCompletedData
	if err := e.Decode(&c); err != nil || c.Output != "echo: approved" || c.IsError {
		t.Fatalf("tool call %+v %v", c, err)
	}
}

func TestSessionMCPServersRefused(t *testing.T) {
	h := mcpHost(t, memory.New())
	tests := []struct {
		name    string
		servers map[string]event.MCPServer
		field   string
		want    string
	}{
		{"trusted", map[string]event.MCPServer{"x": {Command: "/bin/true", Trusted: true}}, "mcpServers.x.trusted", "only the host's configuration may trust"},
		{"literal token", map[string]event.MCPServer{"x": {URL: "https://x", Headers: map[string]string{"Authorization": "Bearer abc"}}}, "mcpServers.x.headers.Authorization", "looks like a credential"},
		{"host variable", map[string]event.MCPServer{"x": {URL: "https://x", Headers: map[string]string{"Authorization": "Bearer ${OPENAI_API_KEY}"}}}, "mcpServers.x.headers.Authorization", "mcpSessionEnv"},
		{"bad name", map[string]event.MCPServer{"a b": {Command: "x"}}, "mcpServers.a b", "use letters"},
		{"too many", manyServers(api.MaxMCPServers + 1), "mcpServers", "the limit is 16"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := h.CreateSession(context.Background(), api.CreateSessionParams{MCPServers: tc.servers})
			var ae *api.Error
			if !errors.As(err, &ae) || ae.Kind != api.KindInvalidParams || ae.Data["field"] != tc.field || !strings.Contains(ae.Message, tc.want) {
				t.Fatalf("error %v (%+v), want field %s and %q", err, ae, tc.field, tc.want)
			}
		})
	}
	plain, _ := newHost(t)
	if _, err := plain.CreateSession(context.Background(), api.CreateSessionParams{MCPServers: map[string]event.MCPServer{"x": {Command: "x"}}}); err == nil || !strings.Contains(err.Error(), "no MCP client") {
		t.Fatalf("a host without MCP: %v", err)
	}
}

func manyServers(n int) map[string]event.MCPServer {
	out := map[string]event.MCPServer{}
	for i := range n {
		out[fmt.Sprintf("s%d", i)] = event.MCPServer{Command: "x"}
	}
	return out
}
