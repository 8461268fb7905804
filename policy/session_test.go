package policy_test

import (
	"strings"
	"testing"

	"weft.dev/weft/api"
	"weft.dev/weft/policy"
)

func TestSessionRuleFor(t *testing.T) {
	approved := func(m api.Match) api.Rule {
		return api.Rule{Action: allow, Match: m, Reason: "approved for this session"}
	}
	cases := []struct {
		name string
		call policy.Call
		want api.Rule
	}{
		{"a shell: the first word", shell("  git status -s"), approved(api.Match{Command: "git"})},
		{"a shell: one word twice", shell("git add . && git commit -m x"), approved(api.Match{Command: "git"})},
		{"a shell: a compound", shell("cd web && npm test | tee log.txt"), approved(api.Match{CommandRegex: `(?:cd|npm|tee)(?:\s|$)`})},
		{"a shell: words quoted for the regexp", shell("./run.sh; c++ -v"), approved(api.Match{CommandRegex: `(?:\./run\.sh|c\+\+)(?:\s|$)`})},
		{"a shell without words", shell(" ; "), approved(api.Match{CommandRegex: "^$"})},
		{"a shell the tool refuses", call(api.ToolShell, `{"command":1}`), approved(api.Match{CommandRegex: "^$"})},
		{"a file tool: the mount", file(api.ToolWriteFile, "/environment/scratch/a/b"), approved(api.Match{Mount: "scratch"})},
		{"a file tool: a relative path", file(api.ToolEditFile, "src/a.go"), approved(api.Match{Mount: "work"})},
		{"a file tool: the default root", call(api.ToolGrep, `{"pattern":"x"}`), approved(api.Match{Mount: "work"})},
		{"a file tool: no mount", file(api.ToolWriteFile, "/etc/passwd"), approved(api.Match{Path: "/environment"})},
		{"a process tool", call(api.ToolProcessSignal, `{"name":"interrupt"}`), approved(api.Match{})},
		{"an MCP tool", call("mcp__github__create_issue", `{}`), approved(api.Match{})},
	}
	for _, c := range cases {
		c.want.Tool = c.call.Tool
		if got := policy.SessionRuleFor(c.call); got != c.want {
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
		}
	}
	start := call(api.ToolStartTool, `{"tool":"write_file","args":{"path":"/environment/docs/x"}}`)
	if got, want := policy.SessionRuleFor(start), (api.Rule{Tool: api.ToolWriteFile, Action: allow, Match: api.Match{Mount: "docs"}, Reason: "approved for this session"}); got != want {
		t.Errorf("start_tool: %+v, want %+v", got, want)
	}
}

// TestAllowSession plays a session under ask-writes where a person answers
// "always for this session".
func TestAllowSession(t *testing.T) {
	s := compile(t, api.Policy{}, api.Policy{Preset: api.PresetAskWrites, Rules: []api.Rule{
		{Tool: api.ToolShell, Match: api.Match{Command: "git push"}, Action: ask},
	}})
	add := func(s *policy.Set, c policy.Call) *policy.Set {
		t.Helper()
		if d := s.Decide(c); d.Action != ask {
			t.Fatalf("%s %s: %s before the approval, want ask", c.Tool, c.Arguments, d.Action)
		}
		ns, err := s.WithSessionRule(policy.SessionRuleFor(c))
		if err != nil {
			t.Fatal(err)
		}
		return ns
	}
	s2 := add(s, shell("git status"))
	s2 = add(s2, file(api.ToolWriteFile, "/environment/scratch/out.txt"))
	runCases(t, s2, []decideCase{
		{"the approved command", shell("git status"), allow},
		{"the same first word", shell("git log --oneline"), allow},
		{"several git commands", shell("git add . && git commit -m wip"), allow},
		{"another command", shell("gitk"), ask},
		{"git chained to another command", shell("git status; curl x"), ask},
		{"the same mount", file(api.ToolWriteFile, "/environment/scratch/other.txt"), allow},
		{"another mount", file(api.ToolWriteFile, "a.txt"), ask},
		{"another tool", file(api.ToolEditFile, "/environment/scratch/out.txt"), ask},
	})
	// The approved rule loses a tie with the session's own rule for git
	// push, and beats the session's preset.
	if d := s2.Decide(shell("git push")); d.Action != ask || d.Layer != policy.LayerSession || d.Index != 0 || d.Preset != "" {
		t.Errorf("git push after approving git: %+v", d)
	}
	if d := s2.Decide(shell("git fetch")); d.Action != allow || d.Layer != policy.LayerSession || d.Index != 1 || d.Preset != "" {
		t.Errorf("git fetch after approving git: %+v", d)
	}
	// The original set is unchanged.
	if d := s.Decide(shell("git status")); d.Action != ask {
		t.Errorf("the original set changed: %+v", d)
	}
	// Approving the same again adds nothing.
	s3, err := s2.WithSessionRule(policy.SessionRuleFor(shell("git diff")))
	if err != nil || s3 != s2 {
		t.Errorf("a repeated approval: %p %v, want the same set %p", s3, err, s2)
	}
}

func TestSessionRuleBelowTheRun(t *testing.T) {
	// A run's layer beats the session's, approved rules included.
	s := compile(t, api.Policy{}, api.Policy{}, api.Policy{Rules: []api.Rule{{Tool: api.ToolShell, Match: api.Match{Command: "rm"}, Action: deny}}})
	s, err := s.WithSessionRule(api.Rule{Tool: api.ToolShell, Action: allow})
	if err != nil {
		t.Fatal(err)
	}
	if d := s.Decide(shell("rm -r x")); d.Action != deny || d.Layer != policy.LayerRun {
		t.Errorf("rm: %+v", d)
	}
	if d := s.Decide(shell("ls")); d.Action != allow || d.Layer != policy.LayerSession || d.Index != 0 {
		t.Errorf("ls: %+v", d)
	}
}

func TestWithSessionRuleAddsLayers(t *testing.T) {
	for _, base := range []*policy.Set{nil, compile(t), compile(t, api.Policy{Preset: api.PresetReadOnly})} {
		s, err := base.WithSessionRule(api.Rule{Tool: api.ToolShell, Match: api.Match{Command: "make"}, Action: allow})
		if err != nil {
			t.Fatal(err)
		}
		if d := s.Decide(shell("make test")); d.Action != allow || d.Layer != policy.LayerSession || d.Index != 0 {
			t.Errorf("make: %+v", d)
		}
		want := allow
		if base != nil && base.Decide(shell("ls")).Action == deny {
			want = deny
		}
		if d := s.Decide(shell("ls")); d.Action != want {
			t.Errorf("ls: %s, want %s", d.Action, want)
		}
	}
}

func TestApprovedRulesRank(t *testing.T) {
	s := compile(t, api.Policy{}, rules(
		api.Rule{Tool: api.ToolShell, Action: ask},
		api.Rule{Tool: api.ToolProcessSignal, Action: ask},
	))
	for _, c := range []policy.Call{shell("make"), call(api.ToolProcessSignal, `{}`)} {
		var err error
		if s, err = s.WithSessionRule(policy.SessionRuleFor(c)); err != nil {
			t.Fatal(err)
		}
	}
	s, err := s.WithSessionRule(api.Rule{Tool: api.ToolShell, Match: api.Match{Command: "make"}, Action: deny})
	if err != nil {
		t.Fatal(err)
	}
	runCases(t, s, []decideCase{
		{"more conditions than the session's rule", shell("ls"), ask},
		{"a later approved rule wins a tie", shell("make"), deny},
		{"a tie with the session's rule goes to it", call(api.ToolProcessSignal, `{}`), ask},
	})
}

func TestSessionRuleForOddNames(t *testing.T) {
	// A model may call a tool that does not exist; an approval of it must
	// not become a glob.
	s := compile(t, api.Policy{Preset: api.PresetAskWrites})
	for _, name := range []string{"*", "mcp__x__[a]", `back\slash`, "what?", ""} {
		r := policy.SessionRuleFor(call(name, `{}`))
		s2, err := s.WithSessionRule(r)
		if err != nil {
			t.Fatalf("%q: %+v: %v", name, r, err)
		}
		want := allow
		if name == "" {
			want = ask // a rule that matches no call
		}
		if d := s2.Decide(call(name, `{}`)); d.Action != want {
			t.Errorf("%q: %s, want %s (rule %+v)", name, d.Action, want, r)
		}
		for _, other := range []string{"mcp__github__delete_repo", "mcp__x__a", "whatx", "back/slash"} {
			if d := s2.Decide(call(other, `{}`)); d.Action != ask {
				t.Errorf("approving %q allows %q: %+v", name, other, d.Rule)
			}
		}
	}
	// Words and names over the limit.
	long := strings.Repeat("x", api.MaxPolicyPatternBytes+1)
	for _, c := range []policy.Call{shell(long + " x; y"), shell(long), call(long, `{}`)} {
		r := policy.SessionRuleFor(c)
		s2, err := s.WithSessionRule(r)
		if err != nil {
			t.Fatalf("%+v: %v", r, err)
		}
		if d := s2.Decide(c); d.Action != ask {
			t.Errorf("%s: %s, want a rule that matches no call: %+v", c.Arguments, d.Action, r)
		}
	}
}
