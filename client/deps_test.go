package client_test

import (
	"os/exec"
	"strings"
	"testing"

	"weft.dev/weft/internal/testenv"
)

// A Go client of weft links the wire types, not the engine: no host, no
// agent loop, no process manager, no sandbox, no pty, no SQLite.
func TestClientLinksNoEngine(t *testing.T) {
	goBin := testenv.Command(t, "go")
	out, err := exec.Command(goBin, "list", "-deps", "weft.dev/weft/client").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	forbidden := []string{
		"weft.dev/weft/host", "weft.dev/weft/agent", "weft.dev/weft/process", "weft.dev/weft/rpc",
		"weft.dev/weft/internal/session", "weft.dev/weft/internal/journal", "weft.dev/weft/env",
		"weft.dev/weft/llm", "weft.dev/weft/tool",
		"github.com/landlock-lsm/go-landlock", "github.com/creack/pty", "modernc.org/sqlite",
	}
	for dep := range strings.Lines(string(out)) {
		dep = strings.TrimSpace(dep)
		for _, f := range forbidden {
			if dep == f || strings.HasPrefix(dep, f+"/") {
				t.Errorf("package client depends on %s", dep)
			}
		}
	}
}
