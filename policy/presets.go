package policy

import "weft.dev/weft/api"

// Presets returns the names of the presets, in the order of the docs.
func Presets() []string {
	return []string{api.PresetReadOnly, api.PresetAskWrites, api.PresetAskAll, api.PresetNeverAsk}
}

// PresetRules returns the rules a preset expands to, a new slice on each
// call, and false for an unknown name (or ""). Every preset ends with a
// rule for "*", so it decides every call. No preset names start_tool: a
// start_tool call is decided as the call it starts.
func PresetRules(name string) ([]api.Rule, bool) {
	// The tools that only read (and ask_user), which read-only and
	// ask-writes allow.
	readers := []string{
		api.ToolReadFile, api.ToolListDir, api.ToolGlob, api.ToolGrep,
		api.ToolProcessAwait, api.ToolProcessOutput, api.ToolProcessList,
		api.ToolAskUser,
	}
	var rs []api.Rule
	add := func(action, reason string, tools ...string) {
		for _, t := range tools {
			rs = append(rs, api.Rule{Tool: t, Action: action, Reason: reason})
		}
	}
	switch name {
	case api.PresetReadOnly:
		add(api.ActionAllow, "", readers...)
		add(api.ActionDeny, "the policy is read-only: files cannot be written", api.ToolWriteFile, api.ToolEditFile)
		add(api.ActionDeny, "the policy is read-only: shell commands cannot run", api.ToolShell)
		add(api.ActionDeny, "the policy is read-only: only tools that read are allowed", "*")
	case api.PresetAskWrites:
		add(api.ActionAllow, "", readers...)
		add(api.ActionAsk, "changes a file", api.ToolWriteFile, api.ToolEditFile)
		add(api.ActionAsk, "runs a shell command", api.ToolShell)
		add(api.ActionAsk, "signals or stops a running process", api.ToolProcessSignal, api.ToolProcessCancel)
		add(api.ActionAsk, "may change something: not known to only read", "*")
	case api.PresetAskAll:
		add(api.ActionAllow, "", api.ToolAskUser)
		add(api.ActionAsk, "every tool call needs approval", "*")
	case api.PresetNeverAsk:
		add(api.ActionAllow, "", "*")
	default:
		return nil, false
	}
	return rs, true
}
