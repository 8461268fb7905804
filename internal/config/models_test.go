package config

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"weft.dev/weft/api"
	"weft.dev/weft/llm"
)

// geminiStream is a recorded Gemini stream (alt=sse).
const geminiStream = `data: {"candidates": [{"content": {"parts": [{"text": "Hi"}],"role": "model"},"index": 0}],"usageMetadata": {"promptTokenCount": 2,"totalTokenCount": 2},"modelVersion": "gemini-2.5-flash","responseId": "abc"}

data: {"candidates": [{"content": {"parts": [{"text": " there!"}],"role": "model"},"finishReason": "STOP","index": 0}],"usageMetadata": {"promptTokenCount": 2,"candidatesTokenCount": 3,"totalTokenCount": 5},"modelVersion": "gemini-2.5-flash","responseId": "abc"}

`

func TestResolveGemini(t *testing.T) {
	var mu sync.Mutex
	var keys, paths []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		mu.Lock()
		keys = append(keys, r.Header.Get("X-Goog-Api-Key"))
		paths = append(paths, r.URL.Path)
		mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, geminiStream)
	}))
	defer srv.Close()

	named := File{Models: map[string]Model{
		"own-key":   {Provider: "gemini", Model: "gemini-2.5-pro", APIKeyEnv: "MY_KEY"},
		"own-proxy": {Provider: "gemini", Model: "gemini-2.5-pro", BaseURL: srv.URL + "/p"},
	}}
	for _, tc := range []struct {
		name, spec string
		env        map[string]string
		key, path  string
		err        string
	}{
		{"gemini key", "gemini:gemini-2.5-flash", map[string]string{"GEMINI_API_KEY": "g1", "GOOGLE_API_KEY": "g2", "GEMINI_BASE_URL": srv.URL}, "g1", "/v1beta/models/gemini-2.5-flash:streamGenerateContent", ""},
		{"google key", "gemini:gemini-2.5-flash", map[string]string{"GOOGLE_API_KEY": "g2", "GEMINI_BASE_URL": srv.URL}, "g2", "/v1beta/models/gemini-2.5-flash:streamGenerateContent", ""},
		{"apiKeyEnv", "own-key", map[string]string{"MY_KEY": "mine", "GEMINI_API_KEY": "g1", "GEMINI_BASE_URL": srv.URL}, "mine", "/v1beta/models/gemini-2.5-pro:streamGenerateContent", ""},
		{"baseURL", "own-proxy", map[string]string{"GEMINI_API_KEY": "g1", "GEMINI_BASE_URL": "http://127.0.0.1:1"}, "g1", "/p/v1beta/models/gemini-2.5-pro:streamGenerateContent", ""},
		{"no key", "gemini:gemini-2.5-flash", nil, "", "", "set GEMINI_API_KEY (or GOOGLE_API_KEY)"},
		{"apiKeyEnv unset", "own-key", map[string]string{"GEMINI_API_KEY": "g1"}, "", "", "set MY_KEY"},
		{"bad base URL", "gemini:x", map[string]string{"GEMINI_API_KEY": "g1", "GEMINI_BASE_URL": "localhost:1"}, "", "", "not an absolute http(s) URL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := Resolve(tc.spec, named, "config.json", func(k string) string { return tc.env[k] })
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var text, finish string
			for ev, err := range r.Provider.Stream(context.Background(), &llm.Request{Model: r.Model, Messages: []llm.Message{{Role: llm.RoleUser, Content: "hi"}}}) {
				if err != nil {
					t.Fatal(err)
				}
				text += ev.Text
				if ev.Finish != nil {
					finish = ev.Finish.Reason
				}
			}
			if text != "Hi there!" || finish != llm.FinishStop {
				t.Errorf("text %q finish %q", text, finish)
			}
			mu.Lock()
			key, path := keys[len(keys)-1], paths[len(paths)-1]
			mu.Unlock()
			if key != tc.key || path != tc.path {
				t.Errorf("key %q path %q, want %q %q", key, path, tc.key, tc.path)
			}
		})
	}
}

func TestProvidersListsGemini(t *testing.T) {
	_, err := Resolve("nope:x", File{}, "config.json", func(string) string { return "" })
	if err == nil || !strings.Contains(err.Error(), "anthropic, gemini, openai, openai-chat, scripted") {
		t.Fatalf("err = %v", err)
	}
}

// A missing API key is a typed error naming the variable to set: the
// provider's, or the one a named model's apiKeyEnv gives.
func TestResolveMissingKey(t *testing.T) {
	f := File{Models: map[string]Model{"mine": {Provider: "anthropic", Model: "claude-x", APIKeyEnv: "MY_KEY"}}}
	noEnv := func(string) string { return "" }
	for _, tc := range []struct{ spec, env, model string }{
		{"openai:gpt-x", "OPENAI_API_KEY", "openai:gpt-x"},
		{"anthropic:claude-x", "ANTHROPIC_API_KEY", "anthropic:claude-x"},
		{"mine", "MY_KEY", "anthropic:claude-x"},
		{"gemini:gemini-x", "GEMINI_API_KEY", "gemini:gemini-x"},
	} {
		_, err := Resolve(tc.spec, f, "config.json", noEnv)
		var ae *api.Error
		if !errors.As(err, &ae) || !errors.Is(err, api.ErrInvalidParams) || ae.Data["env"] != tc.env || ae.Data["model"] != tc.model {
			t.Errorf("%s: %v (data %v)", tc.spec, err, ae)
		}
	}
	// With the key, or a local OpenAI-compatible server, the model resolves.
	if _, err := Resolve("anthropic:claude-x", f, "config.json", func(k string) string {
		return map[string]string{"ANTHROPIC_API_KEY": "sk"}[k]
	}); err != nil {
		t.Errorf("with the key: %v", err)
	}
	if _, err := Resolve("openai-chat:llama", f, "config.json", func(k string) string {
		return map[string]string{"OPENAI_BASE_URL": "http://127.0.0.1:1/v1"}[k]
	}); err != nil {
		t.Errorf("a local server: %v", err)
	}
}

// TestResolveTimeouts: a named model's connectTimeoutMs,
// firstByteTimeoutMs and idleTimeoutMs reach its provider, whichever it
// is: a server that never answers fails the request with a timeout of
// the configured length.
func TestResolveTimeouts(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Read the body: only then does the server notice the client go.
		io.Copy(io.Discard, r.Body)
		<-r.Context().Done()
	}))
	defer srv.Close()
	f := File{Models: map[string]Model{}}
	for _, p := range []string{"openai", "openai-chat", "anthropic", "gemini"} {
		f.Models[p] = Model{Provider: p, Model: "m", BaseURL: srv.URL, APIKeyEnv: "KEY", FirstByteTimeoutMs: 50, IdleTimeoutMs: -1, ConnectTimeoutMs: 1000}
	}
	for _, p := range []string{"openai", "openai-chat", "anthropic", "gemini"} {
		t.Run(p, func(t *testing.T) {
			r, err := Resolve(p, f, "config.json", func(k string) string { return map[string]string{"KEY": "k"}[k] })
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			for _, err := range r.Provider.Stream(ctx, &llm.Request{Model: r.Model, Messages: []llm.Message{{Role: llm.RoleUser, Content: "hi"}}}) {
				var te *llm.TimeoutError
				if e, ok := llm.AsError(err); !ok || e.Kind != llm.KindTimeout || !errors.As(err, &te) || te.Limit != llm.LimitFirstByte || te.After != 50*time.Millisecond {
					t.Fatalf("err = %v, want a first-byte timeout of 50ms", err)
				}
				return
			}
			t.Fatal("no error")
		})
	}
}

// TestResolveContextWindow: a configured window wins; known models have
// their published one; a scripted model takes its script's; compactAt
// outside (0, 1] is refused where it is written.
func TestResolveContextWindow(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "s.json")
	if err := os.WriteFile(script, []byte(`{"contextWindow":3000,"steps":[{"text":"hi"}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	f := File{Models: map[string]Model{
		"small": {Provider: "anthropic", Model: "claude-sonnet-4-5", ContextWindow: 50_000, CompactAt: 0.5, CompactModel: "anthropic:claude-haiku-4-5"},
	}}
	env := func(name string) string {
		if strings.HasSuffix(name, "_KEY") {
			return "key"
		}
		return ""
	}
	for _, tc := range []struct {
		spec   string
		window int
	}{
		{"small", 50_000},
		{"anthropic:claude-sonnet-4-5", 200_000},
		{"openai:gpt-5.1", 400_000},
		{"gemini:gemini-2.5-flash", 1_048_576},
		{"openai-chat:llama3", 0},
		{"scripted:" + script, 3000},
	} {
		r, err := Resolve(tc.spec, f, "config.json", env)
		if err != nil {
			t.Fatalf("%s: %v", tc.spec, err)
		}
		if r.ContextWindow != tc.window {
			t.Errorf("%s: window %d, want %d", tc.spec, r.ContextWindow, tc.window)
		}
	}
	if r, _ := Resolve("small", f, "config.json", env); r.CompactAt != 0.5 || r.CompactModel != "anthropic:claude-haiku-4-5" {
		t.Errorf("compaction settings %+v", r)
	}
	_, err := Parse([]byte(`{"models":{"x":{"provider":"openai","model":"gpt-5","compactAt":1.5}}}`))
	if err == nil || !strings.Contains(err.Error(), "compactAt 1.5") {
		t.Errorf("compactAt 1.5: %v", err)
	}
}
