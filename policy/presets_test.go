package policy_test

import (
	"testing"

	"weft.dev/weft/api"
	"weft.dev/weft/policy"
)

func TestPresets(t *testing.T) {
	calls := []struct {
		name string
		call policy.Call
		// want: read-only, ask-writes, ask-all, never-ask
		want [4]string
	}{
		{"read_file", file(api.ToolReadFile, "a.go"), [4]string{allow, allow, ask, allow}},
		{"list_dir", call(api.ToolListDir, `{}`), [4]string{allow, allow, ask, allow}},
		{"glob", call(api.ToolGlob, `{"pattern":"**/*.go"}`), [4]string{allow, allow, ask, allow}},
		{"grep", call(api.ToolGrep, `{"pattern":"TODO","path":"/environment/docs"}`), [4]string{allow, allow, ask, allow}},
		{"write_file", file(api.ToolWriteFile, "a.go"), [4]string{deny, ask, ask, allow}},
		{"edit_file", file(api.ToolEditFile, "a.go"), [4]string{deny, ask, ask, allow}},
		{"shell", shell("ls -l"), [4]string{deny, ask, ask, allow}},
		{"background shell", call(api.ToolShell, `{"command":"make","background":true}`), [4]string{deny, ask, ask, allow}},
		{"process_await", call(api.ToolProcessAwait, `{"handle":{"__handle__":"process","id":"proc_1"}}`), [4]string{allow, allow, ask, allow}},
		{"process_output", call(api.ToolProcessOutput, `{"handle":{"__handle__":"process","id":"proc_1"}}`), [4]string{allow, allow, ask, allow}},
		{"process_list", call(api.ToolProcessList, `{}`), [4]string{allow, allow, ask, allow}},
		{"process_signal", call(api.ToolProcessSignal, `{"name":"interrupt"}`), [4]string{deny, ask, ask, allow}},
		{"process_cancel", call(api.ToolProcessCancel, `{}`), [4]string{deny, ask, ask, allow}},
		{"start_tool of a read", call(api.ToolStartTool, `{"tool":"grep","args":{"pattern":"x"}}`), [4]string{allow, allow, ask, allow}},
		{"start_tool of a shell", call(api.ToolStartTool, `{"tool":"shell","args":{"command":"make"}}`), [4]string{deny, ask, ask, allow}},
		{"ask_user", call(api.ToolAskUser, `{"question":"?"}`), [4]string{allow, allow, allow, allow}},
		{"an MCP tool", call("mcp__github__create_issue", `{"title":"x"}`), [4]string{deny, ask, ask, allow}},
		{"an unknown tool", call("frobnicate", `{}`), [4]string{deny, ask, ask, allow}},
	}
	for i, name := range policy.Presets() {
		s := compile(t, api.Policy{Preset: name})
		for _, c := range calls {
			d := s.Decide(c.call)
			if d.Action != c.want[i] {
				t.Errorf("%s: %s: %s, want %s", name, c.name, d.Action, c.want[i])
			}
			if d.Rule == nil || d.Preset != name {
				t.Errorf("%s: %s: decided by %+v (preset %q), not by the preset", name, c.name, d.Rule, d.Preset)
			}
			if d.Action == deny && d.Reason == "" {
				t.Errorf("%s: %s: a deny without a reason", name, c.name)
			}
		}
	}
}

func TestPresetsAreTotal(t *testing.T) {
	for _, name := range policy.Presets() {
		rs, ok := policy.PresetRules(name)
		if !ok || len(rs) == 0 || rs[len(rs)-1].Tool != "*" || rs[len(rs)-1].Match != (api.Match{}) {
			t.Errorf("%s does not end with a rule for *: %+v", name, rs)
		}
		if _, err := policy.Compile(api.Policy{Rules: rs}); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		// A fresh slice each time.
		rs[0].Action = "changed"
		if again, _ := policy.PresetRules(name); again[0].Action == "changed" {
			t.Errorf("%s: PresetRules shares its slice", name)
		}
	}
	if _, ok := policy.PresetRules(""); ok {
		t.Error(`PresetRules("") is a preset`)
	}
}
