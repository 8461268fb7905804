package host_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"weft.dev/weft/api"
	"weft.dev/weft/event"
	"weft.dev/weft/host"
	"weft.dev/weft/store/memory"
	"weft.dev/weft/store/record"
)

// TestMCPProgressEvents: an MCP tool's progress notifications become
// tool.progress events of its call, between its tool.call.started and
// its tool.call.completed.
func TestMCPProgressEvents(t *testing.T) {
	var hp atomic.Pointer[host.Host]
	var sid atomic.Pointer[string]
	srv := sdk.NewServer(&sdk.Implementation{Name: "slow", Version: "1"}, nil)
	sdk.AddTool(srv, &sdk.Tool{Name: "work", Description: "Works in steps."}, func(ctx context.Context, req *sdk.CallToolRequest, _ struct{}) (*sdk.CallToolResult, any, error) {
		token := req.Params.GetProgressToken()
		if token == nil {
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "no progress token"}}, IsError: true}, nil, nil
		}
		if err := req.Session.NotifyProgress(ctx, &sdk.ProgressNotificationParams{ProgressToken: token, Progress: 1, Total: 2, Message: "half way"}); err != nil {
			return nil, nil, err
		}
		// Notifications are not ordered with the result: answer once the
		// progress is in the log.
		for seen := false; !seen && ctx.Err() == nil; time.Sleep(time.Millisecond) {
			evs, err := hp.Load().ReadEvents(ctx, api.ReadEventsParams{SessionID: *sid.Load()})
			if err != nil {
				return nil, nil, err
			}
			for _, e := range evs.Events {
				seen = seen || e.Type == event.ToolProgress
			}
		}
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "worked"}}}, nil, nil
	})
	ts := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, nil))
	t.Cleanup(ts.Close)
	h := mcpScriptHost(t, memory.New(), `{"steps":[{"toolCalls":[{"name":"mcp__slow__work"}]},{"text":"done"}]}`)
	ctx := context.Background()
	s, err := h.CreateSession(ctx, api.CreateSessionParams{MCPServers: map[string]event.MCPServer{"slow": {URL: ts.URL}}, Mounts: []event.Mount{{ID: "work", Path: t.TempDir()}}})
	if err != nil {
		t.Fatal(err)
	}
	hp.Store(h)
	sid.Store(&s.ID)
	r := start(t, h, api.StartRunParams{SessionID: s.ID, Input: input("go")})
	if got := wait(t, h, r.ID); got.Status != record.RunCompleted {
		t.Fatalf("status %s", got.Status)
	}
	evs, err := h.ReadEvents(ctx, api.ReadEventsParams{SessionID: s.ID, RunID: r.ID})
	if err != nil {
		t.Fatal(err)
	}
	var order []event.Type
	var callID string
	var progress []event.ToolProgressData
	for _, e := range evs.Events {
		switch e.Type {
		case event.ToolCallStarted:
			var d event.ToolCallStartedData
			e.Decode(&d)
			callID = d.ID
		case event.ToolProgress:
			var d event.ToolProgressData
			e.Decode(&d)
			progress = append(progress, d)
		case event.ToolCallCompleted:
			var d event.ToolCallCompletedData
			e.Decode(&d)
			if d.Output != "worked" {
				t.Errorf("result %+v", d)
			}
		default:
			continue
		}
		order = append(order, e.Type)
	}
	want := []event.Type{event.ToolCallStarted, event.ToolProgress, event.ToolCallCompleted}
	if len(order) != 3 || order[0] != want[0] || order[1] != want[1] || order[2] != want[2] {
		t.Fatalf("events %v, want %v", order, want)
	}
	if p := progress[0]; p.ID != callID || p.Name != "mcp__slow__work" || p.Progress != 1 || p.Total != 2 || p.Message != "half way" {
		t.Errorf("tool.progress %+v (call %s)", p, callID)
	}
}

// TestMCPServerFailedEvent: a session's MCP server that cannot start
// writes mcp.server_failed to the session's log, once while it keeps
// failing the same way, and a call of its tool answers with its error,
// not "unknown tool".
func TestMCPServerFailedEvent(t *testing.T) {
	dead := httptest.NewServer(http.NotFoundHandler())
	url := dead.URL + "/mcp"
	dead.Close() // nothing listens there any more
	h := mcpScriptHost(t, memory.New(), `{"steps":[{"toolCalls":[{"name":"mcp__dead__lookup"}]},{"toolCalls":[{"name":"mcp__dead__lookup"}]},{"text":"done"}]}`)
	ctx := context.Background()
	s, err := h.CreateSession(ctx, api.CreateSessionParams{MCPServers: map[string]event.MCPServer{"dead": {URL: url}}, Mounts: []event.Mount{{ID: "work", Path: t.TempDir()}}})
	if err != nil {
		t.Fatal(err)
	}
	r := start(t, h, api.StartRunParams{SessionID: s.ID, Input: input("go")})
	if got := wait(t, h, r.ID); got.Status != record.RunCompleted {
		t.Fatalf("status %s", got.Status)
	}
	evs, err := h.ReadEvents(ctx, api.ReadEventsParams{SessionID: s.ID, RunID: r.ID})
	if err != nil {
		t.Fatal(err)
	}
	var failed []event.MCPServerFailedData
	var results []event.ToolCallCompletedData
	for _, e := range evs.Events {
		switch e.Type {
		case event.MCPServerFailed:
			var d event.MCPServerFailedData
			e.Decode(&d)
			failed = append(failed, d)
		case event.ToolCallCompleted:
			var d event.ToolCallCompletedData
			e.Decode(&d)
			results = append(results, d)
		}
	}
	if len(failed) != 1 || failed[0].Server != "dead" || !strings.Contains(failed[0].Error, "did not start") {
		t.Errorf("mcp.server_failed events %+v, want one for the dead server", failed)
	}
	if len(results) != 2 {
		t.Fatalf("results %+v", results)
	}
	for _, d := range results {
		if !d.IsError || strings.Contains(d.Output, "unknown tool") || !strings.Contains(d.Output, `mcp server "dead"`) {
			t.Errorf("result %+v, want the server's error", d)
		}
	}
}
