//go:build linux

package sandbox_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"weft.dev/weft/env/sandbox"
	"weft.dev/weft/internal/proctest"
	"weft.dev/weft/internal/testenv"
)

// eachLimited runs f with a sandboxed policy of limits l under each
// containment: in a PID namespace (the init shell, started by the host
// from a thread in the tree's cgroups) and under the subreaper (the
// helper, whose forking thread joins them).
func eachLimited(t *testing.T, l sandbox.Limits, f func(t *testing.T, p sandbox.Policy, lay layout)) {
	testenv.Landlock(t, 1)
	for _, mode := range []string{sandbox.ContainmentPIDNamespace, sandbox.ContainmentSubreaper} {
		t.Run(mode, func(t *testing.T) {
			if mode == sandbox.ContainmentPIDNamespace {
				testenv.PIDNamespace(t)
			}
			lay := newLayout(t)
			f(t, netPolicy(t, lay, sandbox.Config{Containment: mode, Limits: l}), lay)
		})
	}
}

// runLimited runs script under p with a marker and returns its output,
// exit code, the limit it ran into and how long it ran; the marked
// processes must all be gone.
func runLimited(t *testing.T, p sandbox.Policy, script string) (string, int, *sandbox.LimitError, time.Duration) {
	t.Helper()
	c, m := marked(t, t.Context(), p, script)
	t0 := time.Now()
	out, err := c.CombinedOutput()
	d := time.Since(t0)
	code := exitOf(t, err, c)
	proctest.WaitGone(t, m)
	return string(out), code, c.Exceeded(), d
}

// TestProcessLimit: a command that starts more processes than its limit
// is killed whole, at once, and reported; below the limit nothing
// happens.
func TestProcessLimit(t *testing.T) {
	testenv.Cgroups(t)
	eachLimited(t, sandbox.Limits{Processes: 32}, func(t *testing.T, p sandbox.Policy, _ layout) {
		out, code, lim, d := runLimited(t, p, `for i in $(seq 100); do sleep 300 & done; wait`)
		if lim == nil || lim.Limit != sandbox.LimitProcesses || lim.Scope != "command" || !lim.Killed || lim.By != sandbox.ByCgroupV1 || code == 0 {
			t.Fatalf("exit %d after %v, exceeded %+v, output:\n%s", code, d, lim, out)
		}
		if !strings.Contains(lim.Error(), "processes limit of the command's (32, cgroup v1) was reached") {
			t.Errorf("error %q", lim)
		}
		t.Logf("killed after %v: %v", d, lim)
		out, code, lim, _ = runLimited(t, p, `for i in $(seq 20); do sleep 0.1 & done; wait`)
		if lim != nil || code != 0 {
			t.Errorf("below the limit: exit %d, exceeded %v:\n%s", code, lim, out)
		}
	})
}

// TestForkBomb: the classic fork bomb ends as a processes limit within a
// second, its whole tree killed.
func TestForkBomb(t *testing.T) {
	testenv.Cgroups(t)
	eachLimited(t, sandbox.Limits{Processes: 64}, func(t *testing.T, p sandbox.Policy, _ layout) {
		out, code, lim, d := runLimited(t, p, `bomb() { bomb | bomb & }; bomb; sleep 30`)
		if lim == nil || lim.Limit != sandbox.LimitProcesses || !lim.Killed {
			t.Fatalf("exit %d after %v, exceeded %+v, output:\n%s", code, d, lim, out)
		}
		if d > 5*time.Second {
			t.Errorf("the fork bomb ran for %v", d)
		}
		t.Logf("fork bomb killed after %v", d)
	})
}

// TestMemoryLimit: a process allocating past the tree's memory limit is
// killed by the kernel and the command reports it; the rest of the tree
// goes on.
func TestMemoryLimit(t *testing.T) {
	testenv.Cgroups(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	eachLimited(t, sandbox.Limits{Memory: 64 << 20}, func(t *testing.T, p sandbox.Policy, _ layout) {
		out, code, lim, _ := runLimited(t, p, fmt.Sprintf(`%s %s mem %d; echo "hog: $?"`, self, netArg, 256<<20))
		if lim == nil || lim.Limit != sandbox.LimitMemory || lim.Scope != "command" || lim.Killed || code != 0 || !strings.Contains(out, "hog: 137") {
			t.Fatalf("exit %d, exceeded %+v, output:\n%s", code, lim, out)
		}
		if !strings.Contains(lim.Error(), "memory limit of the command's (64 MiB, cgroup v1) was reached; the kernel killed") {
			t.Errorf("error %q", lim)
		}
		out, code, lim, _ = runLimited(t, p, fmt.Sprintf(`%s %s mem %d`, self, netArg, 16<<20))
		if lim != nil || code != 0 {
			t.Errorf("below the limit: exit %d, exceeded %v:\n%s", code, lim, out)
		}
	})
}

// TestFileSizeLimit: a write past the file size limit fails with EFBIG
// (a program ignoring SIGXFSZ sees it), the file stops at the limit, and
// a shell's command killed by SIGXFSZ is reported.
func TestFileSizeLimit(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	eachLimited(t, sandbox.Limits{FileSize: 1 << 20}, func(t *testing.T, p sandbox.Policy, lay layout) {
		f := filepath.Join(lay.work, "f")
		out, code, _, _ := runLimited(t, p, fmt.Sprintf(`%s %s write %s %d`, self, netArg, f, 2<<20))
		if code != 3 || !strings.Contains(out, "file too large") {
			t.Errorf("a write past the limit: exit %d:\n%s", code, out)
		}
		if fi, err := os.Stat(f); err != nil || fi.Size() != 1<<20 {
			t.Errorf("the file: %v, %v", fi.Size(), err)
		}
		out, code, lim, _ := runLimited(t, p, `head -c 2097152 /dev/zero > g`)
		if lim == nil || lim.Limit != sandbox.LimitFileSize || lim.By != sandbox.ByRlimit || code != 128+int(syscall.SIGXFSZ) {
			t.Errorf("exit %d, exceeded %+v, output:\n%s", code, lim, out)
		}
		if fi, err := os.Stat(filepath.Join(lay.work, "g")); err != nil || fi.Size() != 1<<20 {
			t.Errorf("the file: %v, %v", fi.Size(), err)
		}
		// A root shell cannot lift the limit: CAP_SYS_RESOURCE is gone.
		out, code, _, _ = runLimited(t, p, `ulimit -f unlimited && head -c 2097152 /dev/zero > h`)
		if code == 0 {
			t.Errorf("the limit was lifted:\n%s", out)
		}
	})
}

// TestCPUTimeLimit: a tree that uses up its CPU time is killed whole
// (with the cpuacct controller; else RLIMIT_CPU kills the process that
// used up its own).
func TestCPUTimeLimit(t *testing.T) {
	by := testenv.Cgroups(t)
	eachLimited(t, sandbox.Limits{CPUTime: 500 * time.Millisecond}, func(t *testing.T, p sandbox.Policy, _ layout) {
		out, code, lim, d := runLimited(t, p, `while :; do :; done & while :; do :; done`)
		if lim == nil || lim.Limit != sandbox.LimitCPUTime || !lim.Killed || lim.By != by || code == 0 {
			t.Fatalf("exit %d after %v, exceeded %+v, output:\n%s", code, d, lim, out)
		}
		if d > 10*time.Second {
			t.Errorf("ran for %v", d)
		}
	})
}

// TestLimitsStatus: the status names each limit and what enforces it.
func TestLimitsStatus(t *testing.T) {
	cpu := testenv.Cgroups(t)
	if cpu == sandbox.ByRlimit {
		cpu += ", per process"
	}
	l := sandbox.Limits{Processes: 100, Memory: 1 << 30, CPUTime: time.Minute, FileSize: 1 << 30}
	st := (sandbox.Config{Unsandboxed: true, Limits: l}).Status()
	want := "limits: processes 100 (cgroup v1), memory 1 GiB (cgroup v1), CPU time 1m0s (" + cpu + "), file size 1 GiB per file (rlimit)"
	if st.LimitsString() != want {
		t.Errorf("LimitsString() = %q, want %q", st.LimitsString(), want)
	}
	if _, err := sandbox.Command(t.Context(), sandbox.Policy{Config: sandbox.Config{Limits: sandbox.Limits{Memory: -1}}}, "/bin/true"); err == nil {
		t.Error("a negative limit was accepted")
	}
}

// TestLimitsWithoutCgroups: where weft may make no cgroups, the limits
// fall back to rlimits of each process and the status says so: the
// processes limit is not enforced (RLIMIT_NPROC counts the user's
// processes and binds no root), memory is RLIMIT_DATA per process, CPU
// time RLIMIT_CPU per process, which kills the process that used its
// own up and is reported.
func TestLimitsWithoutCgroups(t *testing.T) {
	if testenv.Without(t, testenv.NoCgroups) {
		return
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	l := sandbox.Limits{Processes: 32, Memory: 256 << 20, CPUTime: time.Second, FileSize: 1 << 20}
	st := (sandbox.Config{Unsandboxed: true, Limits: l}).Status()
	want := sandbox.LimitMechanisms{Memory: sandbox.ByRlimit, CPUTime: sandbox.ByRlimit, FileSize: sandbox.ByRlimit}
	if st.LimitsBy != want || !strings.Contains(st.LimitsString(), "processes 32 (not enforced here)") {
		t.Fatalf("limits by %+v: %s", st.LimitsBy, st.LimitsString())
	}
	// Each limit on its own: the helper that sets an rlimit carries it
	// too (the command inherits it from the helper), and a helper built
	// with -race (this test binary) needs more memory for its detector's
	// traces than the memory limit leaves while it waits out a CPU loop.
	eachLimited(t, sandbox.Limits{CPUTime: l.CPUTime}, func(t *testing.T, p sandbox.Policy, _ layout) {
		out, code, lim, _ := runLimited(t, p, `while :; do :; done`)
		if lim == nil || lim.Limit != sandbox.LimitCPUTime || lim.By != sandbox.ByRlimit || code == 0 {
			t.Errorf("CPU: exit %d, exceeded %+v:\n%s", code, lim, out)
		}
	})
	eachLimited(t, sandbox.Limits{Memory: l.Memory}, func(t *testing.T, p sandbox.Policy, _ layout) {
		// Go's runtime reserves address space without RLIMIT_DATA's
		// charge; a big allocation it backs with its heap fails.
		out, code, _, _ := runLimited(t, p, fmt.Sprintf(`%s %s mem %d`, self, netArg, 512<<20))
		if code == 0 {
			t.Errorf("memory: allocated past RLIMIT_DATA:\n%s", out)
		}
	})
}

// TestSessionProcessLimit: the commands of one session together are
// bounded by the session's limit: a second command that would pass it
// is killed and reported as the session's limit, while another
// session's command runs.
func TestSessionProcessLimit(t *testing.T) {
	testenv.Landlock(t, 1)
	testenv.Cgroups(t)
	s, err := sandbox.NewSessions(sandbox.SessionsConfig{Session: sandbox.Limits{Processes: 40}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	lay := newLayout(t)
	testenv.PIDNamespace(t)
	p := netPolicy(t, lay, sandbox.Config{Containment: sandbox.ContainmentPIDNamespace, Limits: sandbox.Limits{Processes: 32}, Sessions: s})
	p.Session = "ses_1"
	// The first command holds 25 processes until the second has ended.
	hold, err := sandbox.Command(t.Context(), p, "/bin/sh", "-c", `for i in $(seq 25); do sleep 300 & done; echo ready; wait`)
	if err != nil {
		t.Fatal(err)
	}
	hold.Dir = lay.work
	out, err := hold.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := hold.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		hold.Kill()
		hold.Wait()
	}()
	if _, err := out.Read(make([]byte, 6)); err != nil {
		t.Fatal(err)
	}
	o, code, lim, _ := runLimited(t, p, `for i in $(seq 25); do sleep 300 & done; wait`)
	if lim == nil || lim.Limit != sandbox.LimitProcesses || lim.Scope != "session" || !lim.Killed || code == 0 {
		t.Fatalf("exit %d, exceeded %+v:\n%s", code, lim, o)
	}
	if !strings.Contains(lim.Error(), "processes limit of the session's commands together (40, cgroup v1)") {
		t.Errorf("error %q", lim)
	}
	other := p
	other.Session = "ses_2"
	if o, code, lim, _ := runLimited(t, other, `for i in $(seq 25); do sleep 0.01 & done; wait`); code != 0 || lim != nil {
		t.Errorf("another session: exit %d, exceeded %v:\n%s", code, lim, o)
	}
}
