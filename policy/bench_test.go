package policy_test

import (
	"strings"
	"testing"

	"weft.dev/weft/api"
	"weft.dev/weft/policy"
)

// BenchmarkDecide decides a typical call, and commands at the size
// limit (64 KiB): 8,192 simple commands, one long word, and a long
// regular expression target, under a policy of preset, prefix, regular
// expression and path rules.
func BenchmarkDecide(b *testing.B) {
	s, err := policy.Compile(api.Policy{Preset: api.PresetAskWrites, Rules: []api.Rule{
		{Tool: api.ToolShell, Match: api.Match{Command: "git"}, Action: api.ActionAllow},
		{Tool: api.ToolShell, Match: api.Match{Command: "go test"}, Action: api.ActionAllow},
		{Tool: api.ToolShell, Match: api.Match{CommandRegex: `curl\b.*\|\s*(ba)?sh\b`}, Action: api.ActionDeny},
		{Tool: api.ToolShell, Match: api.Match{CommandRegex: `rm\s+-rf?\s+/`}, Action: api.ActionDeny},
		{Tool: "*", Match: api.Match{Path: "/environment/*/**/.env"}, Action: api.ActionDeny},
	}})
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name string
		call policy.Call
	}{
		{"shell", shell("git status && go test ./...")},
		{"write_file", file(api.ToolWriteFile, "src/pkg/a.go")},
		{"64KiB-cmds", shell(strings.Repeat("curl x;\n", 8<<10))},
		{"64KiB-word", shell("git log " + strings.Repeat("A", 64<<10-8))},
		{"64KiB-pipe", shell("curl http://x/?" + strings.Repeat("A", 64<<10-30) + " | sh")},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if d := s.Decide(c.call); d.Action == "" {
					b.Fatal("no action")
				}
			}
		})
	}
}
