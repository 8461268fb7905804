package mcp

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"weft.dev/weft/event"
)

func TestCheck(t *testing.T) {
	allow := []string{"GH_TOKEN"}
	tests := []struct {
		name   string
		server string
		spec   event.MCPServer
		origin Origin
		want   string // "" for valid
	}{
		{"stdio", "fs", event.MCPServer{Command: "npx", Args: []string{"-y", "x"}}, FromSession, ""},
		{"http", "gh", event.MCPServer{URL: "https://api.example.com/mcp", Headers: map[string]string{"Authorization": "Bearer ${GH_TOKEN}"}}, FromSession, ""},
		{"neither", "x", event.MCPServer{}, FromConfig, "set command (a stdio server) or url"},
		{"both", "x", event.MCPServer{Command: "a", URL: "http://b"}, FromConfig, "not both"},
		{"bad name", "a__b", event.MCPServer{Command: "a"}, FromConfig, `"__" separates`},
		{"name too long", strings.Repeat("a", 25), event.MCPServer{Command: "a"}, FromConfig, "1 to 24 characters"},
		{"bad url", "x", event.MCPServer{URL: "ftp://x"}, FromConfig, "want an http:// or https:// URL"},
		{"password in url", "x", event.MCPServer{URL: "https://u:p@x/"}, FromConfig, "holds a user and password"},
		{"headers on a command", "x", event.MCPServer{Command: "a", Headers: map[string]string{"A": "b"}}, FromConfig, "headers are for url servers"},
		{"trusted session", "x", event.MCPServer{Command: "a", Trusted: true}, FromSession, "only the host's configuration may trust"},
		{"trusted config", "x", event.MCPServer{Command: "a", Trusted: true}, FromConfig, ""},
		{"variable not allowed", "x", event.MCPServer{URL: "http://x", Headers: map[string]string{"Authorization": "Bearer ${OPENAI_API_KEY}"}}, FromSession, "does not let sessions use this variable"},
		{"variable in config", "x", event.MCPServer{URL: "http://x", Headers: map[string]string{"Authorization": "Bearer ${OPENAI_API_KEY}"}}, FromConfig, ""},
		{"literal token in a session", "x", event.MCPServer{URL: "http://x", Headers: map[string]string{"Authorization": "Bearer abc"}}, FromSession, "looks like a credential"},
		{"literal env key in a session", "x", event.MCPServer{Command: "a", Env: map[string]string{"API_KEY": "abc"}}, FromSession, "looks like a credential"},
		{"literal token in config", "x", event.MCPServer{URL: "http://x", Headers: map[string]string{"Authorization": "Bearer abc"}}, FromConfig, ""},
		{"unclosed reference", "x", event.MCPServer{Command: "a", Env: map[string]string{"A": "${B"}}, FromConfig, "${ without }"},
		{"relative readOnly", "x", event.MCPServer{Command: "a", ReadOnly: []string{"lib"}}, FromConfig, "not an absolute path"},
		{"token in a session's url", "x", event.MCPServer{URL: "https://x/mcp?api_key=abc"}, FromSession, "looks like a credential"},
		{"header with a newline", "x", event.MCPServer{URL: "http://x", Headers: map[string]string{"A": "b\r\nC: d"}}, FromConfig, "line break"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := Check(tc.server, tc.spec, tc.origin, allow)
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
		})
	}
}

func TestToolName(t *testing.T) {
	for _, tc := range []struct{ server, tool, want string }{
		{"everything", "echo", "mcp__everything__echo"},
		{"gh", "repos/list.all", "mcp__gh__repos_list_all"},
		{"s", strings.Repeat("a", 100), "mcp__s__" + strings.Repeat("a", 47) + "_"},
	} {
		got := ToolName(tc.server, tc.tool)
		if !strings.HasPrefix(got, tc.want) || len(got) > 64 {
			t.Errorf("ToolName(%q, %q) = %q, want %q…", tc.server, tc.tool, got, tc.want)
		}
	}
	if a, b := ToolName("s", strings.Repeat("a", 100)), ToolName("s", strings.Repeat("a", 101)); a == b {
		t.Error("two long names are the same")
	}
}

func TestExpand(t *testing.T) {
	lookup := func(k string) (string, bool) { v, ok := map[string]string{"A": "1", "B": ""}[k]; return v, ok }
	for in, want := range map[string]string{"x": "x", "${A}": "1", "a${A}b${B}c": "a1bc", "$A": "$A", "$$": "$$"} {
		if got, err := expand(in, lookup); err != nil || got != want {
			t.Errorf("expand(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := expand("${C}", lookup); err == nil || !strings.Contains(err.Error(), "${C} is not set") {
		t.Errorf("unset: %v", err)
	}
}

func TestResult(t *testing.T) {
	tests := []struct {
		name string
		r    *sdk.CallToolResult
		want string
	}{
		{"empty", &sdk.CallToolResult{}, "(no output)"},
		{"empty error", &sdk.CallToolResult{IsError: true}, "the tool failed without saying why"},
		{"structured only", &sdk.CallToolResult{StructuredContent: map[string]any{"n": 1}}, `structured content: {"n":1}`},
		{"structured beside other text", &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "done"}}, StructuredContent: map[string]any{"n": 1}}, "done\nstructured content: {\"n\":1}"},
		{"structured said in text", &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "n is 1"}}, StructuredContent: map[string]any{"n": 1}}, "n is 1"},
		{"resource link", &sdk.CallToolResult{Content: []sdk.Content{&sdk.ResourceLink{URI: "file:///a", Name: "a", MIMEType: "text/plain"}}}, `[resource link: file:///a "a" (text/plain)]`},
		{"text resource", &sdk.CallToolResult{Content: []sdk.Content{&sdk.EmbeddedResource{Resource: &sdk.ResourceContents{URI: "mem://x", Text: "body"}}}}, "[resource mem://x]\nbody"},
		{"blob", &sdk.CallToolResult{Content: []sdk.Content{&sdk.EmbeddedResource{Resource: &sdk.ResourceContents{URI: "mem://x", Blob: []byte{1, 2}}}}}, "[resource mem://x: type unknown, 2 bytes of binary data, not shown]"},
		{"audio", &sdk.CallToolResult{Content: []sdk.Content{&sdk.AudioContent{Data: []byte{1}, MIMEType: "audio/wav"}}}, "[audio: audio/wav, 1 bytes, not played: weft passes only text to the model]"},
		{"image", &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "see"}, &sdk.ImageContent{Data: []byte{1, 2}, MIMEType: "image/gif"}}}, "see\n[image 1 attached: image/gif, 2 bytes]"},
		{"image blob", &sdk.CallToolResult{Content: []sdk.Content{&sdk.EmbeddedResource{Resource: &sdk.ResourceContents{URI: "mem://p", MIMEType: "image/webp", Blob: []byte{1}}}}}, "[resource mem://p: image 1 attached: image/webp, 1 bytes]"},
		{"svg", &sdk.CallToolResult{Content: []sdk.Content{&sdk.ImageContent{Data: []byte("<svg/>"), MIMEType: "image/svg+xml"}}}, "[image: image/svg+xml, 6 bytes, not shown: weft sends only image/png, image/jpeg, image/gif, image/webp images to the model]"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := result(tc.r).Output; got != tc.want {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// TestHTTPHeaders: a header's ${VAR} is read when the server starts and
// sent with every request; the configuration keeps the reference.
func TestHTTPHeaders(t *testing.T) {
	srv := newFakeServer("tools")
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, nil)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer s3cret" {
			http.Error(w, "who are you?", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	defer ts.Close()
	spec := event.MCPServer{URL: ts.URL, Headers: map[string]string{"Authorization": "Bearer ${WEFT_TEST_TOKEN}"}}
	token := "s3cret"
	m := newManager(t, Config{Servers: map[string]event.MCPServer{"web": spec}, LookupEnv: func(k string) (string, bool) { return token, k == "WEFT_TEST_TOKEN" }})
	reg := tools(t, m, nil)
	if res := call(reg, "mcp__web__echo", `{"text":"over http"}`, 10*time.Second); res.Output != "over http" {
		t.Fatalf("call: %+v", res)
	}
	m.Close()
	token = "wrong"
	m2 := newManager(t, Config{Servers: map[string]event.MCPServer{"web": spec}, LookupEnv: func(k string) (string, bool) { return token, true }})
	_, err := m2.Tools(context.Background(), nil, nil)
	if err == nil || !strings.Contains(err.Error(), "Unauthorized") {
		t.Fatalf("with a wrong token: %v", err)
	}
}

// FuzzCheck: a session's configuration is untrusted input. Check never
// panics, and expand agrees with references about what is a reference.
func FuzzCheck(f *testing.F) {
	f.Add("fs", "npx", "Bearer ${TOKEN}", "Authorization")
	f.Add("a__b", "", "${", "X")
	f.Add("x", "/bin/true", "a$b${C}d${", "API_KEY")
	f.Fuzz(func(t *testing.T, name, command, value, key string) {
		s := event.MCPServer{Command: command, Env: map[string]string{key: value}}
		Check(name, s, FromSession, []string{"TOKEN"})
		Check(name, event.MCPServer{URL: command, Headers: map[string]string{key: value}}, FromSession, nil)
		refs, rerr := references(value)
		out, xerr := expand(value, func(string) (string, bool) { return "v", true })
		if (rerr == nil) != (xerr == nil) {
			t.Fatalf("references: %v, expand: %v", rerr, xerr)
		}
		if rerr == nil && len(refs) == 0 && out != value {
			t.Fatalf("expand(%q) = %q without references", value, out)
		}
	})
}

// SecretsOf names the values ${VAR} reaches: the host's servers' env and
// headers, and the variables sessions may use.
func TestSecretsOf(t *testing.T) {
	vals := map[string]string{"A_TOKEN": "aaaaaaaaaa", "H_KEY": "hhhhhhhhhh", "S_VAR": "ssssssssss", "UNUSED": "uuuuuuuuuu"}
	got := SecretsOf(Config{
		Servers: map[string]event.MCPServer{
			"cmd": {Command: "x", Env: map[string]string{"T": "${A_TOKEN}", "P": "plain"}},
			"web": {URL: "https://x", Headers: map[string]string{"Authorization": "Bearer ${H_KEY}"}},
		},
		SessionEnv: []string{"S_VAR", "MISSING"},
		LookupEnv: func(k string) (string, bool) {
			v, ok := vals[k]
			return v, ok
		},
	})
	if !slices.Equal(got, []string{"aaaaaaaaaa", "hhhhhhhhhh", "ssssssssss"}) {
		t.Fatalf("SecretsOf = %q", got)
	}
	if SecretsOf(Config{Servers: map[string]event.MCPServer{"cmd": {Command: "x", Env: map[string]string{"T": "${A_TOKEN}"}}}}) != nil {
		t.Fatal("secrets without LookupEnv")
	}
}
