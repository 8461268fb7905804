package policy

import (
	"fmt"
	"path"
	"strings"

	"weft.dev/weft/api"
)

// Ranks of a rule's tool pattern: how precisely it names the tool.
const (
	rankAny   = 0 // "*" (or only stars)
	rankGlob  = 1 // a glob such as mcp__github__*
	rankExact = 2 // a name
)

// toolPattern is a compiled [api.Rule.Tool].
type toolPattern struct {
	pattern string
	rank    int
}

func (t toolPattern) match(name string) bool {
	switch t.rank {
	case rankExact:
		return name == t.pattern
	case rankAny:
		return true
	}
	ok, _ := path.Match(t.pattern, name) // validated when compiled
	return ok
}

// isFileTool reports whether the tool has a path argument.
func isFileTool(name string) bool {
	switch name {
	case api.ToolReadFile, api.ToolWriteFile, api.ToolEditFile, api.ToolListDir, api.ToolGlob, api.ToolGrep:
		return true
	}
	return false
}

// invalid returns the invalid_params error for field.
func invalid(field, format string, args ...any) *api.Error {
	return api.Errorf(api.KindInvalidParams, field+": "+format, args...).With("field", field)
}

// tooLong returns the error for a field over its limit of n bytes.
func tooLong(field string, n int) *api.Error {
	return invalid(field, "longer than %d bytes", n).With("limit", n)
}

// compileLayer compiles one layer: its rules, then its preset's.
func compileLayer(layer int, p api.Policy) ([]*rule, *api.Error) {
	preset, ok := PresetRules(p.Preset)
	if p.Preset != "" && !ok {
		return nil, invalid("preset", "unknown preset %q; one of %s", p.Preset, strings.Join(Presets(), ", "))
	}
	if len(p.Rules) > api.MaxPolicyRules {
		return nil, invalid("rules", "%d rules, more than %d", len(p.Rules), api.MaxPolicyRules).With("limit", api.MaxPolicyRules)
	}
	out := make([]*rule, 0, len(p.Rules)+len(preset))
	for i, src := range p.Rules {
		f := fmt.Sprintf("rules[%d]", i)
		r, err := compileRule(src, f)
		if err != nil {
			return nil, err
		}
		if src.Final && layer != LayerConfig {
			return nil, invalid(f+".final", "only the host's config file can make a rule final; a session's or a run's rules cannot")
		}
		r.layer, r.index = layer, i
		r.final = layer == LayerConfig && (src.Final || src.Action == api.ActionDeny)
		out = append(out, r)
	}
	for i, src := range preset {
		r, err := compileRule(src, fmt.Sprintf("preset %s rules[%d]", p.Preset, i))
		if err != nil {
			return nil, err // a bug in a preset; the tests compile each
		}
		r.layer, r.index, r.preset = layer, i, p.Preset
		out = append(out, r)
	}
	return out, nil
}

// compileRule validates src and compiles its patterns. Errors name the
// field under prefix (such as "rules[2]").
func compileRule(src api.Rule, prefix string) (*rule, *api.Error) {
	r := &rule{src: src}
	field := func(name string) string { return prefix + "." + name }

	// The tool.
	switch t := src.Tool; {
	case t == "":
		return nil, invalid(field("tool"), "empty; name a tool, a glob such as mcp__github__*, or *")
	case len(t) > api.MaxPolicyPatternBytes:
		return nil, tooLong(field("tool"), api.MaxPolicyPatternBytes)
	case strings.Trim(t, "*") == "":
		r.tool = toolPattern{t, rankAny}
	case strings.ContainsAny(t, `*?[\`):
		if _, err := path.Match(t, ""); err != nil {
			return nil, invalid(field("tool"), "bad glob %q: %v", t, err)
		}
		r.tool = toolPattern{t, rankGlob}
	default:
		r.tool = toolPattern{t, rankExact}
	}

	// What the rule does.
	switch src.Action {
	case api.ActionAllow, api.ActionAsk, api.ActionDeny:
	case "":
		return nil, invalid(field("action"), "missing; one of allow, ask, deny")
	default:
		return nil, invalid(field("action"), "unknown action %q; one of allow, ask, deny", src.Action)
	}
	if len(src.Reason) > api.MaxReasonBytes {
		return nil, tooLong(field("reason"), api.MaxReasonBytes)
	}
	switch {
	case src.TimeoutMs < 0:
		return nil, invalid(field("timeoutMs"), "negative (%d)", src.TimeoutMs)
	case src.TimeoutMs > api.MaxPolicyTimeoutMs:
		return nil, invalid(field("timeoutMs"), "%d ms, more than %d (30 days)", src.TimeoutMs, api.MaxPolicyTimeoutMs).With("limit", api.MaxPolicyTimeoutMs)
	case src.TimeoutMs > 0 && src.Action != api.ActionAsk:
		return nil, invalid(field("timeoutMs"), "only an ask rule has a deadline, and the action is %s", src.Action)
	}
	switch src.Default {
	case "", api.ActionAllow, api.ActionDeny:
	default:
		return nil, invalid(field("default"), "unknown decision %q; allow or deny", src.Default)
	}
	if src.Default != "" && src.Action != api.ActionAsk {
		return nil, invalid(field("default"), "only an ask rule has a default, and the action is %s", src.Action)
	}
	if src.Final && src.Action == api.ActionAllow {
		return nil, invalid(field("final"), "only an ask or a deny rule can be final, and the action is allow")
	}

	// The conditions.
	m := src.Match
	exact := r.tool.rank == rankExact
	for _, f := range []struct{ name, v string }{{"command", m.Command}, {"commandRegex", m.CommandRegex}, {"path", m.Path}, {"mount", m.Mount}} {
		if len(f.v) > api.MaxPolicyPatternBytes {
			return nil, tooLong(field("match."+f.name), api.MaxPolicyPatternBytes)
		}
	}
	if len(m.CommandExact) > api.MaxShellCommandBytes {
		return nil, tooLong(field("match.commandExact"), api.MaxShellCommandBytes)
	}
	notShell := func(name string) *api.Error {
		return invalid(field("match."+name), "only the %s tool has a command, not %s", api.ToolShell, src.Tool)
	}
	if m.Command != "" {
		r.cmd = compileCommand(m.Command)
		switch {
		case len(r.cmd.words) == 0:
			return nil, invalid(field("match.command"), "blank; give the first words of a command, such as \"git status\"")
		case exact && src.Tool != api.ToolShell:
			return nil, notShell("command")
		}
		r.conds++
	}
	if m.CommandRegex != "" {
		if exact && src.Tool != api.ToolShell {
			return nil, notShell("commandRegex")
		}
		re, err := compileCommandRegex(m.CommandRegex)
		if err != nil {
			f := field("match.commandRegex")
			return nil, api.Wrap(api.KindInvalidParams, err, "%s: bad regular expression %q: %v", f, m.CommandRegex, err).With("field", f)
		}
		r.re = re
		r.conds++
	}
	if m.CommandExact != "" {
		if exact && src.Tool != api.ToolShell {
			return nil, notShell("commandExact")
		}
		if strings.TrimSpace(m.CommandExact) == "" {
			return nil, invalid(field("match.commandExact"), "blank; give a whole command")
		}
		r.exact = analyze(m.CommandExact).canon
		r.conds++
	}
	if m.Path != "" {
		if exact && !isFileTool(src.Tool) {
			return nil, invalid(field("match.path"), "%s has no path argument; only the file tools do (%s)", src.Tool, strings.Join(fileTools(), ", "))
		}
		g, err := compileGlob(m.Path)
		if err != nil {
			return nil, invalid(field("match.path"), "bad glob %q: %v", m.Path, err)
		}
		r.path = &g
		r.conds++
	}
	if m.Mount != "" {
		switch {
		case !isMountID(m.Mount):
			return nil, invalid(field("match.mount"), "%q is not a mount id ([a-z0-9][a-z0-9_-]*)", m.Mount)
		case exact && !isFileTool(src.Tool) && src.Tool != api.ToolShell:
			return nil, invalid(field("match.mount"), "%s lies in no mount; only the shell and the file tools do", src.Tool)
		}
		r.mount = m.Mount
		r.conds++
	}
	return r, nil
}

func fileTools() []string {
	return []string{api.ToolReadFile, api.ToolWriteFile, api.ToolEditFile, api.ToolListDir, api.ToolGlob, api.ToolGrep}
}

// compileGlob compiles a path pattern. A leading / makes it absolute;
// empty and "." components are dropped, ".." is refused (paths are
// cleaned before matching, so it would never match), and consecutive **
// fold into one.
func compileGlob(pat string) (glob, error) {
	g := glob{abs: strings.HasPrefix(pat, "/")}
	for c := range strings.SplitSeq(pat, "/") {
		switch c {
		case "", ".":
			continue
		case "..":
			return glob{}, fmt.Errorf(`".." components never match: paths are cleaned first`)
		case "**":
			if len(g.parts) > 0 && g.parts[len(g.parts)-1] == "**" {
				continue
			}
		default:
			if _, err := path.Match(c, ""); err != nil {
				return glob{}, fmt.Errorf("component %q: %w", c, err)
			}
		}
		g.parts = append(g.parts, c)
	}
	return g, nil
}

// isMountID reports whether s is a slug, as mount IDs are.
func isMountID(s string) bool {
	for i, c := range s {
		if 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || i > 0 && (c == '_' || c == '-') {
			continue
		}
		return false
	}
	return s != ""
}
