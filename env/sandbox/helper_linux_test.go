package sandbox_test

import (
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"weft.dev/weft/env/sandbox"
	"weft.dev/weft/internal/testenv"
)

// TestHelperInPIDNamespace: where the host cannot start the init shell
// itself (under Landlock, when the namespace needs a user namespace), the
// helper is init of the namespace. Forced here, where the host could.
func TestHelperInPIDNamespace(t *testing.T) {
	testenv.PIDNamespace(t)
	dir := t.TempDir()
	for _, unsandboxed := range []bool{true, false} {
		if !unsandboxed {
			testenv.Landlock(t, 1)
		}
		p := sandbox.Policy{Config: sandbox.Config{Unsandboxed: unsandboxed, TempRoot: t.TempDir()}, Mounts: []sandbox.Mount{{Path: dir, Write: true}}}
		command := func(script string) *sandbox.Cmd {
			c, err := sandbox.Command(t.Context(), p, "/bin/sh", "-c", script)
			if err != nil {
				t.Fatal(err)
			}
			sandbox.ForceHelper(c)
			c.Dir = dir
			return c
		}
		for script, want := range map[string]struct {
			out  string
			code int
		}{
			`echo $PPID; exit 3`:                  {"1\n", 3},
			`kill -TERM $$`:                       {"", 143},
			`echo x > f && cat f`:                 {"x\n", 0},
			`cat /proc/1/environ >/dev/null && :`: {"", 1},
		} {
			if unsandboxed && strings.Contains(script, "/proc") {
				continue
			}
			c := command(script)
			out, err := c.Output()
			if c.Args[1] != sandbox.HelperArg {
				t.Fatalf("%s: not run by the helper: %q", script, c.Args)
			}
			var ee *exec.ExitError
			if err != nil && !errors.As(err, &ee) {
				t.Fatal(err)
			}
			if string(out) != want.out || c.ProcessState.ExitCode() != want.code {
				t.Errorf("unsandboxed=%v: %s: exit %d, output %q; want %d, %q", unsandboxed, script, c.ProcessState.ExitCode(), out, want.code, want.out)
			}
		}
		c := command(`sleep 300 & setsid sleep 301 & wait`)
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		c.Kill()
		if err := c.Wait(); err == nil {
			t.Error("Wait after Kill = nil")
		}
		if m, _ := filepath.Glob(filepath.Join(p.TempRoot, "*")); len(m) != 0 {
			t.Errorf("left behind: %v", m)
		}
	}
}
