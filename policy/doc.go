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
//	final        the config file's final rules   every other rule
//	layer        the run's                       the session's, then the config file's
//	origin       the layer's own rules           the rules of the layer's preset
//	tool         an exact name (shell)           a glob (mcp__github__*), then "*"
//	conditions   more fields of match set        fewer
//	approval     the layer's own rules           rules a person approved
//	position     the later rule                  the earlier
//
// The config file's own deny rules, and its ask rules marked Final, are
// final: the operator's word, which no client layer lifts. A final rule
// that matches decides, unless the first other rule that matches is
// stricter (a client may turn a final ask into a deny). Only the first
// layer given to [Compile] may mark a rule final; its preset's rules are
// never final.
//
// When no rule matches, the call is allowed. Every preset ends with a
// rule for "*", so a layer that names a preset decides every call that
// the layers above it do not: a higher layer's preset hides the lower
// layers entirely, including their own rules, while a layer's own rules
// always come before its preset. The host's default preset belongs in the
// config layer, below the config file's rules. Rules approved with
// [Set.WithSessionRule] are rules of the session layer: they lose a tie
// with the session's own rules, and beat the session's preset and the
// config file's rules that are not final, not the run's layer.
//
// Two exceptions: an ask rule never applies to ask_user (answering it is
// the approval), so the next matching rule decides; a deny rule does.
// And a call of start_tool is decided as the call it starts, unless a
// rule naming start_tool exactly is stricter (deny before ask before
// allow).
//
// # Commands: deny over-matches, allow under-matches
//
// A rule decides on what the shell will run, never on the command's text.
// The command is parsed as /bin/sh (dash) parses it (mvdan.cc/sh in its
// POSIX mode, with "&>" read as dash reads it: "&" then ">"), and every
// simple command it may run is taken out with its words after quote
// removal: those of lists, pipelines, compound commands, functions and
// substitutions; those that wrappers run (env, command, exec, nohup, nice,
// timeout, time, stdbuf, setsid, sudo, doas, busybox, xargs, find -exec);
// the scripts of sh -c, bash -c and heredocs fed to sh; eval's joined
// words; trap's action; aliases the command defines. A part of a word
// known only when the command runs ($x, $(…), a glob, ~) is unknown; a
// command whose script the policy cannot see (read from a file or a
// pipe, computed, in another shell's language, unparseable, over
// api.MaxShellCommandBytes) is opaque.
//
//   - command: an allow rule needs every simple command to begin with the
//     rule's words exactly, fully known, its program named as the rule
//     names it and no assignment in front; wrappers that only change how
//     a command runs are looked through. An ask or deny rule needs one
//     simple command whose program may have the rule's first word as its
//     name (in any directory, or unknown) and whose arguments may hold
//     the rule's other words in order (short options by their letters).
//     An opaque command matches every ask and deny rule and no allow rule.
//   - commandRegex: over a rendering of the command (words after quote
//     removal, joined by blanks, with the operators between commands).
//     An allow rule's expression must match each simple command from its
//     start, before any unknown part; an ask or deny rule's may match
//     from the start of any simple command to the end of the command, an
//     unknown part standing for any text without operators. Matching is
//     one pass of a Pike VM over the text: linear in its length.
//   - commandExact: the command parses to the same thing (blanks and
//     comments aside). [SessionRuleFor] approves shell commands this way.
//   - path: the file tool's path, cleaned as the resolver cleans it,
//     matches the glob (* ? [classes] within a component, ** across
//     components); a relative glob is relative to the default mount, an
//     absolute one (/environment/<mount>/…) names the mount, whichever
//     form the model wrote.
//   - mount: the file tool's path lies in the mount. For the shell, an
//     allow rule's holds when its working directory (the shell mount's
//     root when cwd is empty) lies in the mount, and the [Decision] says
//     the call must run with only that mount writable (OnlyWritable),
//     which the host enforces through the binding and the sandbox; an ask
//     or deny rule's holds while the mount is attached, since a shell
//     command reaches every mount.
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
// What command rules cannot see: what a program does from its own
// language or configuration (python -c, make, npm scripts, git aliases,
// find -delete) and a program copied under another name. They guard what
// the model writes; the shell sandbox confines what commands can touch.
//
// # Concurrency
//
// A [Set] is immutable once compiled and safe for concurrent use; its
// regular expressions are compiled once. [Set.WithSessionRule] returns a
// new Set.
package policy
