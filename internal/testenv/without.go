package testenv

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Lack is a set of kernel features a test can run without; see [Without].
type Lack uint

const (
	// NoLandlock makes the Landlock system calls fail with ENOSYS, as on
	// a kernel built without Landlock: [sandbox.Probe] reports ABI 0, and
	// sandboxed commands are refused (also by the sandbox helper, which
	// probes again).
	NoLandlock Lack = 1 << iota
	// NoNamespaces makes clone and unshare fail with EPERM when asked for
	// a new user, PID or network namespace, and setns with EPERM (and
	// clone3 with ENOSYS, so that callers use clone), as a container's
	// seccomp policy does: [sandbox.Containment] falls back to the
	// subreaper, and a denied network to Landlock and a seccomp filter.
	NoNamespaces
	// NoDACOverride takes CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH from
	// the process, so that file permissions bind it even as root, who
	// otherwise reads and writes any file.
	NoDACOverride
	// NoCgroups takes the cgroup file systems away (the child runs in a
	// mount namespace of its own where /sys/fs/cgroup is unmounted), as
	// on a machine where weft may make no cgroups: commands' limits fall
	// back to rlimits.
	NoCgroups
)

// String names the features l lacks, as "NoLandlock|NoNamespaces".
func (l Lack) String() string {
	var names []string
	for _, f := range []struct {
		l    Lack
		name string
	}{{NoLandlock, "NoLandlock"}, {NoNamespaces, "NoNamespaces"}, {NoDACOverride, "NoDACOverride"}, {NoCgroups, "NoCgroups"}} {
		if l&f.l != 0 {
			names = append(names, f.name)
			l &^= f.l
		}
	}
	if l != 0 || len(names) == 0 {
		names = append(names, "Lack("+strconv.FormatUint(uint64(l), 10)+")")
	}
	return strings.Join(names, "|")
}

// The environment of the child test binary that [Without] starts.
const (
	envWithout = "WEFT_TESTENV_WITHOUT" // the Lack, as a number
	envTest    = "WEFT_TESTENV_TEST"    // the test's name
)

// Without runs the test t again, alone, in a child process of the test
// binary that lacks what lack names from its first instruction on, and
// everything the child starts (a sandbox helper, a shell, a weft binary)
// lacks it too. It reports whether it did so: in the parent it returns
// true once the child has ended, having failed t if the child's test
// failed (with the child's output) or skipped t if it skipped; the caller
// then returns at once. In the child it checks that the features are
// gone and returns false, and the test goes on to assert the fallback:
//
//	func TestRefusedWithoutLandlock(t *testing.T) {
//		if testenv.Without(t, testenv.NoLandlock) {
//			return
//		}
//		// Here the kernel has no Landlock.
//	}
//
// The features are taken away with a seccomp filter (NoLandlock,
// NoNamespaces), by dropping capabilities from the bounding set
// (NoDACOverride) and in a mount namespace (NoCgroups), on a thread of the parent used only to start the
// child, so the parent keeps them. Where that cannot be done (not Linux,
// an architecture whose system calls the filter does not know, no
// seccomp, no right to drop capabilities) Without reports it [Missing].
// Call it first in a test or subtest, before t.Parallel and before
// asking for features the parent needs (the child runs everything
// before it too); t's name selects the test in the child.
func Without(t *testing.T, lack Lack) bool {
	t.Helper()
	if os.Getenv(envTest) == t.Name() {
		if got := os.Getenv(envWithout); got != strconv.FormatUint(uint64(lack), 10) {
			t.Fatalf("testenv: this child runs without %s, the test asks for %v", got, lack)
		}
		if err := check(lack); err != nil {
			t.Fatalf("testenv: the child still has what it should lack: %v", err)
		}
		return false
	}
	if err := supported(lack); err != nil {
		Missing(t, "cannot run a test without %v here: %v", lack, err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	args := []string{"-test.run=" + runPattern(t.Name()), "-test.count=1", "-test.v"}
	if testing.Short() {
		args = append(args, "-test.short")
	}
	if d, ok := t.Deadline(); ok {
		args = append(args, "-test.timeout="+time.Until(d).Round(time.Second).String())
	}
	cmd := exec.CommandContext(t.Context(), exe, args...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, envWithout+"=") && !strings.HasPrefix(kv, envTest+"=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, envWithout+"="+strconv.FormatUint(uint64(lack), 10), envTest+"="+t.Name())
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := startWithout(cmd, lack); err != nil {
		var le *lackError
		if errors.As(err, &le) {
			Missing(t, "cannot take %v from a test here: %v", lack, err)
		}
		t.Fatalf("testenv: start the test without %v: %v", lack, err)
	}
	err = cmd.Wait()
	switch s := out.String(); {
	case err == nil && strings.Contains(s, "--- PASS: "+t.Name()+" ("):
		t.Logf("passed without %v, in a child test binary", lack)
	case err == nil && strings.Contains(s, "--- SKIP: "+t.Name()+" ("):
		t.Skipf("skipped without %v, in a child test binary:\n%s", lack, s)
	default:
		t.Fatalf("without %v, in a child test binary (%v):\n%s", lack, err, s)
	}
	return true
}

// StartWithout starts cmd, as [exec.Cmd.Start] does, so that it and
// everything it starts lack what lack names, while this process keeps
// it: for a test whose subject is another program (a weft binary) rather
// than the test binary, which [Without] would run again. Where that
// cannot be done it reports it [Missing]; it returns the error of
// starting cmd.
func StartWithout(t testing.TB, cmd *exec.Cmd, lack Lack) error {
	t.Helper()
	if err := supported(lack); err != nil {
		Missing(t, "cannot start a program without %v here: %v", lack, err)
	}
	err := startWithout(cmd, lack)
	var le *lackError
	if errors.As(err, &le) {
		Missing(t, "cannot take %v from a program here: %v", lack, err)
	}
	return err
}

// lackError is a failure to take a feature away (no seccomp, no
// CAP_SETPCAP), as opposed to a failure to start the program.
type lackError struct{ err error }

func (e *lackError) Error() string { return e.err.Error() }
func (e *lackError) Unwrap() error { return e.err }

// runPattern is the -test.run pattern that selects exactly the test or
// subtest called name.
func runPattern(name string) string {
	parts := strings.Split(name, "/")
	for i, p := range parts {
		parts[i] = "^" + regexp.QuoteMeta(p) + "$"
	}
	return strings.Join(parts, "/")
}
