package policy_test

import (
	"errors"
	"regexp/syntax"
	"strings"
	"testing"

	"weft.dev/weft/api"
	"weft.dev/weft/policy"
)

// badRule is a one-layer policy whose rule 1 is r (rule 0 is valid), so
// that the error must name the right index.
func badRule(r api.Rule) api.Policy {
	return rules(api.Rule{Tool: api.ToolShell, Action: ask}, r)
}

// checkInvalid asserts that err is an invalid_params *api.Error naming
// field (in its data and message), with msg in its message.
func checkInvalid(t *testing.T, err error, field, msg string) *api.Error {
	t.Helper()
	var ae *api.Error
	if !errors.As(err, &ae) {
		t.Fatalf("error %v (%T) is not an *api.Error", err, err)
	}
	if ae.Kind != api.KindInvalidParams || ae.Code != api.CodeInvalidParams || !errors.Is(err, api.ErrInvalidParams) {
		t.Errorf("kind %s code %d, want invalid_params", ae.Kind, ae.Code)
	}
	if got := ae.Data["field"]; got != field {
		t.Errorf("field %v, want %q (message %q)", got, field, ae.Message)
	}
	if !strings.HasPrefix(ae.Message, field+": ") || !strings.Contains(ae.Message, msg) {
		t.Errorf("message %q does not name %q or say %q", ae.Message, field, msg)
	}
	return ae
}

func TestBadPreset(t *testing.T) {
	_, err := policy.Compile(api.Policy{Preset: "ask-sometimes"})
	checkInvalid(t, err, "preset", `unknown preset "ask-sometimes"; one of read-only, ask-writes, ask-all, never-ask`)
}

func TestEmptyTool(t *testing.T) {
	_, err := policy.Compile(badRule(api.Rule{Action: allow}))
	checkInvalid(t, err, "rules[1].tool", "empty")
}

func TestBadToolGlob(t *testing.T) {
	_, err := policy.Compile(badRule(api.Rule{Tool: "mcp__[github__*", Action: allow}))
	checkInvalid(t, err, "rules[1].tool", `bad glob "mcp__[github__*": syntax error in pattern`)
}

func TestMissingAction(t *testing.T) {
	_, err := policy.Compile(badRule(api.Rule{Tool: api.ToolShell}))
	checkInvalid(t, err, "rules[1].action", "missing; one of allow, ask, deny")
}

func TestUnknownAction(t *testing.T) {
	_, err := policy.Compile(badRule(api.Rule{Tool: api.ToolShell, Action: "prompt"}))
	checkInvalid(t, err, "rules[1].action", `unknown action "prompt"; one of allow, ask, deny`)
}

func TestBadCommandRegex(t *testing.T) {
	_, err := policy.Compile(badRule(api.Rule{Tool: api.ToolShell, Match: api.Match{CommandRegex: "git (status"}, Action: allow}))
	ae := checkInvalid(t, err, "rules[1].match.commandRegex", "error parsing regexp: missing closing ): `git (status`")
	var se *syntax.Error
	if !errors.As(err, &se) || se.Code != syntax.ErrMissingParen {
		t.Errorf("the cause is not the regexp error: %v", ae)
	}
}

func TestCommandRegexEscapingItsGroup(t *testing.T) {
	// Valid alone, but not once anchored: ^(?:a)|(b) would anchor only a.
	_, err := policy.Compile(badRule(api.Rule{Tool: api.ToolShell, Match: api.Match{CommandRegex: "a)|(b"}, Action: allow}))
	checkInvalid(t, err, "rules[1].match.commandRegex", "error parsing regexp")
}

func TestBlankCommand(t *testing.T) {
	_, err := policy.Compile(badRule(api.Rule{Tool: api.ToolShell, Match: api.Match{Command: " \t"}, Action: allow}))
	checkInvalid(t, err, "rules[1].match.command", "blank")
}

func TestCommandOnAnotherTool(t *testing.T) {
	_, err := policy.Compile(badRule(api.Rule{Tool: api.ToolReadFile, Match: api.Match{Command: "git"}, Action: allow}))
	checkInvalid(t, err, "rules[1].match.command", "only the shell tool has a command, not read_file")
	_, err = policy.Compile(badRule(api.Rule{Tool: "mcp__x__run", Match: api.Match{CommandRegex: "git"}, Action: allow}))
	checkInvalid(t, err, "rules[1].match.commandRegex", "only the shell tool has a command, not mcp__x__run")
}

func TestBadPathGlob(t *testing.T) {
	_, err := policy.Compile(badRule(api.Rule{Tool: api.ToolReadFile, Match: api.Match{Path: "src/[a-/*.go"}, Action: allow}))
	checkInvalid(t, err, "rules[1].match.path", `bad glob "src/[a-/*.go": component "[a-": syntax error in pattern`)
}

func TestPathGlobWithDotDot(t *testing.T) {
	_, err := policy.Compile(badRule(api.Rule{Tool: api.ToolReadFile, Match: api.Match{Path: "src/../secrets"}, Action: deny}))
	checkInvalid(t, err, "rules[1].match.path", `".." components never match`)
}

func TestPathOnAnotherTool(t *testing.T) {
	_, err := policy.Compile(badRule(api.Rule{Tool: api.ToolShell, Match: api.Match{Path: "src/**"}, Action: allow}))
	checkInvalid(t, err, "rules[1].match.path", "shell has no path argument")
}

func TestBadMount(t *testing.T) {
	_, err := policy.Compile(badRule(api.Rule{Tool: api.ToolWriteFile, Match: api.Match{Mount: "/environment/work"}, Action: allow}))
	checkInvalid(t, err, "rules[1].match.mount", `"/environment/work" is not a mount id`)
}

func TestMountOnAnotherTool(t *testing.T) {
	_, err := policy.Compile(badRule(api.Rule{Tool: api.ToolProcessSignal, Match: api.Match{Mount: "work"}, Action: allow}))
	checkInvalid(t, err, "rules[1].match.mount", "process_signal lies in no mount")
}

func TestDefaultOnANonAskRule(t *testing.T) {
	_, err := policy.Compile(badRule(api.Rule{Tool: api.ToolShell, Action: deny, Default: allow}))
	checkInvalid(t, err, "rules[1].default", "only an ask rule has a default, and the action is deny")
}

func TestUnknownDefault(t *testing.T) {
	_, err := policy.Compile(badRule(api.Rule{Tool: api.ToolShell, Action: ask, Default: "ask"}))
	checkInvalid(t, err, "rules[1].default", `unknown decision "ask"; allow or deny`)
}

func TestNegativeTimeout(t *testing.T) {
	_, err := policy.Compile(badRule(api.Rule{Tool: api.ToolShell, Action: ask, TimeoutMs: -1}))
	checkInvalid(t, err, "rules[1].timeoutMs", "negative (-1)")
}

func TestTimeoutOnANonAskRule(t *testing.T) {
	_, err := policy.Compile(badRule(api.Rule{Tool: api.ToolShell, Action: allow, TimeoutMs: 1000}))
	checkInvalid(t, err, "rules[1].timeoutMs", "only an ask rule has a deadline, and the action is allow")
}

func TestLimits(t *testing.T) {
	long := strings.Repeat("x", api.MaxPolicyPatternBytes+1)
	cases := []struct {
		policy api.Policy
		field  string
		limit  int
	}{
		{api.Policy{Rules: make([]api.Rule, api.MaxPolicyRules+1)}, "rules", api.MaxPolicyRules},
		{badRule(api.Rule{Tool: long, Action: allow}), "rules[1].tool", api.MaxPolicyPatternBytes},
		{badRule(api.Rule{Tool: api.ToolShell, Action: allow, Match: api.Match{Command: long}}), "rules[1].match.command", api.MaxPolicyPatternBytes},
		{badRule(api.Rule{Tool: api.ToolShell, Action: allow, Match: api.Match{CommandRegex: long}}), "rules[1].match.commandRegex", api.MaxPolicyPatternBytes},
		{badRule(api.Rule{Tool: api.ToolReadFile, Action: allow, Match: api.Match{Path: long}}), "rules[1].match.path", api.MaxPolicyPatternBytes},
		{badRule(api.Rule{Tool: api.ToolReadFile, Action: allow, Match: api.Match{Mount: long}}), "rules[1].match.mount", api.MaxPolicyPatternBytes},
		{badRule(api.Rule{Tool: api.ToolShell, Action: deny, Reason: strings.Repeat("r", api.MaxReasonBytes+1)}), "rules[1].reason", api.MaxReasonBytes},
		{badRule(api.Rule{Tool: api.ToolShell, Action: ask, TimeoutMs: api.MaxPolicyTimeoutMs + 1}), "rules[1].timeoutMs", api.MaxPolicyTimeoutMs},
	}
	for _, c := range cases {
		_, err := policy.Compile(c.policy)
		ae := checkInvalid(t, err, c.field, "")
		if ae.Data["limit"] != c.limit {
			t.Errorf("%s: limit %v, want %d", c.field, ae.Data["limit"], c.limit)
		}
	}
	// At the limits, everything compiles.
	ok := make([]api.Rule, api.MaxPolicyRules)
	for i := range ok {
		ok[i] = api.Rule{Tool: strings.Repeat("t", api.MaxPolicyPatternBytes), Action: ask, TimeoutMs: api.MaxPolicyTimeoutMs, Reason: strings.Repeat("r", api.MaxReasonBytes)}
	}
	if _, err := policy.Compile(api.Policy{Rules: ok}); err != nil {
		t.Errorf("at the limits: %v", err)
	}
}

func TestErrorNamesTheLayer(t *testing.T) {
	_, err := policy.Compile(api.Policy{}, api.Policy{Preset: api.PresetAskAll}, badRule(api.Rule{Tool: api.ToolShell, Action: "sure"}))
	ae := checkInvalid(t, err, "rules[1].action", `unknown action "sure"`)
	if ae.Data["layer"] != policy.LayerRun {
		t.Errorf("layer %v, want %d", ae.Data["layer"], policy.LayerRun)
	}
}

func TestWithSessionRuleValidates(t *testing.T) {
	s := compile(t, api.Policy{Preset: api.PresetAskWrites})
	_, err := s.WithSessionRule(api.Rule{Tool: api.ToolShell, Action: allow, Match: api.Match{CommandRegex: "("}})
	checkInvalid(t, err, "rule.match.commandRegex", "error parsing regexp")
}

func TestErrorMessagesQuoteTheInput(t *testing.T) {
	// The message is for people: it says what is wrong in words, with the
	// offending value quoted.
	_, err := policy.Compile(badRule(api.Rule{Tool: api.ToolShell, Match: api.Match{CommandRegex: `a{2,1}`}, Action: allow}))
	checkInvalid(t, err, "rules[1].match.commandRegex", `bad regular expression "a{2,1}": error parsing regexp: invalid repeat count`)
}
