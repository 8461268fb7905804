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
	// Final makes an ask rule of the host's config file final, as its
	// deny rules always are: no rule of a session or a run, and no
	// "always for this session", can lift it; a client layer can only
	// make the call's decision stricter (an ask into a deny). Only the
	// config file may set it, and only on ask and deny rules.
	Final bool `json:"final,omitempty"`
}

// Match holds the conditions a [Rule] puts on a call's arguments. Each
// set field is one condition; all must hold. A condition on an argument
// the tool does not have never holds.
//
// The command conditions look at what the shell will run, not at the
// command's text: the command is parsed as /bin/sh (dash) parses it, and
// every simple command it may run is taken out, with its words after
// quote removal — including the commands of substitutions, of wrappers
// (env, nice, timeout, xargs, find -exec, sudo …), of sh -c strings and
// heredocs fed to sh, of eval, trap and aliases. An ask or deny rule
// over-matches: it matches when it may match one of them, a part known
// only when the command runs ($x, $(…), a glob) standing for whatever
// would match, and a command the policy cannot see into (a script read
// from a file or a pipe, eval of a computed string, a parse error)
// matches every one. An allow rule under-matches: every one of them must
// match it, fully known. docs/policy.md has the details.
type Match struct {
	// Command is a command's first words. An allow rule matches a simple
	// command that begins with them exactly, its program named as the
	// rule names it: "git" matches "git status", not "gitk",
	// "/usr/bin/git status" or "GIT_DIR=x git status". An ask or deny
	// rule matches a simple command whose program has the rule's first
	// word as its name, in any directory ("rm" matches /bin/rm), and
	// whose arguments hold the rule's other words in order, other words
	// between them ("git push" matches "git -C . push"); a short option
	// of the rule (-rf) matches when its letters are among the command's
	// short options (-r -f, -fr).
	Command string `json:"command,omitempty"`
	// CommandRegex is an RE2 regular expression over a rendering of the
	// command: each simple command's words after quote removal joined by
	// single blanks, with the operators between commands (" | ", " && ",
	// "; "). It is matched from the start of a simple command (as if it
	// began with ^; end it with $ to match up to the end of one). An
	// allow rule must match every simple command, from its start and
	// before any part known only when it runs; an ask or deny rule may
	// match from the start of any simple command to the end of the
	// command ("curl.*\|\s*sh"), an unknown part of a word standing for
	// any text without operators.
	CommandRegex string `json:"commandRegex,omitempty"`
	// CommandExact is a whole command: the rule matches a command that
	// parses to the same thing (blanks between words and comments aside)
	// and nothing else. "Always for this session" approves a shell
	// command this way. At most MaxShellCommandBytes.
	CommandExact string `json:"commandExact,omitempty"`
	// Path is a glob over the path argument of the file tools: * ? and
	// [classes] within one component, ** for any number of components. A
	// relative glob ("src/**/*.go") is relative to the default mount; an
	// absolute one names the mount ("/environment/docs/**"). The path is
	// cleaned first and tried in both forms, however the model wrote it.
	Path string `json:"path,omitempty"`
	// Mount is the ID of a mount. A file tool's call lies in the mount
	// its path lies in. A shell command can read every mount and write
	// every read-write one whatever its working directory, so an ask or
	// deny rule with Mount matches every shell call while the mount is
	// attached; an allow rule matches a shell call whose working
	// directory lies in the mount and runs it with that mount the only
	// writable one (the others read-only), which the shell sandbox
	// enforces.
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
// is the approval, so an ask rule never applies to it; a deny rule does.
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

// MaxShellCommandBytes caps the command of the shell tool (and of a
// shell process): a longer one is refused with [ErrInvalidParams]
// (data: "field": "command", "limit"), and the policy, which reads a
// command whole, counts it as a command it cannot see. It also caps a
// rule's Match.CommandExact.
const MaxShellCommandBytes = 64 << 10
