package api

// Policy says which tool calls run at once, which wait for a person's
// approval and which are refused. It is data: a preset, rules, or both,
// given in the params of session/create and run/start (and in the config
// file). Package policy compiles and evaluates it; docs/policy.md is the
// reference, with the precedence of rules and the presets spelled out.
//
// A layer's Rules come before its Preset: the preset decides only what
// none of the layer's own rules match. The zero Policy has no rules and
// no preset; it leaves every decision to the other layers.
type Policy struct {
	// Preset is one of PresetReadOnly, PresetAskWrites, PresetAskAll,
	// PresetNeverAsk, or empty for none.
	Preset string `json:"preset,omitempty"`
	// Rules are at most MaxPolicyRules. On a tie in specificity the later
	// rule wins.
	Rules []Rule `json:"rules,omitempty"`
}

// Rule is one entry of a [Policy]: the calls it matches (a tool name, and
// conditions on the arguments) and what happens to them.
type Rule struct {
	// Tool is an exact tool name ("shell", "mcp__github__create_issue"),
	// a glob over names with * ? and [classes] ("mcp__github__*"), or "*"
	// for every tool. Required.
	Tool string `json:"tool"`
	// Match holds conditions on the call's arguments; all the set ones
	// must hold. The zero Match matches every call of Tool.
	Match Match `json:"match,omitzero"`
	// Action is ActionAllow, ActionAsk or ActionDeny. Required.
	Action string `json:"action"`
	// Reason is shown to the model when the rule denies a call and to the
	// person when it asks; at most MaxReasonBytes.
	Reason string `json:"reason,omitempty"`
	// TimeoutMs is the deadline of an ask, in milliseconds (at most
	// MaxPolicyTimeoutMs); zero means no deadline of the rule's own. Only
	// for ask rules.
	TimeoutMs int64 `json:"timeoutMs,omitempty"`
	// Default is the decision taken when an ask expires: ActionAllow or
	// ActionDeny (the default). Only for ask rules.
	Default string `json:"default,omitempty"`
}

// Match holds the conditions a [Rule] puts on a call's arguments. Each
// set field is one condition; all must hold. A condition on an argument
// the tool does not have never holds.
type Match struct {
	// Command is a prefix of the shell tool's command, in whole words:
	// "git" matches "git status" but not "gitk", "git push" matches
	// "git push -f". A command is split at ; & | newlines, parentheses
	// and backquotes into simple commands: an allow rule matches only if
	// every one of them starts with the prefix, an ask or deny rule if
	// any does.
	Command string `json:"command,omitempty"`
	// CommandRegex is an RE2 regular expression matched from the start of
	// the shell tool's command (as if it began with ^; end it with $ to
	// match the whole), with the same treatment of compound commands as
	// Command; an ask or deny rule also tries it on the rest of the
	// command from each simple command on ("curl.*\|\s*sh").
	CommandRegex string `json:"commandRegex,omitempty"`
	// Path is a glob over the path argument of the file tools: * ? and
	// [classes] within one component, ** for any number of components. A
	// relative glob ("src/**/*.go") is relative to the default mount; an
	// absolute one names the mount ("/environment/docs/**"). The path is
	// cleaned first and tried in both forms, however the model wrote it.
	Path string `json:"path,omitempty"`
	// Mount is the ID of the mount the file tool's path, or the shell's
	// working directory, lies in.
	Mount string `json:"mount,omitempty"`
}

// Rule actions.
const (
	// ActionAllow runs the call.
	ActionAllow = "allow"
	// ActionAsk holds the call until a person decides.
	ActionAsk = "ask"
	// ActionDeny refuses the call: the model gets the rule's reason as
	// the call's result, and the refusal is recorded.
	ActionDeny = "deny"
)

// Presets: named policies, each a list of rules ending with a rule for
// "*", so a preset decides every call. docs/policy.md lists their rules.
const (
	// PresetReadOnly allows the tools that only read, and denies the rest.
	PresetReadOnly = "read-only"
	// PresetAskWrites allows the tools that only read and asks for
	// everything else (the default of weft run on a terminal).
	PresetAskWrites = "ask-writes"
	// PresetAskAll asks for every call but ask_user.
	PresetAskAll = "ask-all"
	// PresetNeverAsk allows every call (the default for scripts and
	// --json).
	PresetNeverAsk = "never-ask"
)

// The tools whose arguments a policy understands.
//
// The shell tool's arguments are {"command": "…", "cwd": "…",
// "background": bool}; cwd is relative to the default mount, or
// /environment/<mount>/…, and when empty the shell mount's root.
//
// The file tools' path is relative to the default mount or
// /environment/<mount>/…: read_file, write_file and edit_file {"path"},
// list_dir {"path"}, glob {"pattern", "path"}, grep {"pattern", "path",
// "glob"}; an empty path of list_dir, glob and grep is the default
// mount's root.
//
// The process tools address a process by its handle. start_tool
// {"tool", "args"} runs another tool's call in the background and is
// decided as that call. ask_user asks the user a question: answering it
// is the approval, so an ask rule never applies to it.
const (
	ToolShell     = "shell"
	ToolReadFile  = "read_file"
	ToolWriteFile = "write_file"
	ToolEditFile  = "edit_file"
	ToolListDir   = "list_dir"
	ToolGlob      = "glob"
	ToolGrep      = "grep"

	ToolProcessAwait  = "process_await"
	ToolProcessOutput = "process_output"
	ToolProcessList   = "process_list"
	ToolProcessSignal = "process_signal"
	ToolProcessCancel = "process_cancel"
	ToolStartTool     = "start_tool"

	ToolAskUser = "ask_user"
)

// Limits of one policy layer. A policy beyond one is refused with
// [ErrInvalidParams] naming the field and the limit; a rule's reason is
// at most MaxReasonBytes.
const (
	// MaxPolicyRules caps the rules of one layer.
	MaxPolicyRules = 256
	// MaxPolicyPatternBytes caps a rule's tool, command, commandRegex,
	// path and mount.
	MaxPolicyPatternBytes = 1 << 10
	// MaxPolicyTimeoutMs caps an ask's deadline: 30 days.
	MaxPolicyTimeoutMs = 30 * 24 * 3600 * 1000
)
