//go:build linux

package sandbox_test

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"weft.dev/weft/env/sandbox"
	"weft.dev/weft/internal/testenv"
)

// TestCannotSignalHost: no sandboxed command can signal the host (this
// test binary), by its pid or its process group, nor every process it
// may (kill -1), on any Landlock ABI (signal scoping came with ABI 6) and
// in either containment (the subreaper has no PID namespace to hide the
// host in). kill(pid, 0) asks whether a signal would be allowed, without
// sending one; -1 is every process the caller may signal, which succeeds
// if only one may be (its own tree, where the kernel scopes signals), so
// it is checked where nothing else would stop it. Signals within the
// command's own tree, to its processes and groups, still work.
func TestCannotSignalHost(t *testing.T) {
	kernel := testenv.Landlock(t, 1)
	pgid, err := syscall.Getpgid(0)
	if err != nil {
		t.Fatal(err)
	}
	targets := map[string]string{
		"pid":   strconv.Itoa(os.Getpid()),
		"group": "-" + strconv.Itoa(pgid),
		"all":   "-1",
	}
	for abi := 1; abi <= kernel; abi++ {
		for _, mode := range []string{sandbox.ContainmentPIDNamespace, sandbox.ContainmentSubreaper} {
			t.Run(fmt.Sprintf("ABI_%d/%s", abi, mode), func(t *testing.T) {
				if mode == sandbox.ContainmentPIDNamespace {
					testenv.PIDNamespace(t)
				}
				l := newLayout(t)
				p := netPolicy(t, l, sandbox.Config{LandlockABI: abi, Containment: mode})
				for name, target := range targets {
					if target == "-1" && (abi >= 6 || mode == sandbox.ContainmentPIDNamespace) {
						// The kernel signals only the processes the
						// caller may reach, its own tree: kill(-1)
						// succeeds, without reaching the host.
						continue
					}
					out, code, _ := runNet(t, p, "kill", target)
					if code != 3 || !strings.Contains(out, "kill:") {
						t.Errorf("kill(%s, 0) (the host's %s) was allowed: exit %d\n%s", target, name, code, out)
					}
				}
				// The tree's own processes and groups stay reachable.
				own := `sleep 10 & kill $! && wait $!; [ $? -gt 128 ] || exit 1
setsid sleep 10 & p=$!; until kill -0 -$p 2>/dev/null; do :; done; kill -TERM -$p && wait $p; [ $? -gt 128 ] || exit 2
setsid sh -c 'kill -TERM 0' & wait $!; [ $? -gt 128 ] || exit 3`
				if out, code, _ := sh(t, p, l.work, own); code != 0 {
					t.Errorf("signals within the tree: exit %d\n%s", code, out)
				}
				// The command's process group is its own, never the
				// host's: signalling it ends the command, not this test.
				if out, code, _ := sh(t, p, l.work, `kill -TERM 0; sleep 1`); code != 128+int(syscall.SIGTERM) {
					t.Errorf("kill 0: exit %d\n%s", code, out)
				}
			})
		}
	}
}
