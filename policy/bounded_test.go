package policy_test

import (
	"strings"
	"testing"
)

// Commands built to make the reading explode (wrappers of unknown syntax
// inside each other, aliases of aliases, evals of evals) are read in time
// linear in their length: past a budget the command is opaque, and so
// denied by any deny rule. Without the budget the first one never ends.
func TestDecideBounded(t *testing.T) {
	s := operator(t)
	for _, cmd := range []string{
		strings.Repeat("chroot a ", 40) + "true",
		strings.Repeat("chroot a ", 7000) + "true",
		strings.Repeat("alias a='a a a a a a a a'\n", 10) + strings.Repeat("a ", 20000),
		strings.Repeat("eval ", 10000) + "true",
		strings.Repeat("env ", 15000) + "true",
		strings.Repeat("find . -exec ", 5000) + "true",
		strings.Repeat("xargs ", 10000) + "true",
		strings.Repeat("sh -c 'sh -c \"", 2000) + "true",
	} {
		if d := s.Decide(shell(cmd)); d.Action != deny || d.Detail == "" {
			t.Errorf("%.40q… (%d bytes): %s %q, want a deny of an opaque command", cmd, len(cmd), d.Action, d.Detail)
		}
	}
}
