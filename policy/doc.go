// Package policy decides whether a tool call runs, waits for a person's
// approval, or is refused. Policies are data ([api.Policy], [api.Rule]);
// this package compiles and evaluates them. It does no I/O, starts no
// goroutine and knows nothing of sessions or runs: the host asks, then
// records and enforces the answer (where a path leads comes from the
// caller, see [Call]). docs/policy.md is the reference for
// users, with examples.
//
// [Compile] validates the layers of a policy (the config file, the
// session, the run) and compiles them into a [Set]; [Set.Decide] returns
// the [Decision] for one call: allow, ask (with a deadline and the
// decision taken when it passes) or deny (with the reason the model is
// told). [SessionRuleFor] and [Set.WithSessionRule] remember a person's
// "always for this session".
//
// # Precedence
//
// Of the rules that match a call, the most specific decides. Rules are
// ordered by these keys, each deciding only between rules equal in the
// ones above it:
//
//	key          first                           then
//	layer        the run's                       the session's, then the config file's
//	origin       the layer's own rules           the rules of the layer's preset
//	tool         an exact name (shell)           a glob (mcp__github__*), then "*"
//	conditions   more fields of match set        fewer
//	approval     the layer's own rules           rules a person approved
//	position     the later rule                  the earlier
//
// When no rule matches, the call is allowed. Every preset ends with a
// rule for "*", so a layer that names a preset decides every call that
// the layers above it do not: a higher layer's preset hides the lower
// layers entirely, including their own rules, while a layer's own rules
// always come before its preset. The host's default preset belongs in the
// config layer, below the config file's rules. Rules approved with
// [Set.WithSessionRule] are rules of the session layer: they lose a tie
// with the session's own rules, and beat the session's preset and the
// config file, not the run's layer.
//
// Two exceptions: an ask rule never applies to ask_user (answering it is
// the approval), so the next matching rule decides; and a call of
// start_tool is decided as the call it starts, unless a rule naming
// start_tool exactly is stricter (deny before ask before allow).
//
// # Conditions
//
// A rule's match holds when every set field holds:
//
//   - command: the shell command, split into simple commands at ; & | ( )
//     backquotes and newlines, begins with the prefix in whole words
//     ("git" matches "git status", not "gitk"). An allow rule needs every
//     simple command to match, an ask or deny rule one (also past leading
//     reserved words and NAME=value assignments), so that
//     "git log; rm -rf x" is not allowed by "git" and is denied by "rm".
//   - commandRegex: the same, with an RE2 expression anchored at the
//     start of each simple command; ask and deny rules also try it on the
//     whole command.
//   - path: the file tool's path, cleaned as the resolver cleans it,
//     matches the glob (* ? [classes] within a component, ** across
//     components); a relative glob is relative to the default mount, an
//     absolute one (/environment/<mount>/…) names the mount, whichever
//     form the model wrote.
//   - mount: the file tool's path, or the shell's working directory (the
//     shell mount's root when cwd is empty), lies in the mount.
//
// A file tool's path has several locations: as written, where it leads
// once symbolic links are followed ([Call.Resolve]), and, for a call that
// runs, what it opened ([Call.Opened]). The path and mount conditions of
// an ask or deny rule hold when one location matches, those of an allow
// rule only when all do: a deny on **/.env holds for a link to .env, and
// an allow on docs/** does not allow a link in docs to .env.
//
// A condition on an argument the tool does not have never holds; the
// arguments are decoded as the tool decodes them, and arguments the tool
// would refuse satisfy no condition.
//
// The command conditions are a guard against mistakes, not a sandbox: a
// deny rule for rm does not see rm run by a script, by find -exec or
// through an alias. The shell sandbox confines what commands can touch.
//
// # Concurrency
//
// A [Set] is immutable once compiled and safe for concurrent use; its
// regular expressions are compiled once. [Set.WithSessionRule] returns a
// new Set.
package policy
