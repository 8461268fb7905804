package mcpserver_test

import (
	"os/exec"
	"strings"
	"testing"

	"weft.dev/weft/internal/testenv"
)

// The MCP server calls weft through the protocol's types (an api.Host),
// never the engine: it links no host, agent loop, process manager,
// sandbox or SQL store, so that it serves a host in this process and a
// connection to one alike.
func TestLinksNoEngine(t *testing.T) {
	goBin := testenv.Command(t, "go")
	out, err := exec.Command(goBin, "list", "-deps", "weft.dev/weft/mcpserver").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	forbidden := []string{
		"weft.dev/weft/host", "weft.dev/weft/agent", "weft.dev/weft/process", "weft.dev/weft/rpc",
		"weft.dev/weft/store/internal", "weft.dev/weft/store/sqlite", "weft.dev/weft/store/postgres",
		"weft.dev/weft/internal/lease", "weft.dev/weft/env", "weft.dev/weft/llm", "weft.dev/weft/tool",
		"github.com/landlock-lsm/go-landlock", "github.com/creack/pty", "modernc.org/sqlite",
	}
	for dep := range strings.Lines(string(out)) {
		dep = strings.TrimSpace(dep)
		for _, f := range forbidden {
			if dep == f || strings.HasPrefix(dep, f+"/") {
				t.Errorf("package mcpserver depends on %s", dep)
			}
		}
	}
}
