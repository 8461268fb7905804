package policy

import (
	"slices"
	"strings"

	"weft.dev/weft/api"
)

// SessionRuleFor returns the rule that allows calls like call for the
// rest of the session, for a person who answered an ask with "always for
// this session" (allow_session): never more than the person saw. The
// rule is an allow rule at [LayerSession] (add it with
// [Set.WithSessionRule]) that names the tool exactly and:
//
//   - for the shell, the command itself (Match.CommandExact): the same
//     command, parsed, and no other ("git status -s" allows neither
//     "git status" nor "git push");
//   - for the file tools, the mount the path lies in (Match.Mount): a
//     write to /environment/work/a.go allows every write in mount work;
//   - for start_tool, the rule of the call it starts;
//   - for other tools (process tools, MCP tools), nothing more.
//
// The tool's name is escaped where it has glob characters, so the rule
// names exactly that tool. A call no tool would run (a blank shell
// command, a path in no mount, a tool without a name) gets a rule that
// matches no call. The rule is always valid. Because the rule is derived
// from the call alone, the host records only the approved call and
// derives the rule again when it loads the session.
func SessionRuleFor(call Call) api.Rule {
	if call.Tool == api.ToolStartTool {
		if inner, ok := startedCall(call); ok {
			return SessionRuleFor(inner)
		}
	}
	r := sessionRule(call)
	if _, err := compileRule(r, "rule"); err != nil {
		// A name or a command over the limit.
		return api.Rule{Tool: "*", Match: api.Match{Path: noPath}, Action: api.ActionAllow, Reason: approvedReason}
	}
	return r
}

const approvedReason = "approved for this session"

// noPath is a path glob no call matches: /environment itself is no path
// a tool accepts.
const noPath = "/" + environment

func sessionRule(call Call) api.Rule {
	if call.Tool == "" {
		return api.Rule{Tool: "*", Match: api.Match{Path: noPath}, Action: api.ActionAllow, Reason: approvedReason}
	}
	r := api.Rule{Tool: escapeGlob(call.Tool), Action: api.ActionAllow, Reason: approvedReason}
	ci := inspect(call)
	switch {
	case call.Tool == api.ToolShell:
		var a shellArgs
		if !decodeArgs(call.Arguments, &a) || strings.TrimSpace(a.Command) == "" {
			return api.Rule{Tool: "*", Match: api.Match{Path: noPath}, Action: api.ActionAllow, Reason: approvedReason}
		}
		r.Match.CommandExact = a.Command
	case isFileTool(call.Tool):
		if ci.where != nil && ci.where.mount != "" {
			r.Match.Mount = ci.where.mount
		} else {
			r.Match.Path = noPath
		}
	}
	return r
}

// escapeGlob escapes the glob characters of a tool's name.
func escapeGlob(name string) string {
	if !strings.ContainsAny(name, `*?[\`) {
		return name
	}
	var b strings.Builder
	for i := range len(name) {
		if strings.IndexByte(`*?[\`, name[i]) >= 0 {
			b.WriteByte('\\')
		}
		b.WriteByte(name[i])
	}
	return b.String()
}

// WithSessionRule returns a Set that also holds r as a rule of the
// session layer, approved by a person; s is unchanged. An approved rule
// ranks among the session's own rules by its tool and conditions, but
// loses a tie with them (so an approval of "git" does not lift the
// session's ask for "git push"), and wins a tie with the rules approved
// before it. A rule equal to one added before leaves the Set
// as it is. An invalid rule is an *api.Error of kind invalid_params, with
// fields named "rule.…". A nil s is an empty Set.
func (s *Set) WithSessionRule(r api.Rule) (*Set, error) {
	cr, err := compileRule(r, "rule")
	if err != nil {
		return nil, err
	}
	if r.Final {
		return nil, invalid("rule.final", "only the host's config file can make a rule final")
	}
	ns := &Set{}
	if s != nil {
		ns.own = s.own
		ns.rules = slices.Clone(s.rules)
	}
	index := ns.own
	for _, x := range ns.rules {
		if x.layer == LayerSession && x.preset == "" && x.index >= ns.own {
			if x.src == r {
				return s, nil
			}
			index = max(index, x.index+1)
		}
	}
	cr.layer, cr.index, cr.approved = LayerSession, index, true
	at := slices.IndexFunc(ns.rules, func(x *rule) bool { return precedence(cr, x) < 0 })
	if at < 0 {
		at = len(ns.rules)
	}
	ns.rules = slices.Insert(ns.rules, at, cr)
	return ns, nil
}
