package mcp

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"weft.dev/weft/env"
	"weft.dev/weft/event"
)

// A session's server is checked again when it starts: a readOnly path
// that was a directory when the session was made and is a link to /proc
// now, or one under the protected state directory, keeps the server from
// starting; the host's own servers are the operator's and are not
// checked.
func TestSessionServerProtectedAtStart(t *testing.T) {
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	tools := filepath.Join(dir, "tools")
	for _, d := range []string{state, tools} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Remove(tools); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/proc", tools); err != nil {
		t.Fatal(err)
	}
	spec := fake(t, "tools")
	spec.Trusted = false
	m := newManager(t, Config{Protected: env.NewProtected(state), Servers: map[string]event.MCPServer{"host": {Command: spec.Command, Env: spec.Env, Trusted: true, ReadOnly: []string{state}}}})
	b, err := env.NewBinding(1, []event.Mount{{ID: "work", Kind: event.KindLocal, Path: dir, Mode: event.ModeReadWrite}})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for name, ro := range map[string]string{"link": tools, "state": filepath.Join(state, "token"), "proc": "/proc/1"} {
		s := spec
		s.ReadOnly = []string{ro}
		reg, err := m.Tools(context.Background(), map[string]event.MCPServer{"sess": s}, b)
		if !errors.Is(err, env.ErrProtected) || !strings.Contains(err.Error(), "readOnly[0]") {
			t.Errorf("%s: %v", name, err)
		}
		for _, sp := range reg.Specs() {
			if strings.HasPrefix(sp.Name, "mcp__sess__") {
				t.Errorf("%s: the session's server started: %s", name, sp.Name)
			}
		}
		if reg.Len() == 0 {
			t.Errorf("%s: the host's server was left out too", name)
		}
	}
	s := spec
	s.Command = "/proc/self/exe"
	if _, err := m.Tools(context.Background(), map[string]event.MCPServer{"sess": s}, b); !errors.Is(err, env.ErrProtected) {
		t.Errorf("a command in /proc: %v", err)
	}
}
