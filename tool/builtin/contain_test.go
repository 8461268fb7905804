//go:build linux

package builtin_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"weft.dev/weft/env/sandbox"
	"weft.dev/weft/internal/proctest"
	"weft.dev/weft/tool"
	"weft.dev/weft/tool/builtin"
)

// TestShellContainment: a foreground shell's whole tree, setsid and
// double-forked children included, ends with the call: on timeout, when
// ctx is cancelled, and when the shell exits on its own.
func TestShellContainment(t *testing.T) {
	proctest.EachContainment(t, func(t *testing.T, cfg sandbox.Config) {
		mark := proctest.NewMarker()
		f := newFixture(t, builtin.Options{ShellKillGrace: 200 * time.Millisecond, Sandbox: &cfg, ShellEnv: []string{proctest.Env(mark)}})

		// Everything is forked by the time "ready" is printed.
		res := f.call("shell", m{"command": `setsid sh -c 'sleep 300' & (sleep 301 &) ; echo ready; sleep 302`, "timeout": 1})
		check(t, res, true, "ready\n", "[timed out after 1s; the command and its children were killed]")
		proctest.WaitGone(t, mark)

		res = f.call("shell", m{"command": `setsid sleep 300 & (sleep 301 &) ; sleep 302 & echo ready`})
		check(t, res, false, "ready\n[exit code 0]")
		proctest.WaitGone(t, mark)

		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		raw, _ := json.Marshal(m{"command": proctest.Tree})
		done := make(chan tool.Result, 1)
		go func() { done <- f.r.Call(ctx, "shell", &tool.Call{Arguments: raw, Env: f.b}, tool.CallOptions{}) }()
		proctest.WaitTree(t, mark, "300", "301", "302")
		cancel()
		if res := <-done; !res.IsError || res.Output != "cancelled" {
			t.Errorf("cancelled call: %+v", res)
		}
		proctest.WaitGone(t, mark)

		// The exit status passes through the helper.
		check(t, f.call("shell", m{"command": "exit 7"}), false, "[exit code 7]")
		check(t, f.call("shell", m{"command": "kill -INT $$"}), false, "[exit code 130]")
	})
}

// TestShellHostDeath: when the host dies (SIGKILL) during a foreground
// call, the command's whole tree dies with it, without anyone cleaning
// up after the host.
func TestShellHostDeath(t *testing.T) {
	proctest.EachContainment(t, func(t *testing.T, cfg sandbox.Config) {
		mark := proctest.NewMarker()
		host := exec.Command(os.Args[0], "-test.run=^$")
		host.Env = append(os.Environ(), hostEnv+"="+strings.Join([]string{cfg.Containment, mark, t.TempDir()}, ":"))
		var out strings.Builder
		host.Stdout, host.Stderr = &out, &out
		if err := host.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() {
			host.Process.Kill()
			host.Wait()
		}()
		proctest.WaitTree(t, mark, "300", "301", "302")
		host.Process.Signal(syscall.SIGKILL)
		host.Wait()
		proctest.WaitGone(t, mark)
		if out.Len() > 0 {
			t.Errorf("host said: %s", out.String())
		}
	})
}
