package host_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"weft.dev/weft/api"
	"weft.dev/weft/event"
	"weft.dev/weft/store/memory"
)

// TestMCPResourcesAndPrompts: a session's MCP server's resources and
// prompts are listed, read and filled in through the host's api; an
// unknown server is not_found, an unknown resource
// environment_unavailable naming the server, bad params invalid_params.
func TestMCPResourcesAndPrompts(t *testing.T) {
	srv := sdk.NewServer(&sdk.Implementation{Name: "docs", Version: "1"}, nil)
	srv.AddResource(&sdk.Resource{URI: "docs://readme", Name: "readme", MIMEType: "text/markdown"}, func(_ context.Context, req *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error) {
		return &sdk.ReadResourceResult{Contents: []*sdk.ResourceContents{{URI: req.Params.URI, MIMEType: "text/markdown", Text: "# Read me"}}}, nil
	})
	srv.AddPrompt(&sdk.Prompt{Name: "review", Arguments: []*sdk.PromptArgument{{Name: "file", Required: true}}}, func(_ context.Context, req *sdk.GetPromptRequest) (*sdk.GetPromptResult, error) {
		return &sdk.GetPromptResult{Messages: []*sdk.PromptMessage{{Role: "user", Content: &sdk.TextContent{Text: "Review " + req.Params.Arguments["file"]}}}}, nil
	})
	ts := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, nil))
	t.Cleanup(ts.Close)
	h := mcpHost(t, memory.New())
	ctx := context.Background()
	s, err := h.CreateSession(ctx, api.CreateSessionParams{MCPServers: map[string]event.MCPServer{"docs": {URL: ts.URL}}, Mounts: []event.Mount{{ID: "work", Path: t.TempDir()}}})
	if err != nil {
		t.Fatal(err)
	}
	rs, err := h.MCPResources(ctx, api.MCPListParams{SessionID: s.ID})
	if err != nil || len(rs.Resources) != 1 || rs.Resources[0] != (api.MCPResource{Server: "docs", URI: "docs://readme", Name: "readme", MIMEType: "text/markdown"}) {
		t.Fatalf("resources %+v, %v", rs, err)
	}
	rr, err := h.MCPReadResource(ctx, api.MCPReadResourceParams{SessionID: s.ID, Server: "docs", URI: "docs://readme"})
	if err != nil || len(rr.Contents) != 1 || rr.Contents[0].Text != "# Read me" {
		t.Fatalf("read %+v, %v", rr, err)
	}
	ps, err := h.MCPPrompts(ctx, api.MCPListParams{SessionID: s.ID, Server: "docs"})
	if err != nil || len(ps.Prompts) != 1 || ps.Prompts[0].Name != "review" || !ps.Prompts[0].Arguments[0].Required {
		t.Fatalf("prompts %+v, %v", ps, err)
	}
	pr, err := h.MCPGetPrompt(ctx, api.MCPGetPromptParams{SessionID: s.ID, Server: "docs", Name: "review", Arguments: map[string]string{"file": "main.go"}})
	if err != nil || len(pr.Messages) != 1 || pr.Messages[0].Role != "user" || event.Text(pr.Messages[0].Content) != "Review main.go" {
		t.Fatalf("prompt %+v, %v", pr, err)
	}

	// Without the session, its server is unknown.
	for name, err := range map[string]error{
		"unknown server":  func() error { _, err := h.MCPResources(ctx, api.MCPListParams{Server: "docs"}); return err }(),
		"unknown session": func() error { _, err := h.MCPPrompts(ctx, api.MCPListParams{SessionID: "ses_nope"}); return err }(),
		"no uri":          func() error { _, err := h.MCPReadResource(ctx, api.MCPReadResourceParams{Server: "docs"}); return err }(),
		"unknown resource": func() error {
			_, err := h.MCPReadResource(ctx, api.MCPReadResourceParams{SessionID: s.ID, Server: "docs", URI: "docs://nope"})
			return err
		}(),
		"unknown prompt": func() error {
			_, err := h.MCPGetPrompt(ctx, api.MCPGetPromptParams{SessionID: s.ID, Server: "docs", Name: "nope"})
			return err
		}(),
	} {
		want := map[string]error{"unknown server": api.ErrNotFound, "unknown session": api.ErrNotFound, "no uri": api.ErrInvalidParams,
			"unknown resource": api.ErrEnvUnavailable, "unknown prompt": api.ErrEnvUnavailable}[name]
		if !errors.Is(err, want) {
			t.Errorf("%s: err = %v, want %v", name, err, want)
		}
	}
}
