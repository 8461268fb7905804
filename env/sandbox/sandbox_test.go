package sandbox_test

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"go.uber.org/goleak"
	"weft.dev/weft/env"
	"weft.dev/weft/env/sandbox"
	"weft.dev/weft/event"
	"weft.dev/weft/internal/testenv"
)

// dialArg makes the test binary, run as a sandboxed "shell", dial the
// TCP address that follows and exit 0 on success, 3 on failure.
const dialArg = "__dial"

// truncArg makes the test binary truncate(2) the file that follows, by
// its path, and exit 0 on success, 3 on failure.
const truncArg = "__truncate"

func TestMain(m *testing.M) {
	if sandbox.IsHelper(os.Args) {
		sandbox.Main(os.Args)
	}
	if len(os.Args) == 3 && os.Args[1] == dialArg {
		c, err := net.Dial("tcp", os.Args[2])
		if err != nil {
			fmt.Println("dial:", err)
			os.Exit(3)
		}
		c.Close()
		fmt.Println("connected")
		os.Exit(0)
	}
	if len(os.Args) >= 3 && os.Args[1] == netArg {
		os.Exit(netOp(os.Args[2:]))
	}
	if len(os.Args) == 3 && os.Args[1] == truncArg {
		if err := os.Truncate(os.Args[2], 0); err != nil {
			fmt.Println("truncate:", err)
			os.Exit(3)
		}
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}

// layout is a host tree: mounts work (rw) and docs (ro), and outside, a
// directory no mount covers.
type layout struct {
	work, docs, outside, secret string
}

func newLayout(t testing.TB) layout {
	t.Helper()
	dir := t.TempDir()
	l := layout{
		work:    filepath.Join(dir, "work"),
		docs:    filepath.Join(dir, "docs"),
		outside: filepath.Join(dir, "outside"),
	}
	l.secret = filepath.Join(l.outside, "secret.txt")
	for _, d := range []string{l.work, l.docs, l.outside} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write(t, l.secret, "SECRET\n")
	write(t, filepath.Join(l.docs, "readme.md"), "README\n")
	return l
}

func write(t testing.TB, name, content string) {
	t.Helper()
	if err := os.WriteFile(name, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func (l layout) policy(cfg sandbox.Config) sandbox.Policy {
	return sandbox.Policy{Config: cfg, Mounts: []sandbox.Mount{
		{Path: l.work, Write: true},
		{Path: l.docs},
	}}
}

// sh runs script with /bin/sh -c under p in dir and returns its combined
// output, exit code and the command's temporary directory.
func sh(t *testing.T, p sandbox.Policy, dir, script string) (string, int, string) {
	t.Helper()
	c, err := sandbox.Command(t.Context(), p, "/bin/sh", "-c", script)
	if err != nil {
		t.Fatal(err)
	}
	c.Dir = dir
	c.Env = []string{"PATH=/usr/bin:/bin"}
	var out bytes.Buffer
	c.Stdout, c.Stderr = &out, &out
	err = c.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("%s: %v", script, err)
	}
	return out.String(), c.ProcessState.ExitCode(), c.TempDir()
}

func TestForBinding(t *testing.T) {
	l := newLayout(t)
	b, err := env.NewBinding(1, []event.Mount{
		{ID: "work", Kind: event.KindLocal, Path: l.work, Mode: event.ModeReadWrite, Default: true},
		{ID: "docs", Kind: event.KindLocal, Path: l.docs, Mode: event.ModeReadOnly},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	cfg := sandbox.Config{Network: sandbox.NetworkAllow, ReadOnly: []string{"/opt"}}
	p := sandbox.ForBinding(cfg, b)
	want := []sandbox.Mount{{Path: l.work, Write: true}, {Path: l.docs}}
	if fmt.Sprint(p.Mounts) != fmt.Sprint(want) || p.Network != sandbox.NetworkAllow || fmt.Sprint(p.ReadOnly) != "[/opt]" {
		t.Errorf("ForBinding = %+v", p)
	}
	cfg.ReadOnly[0] = "/changed"
	if p.ReadOnly[0] != "/opt" {
		t.Error("ForBinding shares ReadOnly with the config")
	}
	if p := sandbox.ForBinding(cfg, nil); len(p.Mounts) != 0 {
		t.Errorf("nil binding: %+v", p.Mounts)
	}
	// A session's own network policy wins over the host's default.
	sb, err := env.Open(event.Binding{BindingVersion: 1, Network: sandbox.NetworkDeny, Mounts: []event.Mount{
		{ID: "work", Kind: event.KindLocal, Path: l.work, Mode: event.ModeReadWrite}}})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	if p := sandbox.ForBinding(cfg, sb); p.Network != sandbox.NetworkDeny {
		t.Errorf("session network deny under a host allow: %q", p.Network)
	}
}

func TestCommandRejectsBadPolicy(t *testing.T) {
	for name, p := range map[string]sandbox.Policy{
		"network":        {Config: sandbox.Config{Network: "sometimes"}},
		"relative mount": {Mounts: []sandbox.Mount{{Path: "work"}}},
		"relative ro":    {Config: sandbox.Config{ReadOnly: []string{"opt"}}},
	} {
		if _, err := sandbox.Command(t.Context(), p, "/bin/sh"); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if _, err := sandbox.Command(t.Context(), sandbox.Policy{Config: sandbox.Config{Unsandboxed: true}}, "sh"); err == nil {
		t.Error("relative shell: no error")
	}
}

// TestRealKernel checks what this kernel gives: a sandboxed command.
// Without Landlock it is refused (TestWithoutLandlock).
func TestRealKernel(t *testing.T) {
	abi := testenv.Landlock(t, 1)
	t.Logf("Landlock ABI %d", abi)
	l := newLayout(t)
	c, err := sandbox.Command(t.Context(), l.policy(sandbox.Config{}), "/bin/true")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Run(); err != nil {
		t.Fatal(err)
	}
	if c.Status.Unsandboxed || c.Status.ABI != abi {
		t.Errorf("status %+v", c.Status)
	}
}

func TestUnsandboxed(t *testing.T) {
	l := newLayout(t)
	p := l.policy(sandbox.Config{Unsandboxed: true})
	out, code, tmp := sh(t, p, l.work, `echo "tmp=$TMPDIR"; echo data > "$TMPDIR/f" && cat "$TMPDIR/f"; cat `+l.secret)
	if code != 0 || !strings.Contains(out, "tmp="+tmp+"\n") || !strings.Contains(out, "data\nSECRET\n") {
		t.Errorf("exit %d, temp %q, output:\n%s", code, tmp, out)
	}
	if _, err := os.Stat(tmp); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("temporary directory left behind: %v", err)
	}
}

func TestTempDirRemovedEvenIfReadOnly(t *testing.T) {
	l := newLayout(t)
	p := l.policy(sandbox.Config{Unsandboxed: true})
	_, code, tmp := sh(t, p, l.work, `mkdir -p "$TMPDIR/a/b" && touch "$TMPDIR/a/b/f" && chmod 0 "$TMPDIR/a/b" "$TMPDIR/a"`)
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	if _, err := os.Stat(tmp); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("temporary directory left behind: %v", err)
	}
}

func TestStartFailureRemovesTempDir(t *testing.T) {
	// Whatever Start starts (the helper, the init shell, or off Linux the
	// shell itself) cannot enter its directory.
	l := newLayout(t)
	for _, cfg := range []sandbox.Config{{Unsandboxed: true}, {}} {
		if !cfg.Unsandboxed {
			testenv.Landlock(t, 1)
		}
		c, err := sandbox.Command(t.Context(), l.policy(cfg), "/bin/sh", "-c", "true")
		if err != nil {
			t.Fatal(err)
		}
		c.Dir = "/nonexistent/dir"
		if err := c.Start(); err == nil {
			c.Wait()
			t.Fatal("Start succeeded")
		}
		if _, err := os.Stat(c.TempDir()); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("temporary directory left behind: %v", err)
		}
		if err := c.Start(); err == nil {
			t.Error("second Start succeeded")
		}
	}
	// Nor does the helper exist.
	p := sandbox.Policy{Config: sandbox.Config{Unsandboxed: true, Executable: "/nonexistent/weft", Containment: sandbox.ContainmentSubreaper}}
	if runtime.GOOS != "linux" {
		p.Containment = ""
	}
	c, err := sandbox.Command(t.Context(), p, "/nonexistent/shell")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err == nil {
		c.Wait()
		t.Fatal("Start succeeded")
	}
	if _, err := os.Stat(c.TempDir()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("temporary directory left behind: %v", err)
	}
}

func TestHelperFailures(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) (int, string) {
		cmd := exec.Command(self, append([]string{sandbox.HelperArg}, args...)...)
		out, _ := cmd.CombinedOutput()
		return cmd.ProcessState.ExitCode(), string(out)
	}
	if code, out := run(`{"v":3`, "/bin/true"); code != sandbox.ExitCannotRun || !strings.HasPrefix(out, "weft sandbox: policy:") {
		t.Errorf("bad JSON: exit %d, %q", code, out)
	}
	if code, out := run(`{"v":3,"network":"deny","tempDir":"/tmp"}`); code != sandbox.ExitCannotRun || !strings.Contains(out, "usage") {
		t.Errorf("no shell: exit %d, %q", code, out)
	}
	if code, out := run(`{"v":3,"network":"deny","tempDir":"/tmp"}`, "true"); code != sandbox.ExitCannotRun || !strings.Contains(out, "not an absolute path") {
		t.Errorf("relative shell: exit %d, %q", code, out)
	}
	tmp := t.TempDir()
	pol := fmt.Sprintf(`{"v":3,"network":"deny","tempDir":%q}`, tmp)
	// Without Landlock the helper refuses before it tries to exec
	// (TestWithoutLandlock).
	testenv.Landlock(t, 1)
	code, out := run(pol, "/nonexistent/sh")
	if code != sandbox.ExitNotFound || !strings.Contains(out, "exec /nonexistent/sh") {
		t.Errorf("missing shell: exit %d, %q", code, out)
	}
	pol = fmt.Sprintf(`{"v":3,"network":"deny","tempDir":%q,"mounts":[{"path":"/nonexistent/mount","write":true}]}`, tmp)
	if code, out := run(pol, "/bin/true"); code != sandbox.ExitCannotRun || !strings.Contains(out, "/nonexistent/mount") {
		t.Errorf("missing mount: exit %d, %q", code, out)
	}
}
