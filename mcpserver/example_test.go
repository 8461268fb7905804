package mcpserver_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"weft.dev/weft/host"
	"weft.dev/weft/llm/scripted"
	"weft.dev/weft/mcpserver"
	"weft.dev/weft/store/memory"
)

// An agent hands work to weft through MCP: start_run answers at once
// with a handle, await_run gives the final answer.
func Example() {
	ctx := context.Background()
	h, _ := host.New(ctx, host.Config{
		Store: memory.New(), DefaultModel: "hi",
		ResolveModel: func(name string) (*host.Model, error) {
			p, err := scripted.Parse("hi.json", []byte(`{"loop":true,"steps":[{"text":"done: {{input}}"}]}`))
			return &host.Model{Name: name, Provider: p, Model: name}, err
		},
	})
	defer h.Close()

	st, ct := mcp.NewInMemoryTransports()
	ss, _ := mcpserver.New(h, nil).Connect(ctx, st, nil)
	defer ss.Wait()
	cs, _ := mcp.NewClient(&mcp.Implementation{Name: "agent"}, nil).Connect(ctx, ct, nil)
	defer cs.Close()

	res, _ := cs.CallTool(ctx, &mcp.CallToolParams{Name: "start_run", Arguments: map[string]any{"prompt": "tidy the docs"}})
	var run mcpserver.RunOutput
	b, _ := json.Marshal(res.StructuredContent)
	json.Unmarshal(b, &run)

	res, _ = cs.CallTool(ctx, &mcp.CallToolParams{Name: "await_run", Arguments: map[string]any{"runId": run.RunID, "timeoutSeconds": 10}})
	b, _ = json.Marshal(res.StructuredContent)
	json.Unmarshal(b, &run)
	fmt.Println(run.Status, run.Done)
	fmt.Println(run.Answer)

	res, _ = cs.CallTool(ctx, &mcp.CallToolParams{Name: "get_run", Arguments: map[string]any{"runId": "run_unknown"}})
	fmt.Println(res.IsError, res.Content[0].(*mcp.TextContent).Text)
	// Output:
	// completed true
	// done: tidy the docs
	// true not_found: run run_unknown not found
}
