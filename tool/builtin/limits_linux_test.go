//go:build linux

package builtin_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"weft.dev/weft/env"
	"weft.dev/weft/env/sandbox"
	"weft.dev/weft/event"
	"weft.dev/weft/internal/testenv"
	"weft.dev/weft/tool"
	"weft.dev/weft/tool/builtin"
)

// TestShellResourceLimits: a fork bomb, a memory hog and a disk filler
// end as the typed failure resource_limit naming the limit, and the
// result says what enforced it; a command within its limits is not a
// failure.
func TestShellResourceLimits(t *testing.T) {
	needLandlock(t)
	testenv.Cgroups(t)
	l := sandbox.Limits{Processes: 64, Memory: 64 << 20, FileSize: 1 << 20}
	f := newFixture(t, builtin.Options{Sandbox: &sandbox.Config{Limits: l}})
	for _, c := range []struct {
		name, command, limit, says string
	}{
		{"fork bomb", `bomb() { bomb | bomb & }; bomb; sleep 30`, sandbox.LimitProcesses, "the processes limit of the command's (64, cgroup v1) was reached"},
		{"memory hog", `awk 'BEGIN { s = "x"; while (1) s = s s }'`, sandbox.LimitMemory, "the memory limit of the command's (64 MiB, cgroup v1) was reached"},
		{"disk filler", `head -c 2000000 /dev/zero > big`, sandbox.LimitFileSize, "the file size limit of the command's (1 MiB per file, rlimit) was reached"},
	} {
		t.Run(c.name, func(t *testing.T) {
			res := f.call("shell", m{"command": c.command})
			check(t, res, true, c.says)
			if res.Failure == nil || res.Failure.Kind != event.FailureResourceLimit || res.Failure.Limit != c.limit || res.Failure.Scope != "command" {
				t.Errorf("failure %+v", res.Failure)
			}
		})
	}
	res := f.call("shell", m{"command": `for i in 1 2 3 4 5; do sleep 0.01 & done; wait; head -c 100000 /dev/zero > small`})
	check(t, res, false, "[exit code 0]")
	if res.Failure != nil || !strings.Contains(res.Confinement, "processes 64 (cgroup v1)") || !strings.Contains(res.Confinement, "network denied") {
		t.Errorf("failure %+v, confinement %q", res.Failure, res.Confinement)
	}
}

// TestForkBombOtherSessionsCarryOn: while one session's command is a
// fork bomb, another session's shell calls go on; the bomb ends as a
// resource_limit failure. It logs the other session's p50 and p99
// before and during the bomb (BENCHMARKS.md, section 20).
func TestForkBombOtherSessionsCarryOn(t *testing.T) {
	needLandlock(t)
	testenv.Cgroups(t)
	cmd, ses, host := sandbox.DefaultLimits(sandbox.MachineMemory())
	cmd.Processes, ses.Processes = 1024, 2048 // polite on a shared machine
	s, err := sandbox.NewSessions(sandbox.SessionsConfig{Session: ses, Host: host})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	f := newFixture(t, builtin.Options{Sandbox: &sandbox.Config{Limits: cmd, Sessions: s}})
	binding := func(id string) *env.Binding {
		b, err := env.OpenSession(id, event.Binding{BindingVersion: 1, Mounts: []event.Mount{
			{ID: "work", Kind: event.KindLocal, Path: t.TempDir(), Mode: event.ModeReadWrite, Default: true}}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		return b
	}
	a, b := binding("ses_a"), binding("ses_b")
	call := func(b *env.Binding, name string, args m) tool.Result {
		raw, _ := json.Marshal(args)
		return f.r.Call(t.Context(), name, &tool.Call{ID: "c", Arguments: raw, Env: b}, tool.CallOptions{ResultBudget: 1 << 20})
	}
	// measure makes the other session's calls, a shell command and a
	// call that starts no process, until stop closes or n of each.
	measure := func(stop <-chan struct{}, n int) (shell, list []time.Duration) {
		for i := 0; i < n || stop != nil; i++ {
			if stop != nil {
				select {
				case <-stop:
					return shell, list
				default:
				}
			}
			t0 := time.Now()
			if res := call(b, "shell", m{"command": "echo ok"}); res.IsError || !strings.Contains(res.Output, "ok") {
				t.Errorf("the other session's shell call: %s", res.Output)
			}
			t1 := time.Now()
			if res := call(b, "list_dir", m{"path": "."}); res.IsError {
				t.Errorf("the other session's list_dir: %s", res.Output)
			}
			shell, list = append(shell, t1.Sub(t0)), append(list, time.Since(t1))
		}
		return shell, list
	}
	beforeShell, beforeList := measure(nil, 30)
	stop := make(chan struct{})
	var bomb tool.Result
	var took time.Duration
	go func() {
		defer close(stop)
		t0 := time.Now()
		bomb = call(a, "shell", m{"command": `bomb() { bomb | bomb & }; bomb; sleep 30`})
		took = time.Since(t0)
	}()
	duringShell, duringList := measure(stop, 0)
	if bomb.Failure == nil || bomb.Failure.Kind != event.FailureResourceLimit || bomb.Failure.Limit != sandbox.LimitProcesses {
		t.Fatalf("the bomb: failure %+v:\n%s", bomb.Failure, bomb.Output)
	}
	q := func(d []time.Duration, p float64) time.Duration {
		if len(d) == 0 {
			return 0
		}
		d = slices.Clone(d)
		slices.Sort(d)
		return d[min(len(d)-1, int(float64(len(d))*p))]
	}
	t.Logf("fork bomb killed after %v; the other session's shell calls: before p50 %v p99 %v (%d); during p50 %v p99 %v (%d); "+
		"its list_dir calls: before p50 %v p99 %v; during p50 %v p99 %v",
		took, q(beforeShell, 0.5), q(beforeShell, 0.99), len(beforeShell), q(duringShell, 0.5), q(duringShell, 0.99), len(duringShell),
		q(beforeList, 0.5), q(beforeList, 0.99), q(duringList, 0.5), q(duringList, 0.99))
}
