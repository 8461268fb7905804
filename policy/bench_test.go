package policy_test

import (
	"strings"
	"testing"

	"weft.dev/weft/api"
	"weft.dev/weft/policy"
)

// BenchmarkDecide decides a typical call, and a command of 1 MiB made of
// 100,000 simple commands, under a policy of preset, prefix, regular
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
		{"huge", shell(strings.Repeat("curl x;\n", 128<<10))},
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
