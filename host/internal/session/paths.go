package session

import (
	"encoding/json"
	"fmt"
	"strings"

	"weft.dev/weft/agent"
	"weft.dev/weft/api"
	"weft.dev/weft/env"
	"weft.dev/weft/event"
	"weft.dev/weft/policy"
)

// resolver returns where a path of the session's current binding leads
// (env.Binding.Locate), for set's decision on a call of tool: a path rule
// then holds on the file the tool would open, not only on the path the
// model wrote. Nil when no rule of set has a path condition for tool (no
// I/O for nothing) or the session has no usable binding.
func (s *Session) resolver(set *policy.Set, tool string) func(string) ([]string, error) {
	if !set.HasPathRules(tool) {
		return nil
	}
	b := s.currentBinding()
	if b == nil {
		return nil
	}
	return b.Locate
}

// guardFor returns the run's guards of its tool calls' file access
// (agent.Run.Guard): the policy decides again on each file a call opens,
// writes or lists, by where it really is.
func (s *Session) guardFor(a *activeRun) func(event.ToolCall, agent.Admission) env.Guard {
	return func(c event.ToolCall, how agent.Admission) env.Guard {
		set, mounts := s.policyFor(a)
		limit := api.ActionAllow
		if how == agent.Approved {
			limit = api.ActionAsk
		}
		return newPathGuard(set, policy.Call{Tool: c.Name, Arguments: json.RawMessage(c.Arguments), Mounts: mounts}, limit)
	}
}

// ToolGuard returns the guard of a background tool call (a start_tool
// process) of run runID: tool with args, in the session's current
// mounts. It is decided by the run's policy while the run is active, and
// by the host's and the session's layers (with the session's approvals)
// once it has ended; the call was decided when start_tool was, so what it
// opens may meet an ask rule (it may have been approved) but no deny.
func (s *Session) ToolGuard(runID, tool string, args json.RawMessage) env.Guard {
	var set *policy.Set
	s.mu.Lock()
	a := s.active
	s.mu.Unlock()
	if a != nil && a.id == runID {
		set, _ = s.policyFor(a)
	} else {
		base, err := s.compilePolicy(nil, "")
		if err != nil {
			return denyAll{err}
		}
		set, _ = s.policyFor(&activeRun{policy: base})
	}
	var mounts []event.Mount
	if b := s.currentBinding(); b != nil {
		mounts = b.Mounts()
	}
	return newPathGuard(set, policy.Call{Tool: tool, Arguments: args, Mounts: mounts}, api.ActionAsk)
}

// newPathGuard returns the guard of call under set, or nil when no rule
// of set has a path condition for the call's tool (nothing to check).
// limit is the strictest action the call may meet: allow for a call the
// policy allowed, ask for one a person approved.
func newPathGuard(set *policy.Set, call policy.Call, limit string) env.Guard {
	if !set.HasPathRules(call.Tool) {
		return nil
	}
	return &pathGuard{set: set, call: call, limit: strictness(limit)}
}

// pathGuard is the env.Guard of one tool call: the call is decided again
// with each target it opens (policy.Call.Opened), and refused when that
// decision is stricter than the one it runs under. Immutable; safe for
// concurrent use.
type pathGuard struct {
	set   *policy.Set
	call  policy.Call
	limit int
}

// Allow implements env.Guard.
func (g *pathGuard) Allow(t env.Target) error {
	c := g.call
	c.Opened = make([]string, 0, 1+len(t.Real))
	c.Opened = append(c.Opened, t.Path.String())
	for _, r := range t.Real {
		c.Opened = append(c.Opened, r.String())
	}
	d := g.set.Decide(c)
	if strictness(d.Action) <= g.limit {
		return nil
	}
	where := ""
	for _, r := range t.Real {
		if r.String() != t.Path.String() && !strings.Contains(where, r.String()) {
			where += ", it leads to " + r.String()
		}
	}
	if d.Action == api.ActionDeny {
		return fmt.Errorf("%s%s", d.Reason, where)
	}
	return fmt.Errorf("opening it needs approval (%s)%s, and it was not asked when the call was decided (a link changed since): call again",
		strings.TrimSpace(d.Reason+" "+ruleSource(d)), where)
}

// ruleSource names where the rule of d comes from, for messages.
func ruleSource(d policy.Decision) string {
	return "rule of " + recordedRule(d).Source
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

// denyAll is a guard that refuses everything, for a policy that no
// longer compiles.
type denyAll struct{ err error }

func (g denyAll) Allow(env.Target) error {
	return fmt.Errorf("the policy cannot be compiled: %v", g.err)
}

// openBinding opens eb, refusing (with env.ErrProtected) a local mount
// whose directory now lies elsewhere than the path stored for it and
// reaches what the host keeps from sessions: a client's mount is stored
// with its links resolved and checked (host.Config.Protected), so a
// difference means a link was made since, such as a component replaced
// by a link to /proc from a shell that can write its parent.
func (s *Session) openBinding(eb event.Binding) (*env.Binding, error) {
	b, err := env.OpenSession(s.id, eb)
	if err != nil {
		return nil, err
	}
	for _, m := range eb.Mounts {
		real, ok := b.RealPath(m.ID)
		if m.Kind == event.KindScratch || !ok || real == m.Path {
			continue
		}
		if _, err := s.cfg.Protected.Check(real); err != nil {
			b.Close()
			return nil, fmt.Errorf("mount %s: %w", m.ID, err)
		}
	}
	return b, nil
}

// instructionsGuard is the guard of run a's reading of AGENTS.md: it is
// read as read_file would read it, and left out if a deny rule refuses
// that (an ask rule does not: the instructions are not the model's call).
func (s *Session) instructionsGuard(a *activeRun) env.Guard {
	set, mounts := s.policyFor(a)
	args, _ := json.Marshal(map[string]string{"path": "AGENTS.md"})
	return newPathGuard(set, policy.Call{Tool: api.ToolReadFile, Arguments: args, Mounts: mounts}, api.ActionAsk)
}
