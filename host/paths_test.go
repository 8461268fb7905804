package host_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"weft.dev/weft/api"
	"weft.dev/weft/event"
	"weft.dev/weft/host"
	"weft.dev/weft/llm/scripted"
	"weft.dev/weft/process"
	"weft.dev/weft/store"
	"weft.dev/weft/store/memory"
	"weft.dev/weft/store/record"
	"weft.dev/weft/tool"
	"weft.dev/weft/tool/builtin"
)

// envSecret is the content of the files the path rules deny.
const envSecret = "SECRET-8c1f0e57-do-not-leak"

// denyEnv is the config file's policy of the issue: the file tools may not
// touch **/.env nor secrets/**, the other mount's vault, nor anything in
// it.
var denyEnv = api.Policy{Rules: []api.Rule{
	{Tool: "*", Match: api.Match{Path: "**/.env"}, Action: api.ActionDeny, Reason: "no .env files"},
	{Tool: "*", Match: api.Match{Path: "secrets/**"}, Action: api.ActionDeny, Reason: "no secrets"},
	{Tool: "*", Match: api.Match{Path: "/environment/vault/**"}, Action: api.ActionDeny, Reason: "not the vault"},
}}

// pathHost is a host with the built-in tools (unsandboxed shells), the
// config layer pol, and a scripted model that makes calls, all in one
// step, then ends.
func pathHost(t *testing.T, pol api.Policy, calls ...string) *host.Host {
	t.Helper()
	return pathHostOn(t, memory.New(), pol, calls...)
}

// pathHostOn is pathHost over st.
func pathHostOn(t *testing.T, st store.Store, pol api.Policy, calls ...string) *host.Host {
	t.Helper()
	reg := tool.NewRegistry()
	if err := builtin.Register(reg, builtin.Options{}); err != nil {
		t.Fatal(err)
	}
	script := `{"steps":[{"toolCalls":[` + strings.Join(calls, ",") + `]},{"text":"done"}]}`
	h, err := host.New(context.Background(), host.Config{
		Store: st, Tools: reg, DefaultModel: "paths", CoalesceWindow: 2 * time.Millisecond, Policy: pol,
		ResolveModel: func(name string) (*host.Model, error) {
			p, err := scripted.Parse(name, []byte(script))
			return &host.Model{Name: name, Provider: p, Model: name}, err
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

// toolCall is a scripted tool call of name with args.
func toolCall(name string, args map[string]any) string {
	b, _ := json.Marshal(map[string]any{"name": name, "arguments": args})
	return string(b)
}

// runCalls runs one run of h in a session with mounts and returns its
// tool.call.completed events, in the order they were committed.
func runCalls(t *testing.T, h *host.Host, mounts []event.Mount) []event.ToolCallCompletedData {
	t.Helper()
	ctx := context.Background()
	s, err := h.CreateSession(ctx, api.CreateSessionParams{Mounts: mounts})
	if err != nil {
		t.Fatal(err)
	}
	r := start(t, h, api.StartRunParams{SessionID: s.ID, Input: input("go")})
	if got := wait(t, h, r.ID); got.Status != record.RunCompleted {
		t.Fatalf("run %s: %+v", r.ID, got)
	}
	evs, err := h.ReadEvents(ctx, api.ReadEventsParams{SessionID: s.ID, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	var out []event.ToolCallCompletedData
	for _, e := range evs.Events {
		if strings.Contains(string(e.Data), envSecret) {
			t.Errorf("event %d (%s) holds the secret: %s", e.Seq, e.Type, e.Data)
		}
		if e.Type == event.ToolCallCompleted {
			var d event.ToolCallCompletedData
			if err := e.Decode(&d); err != nil {
				t.Fatal(err)
			}
			t.Logf("%s %s: %q", d.ID, d.Name, d.Output)
			out = append(out, d)
		}
	}
	return out
}

// secretTree makes a mount directory holding .env, secrets/key and
// vault/key (the secret each), a harmless file, and links to them.
func secretTree(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, f := range []string{".env", "secrets/key", "vault/key", "nested/.env"} {
		writeHostFile(t, filepath.Join(dir, f), envSecret+"\n")
	}
	writeHostFile(t, filepath.Join(dir, "readme.txt"), "harmless\n")
	writeHostFile(t, filepath.Join(dir, "sub/plain.txt"), "plain\n")
	for name, target := range map[string]string{
		"notes.txt":       ".env",        // a file link
		"d":               "secrets",     // a directory link
		"chain1":          "chain2",      // a chain of links
		"chain2":          "sub/../.env", // with .. inside the link
		"sub/up":          "..",          // .. through a link
		"sub/upsecrets":   "../sub/../secrets",
		"tovault":         "vault/key",      // into the other mount
		"sub/nestedenv":   "../nested/.env", // .env deeper down
		"dangling.txt":    "newdir/.env",    // a write through it makes .env
		"docs/linked.txt": "../.env",
	} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func writeHostFile(t *testing.T, name, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(name, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// A path rule holds on what the tool would open: a deny on **/.env,
// secrets/** and the vault mount is not bypassed by a link to the file,
// to a directory, a chain of links, a ".." through a link, or a link into
// another mount; a write through a link does not overwrite or create the
// denied file; the refusal tells the model the rule's reason.
func TestPathRulesFollowLinks(t *testing.T) {
	dir := secretTree(t)
	mounts := []event.Mount{
		{ID: "work", Path: dir, Default: true, DefaultForShell: true},
		{ID: "vault", Path: filepath.Join(dir, "vault"), Mode: event.ModeReadOnly},
	}
	reads := []string{"notes.txt", "d/key", "chain1", "sub/up/.env", "sub/up/secrets/key", "sub/upsecrets/key",
		"tovault", "sub/nestedenv", "docs/linked.txt", "/environment/work/notes.txt", "./sub/../notes.txt"}
	var calls []string
	for _, p := range reads {
		calls = append(calls, toolCall("read_file", map[string]any{"path": p}))
	}
	calls = append(calls,
		toolCall("write_file", map[string]any{"path": "notes.txt", "content": "overwritten"}),
		toolCall("edit_file", map[string]any{"path": "chain1", "oldString": "SECRET", "newString": "EDITED"}),
		toolCall("write_file", map[string]any{"path": "dangling.txt", "content": "created"}),
	)
	h := pathHost(t, denyEnv, calls...)
	got := runCalls(t, h, mounts)
	if len(got) != len(calls) {
		t.Fatalf("%d results for %d calls", len(got), len(calls))
	}
	for _, d := range got {
		if !d.IsError || !strings.Contains(d.Output, "denied by policy") {
			t.Errorf("%s %s was not denied: %q", d.Name, d.ID, d.Output)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(dir, ".env")); string(b) != envSecret+"\n" {
		t.Errorf(".env was changed: %q", b)
	}
	if _, err := os.Stat(filepath.Join(dir, "newdir/.env")); err == nil {
		t.Error("a write through a dangling link created newdir/.env")
	}
}

// grep, glob and list_dir do not show denied files reached through a
// link or lying in the directory searched: grep of a link to .env, of a
// directory that holds .env and links to it, list_dir of a link to a
// denied directory.
func TestSearchesSkipDeniedTargets(t *testing.T) {
	dir := secretTree(t)
	mounts := []event.Mount{
		{ID: "work", Path: dir, Default: true, DefaultForShell: true},
		{ID: "vault", Path: filepath.Join(dir, "vault"), Mode: event.ModeReadOnly},
	}
	calls := []string{
		toolCall("grep", map[string]any{"pattern": "SECRET", "path": "notes.txt"}),
		toolCall("grep", map[string]any{"pattern": "SECRET"}),
		toolCall("grep", map[string]any{"pattern": "SECRET", "path": "sub"}),
		toolCall("list_dir", map[string]any{"path": "d"}),
		toolCall("glob", map[string]any{"pattern": "**/key"}),
		toolCall("glob", map[string]any{"pattern": "*", "path": "d"}),
		toolCall("grep", map[string]any{"pattern": "harmless"}),
	}
	h := pathHost(t, denyEnv, calls...)
	got := runCalls(t, h, mounts)
	if len(got) != len(calls) {
		t.Fatalf("%d results for %d calls", len(got), len(calls))
	}
	for _, d := range got {
		if strings.Contains(d.Output, "key") && !strings.Contains(d.Output, "denied") {
			t.Errorf("%s shows a denied entry: %q", d.ID, d.Output)
		}
	}
	last := got[len(got)-1]
	for _, d := range got {
		if strings.Contains(d.Output, "readme.txt:1:harmless") {
			last = d
		}
	}
	if !strings.Contains(last.Output, "readme.txt:1:harmless") {
		t.Errorf("grep no longer finds what is allowed: %q", last.Output)
	}
}

// The race of the issue: in one step the model swaps notes.txt for a link
// to .env with the shell while it reads notes.txt in parallel, so the
// policy decides before the link exists. No read may return the secret,
// whenever the link appears.
func TestPathRuleRaceWithShell(t *testing.T) {
	dir := t.TempDir()
	writeHostFile(t, filepath.Join(dir, ".env"), envSecret+"\n")
	writeHostFile(t, filepath.Join(dir, "notes.txt"), "notes\n")
	mounts := []event.Mount{{ID: "work", Path: dir, Default: true, DefaultForShell: true}}
	swap := `i=0; while [ $i -lt 400 ]; do ln -sf .env notes.tmp && mv -f notes.tmp notes.txt; ` +
		`printf 'notes\n' > notes.tmp && mv -f notes.tmp notes.txt; i=$((i+1)); done`
	calls := []string{toolCall("shell", map[string]any{"command": swap})}
	for range 40 {
		calls = append(calls, toolCall("read_file", map[string]any{"path": "notes.txt"}),
			toolCall("grep", map[string]any{"pattern": "SECRET", "path": "notes.txt"}))
	}
	h := pathHost(t, denyEnv, calls...)
	for _, d := range runCalls(t, h, mounts) {
		if strings.Contains(d.Output, envSecret) {
			t.Fatalf("%s %s read the secret through the swapped link: %q", d.Name, d.ID, d.Output)
		}
	}
}

// allowed is a helper for tests that check a call ran.
func allowed(t *testing.T, d event.ToolCallCompletedData, want string) {
	t.Helper()
	if d.IsError || !strings.Contains(d.Output, want) {
		t.Errorf("%s: %q, want %q", d.Name, d.Output, fmt.Sprint(want))
	}
}

// An allow rule holds only when the written path and the one it leads to
// both match: "docs/**" allowed under an ask-all preset does not let a
// link in docs/ read .env without asking.
func TestAllowRuleNeedsBothPaths(t *testing.T) {
	dir := secretTree(t)
	writeHostFile(t, filepath.Join(dir, "docs/plain.txt"), "plain docs\n")
	pol := api.Policy{Preset: api.PresetAskAll, Rules: []api.Rule{
		{Tool: api.ToolReadFile, Match: api.Match{Path: "docs/**"}, Action: api.ActionAllow}}}
	h := pathHost(t, pol,
		toolCall("read_file", map[string]any{"path": "docs/plain.txt"}),
		toolCall("read_file", map[string]any{"path": "docs/linked.txt"}))
	ctx := context.Background()
	s, err := h.CreateSession(ctx, api.CreateSessionParams{Mounts: []event.Mount{{ID: "work", Path: dir, Default: true}}})
	if err != nil {
		t.Fatal(err)
	}
	r := start(t, h, api.StartRunParams{SessionID: s.ID, Input: input("go")})
	q := waitingOn(t, h, s.ID, r.ID, 1)[0]
	if !strings.Contains(q.ToolCall.Arguments, "docs/linked.txt") {
		t.Fatalf("asked about %s, want docs/linked.txt", q.ToolCall.Arguments)
	}
	e := waitFor(t, h, s.ID, r.ID, ofType(event.ToolCallCompleted))
	var d event.ToolCallCompletedData
	if err := e.Decode(&d); err != nil {
		t.Fatal(err)
	}
	allowed(t, d, "plain docs")
	if _, err := h.CancelRun(ctx, api.CancelParams{RunID: r.ID}); err != nil {
		t.Fatal(err)
	}
	wait(t, h, r.ID)
}

// AGENTS.md is read into the system prompt as read_file would read it: a
// link AGENTS.md -> .env under a deny on **/.env gives the model no
// instructions, and not the secret.
func TestInstructionsFollowPathRules(t *testing.T) {
	dir := secretTree(t)
	if err := os.Symlink(".env", filepath.Join(dir, "AGENTS.md")); err != nil {
		t.Fatal(err)
	}
	reg := tool.NewRegistry()
	if err := builtin.Register(reg, builtin.Options{}); err != nil {
		t.Fatal(err)
	}
	rec := &seenProvider{}
	h, err := host.New(context.Background(), host.Config{
		Store: memory.New(), Tools: reg, DefaultModel: "paths", CoalesceWindow: 2 * time.Millisecond, Policy: denyEnv,
		ResolveModel: func(name string) (*host.Model, error) {
			p, err := scripted.Parse(name, []byte(`{"steps":[{"text":"done"}]}`))
			rec.p = p
			return &host.Model{Name: name, Provider: rec, Model: name}, err
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	if got := runCalls(t, h, []event.Mount{{ID: "work", Path: dir, Default: true}}); len(got) != 0 {
		t.Fatalf("tool calls: %+v", got)
	}
	if seen := rec.String(); strings.Contains(seen, envSecret) || !strings.Contains(seen, "capable software agent") {
		t.Fatalf("the model was sent: %.500s", seen)
	}
}

// A background tool call (start_tool) runs after the run that started it
// was decided, maybe after it ended: its file access is guarded by the
// session's rules too, so a link made since leads nowhere denied.
func TestBackgroundToolFollowsPathRules(t *testing.T) {
	dir := secretTree(t)
	h := pathHost(t, denyEnv)
	s, err := h.CreateSession(context.Background(), api.CreateSessionParams{Mounts: []event.Mount{{ID: "work", Path: dir, Default: true}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, args := range []string{`{"path":"notes.txt"}`, `{"path":"readme.txt"}`} {
		res := host.RunTool(h, context.Background(), process.ToolRun{
			Process: record.Process{ID: "proc_1", SessionID: s.ID, RunID: "run_gone", Kind: record.ProcessTool,
				Spec: record.ProcessSpec{Tool: api.ToolReadFile, Args: json.RawMessage(args)}},
			Call: &tool.Call{ID: "proc_1", SessionID: s.ID, RunID: "run_gone", Arguments: json.RawMessage(args)},
		})
		switch {
		case strings.Contains(res.Output, envSecret):
			t.Errorf("%s: the background read returned the secret", args)
		case strings.Contains(args, "notes") && (!res.IsError || !strings.Contains(res.Output, "no .env files")):
			t.Errorf("%s: %+v", args, res)
		case strings.Contains(args, "readme") && (res.IsError || !strings.Contains(res.Output, "harmless")):
			t.Errorf("%s: %+v", args, res)
		}
	}
}
