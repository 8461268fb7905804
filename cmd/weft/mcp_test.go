package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"weft.dev/weft/event"
	"weft.dev/weft/internal/testenv"
)

// everything returns the command of server-everything installed where
// .ci/run installs it; without it the test skips, or fails under CI
// (testenv.NPMPackage).
func everything(t *testing.T) (node, script string) {
	t.Helper()
	dir, node := testenv.NPMPackage(t, "@modelcontextprotocol/server-everything")
	return node, filepath.Join(dir, "dist", "index.js")
}

// TestMCPEndToEnd: a scripted model calls server-everything's echo in a
// weft run; the result is in the log. weft mcp list and tools show it.
func TestMCPEndToEnd(t *testing.T) {
	node, script := everything(t)
	e := newEnv(t)
	cfg := map[string]any{"mcpServers": map[string]event.MCPServer{
		"everything": {Command: node, Args: []string{script, "stdio"}, Trusted: true},
	}}
	b, _ := json.Marshal(cfg)
	if err := os.MkdirAll(filepath.Join(e.dir, "config", "weft"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(e.dir, "config", "weft", "config.json"), b, 0o600); err != nil {
		t.Fatal(err)
	}

	out, stderr, code := e.weft("", "mcp", "list")
	if code != 0 || !strings.Contains(out, "everything  stdio      trusted") {
		t.Fatalf("weft mcp list: %d\n%s%s", code, out, stderr)
	}
	out, stderr, code = e.weft("", "mcp", "tools", "everything")
	if code != 0 || !strings.Contains(out, "mcp__everything__echo") || !strings.Contains(out, "Echoes back the input string") {
		t.Fatalf("weft mcp tools: %d\n%s%s", code, out, stderr)
	}
	_, stderr, code = e.weft("", "mcp", "tools", "nothing")
	if code == 0 || !strings.Contains(stderr, `no server "nothing"`) {
		t.Fatalf("weft mcp tools nothing: %d %s", code, stderr)
	}

	// Resources and prompts: listed, read, filled in; an unknown
	// resource or prompt is an error naming it.
	out, stderr, code = e.weft("", "mcp", "resources", "everything", "--json")
	var rs struct {
		Resources []struct{ Server, URI, MIMEType string }
	}
	if code != 0 || json.Unmarshal([]byte(out), &rs) != nil || len(rs.Resources) == 0 {
		t.Fatalf("weft mcp resources: %d\n%s%s", code, out, stderr)
	}
	uri := ""
	for _, r := range rs.Resources {
		if strings.HasPrefix(r.MIMEType, "text/") && uri == "" {
			uri = r.URI
		}
	}
	out, stderr, code = e.weft("", "mcp", "resources", "everything", uri)
	if code != 0 || strings.TrimSpace(out) == "" {
		t.Fatalf("weft mcp resources everything %s: %d\n%s%s", uri, code, out, stderr)
	}
	if _, stderr, code = e.weft("", "mcp", "resources", "everything", "demo://nope"); code == 0 || !strings.Contains(stderr, "demo://nope") {
		t.Fatalf("an unknown resource: %d %s", code, stderr)
	}
	out, stderr, code = e.weft("", "mcp", "prompts")
	if code != 0 || !strings.Contains(out, "SERVER") || !strings.Contains(out, "everything") {
		t.Fatalf("weft mcp prompts: %d\n%s%s", code, out, stderr)
	}
	if _, stderr, code = e.weft("", "mcp", "prompts", "everything", "no-such-prompt"); code == 0 || !strings.Contains(stderr, "no-such-prompt") {
		t.Fatalf("an unknown prompt: %d %s", code, stderr)
	}

	s := e.script("mcp.json", `{"steps":[
		{"text":"calling echo","toolCalls":[{"name":"mcp__everything__echo","arguments":{"message":"{{input}}"}}]},
		{"text":"the server said it"}]}`)
	out, stderr, code = e.weft("", "run", "-m", "scripted:"+s, "-p", "hello over MCP", "--json")
	if code != 0 {
		t.Fatalf("weft run: %d\n%s%s", code, out, stderr)
	}
	evs := e.events(e.onlySession())
	checkContiguous(t, evs)
	var done *event.ToolCallCompletedData
	for _, ev := range evs {
		if ev.Type == event.ToolCallCompleted {
			var d event.ToolCallCompletedData
			if err := ev.Decode(&d); err != nil {
				t.Fatal(err)
			}
			done = &d
		}
	}
	if done == nil || done.Name != "mcp__everything__echo" || done.Output != "Echo: hello over MCP" || done.IsError {
		t.Fatalf("tool call %+v", done)
	}
	if last := evs[len(evs)-1]; last.Type != event.RunCompleted {
		t.Fatalf("the run ended with %s", last.Type)
	}
	// --resource SERVER:URI puts the resource into the run's input.
	see := e.script("see.json", `{"steps":[{"text":"got it"}]}`)
	_, stderr, code = e.weft("", "run", "-m", "scripted:"+see, "-p", "summarise this", "--resource", "everything:"+uri)
	if code != 0 {
		t.Fatalf("weft run --resource: %d %s", code, stderr)
	}
	var user event.MessageUserData
	for _, ev := range e.events(e.latestSession()) {
		if ev.Type == event.MessageUser {
			ev.Decode(&user)
		}
	}
	if text := event.Text(user.Content); !strings.Contains(text, "summarise this") || !strings.Contains(text, "[resource "+uri+"]") {
		t.Fatalf("message.user %q", text)
	}
	if _, stderr, code = e.weft("", "run", "-m", "scripted:"+see, "-p", "x", "--resource", "everything:demo://nope"); code == 0 || !strings.Contains(stderr, "demo://nope") {
		t.Fatalf("an unknown resource: %d %s", code, stderr)
	}
}
