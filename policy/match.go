package policy

import (
	"path"
	"slices"
	"strings"
	"unicode"

	"weft.dev/weft/event"
)

// environment is the directory under which the agent sees its mounts
// (env.Prefix, not imported: the policy does no I/O; where a path leads
// comes from Call.Resolve and Call.Opened).
const environment = "environment"

// simpleCommands splits a shell command into its simple commands at the
// control operators ; & && | || and newlines, and at ( ) and backquotes,
// so that subshells and command substitutions count as commands of their
// own. Quoting is ignored: a quoted separator splits too, which only makes
// an allow rule match less and a deny rule match more. & and | that are
// part of a redirection (2>&1, <&3, &>file, >|file) do not split. Each
// command is trimmed; blank ones are dropped. tails holds, for each, the
// rest of cmd from its start, at most maxTail bytes of it.
func simpleCommands(cmd string) (cmds, tails []string) {
	add := func(at int, s string) {
		if t := strings.TrimSpace(s); t != "" {
			tail := strings.TrimLeftFunc(cmd[at:], unicode.IsSpace)
			cmds = append(cmds, t)
			tails = append(tails, tail[:min(len(tail), maxTail)])
		}
	}
	start := 0
	for i := 0; i < len(cmd); i++ {
		switch cmd[i] {
		case ';', '\n', '\r', '`', '(', ')':
		case '&':
			if i > 0 && (cmd[i-1] == '>' || cmd[i-1] == '<') || i+1 < len(cmd) && cmd[i+1] == '>' {
				continue
			}
		case '|':
			if i > 0 && cmd[i-1] == '>' {
				continue
			}
		default:
			continue
		}
		add(start, cmd[start:i])
		start = i + 1
	}
	add(start, cmd[start:])
	return cmds, tails
}

// maxTail bounds the rest of a command that an ask or deny rule's regular
// expression is tried on from each simple command, so that a command of
// n simple commands costs O(n) and not O(n²) to decide. An expression
// that needs more than maxTail bytes from a simple command's start does
// not match there (the simple command alone is still tried), and one
// ending in $ may match at the cut.
const maxTail = 1 << 10

// isReserved reports whether w is one of the shell's reserved words (or
// time) that may precede a command. Ask and deny rules look past them, so
// that "if rm -r x; then" counts as rm.
func isReserved(w string) bool {
	switch w {
	case "!", "{", "}", "if", "then", "else", "elif", "fi", "do", "done", "while", "until", "time":
		return true
	}
	return false
}

// stripPrefixWords returns the simple command cmd without its leading
// reserved words and variable assignments (NAME=value), which ask and
// deny rules look past: "FOO=1 rm x" counts as rm. Allow rules do not:
// an assignment such as PATH=… or LD_PRELOAD=… changes what runs.
func stripPrefixWords(cmd string) string {
	for {
		w, rest := firstWord(cmd)
		if w == "" || !isReserved(w) && !isAssignment(w) {
			return cmd
		}
		cmd = rest
	}
}

// firstWord splits s into its first blank-separated word and the rest.
func firstWord(s string) (w, rest string) {
	s = strings.TrimLeftFunc(s, unicode.IsSpace)
	i := strings.IndexFunc(s, unicode.IsSpace)
	if i < 0 {
		return s, ""
	}
	return s[:i], strings.TrimLeftFunc(s[i:], unicode.IsSpace)
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

// hasWordPrefix reports whether the words of s begin with prefix's words
// (as split by strings.Fields).
func hasWordPrefix(s string, prefix []string) bool {
	for _, p := range prefix {
		var w string
		if w, s = firstWord(s); w != p {
			return false
		}
	}
	return true
}

// shellCommand is the shell tool's command taken apart once per decision.
type shellCommand struct {
	// cmds are its simple commands, tails the rest of the command from
	// the start of each; loose and looseTails the same past their
	// leading reserved words and assignments.
	cmds, tails, loose, looseTails []string
}

func parseCommand(cmd string) *shellCommand {
	sc := &shellCommand{}
	sc.cmds, sc.tails = simpleCommands(cmd)
	sc.loose = make([]string, len(sc.cmds))
	sc.looseTails = make([]string, len(sc.cmds))
	for i := range sc.cmds {
		sc.loose[i] = stripPrefixWords(sc.cmds[i])
		sc.looseTails[i] = stripPrefixWords(sc.tails[i])
	}
	return sc
}

// all reports whether there is at least one simple command and every one
// satisfies ok: the quantifier of allow rules.
func (sc *shellCommand) all(ok func(string) bool) bool {
	if len(sc.cmds) == 0 {
		return false
	}
	for _, s := range sc.cmds {
		if !ok(s) {
			return false
		}
	}
	return true
}

// any reports whether some simple command, as written or past its
// reserved words and assignments, satisfies ok: the quantifier of ask
// and deny rules.
func (sc *shellCommand) any(ok func(string) bool) bool {
	return anyOf(sc.cmds, sc.loose, ok)
}

// anyTail is any for the rest of the command from each simple command
// on, so that a regular expression of an ask or deny rule can span
// several ("curl … | sh").
func (sc *shellCommand) anyTail(ok func(string) bool) bool {
	return anyOf(sc.tails, sc.looseTails, ok)
}

func anyOf(strict, loose []string, ok func(string) bool) bool {
	for i, s := range strict {
		if ok(s) || loose[i] != s && ok(loose[i]) {
			return true
		}
	}
	return false
}

// glob is a compiled path pattern: slash-separated components, each a
// [path.Match] pattern, and "**" for any number of components.
type glob struct {
	abs   bool
	parts []string
}

// match reports whether the components name match g.
func (g glob) match(name []string) bool {
	pat := g.parts
	pi, ni := 0, 0
	star, mark := -1, 0
	for ni < len(name) {
		switch {
		case pi < len(pat) && pat[pi] == "**":
			star, mark = pi, ni
			pi++
		case pi < len(pat) && componentMatch(pat[pi], name[ni]):
			pi++
			ni++
		case star >= 0:
			// Let the last ** take one more component and retry.
			pi = star + 1
			mark++
			ni = mark
		default:
			return false
		}
	}
	for pi < len(pat) && pat[pi] == "**" {
		pi++
	}
	return pi == len(pat)
}

func componentMatch(pat, name string) bool {
	ok, _ := path.Match(pat, name) // validated when compiled
	return ok
}

// location is where a path argument or a shell's working directory lies,
// cleaned lexically the way the path resolver (package env) cleans it.
type location struct {
	// mount is the mount's ID; empty for a path outside /environment, or
	// a relative path when the binding has no default mount.
	mount string
	// abs holds the components of the absolute form
	// (environment/<mount>/…), nil when there is none.
	abs []string
	// rel holds the components within the default mount, when the
	// location lies there (hasRel); empty for its root.
	rel    []string
	hasRel bool
}

// equal reports whether l and o are the same location.
func (l location) equal(o location) bool {
	return l.mount == o.mount && l.hasRel == o.hasRel && slices.Equal(l.abs, o.abs) && slices.Equal(l.rel, o.rel)
}

func (l *location) matchGlob(g glob) bool {
	if g.abs {
		return l.abs != nil && g.match(l.abs)
	}
	return l.hasRel && g.match(l.rel)
}

// defaults are the mounts relative paths and shells resolve in.
type defaults struct {
	mount, shell string
}

// defaultsOf finds the default mount and the shell mount of a binding,
// normalising the flags as env.NewBinding does: the last mount flagged
// default wins, and a lone mount is the default; the last read-write
// mount flagged for shells wins, else the default mount if read-write.
func defaultsOf(ms []event.Mount) defaults {
	var d defaults
	def, shell := -1, -1
	for i, m := range ms {
		if m.Default {
			def = i
		}
		if m.DefaultForShell && m.Mode == event.ModeReadWrite {
			shell = i
		}
	}
	if def < 0 && len(ms) == 1 {
		def = 0
	}
	if shell < 0 && def >= 0 && ms[def].Mode == event.ModeReadWrite {
		shell = def
	}
	if def >= 0 {
		d.mount = ms[def].ID
	}
	if shell >= 0 {
		d.shell = ms[shell].ID
	}
	return d
}

// locate resolves p as env.Binding.Resolve does, lexically: a path under
// /environment/<id>/ lies in mount id, a relative path in the default
// mount. It reports false for what the resolver refuses outright (an
// empty path, a NUL byte, /environment without a mount, a ".." above a
// mount's root); a path outside /environment gets only its cleaned
// absolute form, and the tool will refuse it.
func locate(p string, d defaults) (location, bool) {
	if p == "" || strings.IndexByte(p, 0) >= 0 {
		return location{}, false
	}
	if p[0] == '/' {
		head, tail := nextComponent(p)
		if head != environment {
			return location{abs: splitClean(path.Clean(p))}, true
		}
		id, tail := nextComponent(tail)
		if id == "" || id == ".." {
			return location{}, false
		}
		rel, ok := cleanParts(tail)
		if !ok {
			return location{}, false
		}
		return newLocation(id, rel, id == d.mount), true
	}
	rel, ok := cleanParts(p)
	if !ok {
		return location{}, false
	}
	return newLocation(d.mount, rel, true), true
}

// mountRoot is the location of a mount's root.
func mountRoot(id string, d defaults) location {
	return newLocation(id, nil, id == d.mount)
}

func newLocation(mount string, rel []string, inDefault bool) location {
	l := location{mount: mount, rel: rel, hasRel: inDefault}
	if mount != "" {
		l.abs = append([]string{environment, mount}, rel...)
	}
	return l
}

// nextComponent skips leading slashes and "." components and returns the
// next component and what follows it (as env does).
func nextComponent(s string) (head, tail string) {
	for {
		s = strings.TrimLeft(s, "/")
		head, tail, _ = strings.Cut(s, "/")
		if head != "." {
			return head, tail
		}
		s = tail
	}
}

// cleanParts cleans a relative slash-separated path into components. It
// reports false if a ".." climbs above the start.
func cleanParts(s string) ([]string, bool) {
	var parts []string
	for c := range strings.SplitSeq(s, "/") {
		switch c {
		case "", ".":
		case "..":
			if len(parts) == 0 {
				return nil, false
			}
			parts = parts[:len(parts)-1]
		default:
			parts = append(parts, c)
		}
	}
	return parts, true
}

// splitClean splits a cleaned absolute path into its components.
func splitClean(p string) []string {
	p = strings.TrimPrefix(p, "/")
	if p == "" {
		return []string{}
	}
	return strings.Split(p, "/")
}
