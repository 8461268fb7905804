package policy_test

import (
	"encoding/json"
	"fmt"

	"weft.dev/weft/api"
	"weft.dev/weft/event"
	"weft.dev/weft/policy"
)

func Example() {
	// The config file's rules, over the host's default preset; then the
	// session's policy.
	config := api.Policy{Preset: api.PresetAskWrites, Rules: []api.Rule{
		{Tool: api.ToolShell, Match: api.Match{Command: "go test"}, Action: api.ActionAllow},
		{Tool: api.ToolShell, Match: api.Match{Command: "rm"}, Action: api.ActionDeny, Reason: "delete files with a person"},
	}}
	session := api.Policy{Rules: []api.Rule{
		{Tool: api.ToolWriteFile, Match: api.Match{Mount: "scratch"}, Action: api.ActionAllow},
		{Tool: "mcp__github__*", Action: api.ActionAsk, Reason: "acts on GitHub", TimeoutMs: 60_000},
	}}
	set, err := policy.Compile(config, session)
	if err != nil {
		fmt.Println(err)
		return
	}

	mounts := []event.Mount{
		{ID: "work", Kind: event.KindLocal, Path: "/home/me/project", Mode: event.ModeReadWrite, Default: true},
		{ID: "scratch", Kind: event.KindScratch, Path: "/var/lib/weft/scratch/s1", Mode: event.ModeReadWrite},
	}
	calls := []struct{ tool, args string }{
		{"read_file", `{"path":"main.go"}`},
		{"shell", `{"command":"go test ./..."}`},
		{"shell", `{"command":"go test ./... && rm -rf /"}`},
		{"write_file", `{"path":"/environment/scratch/notes.md","content":"…"}`},
		{"write_file", `{"path":"main.go","content":"…"}`},
		{"mcp__github__create_issue", `{"title":"flaky test"}`},
	}
	for _, c := range calls {
		d := set.Decide(policy.Call{Tool: c.tool, Arguments: json.RawMessage(c.args), Mounts: mounts})
		fmt.Printf("%s %s: %s (layer %d %s) %q %v\n", c.tool, c.args, d.Action, d.Layer, d.Preset, d.Reason, d.Timeout)
	}
	// Output:
	// read_file {"path":"main.go"}: allow (layer 0 ask-writes) "" 0s
	// shell {"command":"go test ./..."}: allow (layer 0 ) "" 0s
	// shell {"command":"go test ./... && rm -rf /"}: deny (layer 0 ) "delete files with a person" 0s
	// write_file {"path":"/environment/scratch/notes.md","content":"…"}: allow (layer 1 ) "" 0s
	// write_file {"path":"main.go","content":"…"}: ask (layer 0 ask-writes) "changes a file" 0s
	// mcp__github__create_issue {"title":"flaky test"}: ask (layer 1 ) "acts on GitHub" 1m0s
}

func ExampleSessionRuleFor() {
	set, _ := policy.Compile(api.Policy{Preset: api.PresetAskWrites})
	build := policy.Call{Tool: api.ToolShell, Arguments: json.RawMessage(`{"command":"make build"}`)}
	fmt.Println(set.Decide(build).Action)

	// The person answers "always for this session".
	rule := policy.SessionRuleFor(build)
	b, _ := json.Marshal(rule)
	fmt.Println(string(b))
	set, _ = set.WithSessionRule(rule)

	for _, cmd := range []string{"make build", "make  build", "make test", "make build | tee log"} {
		args, _ := json.Marshal(map[string]string{"command": cmd})
		fmt.Printf("%q: %s\n", cmd, set.Decide(policy.Call{Tool: api.ToolShell, Arguments: args}).Action)
	}
	// Output:
	// ask
	// {"tool":"shell","match":{"commandExact":"make build"},"action":"allow","reason":"approved for this session"}
	// "make build": allow
	// "make  build": allow
	// "make test": ask
	// "make build | tee log": ask
}
