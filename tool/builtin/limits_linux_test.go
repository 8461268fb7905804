//go:build linux

package builtin_test

import (
	"strings"
	"testing"

	"weft.dev/weft/env/sandbox"
	"weft.dev/weft/event"
	"weft.dev/weft/internal/testenv"
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
		{"fork bomb", `bomb() { bomb | bomb & }; bomb; wait`, sandbox.LimitProcesses, "the processes limit of the command's (64, cgroup v1) was reached"},
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
