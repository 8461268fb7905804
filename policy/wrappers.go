package policy

import (
	"slices"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// base returns the last element of a program's name: "rm" for /bin/rm.
func base(name string) string { return name[strings.LastIndexByte(name, '/')+1:] }

// options describes how a wrapper's options are spelled, so that the
// command it runs can be found after them.
type options struct {
	// arg holds the short options that take an argument ("u" for -u
	// USER, given as -u USER or -uUSER); optional holds those whose
	// argument is optional and attached only (xargs -i[R]).
	arg, optional string
	// long holds the long options that take an argument (without --),
	// given as --user=U or --user U.
	long []string
	// numeric: -N is an option (nice -10).
	numeric bool
	// assigns: NAME=value words before the command are assignments
	// (env, sudo).
	assigns bool
}

// skip returns the index of the first word at or after i that is not
// an option (or assignment), whether an assignment was seen, the
// options seen (their letters, and the long ones as "--name"), and
// whether all of it was known: an unknown word where an option may be
// leaves the command unknown.
func (o options) skip(ws []word, i int) (next int, assigns bool, seen []string, ok bool) {
	for ; i < len(ws); i++ {
		s, known := ws[i].lit()
		if !known {
			return i, assigns, seen, false
		}
		switch {
		case s == "--":
			return i + 1, assigns, seen, true
		case strings.HasPrefix(s, "--") && len(s) > 2:
			name, _, hasValue := strings.Cut(s[2:], "=")
			seen = append(seen, "--"+name)
			for _, l := range o.long {
				if l == name && !hasValue {
					i++ // the argument is the next word
				}
			}
		case strings.HasPrefix(s, "-") && len(s) > 1:
			if o.numeric && strings.Trim(s[1:], "0123456789") == "" {
				continue
			}
			for j := 1; j < len(s); j++ {
				seen = append(seen, s[j:j+1])
				if strings.IndexByte(o.optional, s[j]) >= 0 {
					break // the rest is its argument
				}
				if strings.IndexByte(o.arg, s[j]) >= 0 {
					if j == len(s)-1 {
						i++ // the argument is the next word
					}
					break
				}
			}
		case o.assigns && isAssignment(s):
			assigns = true
		default:
			return i, assigns, seen, true
		}
	}
	return i, assigns, seen, true
}

// isAssignment reports whether w is NAME=value.
func isAssignment(w string) bool {
	name, _, ok := strings.Cut(w, "=")
	if !ok || name == "" {
		return false
	}
	for i, c := range name {
		letter := c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
		if !letter && (i == 0 || c < '0' || c > '9') {
			return false
		}
	}
	return true
}

// Wrappers whose syntax the policy knows: the command they run is found
// after their options.
var wrapperOptions = map[string]options{
	"env":     {arg: "uCS", long: []string{"unset", "chdir", "split-string"}, assigns: true},
	"nice":    {arg: "n", long: []string{"adjustment"}, numeric: true},
	"nohup":   {},
	"timeout": {arg: "ks", long: []string{"kill-after", "signal"}},
	"time":    {arg: "fo", long: []string{"format", "output"}},
	"stdbuf":  {arg: "ioe", long: []string{"input", "output", "error"}},
	"setsid":  {},
	"command": {},
	"builtin": {},
	"exec":    {arg: "a"},
	"busybox": {},
	"xargs": {arg: "adEILnPs", optional: "eil",
		long: []string{"arg-file", "delimiter", "max-args", "max-procs", "max-chars", "process-slot-var"}},
	"sudo": {arg: "ugCDprtTUR", assigns: true,
		long: []string{"user", "group", "close-from", "chdir", "prompt", "role", "type", "command-timeout", "other-user", "chroot", "host"}},
	"doas": {arg: "uC"},
}

// Wrappers whose syntax the policy does not know: any of their words may
// start the command they run, and any of their arguments may be a
// script. Ask and deny rules look at every such guess.
var guessWrappers = map[string]bool{
	"chroot": true, "flock": true, "ionice": true, "taskset": true, "chrt": true, "unshare": true,
	"nsenter": true, "strace": true, "ltrace": true, "valgrind": true, "fakeroot": true, "fakechroot": true,
	"firejail": true, "bwrap": true, "proot": true, "runuser": true, "su": true, "watch": true,
	"script": true, "systemd-run": true, "parallel": true, "sem": true, "sg": true, "numactl": true,
	"cgexec": true, "prlimit": true, "torsocks": true, "proxychains": true, "proxychains4": true,
	"catchsegv": true, "daemonize": true, "start-stop-daemon": true, "dbus-run-session": true,
	"dbus-launch": true, "xvfb-run": true, "nocache": true, "eatmydata": true, "unbuffer": true,
	"chpst": true, "pkexec": true, "run-one": true, "perf": true, "gdb": true, "ssh": true,
	"setpriv": true, "capsh": true, "ip": true, "systemd-nspawn": true, "schroot": true,
	"firejail-ui": true, "with-lock-ex": true, "lckdo": true, "retry": true, "unbuffered": true,
}

// Shells whose scripts the policy reads, and the language of each.
var shellLangs = map[string]syntax.LangVariant{
	"sh": syntax.LangPOSIX, "dash": syntax.LangPOSIX, "ash": syntax.LangPOSIX, "bash": syntax.LangBash,
}

// Shells and interpreters of shell-like languages whose scripts the
// policy does not read: any call of one is opaque.
var otherShells = map[string]bool{
	"zsh": true, "ksh": true, "mksh": true, "pdksh": true, "ksh93": true, "yash": true, "posh": true,
	"fish": true, "csh": true, "tcsh": true, "rc": true, "es": true, "elvish": true, "nu": true,
	"xonsh": true, "oksh": true, "loksh": true, "rbash": true, "hush": true, "msh": true,
}

// expand takes out what inv runs besides its program: the command of a
// wrapper, a shell's script, eval's and trap's strings, an alias's
// definition.
func (w *walker) expand(inv *invocation, in stdin) {
	p := inv.program()
	if p == nil || w.a.words < 0 {
		return
	}
	name, ok := p.lit()
	if !ok {
		return // an unknown program matches rules as a wildcard
	}
	if inv.depth > maxWrapping {
		w.a.opaque("the command nests more than 16 wrappers deep")
		return
	}
	prog := base(name)
	args := inv.words[1:]
	if lang, ok := shellLangs[prog]; ok {
		w.shell(inv, lang, in)
		return
	}
	if otherShells[prog] {
		w.a.opaque(prog + " runs a script the policy does not read")
		return
	}
	switch prog {
	case ".", "source":
		if len(args) > 0 {
			w.a.opaque(prog + " reads a script from a file, which the policy cannot see")
		}
		return
	case "eval":
		src, ok := joined(args)
		if !ok {
			w.a.opaque("eval runs a string computed when the command runs")
			return
		}
		inv.wrapper = true
		w.a.nested(src, w.lang, w.depth+1, nil, "eval's string")
		return
	case "trap":
		w.trap(args)
		return
	case "alias":
		w.alias(args)
		return
	case "find":
		w.find(inv)
		return
	}
	if guessWrappers[prog] {
		w.guess(inv, 1)
		return
	}
	o, ok := wrapperOptions[prog]
	if !ok {
		return
	}
	i, assigns, seen, known := o.skip(inv.words, 1)
	has := func(opt string) bool {
		for _, s := range seen {
			if s == opt {
				return true
			}
		}
		return false
	}
	if !known {
		w.guess(inv, i)
		return
	}
	transparent := true
	var appended []word
	switch prog {
	case "env":
		if has("S") || has("--split-string") {
			// env -S splits a string into the command: read each of
			// its arguments as a script (past -S or --split-string=),
			// and take env as a wrapper of unknown syntax.
			for k, x := range inv.words[1:] {
				s, ok := x.lit()
				rest := inv.words[k+2:] // the words env appends
				switch {
				case !ok:
				case strings.HasPrefix(s, "--split-string="):
					w.guessScript(s[len("--split-string="):], rest)
				case strings.HasPrefix(s, "-") && !strings.HasPrefix(s, "--"):
					if _, arg, ok := strings.Cut(s, "S"); ok && arg != "" {
						w.guessScript(arg, rest)
					}
				default:
					w.guessScript(s, rest)
				}
			}
			w.guess(inv, 1)
			return
		}
	case "timeout":
		i++ // the duration
	case "command":
		if has("v") || has("V") {
			return // prints how a name resolves; runs nothing
		}
	case "xargs":
		// xargs runs echo when given no command, and appends words it
		// reads.
		appended = []word{{segs: []seg{{kind: segSplit}}, multi: true}}
		if i >= len(inv.words) {
			inner := &invocation{words: append([]word{{segs: []seg{{s: "echo"}}}}, appended...),
				assigns: inv.assigns, start: inv.start, depth: inv.depth + 1}
			inv.wrapper = true
			w.add(inner)
			return
		}
		if repl, ok := xargsReplace(inv.words[1:i]); ok {
			w.inner(inv, i, assigns, transparent, replaced(repl), appended, in)
			return
		}
	case "sudo":
		transparent = false
		if has("e") || has("--edit") {
			return // sudoedit: edits files, runs no command
		}
		if has("s") || has("i") || has("--shell") || has("--login") {
			// The command runs through a shell, as one string.
			if i >= len(inv.words) {
				w.a.opaque("sudo -s runs a shell that reads its script from stdin, which the policy cannot see")
				return
			}
			src, ok := joined(inv.words[i:])
			if !ok {
				w.a.opaque("sudo -s runs a string computed when the command runs")
				return
			}
			w.a.nested(src, syntax.LangPOSIX, w.depth+1, nil, "sudo's command")
			return
		}
	case "doas":
		transparent = false
		if has("s") && i >= len(inv.words) {
			w.a.opaque("doas -s runs a shell that reads its script from stdin, which the policy cannot see")
			return
		}
	}
	if i >= len(inv.words) {
		return // no command: env alone prints, exec alone redirects
	}
	w.inner(inv, i, assigns, transparent, nil, appended, in)
}

// inner adds the command inv runs from its word i on, with extra
// words appended; it counts for allow rules instead of inv when
// transparent. replace, if set, rewrites words that the wrapper fills in.
func (w *walker) inner(inv *invocation, i int, assigns, transparent bool, replace func(word) word, appended []word, in stdin) {
	words := make([]word, 0, len(inv.words)-i+len(appended))
	for _, x := range inv.words[i:] {
		if replace != nil {
			x = replace(x)
		}
		words = append(words, x)
	}
	words = append(words, appended...)
	inner := &invocation{words: words, assigns: inv.assigns || assigns,
		start: inv.words[i].off, depth: inv.depth + 1, guess: inv.guess}
	inv.wrapper = transparent
	w.add(inner)
	w.expand(inner, in)
}

// xargsReplace returns the replacement string of xargs -I R, -i[R] or
// --replace[=R].
func xargsReplace(opts []word) (string, bool) {
	for j, x := range opts {
		s, _ := x.lit()
		switch {
		case s == "-I" && j+1 < len(opts):
			r, _ := opts[j+1].lit()
			return r, true
		case strings.HasPrefix(s, "-I") && len(s) > 2:
			return s[2:], true
		case s == "-i" || s == "--replace":
			return "{}", true
		case strings.HasPrefix(s, "-i"):
			return s[2:], true
		case strings.HasPrefix(s, "--replace="):
			return s[len("--replace="):], true
		}
	}
	return "", false
}

// replaced returns a function that makes every word containing r unknown
// (xargs -I, find -exec's {}).
func replaced(r string) func(word) word {
	return func(x word) word {
		for _, s := range x.segs {
			if s.kind == segLit && r != "" && strings.Contains(s.s, r) {
				return word{segs: []seg{{kind: segWild}}, off: x.off}
			}
		}
		return x
	}
}

// guess adds, as guesses, the commands a wrapper of unknown syntax may
// run from its word i on: each suffix that starts with a word that is
// not an option, and each argument that looks like a script.
func (w *walker) guess(inv *invocation, i int) {
	w.a.guessing++
	defer func() { w.a.guessing-- }()
	for j := i; j < len(inv.words) && w.a.words >= 0; j++ {
		x := &inv.words[j]
		if s, ok := x.lit(); ok {
			if strings.HasPrefix(s, "-") {
				continue
			}
			if strings.ContainsAny(s, " \t\n;&|") {
				w.guessScript(s, nil)
			}
		}
		inner := &invocation{words: inv.words[j:], assigns: inv.assigns, start: x.off, depth: inv.depth + 1}
		w.add(inner)
		if inv.depth < maxWrapping {
			w.expand(inner, stdin{kind: stdinPipe})
		}
	}
}

// guessScript takes apart s as a script a wrapper may run, with the
// words extra appended to its last command; it is a guess, so a failure
// to parse does not count.
func (w *walker) guessScript(s string, extra []word) {
	if w.depth >= maxNesting || w.a.budget < len(s) {
		return
	}
	w.a.guessing++
	defer func() { w.a.guessing-- }()
	w.a.nested(s, syntax.LangPOSIX, w.depth+1, slices.Clone(extra), "a wrapper's argument")
}

// find adds the commands of find's -exec, -execdir, -ok and -okdir: the
// words up to ";" or "+", with {} (the file found) unknown.
func (w *walker) find(inv *invocation) {
	for j := 1; j < len(inv.words); j++ {
		s, ok := inv.words[j].lit()
		if !ok {
			// $x may be -exec: every word may start a command.
			w.guess(inv, j)
			return
		}
		switch s {
		case "-exec", "-execdir", "-ok", "-okdir":
		default:
			continue
		}
		k := j + 1
		for k < len(inv.words) {
			if t, ok := inv.words[k].lit(); ok && (t == ";" || t == "+") {
				break
			}
			k++
		}
		if k > j+1 {
			// With "+", {} stands for as many files as fit.
			plus := false
			if k < len(inv.words) {
				t, _ := inv.words[k].lit()
				plus = t == "+"
			}
			words := make([]word, 0, k-j-1)
			for _, x := range inv.words[j+1 : k] {
				x = replaced("{}")(x)
				if plus && !x.known() {
					x = word{segs: []seg{{kind: segSplit}}, multi: true, off: x.off}
				}
				words = append(words, x)
			}
			inner := &invocation{words: words, start: inv.words[j+1].off, depth: inv.depth + 1, guess: inv.guess}
			w.add(inner)
			w.expand(inner, stdin{kind: stdinPipe})
		}
		j = k
	}
}

// shell takes out what a shell runs: the string of -c, or the script it
// reads from stdin when that is a heredoc with known text. A script from
// a file or a pipe, or a shell reading startup files, is opaque.
func (w *walker) shell(inv *invocation, lang syntax.LangVariant, in stdin) {
	name, _ := inv.words[0].lit()
	prog := base(name)
	cmdMode, stdinMode := false, false
	i := 1
	for ; i < len(inv.words); i++ {
		s, ok := inv.words[i].lit()
		if !ok {
			w.a.opaque(prog + " is given an argument computed when the command runs, which may be its script")
			return
		}
		if s == "--" || s == "-" {
			i++
			break
		}
		if !strings.HasPrefix(s, "-") && !strings.HasPrefix(s, "+") || len(s) < 2 {
			break
		}
		if strings.HasPrefix(s, "--") {
			switch s {
			case "--login", "--rcfile", "--init-file", "--debugger":
				w.a.opaque(prog + " " + s + " reads startup files, which the policy cannot see")
				return
			}
			continue
		}
		for _, c := range s[1:] {
			switch c {
			case 'c':
				cmdMode = true
			case 's':
				stdinMode = true
			case 'i', 'l':
				w.a.opaque(prog + " -" + string(c) + " reads startup files, which the policy cannot see")
				return
			case 'o', 'O':
				i++ // its argument is the next word
			}
		}
	}
	if lang == syntax.LangBash && w.a.envTainted() {
		w.a.opaque("bash reads the file named by BASH_ENV, which the command may set")
		return
	}
	switch {
	case cmdMode:
		if i >= len(inv.words) {
			return // sh -c without a string fails
		}
		src, ok := inv.words[i].lit()
		if !ok {
			w.a.opaque(prog + " -c runs a string computed when the command runs")
			return
		}
		inv.wrapper = lang == syntax.LangPOSIX
		w.a.nested(src, lang, w.depth+1, nil, prog+" -c's string")
	case i < len(inv.words) && !stdinMode:
		w.a.opaque(prog + " reads a script from a file, which the policy cannot see")
	case in.kind == stdinHeredoc:
		inv.wrapper = lang == syntax.LangPOSIX
		w.a.nested(in.body, lang, w.depth+1, nil, prog+"'s heredoc")
	default:
		w.a.opaque(prog + " reads its script from stdin, which the policy cannot see")
	}
}

// envTainted reports whether the command may set BASH_ENV (which bash
// sources before a script): it names it, or exports a computed name.
func (a *analysis) envTainted() bool {
	return strings.Contains(a.raw, "BASH_ENV")
}

// trap takes apart the action of trap ACTION SIGNAL…, which runs as a
// script.
func (w *walker) trap(args []word) {
	i := 0
	for i < len(args) {
		s, ok := args[i].lit()
		if !ok || !strings.HasPrefix(s, "-") || s == "-" {
			break
		}
		i++
		if s == "--" {
			break
		}
	}
	if i >= len(args) || i == len(args)-1 && len(args) == 1 {
		return // trap, trap -p: lists
	}
	action, ok := args[i].lit()
	if !ok {
		w.a.opaque("trap runs a string computed when the command runs")
		return
	}
	if action == "" || action == "-" || strings.Trim(action, "0123456789") == "" {
		return // ignore, reset, or a signal number (reset)
	}
	w.a.nested(action, w.lang, w.depth+1, nil, "trap's action")
}

// alias records the aliases args define and takes apart their values,
// which run where the alias is used.
func (w *walker) alias(args []word) {
	for _, x := range args {
		s, ok := x.lit()
		if !ok {
			w.a.opaque("alias defines an alias computed when the command runs")
			return
		}
		name, value, ok := strings.Cut(s, "=")
		if !ok || strings.HasPrefix(s, "-") {
			continue
		}
		w.a.aliases[name] = value
		w.a.nested(value, w.lang, w.depth+1, nil, "alias "+name)
	}
}

// expandAliases adds, for each command whose program is an alias the
// command defines, the alias's value with the command's arguments.
// Aliases apply in dash only from the next line on; the policy applies
// them everywhere, which can only make it see more.
func (a *analysis) expandAliases() {
	if len(a.aliases) == 0 {
		return
	}
	a.expanded = map[aliasUse]bool{}
	for i := 0; i < len(a.sc.cmds); i++ { // cmds grows as we go
		inv := a.sc.cmds[i]
		p := inv.program()
		if p == nil {
			continue
		}
		name, ok := p.lit()
		if !ok {
			continue
		}
		value, ok := a.aliases[name]
		if !ok || a.expanded[aliasUse{inv, name}] {
			continue
		}
		a.expanded[aliasUse{inv, name}] = true
		if inv.depth > maxNesting {
			a.opaque("alias " + name + " nests too deep")
			continue
		}
		// An alias whose value ends in a blank has the next word
		// expanded too.
		src, extra := value, inv.words[1:]
		for n := 0; n < maxNesting && len(extra) > 0 && (strings.HasSuffix(src, " ") || strings.HasSuffix(src, "\t")); n++ {
			next, ok := extra[0].lit()
			v, isAlias := a.aliases[next]
			if !ok || !isAlias {
				break
			}
			src, extra = src+v, extra[1:]
		}
		before := len(a.sc.cmds)
		a.nested(src, syntax.LangPOSIX, inv.depth+1, append([]word{}, extra...), "alias "+name)
		for _, c := range a.sc.cmds[before:] {
			c.depth = max(c.depth, inv.depth+1)
		}
	}
}

// joined returns the words joined by blanks, as eval joins them.
func joined(ws []word) (string, bool) {
	parts := make([]string, len(ws))
	for i := range ws {
		s, ok := ws[i].lit()
		if !ok {
			return "", false
		}
		parts[i] = s
	}
	return strings.Join(parts, " "), true
}
