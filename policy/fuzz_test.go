package policy_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"weft.dev/weft/api"
	"weft.dev/weft/policy"
)

var validActions = map[string]bool{api.ActionAllow: true, api.ActionAsk: true, api.ActionDeny: true}

// FuzzCompile: any policy a client may send compiles or is refused with
// an invalid_params *api.Error naming a field, never a panic; what
// compiles decides every call with an action.
func FuzzCompile(f *testing.F) {
	for _, s := range []string{
		`{"preset":"ask-writes"}`,
		`{"rules":[{"tool":"shell","match":{"command":"git"},"action":"allow"}]}`,
		`{"rules":[{"tool":"shell","match":{"commandRegex":"go (test|vet)\\b"},"action":"allow"}]}`,
		`{"rules":[{"tool":"read_file","match":{"path":"src/**/*.go","mount":"work"},"action":"deny","reason":"no"}]}`,
		`{"rules":[{"tool":"*","action":"ask","timeoutMs":1000,"default":"allow"}]}`,
		`{"rules":[{"tool":"mcp__[","action":"ask"}]}`,
		`{"rules":[{"tool":"shell","match":{"commandRegex":"("},"action":"allow"}]}`,
		`{"preset":"nope","rules":[{}]}`,
		`{"rules":[{"tool":"write_file","action":"allow","default":"deny","timeoutMs":-5}]}`,
	} {
		f.Add([]byte(s), "shell", `{"command":"git status && rm -rf /"}`)
	}
	f.Fuzz(func(t *testing.T, b []byte, tool, args string) {
		var p api.Policy
		if json.Unmarshal(b, &p) != nil {
			return
		}
		s, err := policy.Compile(p)
		if err != nil {
			var ae *api.Error
			if !errors.As(err, &ae) || ae.Kind != api.KindInvalidParams {
				t.Fatalf("Compile(%s): %v is not an invalid_params *api.Error", b, err)
			}
			field, _ := ae.Data["field"].(string)
			if field == "" || !strings.HasPrefix(ae.Message, field+": ") {
				t.Fatalf("Compile(%s): %q does not name its field %q", b, ae.Message, field)
			}
			return
		}
		for _, c := range []policy.Call{
			{Tool: tool, Arguments: json.RawMessage(args), Mounts: mounts},
			{Tool: api.ToolShell, Arguments: json.RawMessage(args), Mounts: mounts},
			{Tool: api.ToolReadFile, Arguments: json.RawMessage(args)},
		} {
			checkDecision(t, s, c)
		}
	})
}

// FuzzDecide: any call, under policies that use every kind of condition,
// gets a decision with an action and never panics; SessionRuleFor of it
// is a valid rule that allows it, unless a stricter rule of equal rank
// stays in the way.
func FuzzDecide(f *testing.F) {
	for _, c := range [][2]string{
		{"shell", `{"command":"git status; rm -rf / && echo $(curl x | sh)"}`},
		{"shell", `{"command":"FOO=1 if ! { rm x; }","cwd":"/environment/scratch/.."}`},
		{"shell", `{"command":"ls 2>&1 >|f &>g","cwd":"sub/../.."}`},
		{"shell", `{"command":"git status &>/dev/null rm important.txt"}`},
		{"shell", `{"command":"git -C . push; git \"push\"; ${RM:-rm} x; sh -c 'eval \"rm x\"'"}`},
		{"shell", `{"command":"alias r='rm '\nr x; find . -exec rm {} +; xargs -I{} sh -c 'rm {}'"}`},
		{"shell", `{"command":"cat <<EOF | sh\nrm x\nEOF\n","cwd":"/environment/scratch"}`},
		{"shell", `{"command":"a\r\nb\\\r\nc $((1+$(d))) \"${e:-$(f)}\" ~/g [h] i*"}`},
		{"read_file", `{"path":"/environment/work/../docs/a"}`},
		{"write_file", `{"path":"./src//../.env","content":""}`},
		{"glob", `{"pattern":"**","path":"/environment"}`},
		{"list_dir", `{}`},
		{"start_tool", `{"tool":"write_file","args":{"path":"secrets/x"}}`},
		{"start_tool", `{"tool":"start_tool","args":{"tool":"shell"}}`},
		{"ask_user", `{"question":"?"}`},
		{"mcp__github__x", `null`},
		{"", ``},
	} {
		f.Add(c[0], c[1])
	}
	sets := make([]*policy.Set, 0, 5)
	for _, name := range policy.Presets() {
		s, err := policy.Compile(api.Policy{Preset: name})
		if err != nil {
			f.Fatal(err)
		}
		sets = append(sets, s)
	}
	s, err := policy.Compile(
		api.Policy{Preset: api.PresetAskWrites, Rules: []api.Rule{
			{Tool: api.ToolShell, Match: api.Match{Command: "git"}, Action: api.ActionAllow},
			{Tool: api.ToolShell, Match: api.Match{CommandRegex: `curl\b.*\|\s*sh`}, Action: api.ActionDeny},
			{Tool: api.ToolShell, Match: api.Match{Command: "rm -rf"}, Action: api.ActionAsk},
			{Tool: api.ToolShell, Match: api.Match{Mount: "scratch"}, Action: api.ActionAllow},
			{Tool: "*", Match: api.Match{Path: "/environment/*/**/.env"}, Action: api.ActionDeny},
		}},
		api.Policy{Rules: []api.Rule{
			{Tool: api.ToolWriteFile, Match: api.Match{Mount: "scratch", Path: "**"}, Action: api.ActionAllow},
			{Tool: "mcp__*", Action: api.ActionAsk, TimeoutMs: 10, Default: api.ActionAllow},
			{Tool: api.ToolStartTool, Action: api.ActionAsk},
		}},
	)
	if err != nil {
		f.Fatal(err)
	}
	sets = append(sets, s)
	f.Fuzz(func(t *testing.T, tool, args string) {
		c := policy.Call{Tool: tool, Arguments: json.RawMessage(args), Mounts: mounts}
		for _, s := range sets {
			checkDecision(t, s, c)
			r := policy.SessionRuleFor(c)
			s2, err := s.WithSessionRule(r)
			if err != nil {
				t.Fatalf("SessionRuleFor(%s %s) = %+v: %v", tool, args, r, err)
			}
			checkDecision(t, s2, c)
		}
	})
}

func checkDecision(t *testing.T, s *policy.Set, c policy.Call) {
	t.Helper()
	d := s.Decide(c)
	if !validActions[d.Action] {
		t.Fatalf("Decide(%s %s): action %q", c.Tool, c.Arguments, d.Action)
	}
	if (d.Rule == nil) != (d.Layer < 0) {
		t.Fatalf("Decide(%s %s): rule %+v in layer %d", c.Tool, c.Arguments, d.Rule, d.Layer)
	}
	if d.Action == api.ActionDeny && d.Reason == "" {
		t.Fatalf("Decide(%s %s): a deny without a reason", c.Tool, c.Arguments)
	}
	if d.Action == api.ActionAsk && c.Tool == api.ToolAskUser {
		t.Fatalf("Decide(%s %s): ask_user asked", c.Tool, c.Arguments)
	}
}

// FuzzCommand: any shell command is taken apart without a panic, within
// bounds, and a command after "rm x" on a line of its own is never
// allowed past a deny of rm (whatever it does to the parse, rm runs
// first). The policy's reading of what dash runs is checked against dash
// itself in TestDash.
func FuzzCommand(f *testing.F) {
	for _, c := range dashCorpus {
		f.Add(c)
	}
	s, err := policy.Compile(api.Policy{Rules: []api.Rule{
		{Tool: api.ToolShell, Match: api.Match{Command: "git"}, Action: api.ActionAllow},
		{Tool: api.ToolShell, Match: api.Match{Command: "rm"}, Action: api.ActionDeny},
		{Tool: api.ToolShell, Match: api.Match{CommandRegex: `curl\b.*\|\s*(ba)?sh`}, Action: api.ActionDeny},
	}})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, cmd string) {
		checkDecision(t, s, shell(cmd))
		if d := s.Decide(shell("rm x\n" + cmd)); d.Action != api.ActionDeny {
			t.Fatalf("rm x then %q: %s", cmd, d.Action)
		}
		mayRun, _ := policy.MayRun(cmd)
		mayRun([]string{"rm", "x"})
	})
}
