package policy_test

import (
	"encoding/json"
	"errors"
	"testing"

	"weft.dev/weft/api"
	"weft.dev/weft/policy"
)

// leadsTo is a resolver (policy.Call.Resolve) of a fixed set of links;
// other paths lead where they are written, and "broken" cannot be told.
func leadsTo(links map[string][]string) func(string) ([]string, error) {
	return func(p string) ([]string, error) {
		if p == "docs/broken" {
			return nil, errors.New("too many links")
		}
		if to, ok := links[p]; ok {
			return to, nil
		}
		return []string{"/environment/work/" + p}, nil
	}
}

func resolved(c policy.Call, links map[string][]string) policy.Call {
	c.Resolve = leadsTo(links)
	return c
}

func opened(c policy.Call, paths ...string) policy.Call {
	c.Opened = paths
	return c
}

// A path rule decides on where the path leads as well as on what was
// written: a deny or ask rule holds if either matches, an allow rule only
// if both do. The same holds for the mount condition, and for what a
// running call opened.
func TestPathRulesSeeWhereThePathLeads(t *testing.T) {
	links := map[string][]string{
		"notes.txt":       {"/environment/work/.env"},
		"d/key":           {"/environment/work/secrets/key"},
		"docs/linked.txt": {"/environment/work/.env"},
		"tovault":         {"/environment/work/vault/key", "/environment/docs/key"},
		"src":             {"/environment/work/src"},
	}
	s := compile(t, rules(
		api.Rule{Tool: "*", Match: api.Match{Path: "**/.env"}, Action: api.ActionDeny, Reason: "no .env"},
		api.Rule{Tool: "*", Match: api.Match{Path: "secrets/**"}, Action: api.ActionDeny, Reason: "no secrets"},
		api.Rule{Tool: "*", Match: api.Match{Mount: "docs"}, Action: api.ActionAsk, Reason: "docs"},
	), api.Policy{Preset: api.PresetAskAll, Rules: []api.Rule{
		{Tool: api.ToolReadFile, Match: api.Match{Path: "docs/**"}, Action: api.ActionAllow},
		{Tool: api.ToolGrep, Match: api.Match{Path: "src/**"}, Action: api.ActionAllow},
	}})
	tests := []decideCase{
		// As written, this matches no rule of the higher layer: ask-all.
		{"written", file(api.ToolReadFile, "notes.txt"), api.ActionAsk},
		{"written in docs", file(api.ToolReadFile, "docs/linked.txt"), api.ActionAllow},
		// Where it leads matches the config file's deny, which is final.
		{"a link to .env", resolved(file(api.ToolReadFile, "notes.txt"), links), api.ActionDeny},
		{"a link in docs to .env", resolved(file(api.ToolReadFile, "docs/linked.txt"), links), api.ActionDeny},
		{"a link into another mount", resolved(file(api.ToolReadFile, "tovault"), links), api.ActionAsk},
		{"a path that cannot be told", resolved(file(api.ToolReadFile, "docs/broken"), links), api.ActionAllow},
		{"a plain path", resolved(file(api.ToolReadFile, "docs/a.txt"), links), api.ActionAllow},
		{"a walk's base", resolved(file(api.ToolGrep, "src"), links), api.ActionAllow},
		{"what a grep opened", opened(file(api.ToolGrep, "src"), "/environment/work/src/a.go"), api.ActionAllow},
		{"what a grep opened through a link", opened(file(api.ToolGrep, "src"), "/environment/work/src/l", "/environment/work/lib/a.go"), api.ActionAsk},
		{"started", resolved(call(api.ToolStartTool, `{"tool":"read_file","args":{"path":"docs/linked.txt"}}`), links), api.ActionDeny},
	}
	for _, tc := range tests {
		if d := s.Decide(tc.call); d.Action != tc.want {
			t.Errorf("%s: %s (rule %+v), want %s", tc.name, d.Action, d.Rule, tc.want)
		}
	}

	// A mount condition: an allow of mount work holds only when the file
	// lies in work wherever it leads.
	m := compile(t, api.Policy{Preset: api.PresetAskAll, Rules: []api.Rule{
		{Tool: api.ToolReadFile, Match: api.Match{Mount: "work"}, Action: api.ActionAllow}}})
	if d := m.Decide(resolved(file(api.ToolReadFile, "notes.txt"), links)); d.Action != api.ActionAllow {
		t.Errorf("a link within work: %+v", d)
	}
	if d := m.Decide(resolved(file(api.ToolReadFile, "tovault"), links)); d.Action != api.ActionAsk {
		t.Errorf("a link from work into docs: %+v", d)
	}

	// The config layer's denies decide where the higher layer's rules do
	// not match.
	deny := compile(t, rules(
		api.Rule{Tool: "*", Match: api.Match{Path: "**/.env"}, Action: api.ActionDeny, Reason: "no .env"},
		api.Rule{Tool: "*", Match: api.Match{Path: "secrets/**"}, Action: api.ActionDeny, Reason: "no secrets"},
	))
	for _, c := range []policy.Call{
		resolved(file(api.ToolReadFile, "notes.txt"), links),
		resolved(file(api.ToolWriteFile, "notes.txt"), links),
		resolved(file(api.ToolReadFile, "d/key"), links),
		opened(file(api.ToolGrep, "."), "/environment/work/sub/n", "/environment/work/.env"),
		opened(file(api.ToolListDir, "d"), "/environment/work/secrets"),
	} {
		d := deny.Decide(c)
		if d.Action != api.ActionDeny || (d.Reason != "no .env" && d.Reason != "no secrets") {
			t.Errorf("%s %s (opened %v): %+v", c.Tool, c.Arguments, c.Opened, d)
		}
	}
	var a map[string]string
	if d := deny.Decide(file(api.ToolReadFile, "notes.txt")); d.Action != api.ActionAllow || json.Unmarshal(file(api.ToolReadFile, "x").Arguments, &a) != nil {
		t.Errorf("a written path alone: %+v", d)
	}
}

// HasPathRules tells the guard whether a tool's calls need checking.
func TestHasPathRules(t *testing.T) {
	s := compile(t, rules(
		api.Rule{Tool: "read_*", Match: api.Match{Path: "**/.env"}, Action: api.ActionDeny},
		api.Rule{Tool: api.ToolShell, Match: api.Match{Mount: "scratch"}, Action: api.ActionAllow},
		api.Rule{Tool: "*", Action: api.ActionAllow},
	))
	for tool, want := range map[string]bool{
		api.ToolReadFile: true, api.ToolWriteFile: false, api.ToolShell: true, api.ToolStartTool: true, "mcp__x__y": false,
	} {
		if got := s.HasPathRules(tool); got != want {
			t.Errorf("HasPathRules(%s) = %v", tool, got)
		}
	}
	var none *policy.Set
	if none.HasPathRules(api.ToolReadFile) {
		t.Error("a nil Set has path rules")
	}
}

// BenchmarkDecideOpened is what a guarded walk pays per entry it reaches:
// a grep call decided again with the entry's path and where it is.
func BenchmarkDecideOpened(b *testing.B) {
	s, err := policy.Compile(api.Policy{Preset: api.PresetAskWrites, Rules: []api.Rule{
		{Tool: "*", Match: api.Match{Path: "**/.env"}, Action: api.ActionDeny},
		{Tool: "*", Match: api.Match{Path: "secrets/**"}, Action: api.ActionDeny},
		{Tool: api.ToolShell, Match: api.Match{Command: "git"}, Action: api.ActionAllow},
	}})
	if err != nil {
		b.Fatal(err)
	}
	c := opened(file(api.ToolGrep, "src"), "/environment/work/src/pkg/deep/file.go", "/environment/work/src/pkg/deep/file.go")
	b.ReportAllocs()
	for b.Loop() {
		if d := s.Decide(c); d.Action != api.ActionAllow {
			b.Fatal(d.Action)
		}
	}
}
