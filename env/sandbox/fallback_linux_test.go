package sandbox_test

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"weft.dev/weft/env/sandbox"
	"weft.dev/weft/internal/proctest"
	"weft.dev/weft/internal/testenv"
)

// TestWithoutLandlock: on a kernel without Landlock a sandboxed command
// is refused with the way out, by Command and by the helper itself;
// unsandboxed commands still run, contained.
func TestWithoutLandlock(t *testing.T) {
	if testenv.Without(t, testenv.NoLandlock) {
		return
	}
	l := newLayout(t)
	st := sandbox.Config{}.Status()
	if st.ABI != 0 || st.String() != "no Landlock: commands are refused" {
		t.Errorf("status %+v %q", st, st)
	}
	_, err := sandbox.Command(t.Context(), l.policy(sandbox.Config{}), "/bin/true")
	var re *sandbox.RefusedError
	if !errors.Is(err, sandbox.ErrNoLandlock) || !errors.As(err, &re) || !strings.Contains(err.Error(), "built without Landlock") ||
		!strings.Contains(err.Error(), `set "unsandboxed": true in the config`) {
		t.Fatalf("Command = %v, want a refusal with the way out", err)
	}
	// The helper probes again and refuses before it tries to exec.
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	helper := exec.Command(self, sandbox.HelperArg, fmt.Sprintf(`{"v":3,"network":"deny","tempDir":%q}`, t.TempDir()), "/bin/true")
	out, _ := helper.CombinedOutput()
	if code := helper.ProcessState.ExitCode(); code != sandbox.ExitCannotRun || !strings.Contains(string(out), "refusing to run unsandboxed") {
		t.Errorf("helper: exit %d, %q", code, out)
	}
	// Unsandboxed, by choice: contained as usual, and unconfined.
	c, m := bestContained(t, l.policy(sandbox.Config{Unsandboxed: true, TempRoot: t.TempDir()}), `cat `+l.secret+`; setsid sleep 300 & exit 0`)
	out, err = c.CombinedOutput()
	if err != nil || string(out) != "SECRET\n" || c.Status.Containment != sandbox.ContainmentPIDNamespace {
		t.Errorf("unsandboxed: %v, containment %q, output %q", err, c.Status.Containment, out)
	}
	proctest.WaitGone(t, m)
}

// TestWithoutNamespaces: where no PID namespace can be made (a
// container's seccomp policy here), commands fall back to the subreaper,
// which still contains their tree; Landlock confines them as before, and
// a required namespace is refused.
func TestWithoutNamespaces(t *testing.T) {
	if testenv.Without(t, testenv.NoNamespaces) {
		return
	}
	mode, err := sandbox.Containment()
	if mode != sandbox.ContainmentSubreaper || !errors.Is(err, syscall.EPERM) {
		t.Fatalf("Containment() = %q, %v; want the subreaper, because of EPERM", mode, err)
	}
	if st := (sandbox.Config{Unsandboxed: true}).Status(); st.Containment != sandbox.ContainmentSubreaper || !strings.Contains(st.String(), "under a subreaper (no PID namespace)") {
		t.Errorf("status %+v %q", st, st)
	}
	l := newLayout(t)
	if _, err := sandbox.Command(t.Context(), l.policy(sandbox.Config{Unsandboxed: true, Containment: sandbox.ContainmentPIDNamespace}), "/bin/true"); err == nil {
		t.Error("a required PID namespace was not refused")
	}
	for _, cfg := range []sandbox.Config{{Unsandboxed: true}, {}} {
		if !cfg.Unsandboxed {
			testenv.Landlock(t, 1)
		}
		cfg.TempRoot = t.TempDir()
		c, m := bestContained(t, l.policy(cfg), `echo $PPID; cat `+l.secret+`; setsid sleep 300 & exit 0`)
		if c.Status.Containment != sandbox.ContainmentSubreaper {
			t.Errorf("containment %q", c.Status.Containment)
		}
		out, _ := c.CombinedOutput()
		if strings.HasPrefix(string(out), "1\n") || strings.Contains(string(out), "SECRET") != cfg.Unsandboxed {
			t.Errorf("unsandboxed=%v: output %q", cfg.Unsandboxed, out)
		}
		proctest.WaitGone(t, m)
	}
}

// bestContained is marked with the best containment this process has
// (Config.Containment empty).
func bestContained(t *testing.T, p sandbox.Policy, script string) (*sandbox.Cmd, string) {
	t.Helper()
	c, err := sandbox.Command(t.Context(), p, "/bin/sh", "-c", script)
	if err != nil {
		t.Fatal(err)
	}
	m := proctest.NewMarker()
	c.Dir = p.Mounts[0].Path
	c.Env = []string{"PATH=/usr/bin:/bin", proctest.Env(m)}
	return c, m
}

// TestEachABI runs commands at every Landlock ABI up to the kernel's
// (Config.LandlockABI) and checks what docs/sandbox.md says each one
// enforces: files outside the mounts always out of reach; links and
// renames across directories from ABI 2; truncate(2) of a read-only
// file refused from 3; signals to processes outside the sandbox refused
// from 6; and, whatever the ABI, TCP denied by the command's network
// namespace (TestEachABIWithoutNamespaces: by the seccomp filter).
func TestEachABI(t *testing.T) {
	kernel := testenv.Landlock(t, 1)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	for abi := 1; abi <= kernel; abi++ {
		for _, mode := range []string{sandbox.ContainmentPIDNamespace, sandbox.ContainmentSubreaper} {
			t.Run(fmt.Sprintf("ABI_%d/%s", abi, mode), func(t *testing.T) {
				if mode == sandbox.ContainmentPIDNamespace {
					testenv.PIDNamespace(t) // the host confines the init shell
				}
				testenv.NetNamespace(t)
				eachABI(t, abi, mode, self, ln.Addr().String(), sandbox.DeniedByNamespace)
			})
		}
	}
	// A cap above the kernel's is the kernel's; a negative one is refused.
	if st := (sandbox.Config{LandlockABI: kernel + 1}).Status(); st.ABI != kernel {
		t.Errorf("cap %d on ABI %d: status %+v", kernel+1, kernel, st)
	}
	if _, err := sandbox.Command(t.Context(), sandbox.Policy{Config: sandbox.Config{LandlockABI: -1}}, "/bin/true"); err == nil {
		t.Error("a negative ABI cap was accepted")
	}
}

// TestEachABIWithoutNamespaces is TestEachABI where no namespace can be
// made: under the subreaper, with the network denied by the seccomp
// filter at every ABI.
func TestEachABIWithoutNamespaces(t *testing.T) {
	if testenv.Without(t, testenv.NoNamespaces) {
		return
	}
	kernel := testenv.Landlock(t, 1)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go acceptAll(ln)
	for abi := 1; abi <= kernel; abi++ {
		t.Run(fmt.Sprintf("ABI_%d", abi), func(t *testing.T) {
			eachABI(t, abi, sandbox.ContainmentSubreaper, self, ln.Addr().String(), sandbox.DeniedBySeccomp)
		})
	}
}

// eachABI is one case of TestEachABI: ABI abi under containment mode,
// self being the test binary and addr a TCP listener's address. Under
// the subreaper the shell's parent is the unconfined helper, a process
// outside the sandbox to signal.
func eachABI(t *testing.T, abi int, mode, self, addr, wantNetBy string) {
	l := newLayout(t)
	p := l.policy(sandbox.Config{LandlockABI: abi, ReadOnly: []string{self}, Containment: mode, TempRoot: t.TempDir()})
	run := func(name string, args ...string) (string, int, sandbox.Status) {
		t.Helper()
		c, err := sandbox.Command(t.Context(), p, name, args...)
		if err != nil {
			t.Fatal(err)
		}
		c.Dir = l.work
		c.Env = []string{"PATH=/usr/bin:/bin"}
		out, err := c.CombinedOutput()
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatal(err)
		}
		return string(out), c.ProcessState.ExitCode(), c.Status
	}
	check := func(what string, enforced bool, out string, code int) {
		t.Helper()
		if refused := code != 0; refused != enforced {
			t.Errorf("%s: refused %v, want %v (exit %d):\n%s", what, refused, enforced, code, out)
		}
	}
	out, code, st := run("/bin/sh", "-c", "cat "+l.secret)
	check("reading outside the mounts", true, out, code)
	if st.ABI != abi || !strings.HasPrefix(st.String(), fmt.Sprintf("Landlock ABI %d;", abi)) {
		t.Errorf("status %+v %q", st, st)
	}
	out, code, _ = run("/bin/sh", "-c", "mkdir a b && echo x > a/f && ln a/f b/f")
	check("a link across directories", abi < 2, out, code)
	readme := filepath.Join(l.docs, "readme.md")
	out, code, _ = run(self, truncArg, readme)
	check("truncate(2) of a read-only file", abi >= 3, out, code)
	if b, _ := os.ReadFile(readme); (string(b) == "README\n") != (abi >= 3) {
		t.Errorf("the read-only file holds %q after truncate", b)
	}
	// The network is denied by a network namespace (or where none can
	// be made, a seccomp filter) whatever the ABI; Landlock alone would
	// refuse TCP from ABI 4.
	out, code, st = run(self, dialArg, addr)
	check("a TCP connection", true, out, code)
	if !st.TCPDenied || !st.UDPDenied || st.NetworkDeniedBy != wantNetBy || st.Warning() != "" {
		t.Errorf("status %+v, warning %q", st, st.Warning())
	}
	if mode == sandbox.ContainmentSubreaper {
		out, code, _ = run("/bin/sh", "-c", "kill -0 $PPID")
		check("signalling the helper, outside the sandbox", abi >= 6, out, code)
	}
}
