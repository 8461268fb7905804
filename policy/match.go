package policy

import (
	"path"
	"slices"
	"strings"

	"weft.dev/weft/event"
)

// environment is the directory under which the agent sees its mounts
// (env.Prefix, not imported: the policy does no I/O; where a path leads
// comes from Call.Resolve and Call.Opened).
const environment = "environment"

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
