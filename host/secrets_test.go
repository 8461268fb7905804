package host_test

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"weft.dev/weft/api"
	"weft.dev/weft/event"
	"weft.dev/weft/host"
	"weft.dev/weft/llm"
	"weft.dev/weft/llm/scripted"
	"weft.dev/weft/redact"
	"weft.dev/weft/store/memory"
	"weft.dev/weft/store/record"
	"weft.dev/weft/tool"
	"weft.dev/weft/tool/mcp"
)

// fakeMCPEnv makes the test binary a stdio MCP server (see TestMain)
// whose tools show the value of its FAKE_TOKEN variable: "leak" returns
// it, "crash" writes it to stderr and exits mid-call.
const fakeMCPEnv = "WEFT_HOST_FAKE_MCP"

func fakeMCPServer(string) int {
	s := sdk.NewServer(&sdk.Implementation{Name: "fake", Version: "1"}, nil)
	tok := os.Getenv("FAKE_TOKEN")
	sdk.AddTool(s, &sdk.Tool{Name: "leak", Description: "Shows the token."}, func(context.Context, *sdk.CallToolRequest, struct{}) (*sdk.CallToolResult, any, error) {
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "my token is " + tok}}}, nil, nil
	})
	sdk.AddTool(s, &sdk.Tool{Name: "crash", Description: "Crashes."}, func(context.Context, *sdk.CallToolRequest, struct{}) (*sdk.CallToolResult, any, error) {
		fmt.Fprintf(os.Stderr, "config: {\"token\": %q, \"api_key\": \"%s\"}\n", tok, tok)
		fmt.Fprintln(os.Stderr, "fatal: cannot authenticate with "+tok)
		os.Exit(3)
		return nil, nil, nil
	})
	if err := s.Run(context.Background(), &sdk.StdioTransport{}); err != nil {
		return 1
	}
	return 0
}

// seenProvider is a provider that records every request the model is sent.
type seenProvider struct {
	p llm.Provider

	mu   sync.Mutex
	seen strings.Builder
}

func (r *seenProvider) Stream(ctx context.Context, req *llm.Request) iter.Seq2[llm.StreamEvent, error] {
	b, _ := json.Marshal(req)
	r.mu.Lock()
	r.seen.Write(b)
	r.mu.Unlock()
	return r.p.Stream(ctx, req)
}

func (r *seenProvider) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.seen.String()
}

// The leak: a ${VAR} value in an MCP server's env came back in the
// stored tool.call.completed output (the stderr tail of a failed call),
// so the model and its provider saw it. Neither the log nor any request
// to the model may hold it, nor the host's own keys (Config.Redactor),
// whether the server returns it, prints it on stderr or the model
// repeats it in its text.
func TestSecretsNeverReachTheLogOrTheModel(t *testing.T) {
	const mcpToken = "mcp-token-7b3e19d0c4a8"
	const apiKey = "sk-provider-key-55aa0f31"
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	m, err := mcp.New(mcp.Config{
		Servers: map[string]event.MCPServer{"fake": {Command: exe, Trusted: true,
			Env: map[string]string{fakeMCPEnv: "1", "FAKE_TOKEN": "${TEST_MCP_TOKEN}"}}},
		LookupEnv: func(k string) (string, bool) {
			if k == "TEST_MCP_TOKEN" {
				return mcpToken, true
			}
			return "", false
		},
		BaseEnv: os.Environ(),
	})
	if err != nil {
		t.Fatal(err)
	}
	script := `{"steps":[
		{"toolCalls":[{"name":"mcp__fake__leak","arguments":{}}]},
		{"toolCalls":[{"name":"mcp__fake__crash","arguments":{}}]},
		{"text":"the key is ` + apiKey + ` and the token ` + mcpToken[:9] + `","delayMs":1},
		{"text":"` + mcpToken[9:] + ` done"}]}`
	rec := &seenProvider{}
	h, err := host.New(context.Background(), host.Config{
		Store: memory.New(), Tools: tool.NewRegistry(), MCP: m, DefaultModel: "scripted:secrets",
		CoalesceWindow: 2 * time.Millisecond, Redactor: redact.New(apiKey),
		ResolveModel: func(name string) (*host.Model, error) {
			p, err := scripted.Parse("secrets.json", []byte(script))
			if err != nil {
				return nil, err
			}
			rec.p = p
			return &host.Model{Name: name, Provider: rec, Model: "secrets"}, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		h.Close()
		m.Close()
	})
	s, err := h.CreateSession(context.Background(), api.CreateSessionParams{Mounts: []event.Mount{{ID: "work", Path: t.TempDir()}}})
	if err != nil {
		t.Fatal(err)
	}
	r := start(t, h, api.StartRunParams{SessionID: s.ID, Input: input("go")})
	wait(t, h, r.ID)
	r2 := start(t, h, api.StartRunParams{SessionID: s.ID, Input: input("again")})
	wait(t, h, r2.ID)
	evs, err := h.ReadEvents(context.Background(), api.ReadEventsParams{SessionID: s.ID, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	results := 0
	for _, e := range evs.Events {
		for _, v := range []string{mcpToken, apiKey} {
			if strings.Contains(string(e.Data), v) {
				t.Errorf("event %d (%s) holds a secret: %s", e.Seq, e.Type, e.Data)
			}
		}
		var d event.ToolCallCompletedData
		if e.Type == event.ToolCallCompleted && e.Decode(&d) == nil {
			results++
			if !strings.Contains(d.Output, redact.Mask) {
				t.Errorf("%s: %q, want the token masked", d.Name, d.Output)
			}
		}
	}
	if results != 2 {
		t.Errorf("%d tool results, want 2", results)
	}
	seen := rec.String()
	if !strings.Contains(seen, redact.Mask) {
		t.Errorf("the model never saw a masked result: %s", seen)
	}
	for _, v := range []string{mcpToken, apiKey} {
		if strings.Contains(seen, v) {
			t.Errorf("a request to the model holds a secret: %s", seen)
		}
	}
	if got, _ := h.GetRun(context.Background(), api.RunIDParams{RunID: r.ID}); got.Run.Status != record.RunCompleted {
		t.Errorf("run: %+v", got.Run)
	}
}
