package client_test

import (
	"os/exec"
	"strings"
	"testing"

	"weft.dev/weft/internal/testenv"
)

// A Go client of weft links the wire types, not the engine: no host (and
// so none of the engine under host/internal: session, journal, reconcile,
// idem), no agent loop, no process manager, no sandbox, no pty, no SQL
// store or its migrations. The rpc server is held to the same: it serves
// an api.Host, as net/http serves a Handler, and links none of the engine
// that implements it. The compiler's internal rule keeps host/internal
// and store/internal from being imported here; this test keeps them from
// being linked by another road.
func TestClientLinksNoEngine(t *testing.T) {
	goBin := testenv.Command(t, "go")
	forbidden := []string{
		"weft.dev/weft/host", "weft.dev/weft/agent", "weft.dev/weft/process",
		"weft.dev/weft/store/internal", "weft.dev/weft/store/sqlite", "weft.dev/weft/store/postgres",
		"weft.dev/weft/internal/lease", "weft.dev/weft/env",
		"weft.dev/weft/llm", "weft.dev/weft/tool",
		"github.com/landlock-lsm/go-landlock", "github.com/creack/pty", "modernc.org/sqlite",
	}
	for _, tc := range []struct {
		pkg   string
		extra []string
	}{
		{pkg: "weft.dev/weft/client", extra: []string{"weft.dev/weft/rpc"}},
		{pkg: "weft.dev/weft/rpc"},
	} {
		out, err := exec.Command(goBin, "list", "-deps", tc.pkg).Output()
		if err != nil {
			t.Fatalf("go list %s: %v", tc.pkg, err)
		}
		for dep := range strings.Lines(string(out)) {
			dep = strings.TrimSpace(dep)
			for _, f := range append(forbidden, tc.extra...) {
				if dep == f || strings.HasPrefix(dep, f+"/") {
					t.Errorf("package %s depends on %s", tc.pkg, dep)
				}
			}
		}
	}
}
