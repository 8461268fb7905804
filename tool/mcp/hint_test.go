package mcp

import (
	"strings"
	"testing"
)

// TestDescribeHintsSandbox: a server that died because the sandbox
// refused it a file (Node's EACCES, a shell's "Permission denied", a
// read-only file system) is described with the likely fix, readOnly or
// trusted; other failures are not.
func TestDescribeHintsSandbox(t *testing.T) {
	for _, tc := range []struct {
		stderr string
		hint   bool
	}{
		{"Error: EACCES: permission denied, open '/home/me/.npm/_logs/x.log'", true},
		{"sh: /opt/mcp/run: Permission denied", true},
		{"OSError: [Errno 30] Read-only file system: '/home/me/.cache'", true},
		{"Error: Cannot find module 'x'", false},
	} {
		p := &proc{exited: make(chan struct{})}
		close(p.exited)
		p.tail.add(tc.stderr)
		got := p.describe()
		if has := strings.Contains(got, "readOnly") && strings.Contains(got, "trusted"); has != tc.hint {
			t.Errorf("describe with stderr %q = %q; hint %v, want %v", tc.stderr, got, has, tc.hint)
		}
	}
}
