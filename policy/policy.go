package policy

import (
	"bytes"
	"cmp"
	"encoding/json"
	"slices"
	"time"

	"weft.dev/weft/api"
	"weft.dev/weft/event"
)

// The layers of a policy, from the lowest precedence to the highest: the
// conventional order of the arguments of [Compile].
const (
	// LayerConfig is the host's config file (and the host's default
	// preset, when no layer names one).
	LayerConfig = 0
	// LayerSession is the policy given to session/create, plus the rules
	// a person approved for the session ([Set.WithSessionRule]).
	LayerSession = 1
	// LayerRun is the policy given to run/start.
	LayerRun = 2
)

// Call is a tool call to decide on.
type Call struct {
	// Tool is the tool's name.
	Tool string
	// Arguments are the call's arguments as the model gave them. Empty
	// means {}; arguments the tool would refuse match no condition.
	Arguments json.RawMessage
	// Mounts is the session's binding (the mounts as listed by env/list),
	// which tells the mount a path or a shell's working directory lies
	// in: the default mount for a relative path, the shell mount for a
	// shell without cwd. Nil means no mounts.
	Mounts []event.Mount
	// Resolve, if set, tells where a file tool's path argument really
	// leads: the display paths (/environment/<mount>/<rel>) of what the
	// tool would open once symbolic links are followed inside the mount,
	// one for each mount the target lies in (mounts may nest on the
	// host). The session's binding provides it (env.Binding.Locate). A
	// path it cannot tell (an error) is judged as written. Nil judges
	// every path as written: lexically, with no I/O.
	Resolve func(path string) ([]string, error)
	// Opened lists the display paths of what a running file tool is
	// about to open or list, and of where that really is (see env.Guard):
	// the decision then covers them as well as the path argument. Empty
	// for a call decided before it runs.
	Opened []string
}

// Decision is what a [Set] says about a call.
type Decision struct {
	// Action is api.ActionAllow, api.ActionAsk or api.ActionDeny; never
	// empty.
	Action string
	// Rule is a copy of the rule that decided, nil when none matched and
	// the call is allowed by default.
	Rule *api.Rule
	// Layer is the rule's layer, -1 for the default.
	Layer int
	// Preset names the preset the rule comes from; empty for a rule of
	// the layer's own (or the default).
	Preset string
	// Index is the rule's position among its layer's rules (rules added
	// by [Set.WithSessionRule] follow the session layer's own), or among
	// its preset's rules; -1 for the default.
	Index int
	// Reason is the rule's reason. A deny always has one: the model is
	// told why.
	Reason string
	// Timeout is an ask's deadline, zero for none.
	Timeout time.Duration
	// Default is what an ask becomes when its deadline passes:
	// api.ActionAllow or api.ActionDeny. Empty unless Action is ask.
	Default string
	// Final is set when the rule is final (a deny or a final ask of the
	// config file): no session rule, "always for this session"
	// included, can lift it.
	Final bool
	// Detail, when set, says why an ask or deny rule matched a command
	// it could not see whole (a part known only when it runs, a script
	// read from a pipe, a command that does not parse): the model is
	// told, with the reason.
	Detail string
	// OnlyWritable, when set, is the one mount the call may write: a
	// shell call allowed by a rule with a mount condition runs with the
	// session's other mounts read-only. The host narrows the call's
	// binding so; the shell sandbox enforces it.
	OnlyWritable string
}

// Set is a compiled policy: the rules of every layer ordered by
// precedence, with their patterns compiled. A Set is immutable and safe
// for concurrent use; a nil *Set, like the zero Set, allows every call.
type Set struct {
	// rules is every rule, the most specific first: Decide returns the
	// first that matches.
	rules []*rule
	// own is the number of the session layer's own rules; the rules
	// added by WithSessionRule follow them.
	own int
}

// rule is a compiled [api.Rule] and where it comes from.
type rule struct {
	src      api.Rule
	layer    int
	preset   string
	index    int
	approved bool // added by WithSessionRule

	// final: a deny or final ask of the config file's own rules, which
	// comes before every other rule and which only a stricter decision
	// overrides.
	final bool

	tool  toolPattern
	cmd   *commandPattern // Match.Command; nil when unset
	re    *commandRegex   // Match.CommandRegex
	exact string          // Match.CommandExact's canonical form
	path  *glob           // Match.Path
	mount string          // Match.Mount
	conds int             // the number of conditions set in Match
}

// Compile validates and compiles the layers of a policy, given from the
// lowest precedence to the highest: conventionally the config file
// ([LayerConfig]), the session ([LayerSession]) and the run ([LayerRun]).
// A zero Policy is a valid, empty layer. Each layer's preset expands to
// rules that follow the layer's own.
//
// An invalid layer is an *api.Error of kind invalid_params whose message
// names the rule and the field and says what is wrong; its data holds
// "field" (relative to the layer's Policy, such as
// "rules[2].match.commandRegex"), "layer" (its position among layers),
// and "limit" for a field over a limit.
func Compile(layers ...api.Policy) (*Set, error) {
	s := &Set{}
	for li, p := range layers {
		rs, err := compileLayer(li, p)
		if err != nil {
			return nil, err.With("layer", li)
		}
		s.rules = append(s.rules, rs...)
		if li == LayerSession {
			s.own = len(p.Rules)
		}
	}
	slices.SortStableFunc(s.rules, precedence)
	return s, nil
}

// precedence orders rules the most specific first; see the package doc.
func precedence(a, b *rule) int {
	if a.final != b.final {
		if a.final {
			return -1 // final rules first
		}
		return 1
	}
	if c := cmp.Compare(b.layer, a.layer); c != 0 {
		return c // a higher layer first
	}
	if ap, bp := a.preset != "", b.preset != ""; ap != bp {
		if bp {
			return -1 // the layer's own rules before its preset's
		}
		return 1
	}
	if c := cmp.Compare(b.tool.rank, a.tool.rank); c != 0 {
		return c // an exact name, then a glob, then *
	}
	if c := cmp.Compare(b.conds, a.conds); c != 0 {
		return c // more conditions first
	}
	if a.approved != b.approved {
		if b.approved {
			return -1 // the layer's own rules before approved ones
		}
		return 1
	}
	return cmp.Compare(b.index, a.index) // the later rule first
}

// Decide returns the decision for call: that of the most specific rule
// that matches it, or allow when none does. A final rule that matches
// decides, unless the decision of the other rules is stricter. A call of
// start_tool is decided as the call it starts; a rule that names
// start_tool exactly can only make that stricter. Ask rules never apply
// to ask_user; deny rules do.
func (s *Set) Decide(call Call) Decision {
	if call.Tool == api.ToolStartTool {
		if inner, ok := startedCall(call); ok {
			ci := inspect(inner)
			ci.narrowable = false // the call it starts gets no binding of its own
			d := s.decide(ci)
			if o, ok := s.first(&callInfo{tool: call.Tool}, namesExactly); ok && strictness(o.Action) > strictness(d.Action) {
				return o
			}
			return d
		}
	}
	return s.decide(inspect(call))
}

func (s *Set) decide(ci *callInfo) Decision {
	if d, ok := s.first(ci, nil); ok {
		return d
	}
	return Decision{Action: api.ActionAllow, Layer: -1, Index: -1}
}

// namesExactly keeps the rules that name a tool exactly.
func namesExactly(r *rule) bool { return r.tool.rank == rankExact }

// first returns the decision of the first rule that matches ci, among
// those keep keeps (all when keep is nil); a final rule's decision
// stands unless the first other rule that matches is stricter.
func (s *Set) first(ci *callInfo, keep func(*rule) bool) (Decision, bool) {
	if s == nil {
		return Decision{}, false
	}
	var final *Decision
	for _, r := range s.rules {
		if keep != nil && !keep(r) || r.final && final != nil {
			continue
		}
		if r.src.Action == api.ActionAsk && ci.tool == api.ToolAskUser {
			continue
		}
		ok, detail := r.matches(ci)
		if !ok {
			continue
		}
		d := r.decision(ci, detail)
		switch {
		case r.final && d.Action == api.ActionDeny:
			return d, true
		case r.final:
			final = &d
		case final != nil && strictness(d.Action) <= strictness(final.Action):
			return *final, true
		default:
			return d, true
		}
	}
	if final != nil {
		return *final, true
	}
	return Decision{}, false
}

func strictness(action string) int {
	switch action {
	case api.ActionDeny:
		return 2
	case api.ActionAsk:
		return 1
	}
	return 0
}

// decision is r's decision for the call ci, detail the detail of its
// match.
func (r *rule) decision(ci *callInfo, detail string) Decision {
	src := r.src
	d := Decision{Action: src.Action, Rule: &src, Layer: r.layer, Preset: r.preset, Index: r.index, Reason: src.Reason, Final: r.final}
	switch src.Action {
	case api.ActionAsk:
		d.Timeout = time.Duration(src.TimeoutMs) * time.Millisecond
		d.Default = cmp.Or(src.Default, api.ActionDeny)
		d.Detail = detail
	case api.ActionDeny:
		d.Reason = cmp.Or(d.Reason, "the policy does not allow "+ci.tool)
		d.Detail = detail
	case api.ActionAllow:
		if ci.tool == api.ToolShell && r.mount != "" {
			d.OnlyWritable = r.mount
		}
	}
	return d
}

// callInfo is a call's arguments, taken apart once per decision.
type callInfo struct {
	tool string
	// sh is the shell's command, taken apart; nil for other tools.
	sh *script
	// mounts are the IDs of the session's mounts.
	mounts []string
	// narrowable: the call can be run with fewer writable mounts (a
	// shell call, not one that start_tool starts).
	narrowable bool
	// paths are where a file tool's path lies: as written first, then
	// where it leads (Call.Resolve) and what the tool opened
	// (Call.Opened); nil for other tools and for a path the resolver
	// refuses. A path condition of an ask or deny rule holds when one of
	// them matches, that of an allow rule when all of them do.
	paths []location
	// where is the location of the path as written, or of the shell's
	// working directory.
	where *location
}

// The argument structs mirror the tools' own (tool/builtin), decoded with
// the same package, so that the policy reads the arguments the tool will
// act on: the same key wins among duplicates, keys match alike.
type (
	shellArgs struct {
		Command string `json:"command"`
		Cwd     string `json:"cwd"`
	}
	pathArgs struct {
		Path string `json:"path"`
	}
	startToolArgs struct {
		Tool string         `json:"tool"`
		Args map[string]any `json:"args"`
	}
)

// decodeArgs decodes a call's arguments as the tool registry does: empty
// means {}. It reports false when the tool would refuse them.
func decodeArgs(raw json.RawMessage, v any) bool {
	if len(bytes.TrimSpace(raw)) == 0 {
		return true
	}
	if bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return false
	}
	return json.Unmarshal(raw, v) == nil
}

func inspect(call Call) *callInfo {
	ci := &callInfo{tool: call.Tool}
	switch call.Tool {
	case api.ToolShell:
		var a shellArgs
		if !decodeArgs(call.Arguments, &a) {
			return ci
		}
		ci.sh = analyze(a.Command)
		ci.narrowable = true
		for _, m := range call.Mounts {
			ci.mounts = append(ci.mounts, m.ID)
		}
		d := defaultsOf(call.Mounts)
		switch {
		case a.Cwd != "":
			if l, ok := locate(a.Cwd, d); ok {
				ci.where = &l
			}
		case d.shell != "":
			l := mountRoot(d.shell, d)
			ci.where = &l
		}
	case api.ToolReadFile, api.ToolWriteFile, api.ToolEditFile, api.ToolListDir, api.ToolGlob, api.ToolGrep:
		var a pathArgs
		if !decodeArgs(call.Arguments, &a) {
			return ci
		}
		d := defaultsOf(call.Mounts)
		switch {
		case a.Path != "":
			if l, ok := locate(a.Path, d); ok {
				ci.paths, ci.where = []location{l}, &l
			}
		case defaultsToRoot(call.Tool) && d.mount != "":
			l := mountRoot(d.mount, d)
			ci.paths, ci.where = []location{l}, &l
		}
		if ci.paths == nil {
			return ci
		}
		if call.Resolve != nil {
			p := a.Path
			if p == "" {
				p = "."
			}
			if real, err := call.Resolve(p); err == nil {
				ci.paths = appendLocations(ci.paths, real, d)
			}
		}
		ci.paths = appendLocations(ci.paths, call.Opened, d)
	}
	return ci
}

// appendLocations appends to ls the locations of the display paths ps
// that differ from those ls holds. A display path the resolver would
// refuse is left out: it names nothing a tool opens.
func appendLocations(ls []location, ps []string, d defaults) []location {
	for _, p := range ps {
		l, ok := locate(p, d)
		if ok && !slices.ContainsFunc(ls, l.equal) {
			ls = append(ls, l)
		}
	}
	return ls
}

// defaultsToRoot reports whether an empty path of the file tool means the
// default mount's root.
func defaultsToRoot(tool string) bool {
	return tool == api.ToolListDir || tool == api.ToolGlob || tool == api.ToolGrep
}

// startedCall returns the call a start_tool call starts. The arguments
// take the way the start_tool tool gives them to the tool it starts: a
// map, encoded again.
func startedCall(call Call) (Call, bool) {
	var a startToolArgs
	if !decodeArgs(call.Arguments, &a) || a.Tool == "" || a.Tool == api.ToolStartTool {
		return Call{}, false
	}
	raw := json.RawMessage("{}")
	if a.Args != nil {
		b, err := json.Marshal(a.Args)
		if err != nil {
			return Call{}, false
		}
		raw = b
	}
	return Call{Tool: a.Tool, Arguments: raw, Mounts: call.Mounts, Resolve: call.Resolve, Opened: call.Opened}, true
}

// matches reports whether every part of r holds for the call, and
// with what detail (see [Decision.Detail]).
func (r *rule) matches(ci *callInfo) (bool, string) {
	if !r.tool.match(ci.tool) {
		return false, ""
	}
	allow := r.src.Action == api.ActionAllow
	var detail string
	check := func(ok bool, d string) bool {
		if ok && detail == "" {
			detail = d
		}
		return ok
	}
	if r.cmd != nil || r.re != nil || r.exact != "" {
		if ci.sh == nil {
			return false, ""
		}
	}
	if r.cmd != nil {
		if allow && !ci.sh.allowedBy(r.cmd.allows) || !allow && !check(ci.sh.caughtBy(r.cmd.catches)) {
			return false, ""
		}
	}
	if r.re != nil {
		if allow && !ci.sh.allowedBy(r.regexAllows) || !allow && !check(r.regexCatches(ci.sh)) {
			return false, ""
		}
	}
	if r.exact != "" && ci.sh.canon != r.exact {
		return false, ""
	}
	if r.path != nil && !quantify(ci.paths, allow, func(l location) bool { return l.matchGlob(*r.path) }) {
		return false, ""
	}
	if r.mount != "" && !r.inMount(ci) {
		return false, ""
	}
	return true, detail
}

// inMount reports whether the call lies in r's mount: a file tool's path
// does; a shell call, for an allow rule, when it runs there and can be
// run with only that mount writable, and for an ask or deny rule always
// while the mount is attached (a shell command reaches every mount).
func (r *rule) inMount(ci *callInfo) bool {
	if ci.tool == api.ToolShell && ci.sh != nil {
		if r.src.Action != api.ActionAllow {
			return slices.Contains(ci.mounts, r.mount)
		}
		if !ci.narrowable {
			return false
		}
	}
	inMount := func(l location) bool { return l.mount == r.mount }
	if ci.paths != nil {
		return quantify(ci.paths, r.src.Action == api.ActionAllow, inMount)
	}
	return ci.where != nil && inMount(*ci.where)
}

// regexAllows reports whether an allow rule's expression matches inv:
// its program known, no assignments in front, from its start and
// before any part known only when it runs.
func (r *rule) regexAllows(inv *invocation) bool {
	p := inv.program()
	if inv.assigns || p == nil || !p.known() {
		return false
	}
	return r.re.match(inv.render(), underMatch)
}

// regexCatches reports whether an ask or deny rule's expression may
// match the command: from the start of any simple command, in the
// command's text or a nested script's.
func (r *rule) regexCatches(sc *script) (bool, string) {
	if sc.opaque != "" {
		return true, sc.opaque
	}
	for _, t := range sc.texts {
		if r.re.match(t, overMatch) {
			if len(t.wild) > 0 && !r.re.match(t.known(), overMatch) {
				return true, detailUnknown
			}
			return true, ""
		}
	}
	return false, ""
}

// quantify is the quantifier of a path condition over the locations of
// a call's path: an allow rule needs every location to satisfy ok (and
// at least one location), an ask or deny rule one of them.
func quantify(ls []location, allow bool, ok func(location) bool) bool {
	if len(ls) == 0 {
		return false
	}
	if allow {
		return !slices.ContainsFunc(ls, func(l location) bool { return !ok(l) })
	}
	return slices.ContainsFunc(ls, ok)
}

// HasPathRules reports whether a rule that could decide a call of tool
// has a path or mount condition: only then can where a file tool's path
// really leads change the decision (see Call.Resolve and Call.Opened).
// For start_tool it reports on every tool, since the call it starts can
// be any. A nil Set has none.
func (s *Set) HasPathRules(tool string) bool {
	if s == nil {
		return false
	}
	for _, r := range s.rules {
		if (r.path != nil || r.mount != "") && (tool == api.ToolStartTool || r.tool.match(tool)) {
			return true
		}
	}
	return false
}
