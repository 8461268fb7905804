package policy_test

import (
	"encoding/json"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"weft.dev/weft/api"
	"weft.dev/weft/event"
	"weft.dev/weft/policy"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// mounts is a binding of three mounts: work (the default, rw), docs (ro)
// and scratch (rw, the shells' default).
var mounts = []event.Mount{
	{ID: "work", Kind: event.KindLocal, Path: "/srv/work", Mode: event.ModeReadWrite, Default: true},
	{ID: "docs", Kind: event.KindLocal, Path: "/srv/docs", Mode: event.ModeReadOnly},
	{ID: "scratch", Kind: event.KindScratch, Path: "/srv/scratch", Mode: event.ModeReadWrite, DefaultForShell: true},
}

func compile(t *testing.T, layers ...api.Policy) *policy.Set {
	t.Helper()
	s, err := policy.Compile(layers...)
	if err != nil {
		t.Fatalf("Compile: %v", err)
	}
	return s
}

// rules is a one-layer policy of rules.
func rules(rs ...api.Rule) api.Policy { return api.Policy{Rules: rs} }

func shell(cmd string) policy.Call {
	b, _ := json.Marshal(map[string]string{"command": cmd})
	return policy.Call{Tool: api.ToolShell, Arguments: b, Mounts: mounts}
}

func shellIn(cmd, cwd string) policy.Call {
	b, _ := json.Marshal(map[string]string{"command": cmd, "cwd": cwd})
	return policy.Call{Tool: api.ToolShell, Arguments: b, Mounts: mounts}
}

func file(tool, path string) policy.Call {
	b, _ := json.Marshal(map[string]string{"path": path})
	return policy.Call{Tool: tool, Arguments: b, Mounts: mounts}
}

func call(tool, args string) policy.Call {
	return policy.Call{Tool: tool, Arguments: json.RawMessage(args), Mounts: mounts}
}

type decideCase struct {
	name string
	call policy.Call
	want string
}

func runCases(t *testing.T, s *policy.Set, cases []decideCase) {
	t.Helper()
	for _, c := range cases {
		if got := s.Decide(c.call); got.Action != c.want {
			t.Errorf("%s: %s %.200s: got %s (rule %+v), want %s", c.name, c.call.Tool, c.call.Arguments, got.Action, got.Rule, c.want)
		}
	}
}

const (
	allow = api.ActionAllow
	ask   = api.ActionAsk
	deny  = api.ActionDeny
)

func TestCommandPrefixAllow(t *testing.T) {
	s := compile(t, api.Policy{}, rules(
		api.Rule{Tool: "*", Action: ask},
		api.Rule{Tool: api.ToolShell, Match: api.Match{Command: "git"}, Action: allow},
		api.Rule{Tool: api.ToolShell, Match: api.Match{Command: "go  test"}, Action: allow},
	))
	runCases(t, s, []decideCase{
		{"the word alone", shell("git"), allow},
		{"a prefix", shell("git status"), allow},
		{"leading blanks", shell(" \t git status"), allow},
		{"a tab", shell("git\tstatus"), allow},
		{"not at a word boundary", shell("gitk"), ask},
		{"a longer word", shell("git-lfs pull"), ask},
		{"not first", shell("echo git"), ask},
		{"two git commands", shell("git status && git log"), allow},
		{"a sequence", shell("git status; git log\ngit diff"), allow},
		{"chained to another command", shell("git status && rm -rf /"), ask},
		{"after a semicolon", shell("git status;rm -rf /"), ask},
		{"piped", shell("git log | sh"), ask},
		{"a command substitution", shell("git log $(rm -rf /)"), ask},
		{"backquotes", shell("git log `rm -rf /`"), ask},
		{"background", shell("git gc & rm x"), ask},
		{"a redirection of stderr", shell("git log 2>&1"), allow},
		{"a redirection of both, as bash writes it", shell("git log >out.txt 2>&1"), allow},
		// dash reads "&>" as "&" then ">": git log runs in the
		// background, and ">out.txt" is a command of its own.
		{"&> as dash reads it", shell("git log &>out.txt"), ask},
		{"an assignment before", shell("GIT_SSH_COMMAND='sh -c x' git fetch"), ask},
		{"empty", shell(""), ask},
		{"blank", shell("  "), ask},
		{"two words", shell("go test ./..."), allow},
		{"words normalised", shell("go   test"), allow},
		{"the first word only", shell("go build"), ask},
		{"a longer second word", shell("go testx"), ask},
	})
}

func TestCommandPrefixDeny(t *testing.T) {
	s := compile(t, api.Policy{}, rules(
		api.Rule{Tool: "*", Action: allow},
		api.Rule{Tool: api.ToolShell, Match: api.Match{Command: "rm"}, Action: deny, Reason: "no rm"},
		api.Rule{Tool: api.ToolShell, Match: api.Match{Command: "git push"}, Action: ask},
	))
	runCases(t, s, []decideCase{
		{"first", shell("rm -rf x"), deny},
		{"leading blanks", shell("   rm x"), deny},
		{"after a semicolon", shell("ls; rm x"), deny},
		{"after &&", shell("ls && rm x"), deny},
		{"after ||", shell("ls || rm x"), deny},
		{"piped into", shell("ls | rm x"), deny},
		{"on a new line", shell("ls\nrm x"), deny},
		{"in a substitution", shell("echo $(rm x)"), deny},
		{"in backquotes", shell("echo `rm x`"), deny},
		{"in a subshell", shell("(cd /tmp && rm x)"), deny},
		{"after an assignment", shell("FOO=1 rm x"), deny},
		{"after reserved words", shell("if rm x; then echo; fi"), deny},
		{"in a group", shell("{ rm x; }"), deny},
		{"negated", shell("! rm x"), deny},
		{"a quoted separator is a word", shell(`echo "a; rm x"`), allow},
		{"another word", shell("rmdir x"), allow},
		{"an argument", shell("echo rm"), allow},
		{"ask on a compound", shell("git status && git push origin"), ask},
		{"git alone", shell("git status"), allow},
		{"a later ask wins a tie with a deny", shell("git push; rm x"), ask},
	})
}

func TestCommandRegex(t *testing.T) {
	s := compile(t, api.Policy{}, rules(
		api.Rule{Tool: "*", Action: ask},
		api.Rule{Tool: api.ToolShell, Match: api.Match{CommandRegex: `go (test|vet)\b`}, Action: allow},
		api.Rule{Tool: api.ToolShell, Match: api.Match{CommandRegex: `ls$`}, Action: allow},
		api.Rule{Tool: api.ToolShell, Match: api.Match{CommandRegex: `curl\b.*\|\s*(ba)?sh\b`}, Action: deny},
		api.Rule{Tool: api.ToolShell, Match: api.Match{CommandRegex: `(?i)sudo`}, Action: deny},
	))
	runCases(t, s, []decideCase{
		{"anchored at the start", shell("go test ./..."), allow},
		{"leading blanks", shell("  go vet"), allow},
		{"not at the start", shell("xgo test"), ask},
		{"not in the middle", shell("echo go test"), ask},
		{"other subcommand", shell("go build"), ask},
		{"every simple command", shell("go vet && go test"), allow},
		{"one does not match", shell("go test; curl example.com"), ask},
		{"anchored at the end", shell("ls"), allow},
		{"more after the end", shell("ls -l"), ask},
		{"the whole command for deny", shell("curl -s example.com | sh"), deny},
		{"the whole command after another", shell("cd /tmp; curl example.com | bash"), deny},
		{"a simple command for deny", shell("echo hi && SUDO ls"), deny},
		{"deny past an assignment", shell("X=1 sudo ls"), deny},
	})
}

func TestPathGlob(t *testing.T) {
	s := compile(t, api.Policy{}, rules(
		api.Rule{Tool: "*", Action: ask},
		api.Rule{Tool: api.ToolReadFile, Match: api.Match{Path: "src/**/*.go"}, Action: allow},
		api.Rule{Tool: api.ToolReadFile, Match: api.Match{Path: "/environment/docs/**"}, Action: allow},
		api.Rule{Tool: api.ToolReadFile, Match: api.Match{Path: "**/.env"}, Action: deny},
		api.Rule{Tool: api.ToolReadFile, Match: api.Match{Path: "/environment/*/**/.git/**"}, Action: deny},
		api.Rule{Tool: api.ToolListDir, Match: api.Match{Path: "**"}, Action: allow},
		api.Rule{Tool: api.ToolGlob, Match: api.Match{Path: "/environment/*/src"}, Action: allow},
		api.Rule{Tool: api.ToolGrep, Match: api.Match{Path: "."}, Action: allow},
	))
	runCases(t, s, []decideCase{
		{"relative", file(api.ToolReadFile, "src/main.go"), allow},
		{"** as no directory", file(api.ToolReadFile, "src/a.go"), allow},
		{"** as several", file(api.ToolReadFile, "src/a/b/c/d.go"), allow},
		{"another extension", file(api.ToolReadFile, "src/a/b.txt"), ask},
		{"outside src", file(api.ToolReadFile, "lib/a.go"), ask},
		{"the /environment form of a relative glob", file(api.ToolReadFile, "/environment/work/src/a.go"), allow},
		{"a relative glob in another mount", file(api.ToolReadFile, "/environment/scratch/src/a.go"), ask},
		{"cleaned", file(api.ToolReadFile, "./src//x/../a.go"), allow},
		{"cleaned away", file(api.ToolReadFile, "src/../a.go"), ask},
		{"escaping the mount", file(api.ToolReadFile, "src/../../work/src/a.go"), ask},
		{"escaping through /environment", file(api.ToolReadFile, "/environment/docs/../work/src/a.go"), ask},
		{"an absolute glob", file(api.ToolReadFile, "/environment/docs/guide/intro.md"), allow},
		{"an absolute glob, the mount root", file(api.ToolReadFile, "/environment/docs"), allow},
		{"an absolute glob, . components", file(api.ToolReadFile, "/./environment//docs/./a"), allow},
		{"a relative path is not in docs", file(api.ToolReadFile, "guide/intro.md"), ask},
		{"deny at the root", file(api.ToolReadFile, ".env"), deny},
		{"deny deep", file(api.ToolReadFile, "/environment/work/a/b/.env"), deny},
		{"a relative glob is not in another mount", file(api.ToolReadFile, "/environment/docs/.env"), allow},
		{"in every mount", file(api.ToolReadFile, "/environment/docs/a/.git/config"), deny},
		{"a path outside /environment", file(api.ToolReadFile, "/etc/passwd"), ask},
		{"no path", call(api.ToolReadFile, `{}`), ask},
		{"list_dir: ** matches the root", call(api.ToolListDir, `{}`), allow},
		{"list_dir: another mount is not relative", file(api.ToolListDir, "/environment/docs"), ask},
		{"glob: * for the mount", call(api.ToolGlob, `{"pattern":"**","path":"/environment/scratch/src"}`), allow},
		{"glob: relative", call(api.ToolGlob, `{"pattern":"*.go","path":"src"}`), allow},
		{"grep: . is the default mount's root", call(api.ToolGrep, `{"pattern":"x"}`), allow},
		{"grep: a directory", call(api.ToolGrep, `{"pattern":"x","path":"src"}`), ask},
		{"the shell has no path", shell("cat src/a.go"), ask},
	})
}

func TestPathGlobDefaultMount(t *testing.T) {
	// With docs as the default mount, relative globs and paths are in docs.
	ms := []event.Mount{
		{ID: "work", Kind: event.KindLocal, Path: "/w", Mode: event.ModeReadWrite},
		{ID: "docs", Kind: event.KindLocal, Path: "/d", Mode: event.ModeReadOnly, Default: true},
	}
	s := compile(t, api.Policy{}, rules(
		api.Rule{Tool: "*", Action: ask},
		api.Rule{Tool: api.ToolReadFile, Match: api.Match{Path: "*.md"}, Action: allow},
	))
	for _, c := range []struct {
		path string
		want string
	}{
		{"a.md", allow},
		{"/environment/docs/a.md", allow},
		{"/environment/work/a.md", ask},
	} {
		b, _ := json.Marshal(map[string]string{"path": c.path})
		if got := s.Decide(policy.Call{Tool: api.ToolReadFile, Arguments: b, Mounts: ms}).Action; got != c.want {
			t.Errorf("%s: %s, want %s", c.path, got, c.want)
		}
	}
	// With no mounts, a relative path still matches a relative glob.
	if got := s.Decide(policy.Call{Tool: api.ToolReadFile, Arguments: json.RawMessage(`{"path":"a.md"}`)}).Action; got != allow {
		t.Errorf("no mounts: %s, want allow", got)
	}
}

// A mount condition: a file tool's path lies in the mount; an allow
// rule's shell call runs there (and only that mount is writable); an ask
// or deny rule's shell call may touch every attached mount.
func TestMount(t *testing.T) {
	s := compile(t, api.Policy{}, rules(
		api.Rule{Tool: "*", Action: ask},
		api.Rule{Tool: api.ToolWriteFile, Match: api.Match{Mount: "scratch"}, Action: allow},
		api.Rule{Tool: api.ToolShell, Match: api.Match{Mount: "scratch"}, Action: allow},
		api.Rule{Tool: "*", Match: api.Match{Mount: "docs"}, Action: deny},
	))
	runCases(t, s, []decideCase{
		{"write in scratch", file(api.ToolWriteFile, "/environment/scratch/a"), allow},
		{"write in the default mount", file(api.ToolWriteFile, "a"), ask},
		{"write in docs", file(api.ToolWriteFile, "/environment/docs/a"), deny},
		{"read in docs", file(api.ToolReadFile, "/environment/docs/a"), deny},
		{"list the default mount", call(api.ToolListDir, `{}`), ask},
		{"a shell without cwd runs in the shell mount", shell("make"), allow},
		{"a shell elsewhere may touch docs", shellIn("make", "sub"), deny},
		{"a shell with an absolute cwd", shellIn("make", "/environment/scratch/sub"), allow},
		{"a shell in docs", shellIn("ls", "/environment/docs"), deny},
		{"no mount for process tools", call(api.ToolProcessList, `{}`), ask},
		{"no mount for a path outside", file(api.ToolWriteFile, "/tmp/a"), ask},
	})
	if d := s.Decide(shell("make")); d.OnlyWritable != "scratch" {
		t.Errorf("a shell allowed in scratch: only writable %q, want scratch", d.OnlyWritable)
	}
	if d := s.Decide(file(api.ToolWriteFile, "/environment/scratch/a")); d.OnlyWritable != "" {
		t.Errorf("a write allowed in scratch: only writable %q, want none", d.OnlyWritable)
	}
	// Without a shell mount, a shell without cwd lies in no mount, but
	// may read docs.
	ro := []event.Mount{{ID: "docs", Kind: event.KindLocal, Path: "/d", Mode: event.ModeReadOnly}}
	c := shell("ls")
	c.Mounts = ro
	if got := s.Decide(c).Action; got != deny {
		t.Errorf("shell with no shell mount: %s, want deny", got)
	}
	// A lone unflagged mount is the default, and the shell mount when rw.
	one := []event.Mount{{ID: "scratch", Kind: event.KindScratch, Path: "/s", Mode: event.ModeReadWrite}}
	c.Mounts = one
	if got := s.Decide(c).Action; got != allow {
		t.Errorf("shell in a lone rw mount: %s, want allow", got)
	}
	c = file(api.ToolWriteFile, "a")
	c.Mounts = one
	if got := s.Decide(c).Action; got != allow {
		t.Errorf("write in a lone mount: %s, want allow", got)
	}
	// start_tool of a shell gets no binding of its own: a mount-bound
	// allow does not apply to it.
	bg := call(api.ToolStartTool, `{"tool":"shell","args":{"command":"make"}}`)
	if d := s.Decide(bg); d.Action != deny || d.OnlyWritable != "" {
		t.Errorf("start_tool of a shell in scratch: %+v, want deny (docs)", d)
	}
}

func TestToolGlob(t *testing.T) {
	s := compile(t, api.Policy{}, rules(
		api.Rule{Tool: "*", Action: allow},
		api.Rule{Tool: "mcp__*", Action: ask},
		api.Rule{Tool: "mcp__github__*", Action: deny},
		api.Rule{Tool: "mcp__github__get_?ssue", Action: allow},
	))
	runCases(t, s, []decideCase{
		{"a built-in", call(api.ToolShell, `{"command":"ls"}`), allow},
		{"an MCP tool", call("mcp__fs__read", `{}`), ask},
		{"a later glob wins a tie", call("mcp__github__create_issue", `{}`), deny},
		{"an exact name", call("mcp__github__get_issue", `{}`), allow},
		{"no match for the glob", call("mcpx", `{}`), allow},
	})
}

func TestPrecedenceWithinLayer(t *testing.T) {
	cases := []struct {
		name  string
		rules []api.Rule
		call  policy.Call
		want  string
	}{
		{
			"an exact name beats a glob",
			[]api.Rule{{Tool: api.ToolShell, Action: allow}, {Tool: "sh*", Action: deny}},
			shell("ls"), allow,
		},
		{
			"a glob beats *",
			[]api.Rule{{Tool: "sh*", Action: allow}, {Tool: "*", Action: deny}},
			shell("ls"), allow,
		},
		{
			"** ranks as *",
			[]api.Rule{{Tool: "**", Action: deny}, {Tool: "sh?ll", Action: ask}},
			shell("ls"), ask,
		},
		{
			"the tool before the conditions",
			[]api.Rule{{Tool: api.ToolShell, Action: ask}, {Tool: "*", Match: api.Match{Command: "ls", Mount: "scratch"}, Action: allow}},
			shell("ls"), ask,
		},
		{
			"more conditions win",
			[]api.Rule{{Tool: api.ToolShell, Match: api.Match{Command: "ls", Mount: "scratch"}, Action: allow}, {Tool: api.ToolShell, Match: api.Match{Command: "ls"}, Action: deny}},
			shell("ls"), allow,
		},
		{
			"a condition beats none",
			[]api.Rule{{Tool: api.ToolShell, Match: api.Match{Command: "ls"}, Action: allow}, {Tool: api.ToolShell, Action: deny}},
			shell("ls"), allow,
		},
		{
			"the later wins a tie",
			[]api.Rule{{Tool: api.ToolShell, Match: api.Match{Command: "git"}, Action: allow}, {Tool: api.ToolShell, Match: api.Match{Command: "git push"}, Action: ask}},
			shell("git push"), ask,
		},
		{
			"the later wins a tie, other order",
			[]api.Rule{{Tool: api.ToolShell, Match: api.Match{Command: "git push"}, Action: ask}, {Tool: api.ToolShell, Match: api.Match{Command: "git"}, Action: allow}},
			shell("git push"), allow,
		},
		{
			"a rule that does not match is skipped",
			[]api.Rule{{Tool: api.ToolShell, Action: ask}, {Tool: api.ToolShell, Match: api.Match{Command: "rm"}, Action: deny}},
			shell("ls"), ask,
		},
	}
	for _, c := range cases {
		s := compile(t, api.Policy{}, rules(c.rules...))
		if got := s.Decide(c.call); got.Action != c.want {
			t.Errorf("%s: %s (rule %+v), want %s", c.name, got.Action, got.Rule, c.want)
		}
	}
}

func TestPrecedenceAcrossLayers(t *testing.T) {
	exact := func(a string) api.Policy { return rules(api.Rule{Tool: api.ToolShell, Action: a}) }
	star := func(a string) api.Policy { return rules(api.Rule{Tool: "*", Action: a}) }
	cases := []struct {
		name   string
		layers []api.Policy
		want   string
		layer  int
		preset string
	}{
		{"no layers", nil, allow, -1, ""},
		{"empty layers", []api.Policy{{}, {}, {}}, allow, -1, ""},
		{"the config alone", []api.Policy{exact(deny)}, deny, 0, ""},
		{"the session beats the config", []api.Policy{exact(ask), exact(allow)}, allow, 1, ""},
		{"the run beats the session", []api.Policy{exact(ask), exact(deny), exact(allow)}, allow, 2, ""},
		{"a higher layer's * beats a lower exact name", []api.Policy{exact(ask), star(allow)}, allow, 1, ""},
		{"a lower layer decides what the higher does not match", []api.Policy{exact(deny), rules(api.Rule{Tool: api.ToolReadFile, Action: allow})}, deny, 0, ""},
		{"the config's deny is final", []api.Policy{exact(deny), star(allow), exact(allow)}, deny, 0, ""},
		{"the config's final ask stands", []api.Policy{rules(api.Rule{Tool: api.ToolShell, Action: ask, Final: true}), exact(allow), exact(allow)}, ask, 0, ""},
		{"a client makes a final ask stricter", []api.Policy{rules(api.Rule{Tool: "*", Action: ask, Final: true}), {}, exact(deny)}, deny, 2, ""},
		{"a preset's deny is not final", []api.Policy{{Preset: api.PresetReadOnly}, exact(allow)}, allow, 1, ""},
		{"a layer's rules beat its preset", []api.Policy{{Preset: api.PresetReadOnly, Rules: []api.Rule{{Tool: "*", Action: ask}}}}, ask, 0, ""},
		{"a preset's exact rule loses to the layer's *", []api.Policy{{Preset: api.PresetNeverAsk, Rules: []api.Rule{{Tool: "*", Action: deny}}}}, deny, 0, ""},
		{"a higher preset beats lower rules", []api.Policy{exact(allow), {Preset: api.PresetReadOnly}}, deny, 1, api.PresetReadOnly},
		{"a higher preset beats a lower preset", []api.Policy{{Preset: api.PresetReadOnly}, {}, {Preset: api.PresetAskAll}}, ask, 2, api.PresetAskAll},
		{"the config's rules beat its default preset", []api.Policy{{Preset: api.PresetAskWrites, Rules: []api.Rule{{Tool: api.ToolShell, Match: api.Match{Command: "ls"}, Action: allow}}}}, allow, 0, ""},
	}
	for _, c := range cases {
		s := compile(t, c.layers...)
		d := s.Decide(shell("ls"))
		if d.Action != c.want || d.Layer != c.layer || d.Preset != c.preset {
			t.Errorf("%s: %s layer %d preset %q, want %s layer %d preset %q", c.name, d.Action, d.Layer, d.Preset, c.want, c.layer, c.preset)
		}
	}
}

func TestDecision(t *testing.T) {
	s := compile(t,
		rules(api.Rule{Tool: "mcp__*", Action: deny}),
		rules(
			api.Rule{Tool: api.ToolWriteFile, Action: ask, Reason: "writes", TimeoutMs: 1500, Default: allow},
			api.Rule{Tool: api.ToolEditFile, Action: ask},
			api.Rule{Tool: api.ToolShell, Action: deny, Reason: "no shells here"},
		),
	)
	d := s.Decide(file(api.ToolWriteFile, "a"))
	want := api.Rule{Tool: api.ToolWriteFile, Action: ask, Reason: "writes", TimeoutMs: 1500, Default: allow}
	if d.Action != ask || d.Rule == nil || *d.Rule != want || d.Layer != 1 || d.Index != 0 || d.Reason != "writes" || d.Timeout != 1500*time.Millisecond || d.Default != allow {
		t.Errorf("ask with a deadline: %+v", d)
	}
	d.Rule.Reason = "changed" // a copy: the Set does not change
	if d := s.Decide(file(api.ToolWriteFile, "a")); d.Rule.Reason != "writes" {
		t.Errorf("the decision's rule aliases the set's: %q", d.Rule.Reason)
	}
	if d := s.Decide(file(api.ToolEditFile, "a")); d.Action != ask || d.Timeout != 0 || d.Default != deny || d.Index != 1 {
		t.Errorf("ask without a deadline: %+v", d)
	}
	if d := s.Decide(shell("ls")); d.Action != deny || d.Reason != "no shells here" || d.Default != "" || d.Index != 2 {
		t.Errorf("deny: %+v", d)
	}
	if d := s.Decide(call("mcp__x__y", `{}`)); d.Action != deny || d.Reason == "" || d.Layer != 0 {
		t.Errorf("deny without a reason: %+v", d)
	}
	if d := s.Decide(call(api.ToolReadFile, `{}`)); d.Action != allow || d.Rule != nil || d.Layer != -1 || d.Index != -1 || d.Reason != "" {
		t.Errorf("the default: %+v", d)
	}
	var none *policy.Set
	if d := none.Decide(shell("rm -rf /")); d.Action != allow || d.Rule != nil {
		t.Errorf("a nil set: %+v", d)
	}
	if d := new(policy.Set).Decide(shell("rm -rf /")); d.Action != allow || d.Rule != nil {
		t.Errorf("the zero set: %+v", d)
	}
}

func TestAskUserIsNeverAsked(t *testing.T) {
	q := call(api.ToolAskUser, `{"question":"which one?"}`)
	for _, c := range []struct {
		name   string
		layers []api.Policy
		want   string
	}{
		{"ask-all", []api.Policy{{Preset: api.PresetAskAll}}, allow},
		{"read-only", []api.Policy{{Preset: api.PresetReadOnly}}, allow},
		{"an explicit ask is skipped", []api.Policy{rules(api.Rule{Tool: api.ToolAskUser, Action: ask})}, allow},
		{"the next rule decides", []api.Policy{rules(api.Rule{Tool: "*", Action: deny}, api.Rule{Tool: api.ToolAskUser, Action: ask})}, deny},
		{"a deny is kept", []api.Policy{{Preset: api.PresetNeverAsk}, rules(api.Rule{Tool: api.ToolAskUser, Action: deny})}, deny},
	} {
		if got := compile(t, c.layers...).Decide(q).Action; got != c.want {
			t.Errorf("%s: %s, want %s", c.name, got, c.want)
		}
	}
}

func TestStartTool(t *testing.T) {
	start := func(tool string, args any) policy.Call {
		b, _ := json.Marshal(map[string]any{"tool": tool, "args": args})
		return policy.Call{Tool: api.ToolStartTool, Arguments: b, Mounts: mounts}
	}
	s := compile(t, api.Policy{Preset: api.PresetAskWrites, Rules: []api.Rule{
		{Tool: api.ToolWriteFile, Match: api.Match{Path: "secrets/**"}, Action: deny},
		{Tool: api.ToolShell, Match: api.Match{Command: "make"}, Action: allow},
	}})
	runCases(t, s, []decideCase{
		{"a read", start(api.ToolReadFile, map[string]string{"path": "a"}), allow},
		{"a write", start(api.ToolWriteFile, map[string]string{"path": "a", "content": "x"}), ask},
		{"a denied write", start(api.ToolWriteFile, map[string]string{"path": "secrets/key"}), deny},
		{"an allowed shell", start(api.ToolShell, map[string]string{"command": "make test"}), allow},
		{"a shell", start(api.ToolShell, map[string]string{"command": "rm x"}), ask},
		{"no args", start(api.ToolListDir, nil), allow},
		{"an MCP tool", start("mcp__x__y", map[string]any{}), ask},
		{"bad args are decided by name", call(api.ToolStartTool, `{"tool":5}`), ask},
		{"no tool is decided by name", call(api.ToolStartTool, `{}`), ask},
		{"start_tool in start_tool is decided by name", start(api.ToolStartTool, map[string]any{"tool": "read_file"}), ask},
	})

	// A rule naming start_tool exactly only makes it stricter; * does not
	// apply to start_tool itself.
	strict := compile(t,
		api.Policy{Preset: api.PresetNeverAsk},
		rules(api.Rule{Tool: api.ToolStartTool, Action: allow}, api.Rule{Tool: api.ToolShell, Action: deny}),
		rules(api.Rule{Tool: api.ToolStartTool, Action: ask}, api.Rule{Tool: "*", Action: allow, Match: api.Match{Mount: "docs"}}),
	)
	runCases(t, strict, []decideCase{
		{"start_tool: ask beats the inner allow", start(api.ToolReadFile, map[string]string{"path": "a"}), ask},
		{"the inner deny beats start_tool's ask", start(api.ToolShell, map[string]string{"command": "ls"}), deny},
		{"the run's exact start_tool rule beats the session's", start(api.ToolListDir, map[string]string{"path": "/environment/docs"}), ask},
	})
	glob := compile(t, api.Policy{}, rules(api.Rule{Tool: "start*", Action: deny}, api.Rule{Tool: "*", Action: deny, Match: api.Match{Mount: "docs"}}))
	runCases(t, glob, []decideCase{
		{"a glob does not apply to start_tool itself", start(api.ToolReadFile, map[string]string{"path": "a"}), allow},
		{"but to the call it starts", start(api.ToolReadFile, map[string]string{"path": "/environment/docs/a"}), deny},
	})
	d := compile(t, api.Policy{}, rules(api.Rule{Tool: api.ToolStartTool, Action: deny, Reason: "no background work"})).Decide(start(api.ToolReadFile, map[string]string{"path": "a"}))
	if d.Action != deny || d.Reason != "no background work" {
		t.Errorf("start_tool denied by name: %+v", d)
	}
	d = compile(t, api.Policy{}, rules(api.Rule{Tool: api.ToolStartTool, Action: deny})).Decide(start(api.ToolReadFile, map[string]string{"path": "a"}))
	if d.Action != deny || d.Reason != "the policy does not allow start_tool" {
		t.Errorf("start_tool denied by name without a reason: %+v", d)
	}
}

func TestArgumentsAsTheToolReadsThem(t *testing.T) {
	s := compile(t, api.Policy{}, rules(
		api.Rule{Tool: "*", Action: allow},
		api.Rule{Tool: api.ToolShell, Match: api.Match{Command: "rm"}, Action: deny},
		api.Rule{Tool: api.ToolWriteFile, Match: api.Match{Path: "secrets/**"}, Action: deny},
		api.Rule{Tool: api.ToolShell, Match: api.Match{Command: "ls"}, Action: ask},
	))
	runCases(t, s, []decideCase{
		{"the last duplicate key wins, as in the tool", call(api.ToolShell, `{"command":"ls","command":"rm -rf x"}`), deny},
		{"keys match without case, as in the tool", call(api.ToolWriteFile, `{"PATH":"secrets/k","content":"x"}`), deny},
		{"empty arguments are {}", call(api.ToolShell, ``), allow},
		{"arguments the tool refuses match no condition", call(api.ToolShell, `{"command":5}`), allow},
		{"not an object", call(api.ToolShell, `[]`), allow},
		{"null", call(api.ToolWriteFile, `null`), allow},
		{"invalid JSON", call(api.ToolShell, `{"command":"rm`), allow},
		{"other fields do not matter", call(api.ToolShell, `{"command":"ls","timeout":"soon"}`), ask},
	})
}

func TestConcurrentDecide(t *testing.T) {
	s := compile(t, api.Policy{Preset: api.PresetAskWrites}, rules(api.Rule{Tool: api.ToolShell, Match: api.Match{CommandRegex: `go (test|vet)`}, Action: allow}))
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 200 {
				if d := s.Decide(shell("go test ./...")); d.Action != allow {
					t.Errorf("got %s", d.Action)
					return
				}
				if d := s.Decide(file(api.ToolWriteFile, "a")); d.Action != ask {
					t.Errorf("got %s", d.Action)
					return
				}
			}
		})
	}
	wg.Wait()
}
