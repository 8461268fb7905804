package mcp_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"weft.dev/weft/event"
	"weft.dev/weft/tool"
	"weft.dev/weft/tool/mcp"
)

type addArgs struct {
	A float64 `json:"a"`
	B float64 `json:"b"`
}

// A Manager offers an MCP server's tools to the model as
// mcp__<server>__<tool>, in a tool.Registry like the built-in tools.
// Here the server is one of the MCP SDK's, served in process over
// streamable HTTP; a command that speaks MCP on stdio is configured with
// Command instead of URL.
func Example() {
	srv := sdk.NewServer(&sdk.Implementation{Name: "calc", Version: "1"}, nil)
	sdk.AddTool(srv, &sdk.Tool{Name: "add", Description: "Adds a and b."}, func(_ context.Context, _ *sdk.CallToolRequest, in addArgs) (*sdk.CallToolResult, any, error) {
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: fmt.Sprint(in.A + in.B)}}}, nil, nil
	})
	ts := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, nil))
	defer ts.Close()

	m, err := mcp.New(mcp.Config{Servers: map[string]event.MCPServer{"calc": {URL: ts.URL}}})
	if err != nil {
		panic(err)
	}
	defer m.Close()

	ctx := context.Background()
	// The session's own servers (none here) and mounts (nil: a remote
	// server needs none) decide which tools a step sees.
	reg, err := m.Tools(ctx, nil, nil)
	if err != nil {
		panic(err)
	}
	for _, s := range reg.Specs() {
		fmt.Println(s.Name+":", s.Description)
	}
	res := reg.Call(ctx, mcp.ToolName("calc", "add"), &tool.Call{Arguments: json.RawMessage(`{"a": 2, "b": 3}`)}, tool.CallOptions{})
	fmt.Println(res.Output, res.IsError)
	// Output:
	// mcp__calc__add: Adds a and b.
	// 5 false
}

// A session's configuration is untrusted: Check refuses a credential
// written into it, which would end up in the session's log; ${VAR}
// names a host variable the host allows sessions to use.
func ExampleCheck() {
	literal := event.MCPServer{URL: "https://mcp.example.com", Headers: map[string]string{"Authorization": "Bearer sk-live-0123456789"}}
	fmt.Println(mcp.Check("docs", literal, mcp.FromSession, []string{"DOCS_TOKEN"}))

	byName := event.MCPServer{URL: "https://mcp.example.com", Headers: map[string]string{"Authorization": "Bearer ${DOCS_TOKEN}"}}
	fmt.Println(mcp.Check("docs", byName, mcp.FromSession, []string{"DOCS_TOKEN"}))
	fmt.Println(mcp.Check("docs", byName, mcp.FromSession, nil))
	// Output:
	// mcpServers.docs.headers.Authorization: looks like a credential, and a session's configuration is stored in its log: put it in an environment variable of the host and write ${VAR}
	// <nil>
	// mcpServers.docs.headers.Authorization: ${DOCS_TOKEN}: the host's configuration does not let sessions use this variable (add it to mcpSessionEnv)
}
