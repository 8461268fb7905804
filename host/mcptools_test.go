package host_test

import (
	"context"
	"slices"
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
	"weft.dev/weft/tool/mcp"
)

// TestMCPToolsListedAndStarted: tools/list with a session lists its MCP
// server's tools beside the host's; process/start runs one in the
// background, and so does the model's start_tool.
func TestMCPToolsListedAndStarted(t *testing.T) {
	url := echoServer(t)
	st := memory.New()
	pm, err := process.New(process.Config{Store: st, KillGrace: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	reg := tool.NewRegistry()
	if err := builtin.Register(reg, builtin.Options{Background: process.BackgroundShell{}}); err != nil {
		t.Fatal(err)
	}
	if err := process.RegisterTools(reg, pm); err != nil {
		t.Fatal(err)
	}
	m, err := mcp.New(mcp.Config{})
	if err != nil {
		t.Fatal(err)
	}
	// The started process may end while the run's second step is under
	// way: its exit notice then reaches the run, which takes a third.
	script := `{"steps":[{"toolCalls":[{"name":"start_tool","arguments":{"tool":"mcp__web__echo","args":{"text":"from the model"}}}]},{"text":"started"},{"text":"it ended"}]}`
	h, err := host.New(context.Background(), host.Config{
		Store: st, Tools: reg, MCP: m, Processes: pm, DefaultModel: "scripted:bg",
		ResolveModel: func(name string) (*host.Model, error) {
			p, err := scripted.Parse("bg.json", []byte(script))
			if err != nil {
				return nil, err
			}
			return &host.Model{Name: name, Provider: p, Model: "bg"}, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		h.Close()
		m.Close()
	})
	ctx := context.Background()
	s, err := h.CreateSession(ctx, api.CreateSessionParams{MCPServers: map[string]event.MCPServer{"web": {URL: url}}, Mounts: []event.Mount{{ID: "work", Path: t.TempDir()}}})
	if err != nil {
		t.Fatal(err)
	}

	names := func(p api.ToolsListParams) []string {
		res, err := h.ListTools(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, t := range res.Tools {
			out = append(out, t.Name)
		}
		return out
	}
	if got := names(api.ToolsListParams{SessionID: s.ID}); !slices.Contains(got, "mcp__web__echo") || !slices.Contains(got, "read_file") {
		t.Errorf("tools/list of the session: %v", got)
	}
	if got := names(api.ToolsListParams{}); slices.Contains(got, "mcp__web__echo") {
		t.Errorf("tools/list without the session has its server's tool: %v", got)
	}

	p, err := h.StartProcess(ctx, api.ProcessStartParams{SessionID: s.ID, Tool: "mcp__web__echo", Args: []byte(`{"text":"in the background"}`)})
	if err != nil {
		t.Fatal(err)
	}
	r, err := h.AwaitProcess(ctx, api.ProcessAwaitParams{ID: p.ID, TimeoutMs: 10000})
	if err != nil || r.Process.Status != record.ProcessCompleted || !strings.Contains(r.Tail, "echo: in the background") {
		t.Fatalf("await: %+v %v", r, err)
	}
	if _, err := h.StartProcess(ctx, api.ProcessStartParams{SessionID: s.ID, Tool: "mcp__web__echo", Args: []byte(`{"text":1}`)}); err == nil {
		t.Error("bad arguments of an MCP tool: no error")
	}

	run := start(t, h, api.StartRunParams{SessionID: s.ID, Input: input("go")})
	if got := wait(t, h, run.ID); got.Status != record.RunCompleted {
		t.Fatalf("run %s: %+v", got.Status, got.Error)
	}
	evs, _ := h.ReadEvents(ctx, api.ReadEventsParams{SessionID: s.ID, RunID: run.ID})
	for _, e := range evs.Events {
		if e.Type == event.ToolCallCompleted {
			var d event.ToolCallCompletedData
			e.Decode(&d)
			if d.IsError || !strings.Contains(d.Output, "handle") {
				t.Errorf("start_tool of an MCP tool: %+v", d)
			}
		}
	}
}
