// Package testenv says what a test needs from the machine it runs on, and
// what happens when the machine lacks it: on a developer's machine the
// test skips, saying what is missing; under CI it fails. CI runs on
// machines of the kind weft is made for — Linux as root, PID and network
// namespaces, Landlock ABI 7, seccomp, cgroup v1 with the pids and memory
// controllers, the go command, and the PostgreSQL and npm packages that
// .ci/run installs — so a test that skips there has quietly stopped
// testing what it was written for. Every test that needs a kernel feature
// or an outside program asks through this package (or through
// internal/pgtest, which uses [Missing]), never with t.Skip directly.
//
// Where weft falls back when a feature is missing (no Landlock: shells
// refused unless unsandboxed; no namespaces: the subreaper), [Without]
// runs a test again in a child test binary that lacks the feature, so the
// fallback is tested on the machines that have it, CI among them. Tests
// assert which level is active rather than skip.
//
// The package imports env/sandbox (for [Landlock], [PIDNamespace],
// [NetNamespace] and [Cgroups]), so
// the internal tests of env/sandbox, env and event cannot use it; their
// external tests can.
package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"weft.dev/weft/env/sandbox"
)

// CI reports whether the tests run under CI: the environment variable CI
// is set to anything but "" or a false value of [strconv.ParseBool]
// ("0", "false"). CI services set CI=true; .ci/run expects it set.
func CI() bool {
	v := os.Getenv("CI")
	if v == "" {
		return false
	}
	b, err := strconv.ParseBool(v)
	return err != nil || b
}

// Missing reports that the machine lacks what t needs, described by
// format and args: it skips t, or, under [CI], fails it, since CI
// machines have everything the tests need. It does not return.
func Missing(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if CI() {
		t.Fatalf("%s (CI is set, so this test must run: CI machines have it)", msg)
	}
	t.Skip(msg)
}

// Landlock returns the kernel's Landlock ABI ([sandbox.Probe]), or, when
// it is below min, reports it [Missing]. CI machines have ABI 7: a test
// of what a later ABI adds should instead run at every ABI up to the
// kernel's (sandbox.Config.LandlockABI) and assert what each one gives.
func Landlock(t testing.TB, min int) int {
	t.Helper()
	abi, err := sandbox.Probe()
	if abi < min {
		Missing(t, "needs Landlock ABI %d, this kernel has %d (%v)", min, abi, err)
	}
	return abi
}

// PIDNamespace reports it [Missing] when this process cannot start
// commands in a PID namespace ([sandbox.Containment]).
func PIDNamespace(t testing.TB) {
	t.Helper()
	if mode, err := sandbox.Containment(); mode != sandbox.ContainmentPIDNamespace {
		Missing(t, "no PID namespace on this machine (containment %s): %v", mode, err)
	}
}

// NetNamespace reports it [Missing] unless a sandboxed command whose
// network is denied gets a network namespace here
// ([sandbox.DeniedByNamespace]): as root, or through an unprivileged
// user namespace.
func NetNamespace(t testing.TB) {
	t.Helper()
	if st := (sandbox.Config{}).Status(); st.NetworkDeniedBy != sandbox.DeniedByNamespace {
		Missing(t, "no network namespace for commands on this machine (the network is denied by %q)", st.NetworkDeniedBy)
	}
}

// Cgroups reports it [Missing] unless commands' trees get cgroups here
// for the limits of processes and memory: cgroup v1 with the pids and
// memory controllers, which this process may make groups in (CI
// machines have them). It returns what enforces a CPU time limit here:
// [sandbox.ByCgroupV1] with the cpuacct controller, else
// [sandbox.ByRlimit].
func Cgroups(t testing.TB) (cpuTimeBy string) {
	t.Helper()
	l := sandbox.Limits{Processes: 64, Memory: 64 << 20, CPUTime: time.Second}
	by := (sandbox.Config{Unsandboxed: true, Limits: l}).Status().LimitsBy
	if by.Processes != sandbox.ByCgroupV1 || by.Memory != sandbox.ByCgroupV1 {
		Missing(t, "no cgroups for commands on this machine (limits by %+v)", by)
	}
	return by.CPUTime
}

// Root reports it [Missing] unless the test runs as root.
func Root(t testing.TB, why string) {
	t.Helper()
	if os.Geteuid() != 0 {
		Missing(t, "needs root: %s", why)
	}
}

// Command returns the path of the program name found in PATH, or reports
// it [Missing].
func Command(t testing.TB, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		Missing(t, "no %s command: %v", name, err)
	}
	return p
}

// NPMPackage returns the directory of the npm package name (for example
// @modelcontextprotocol/server-everything) installed where .ci/run
// installs them, $WEFT_NPM_PREFIX or else ~/.cache/weft-npm, and the node
// binary; when either is missing it reports it [Missing], saying how to
// install it.
func NPMPackage(t testing.TB, name string) (dir, node string) {
	t.Helper()
	prefix := os.Getenv("WEFT_NPM_PREFIX")
	if prefix == "" {
		home, _ := os.UserHomeDir()
		prefix = filepath.Join(home, ".cache", "weft-npm")
	}
	dir = filepath.Join(prefix, "node_modules", filepath.FromSlash(name))
	node, err := exec.LookPath("node")
	if _, serr := os.Stat(filepath.Join(dir, "package.json")); err != nil || serr != nil {
		Missing(t, "%s is not installed under %s (or node is missing): run npm install --prefix %s %s, as .ci/run does", name, prefix, prefix, name)
	}
	return dir, node
}
