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
		{"a shell: the command", shell("  git status -s"), approved(api.Match{CommandExact: "  git status -s"})},
		{"a shell: a compound", shell("cd web && npm test | tee log.txt"), approved(api.Match{CommandExact: "cd web && npm test | tee log.txt"})},
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
	never := approved(api.Match{Path: "/environment"})
	never.Tool = "*"
	for _, c := range []policy.Call{
		shell("  "),
		call(api.ToolShell, `{"command":1}`),
		shell(strings.Repeat("x", api.MaxShellCommandBytes+1)),
	} {
		if got := policy.SessionRuleFor(c); got != never {
			t.Errorf("%.40s: %+v, want a rule that matches no call", c.Arguments, got)
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
		{"the same command, other blanks", shell(" git   status\n"), allow},
		{"the same words, quoted", shell(`git "status"`), ask},
		{"other arguments", shell("git status -s"), ask},
		{"the same first word", shell("git log --oneline"), ask},
		{"the command twice", shell("git status; git status"), ask},
		{"chained to another command", shell("git status; curl x"), ask},
		{"another command", shell("gitk"), ask},
		{"the same mount", file(api.ToolWriteFile, "/environment/scratch/other.txt"), allow},
		{"another mount", file(api.ToolWriteFile, "a.txt"), ask},
		{"another tool", file(api.ToolEditFile, "/environment/scratch/out.txt"), ask},
	})
	// An approved compound allows exactly that compound: not git push
	// (which the session asks about), nor its parts alone.
	s3 := add(s2, shell("git fetch && git rebase"))
	runCases(t, s3, []decideCase{
		{"the approved compound", shell("git fetch && git rebase"), allow},
		{"a part of it", shell("git fetch"), ask},
		{"git push after a compound of git", shell("git push"), ask},
		{"the parts in another order", shell("git rebase && git fetch"), ask},
	})
	if d := s3.Decide(shell("git push")); d.Layer != policy.LayerSession || d.Index != 0 || d.Preset != "" {
		t.Errorf("git push after approving git commands: %+v", d)
	}
	// The original set is unchanged.
	if d := s.Decide(shell("git status")); d.Action != ask {
		t.Errorf("the original set changed: %+v", d)
	}
	// Approving the same again adds nothing.
	s4, err := s3.WithSessionRule(policy.SessionRuleFor(shell("git status")))
	if err != nil || s4 != s3 {
		t.Errorf("a repeated approval: %p %v, want the same set %p", s4, err, s3)
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
	// Names over the limit, and a command over the shell's.
	long := strings.Repeat("x", api.MaxPolicyPatternBytes+1)
	for _, c := range []policy.Call{shell(strings.Repeat("x", api.MaxShellCommandBytes+1)), call(long, `{}`)} {
		r := policy.SessionRuleFor(c)
		s2, err := s.WithSessionRule(r)
		if err != nil {
			t.Fatalf("%+v: %v", r, err)
		}
		if d := s2.Decide(c); d.Action != ask {
			t.Errorf("%.40s: %s, want a rule that matches no call: %.80v", c.Arguments, d.Action, r)
		}
	}
	// A long command within the limit is approved as it is.
	c := shell(long + " x; y")
	s2, err := s.WithSessionRule(policy.SessionRuleFor(c))
	if err != nil {
		t.Fatal(err)
	}
	if d := s2.Decide(c); d.Action != allow {
		t.Errorf("a long command: %s, want allow", d.Action)
	}
}

// A session rule cannot be final, nor lift a final rule of the config.
func TestSessionRuleAndFinal(t *testing.T) {
	s := compile(t, rules(
		api.Rule{Tool: api.ToolShell, Match: api.Match{Command: "git push"}, Action: ask, Final: true},
		api.Rule{Tool: api.ToolShell, Match: api.Match{Command: "rm"}, Action: deny},
	))
	if _, err := s.WithSessionRule(api.Rule{Tool: api.ToolShell, Action: ask, Final: true}); err == nil {
		t.Error("a final session rule was accepted")
	}
	for _, cmd := range []string{"git push", "rm x"} {
		d := s.Decide(shell(cmd))
		if !d.Final {
			t.Errorf("%s: not final: %+v", cmd, d)
		}
		s2, err := s.WithSessionRule(policy.SessionRuleFor(shell(cmd)))
		if err != nil {
			t.Fatal(err)
		}
		if d2 := s2.Decide(shell(cmd)); d2.Action != d.Action {
			t.Errorf("%s: %s after an approval, want %s", cmd, d2.Action, d.Action)
		}
	}
}
