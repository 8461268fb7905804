//go:build linux

package sandbox_test

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
	"weft.dev/weft/env/sandbox"
	"weft.dev/weft/internal/testenv"
)

// TestEscapes runs the shell escapes of the spec against a real Landlock
// sandbox: each must fail, and the host tree must be unchanged.
func TestEscapes(t *testing.T) {
	testenv.Landlock(t, 1)
	l := newLayout(t)
	p := l.policy(sandbox.Config{})
	escapes := map[string]string{
		"cat outside":        `cat ` + l.secret,
		"ls outside":         `ls ` + l.outside,
		"ls root":            `ls /`,
		"symlink to root":    `ln -s / x && cat x` + l.secret,
		"symlink to outside": `ln -s ` + l.outside + ` y && cat y/secret.txt`,
		"cp outside":         `cp ` + l.secret + ` stolen && cat stolen`,
		"hard link outside":  `ln ` + l.secret + ` hard && cat hard`,
		"write ro mount":     `echo x > ` + filepath.Join(l.docs, "new.txt"),
		"append ro mount":    `echo x >> ` + filepath.Join(l.docs, "readme.md"),
		"truncate ro mount":  `: > ` + filepath.Join(l.docs, "readme.md"),
		"rm ro mount":        `rm -f ` + filepath.Join(l.docs, "readme.md"),
		"mv out of ro mount": `mv ` + filepath.Join(l.docs, "readme.md") + ` moved`,
		"mkdir ro mount":     `mkdir ` + filepath.Join(l.docs, "d"),
		"symlink in ro":      `ln -s / ` + filepath.Join(l.docs, "root"),
		"hard link ro to rw": `ln ` + filepath.Join(l.docs, "readme.md") + ` rolink && echo x >> rolink`,
		"write outside":      `echo x > ` + filepath.Join(l.outside, "new.txt"),
		"write /tmp":         `echo x > /tmp/weft-sandbox-escape-$$`,
		"write etc":          `echo x >> /etc/hostname`,
		"tty":                `echo x > /dev/tty`,
		"parent environ":     `cat /proc/$PPID/environ`,
		"own environ":        `cat /proc/self/environ`,
		"proc listing":       `ls /proc`,
	}
	for name, script := range escapes {
		t.Run(name, func(t *testing.T) {
			out, code, _ := sh(t, p, l.work, script)
			if code == 0 {
				t.Errorf("%s: escaped, output:\n%s", script, out)
			}
			if strings.Contains(out, "SECRET") {
				t.Errorf("%s: secret leaked:\n%s", script, out)
			}
		})
	}
	if data, _ := os.ReadFile(filepath.Join(l.docs, "readme.md")); string(data) != "README\n" {
		t.Errorf("ro mount file changed: %q", data)
	}
	entries, _ := os.ReadDir(l.docs)
	outside, _ := os.ReadDir(l.outside)
	if len(entries) != 1 || len(outside) != 1 {
		t.Errorf("ro mount has %d entries, outside %d", len(entries), len(outside))
	}
}

// TestParallelStarts starts sandboxed commands at once while other
// goroutines of the host write and read outside every sandbox and check
// that their thread has no no_new_privs: each command is confined, and
// no goroutine of the host ever runs on a thread restricted to start one.
func TestParallelStarts(t *testing.T) {
	testenv.Landlock(t, 1)
	l := newLayout(t)
	p := l.policy(sandbox.Config{})
	stop := make(chan struct{})
	var host sync.WaitGroup
	for i := range 2 * runtime.GOMAXPROCS(0) {
		host.Go(func() {
			name := filepath.Join(l.outside, fmt.Sprintf("host-%d", i))
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				if err := os.WriteFile(name, []byte(strconv.Itoa(n)), 0o644); err != nil {
					t.Errorf("the host cannot write outside the sandbox: %v", err)
					return
				}
				if _, err := os.ReadFile(l.secret); err != nil {
					t.Errorf("the host cannot read outside the sandbox: %v", err)
					return
				}
				if v, err := unix.PrctlRetInt(unix.PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0); err != nil || v != 0 {
					t.Errorf("a goroutine of the host runs on a restricted thread (%d, %v)", v, err)
					return
				}
				runtime.Gosched()
			}
		})
	}
	var cmds sync.WaitGroup
	const n = 16
	for i := range n {
		cmds.Go(func() {
			script := fmt.Sprintf(`echo %d > in-%d && ! cat %s && ! echo x > %s`, i, i, l.secret, filepath.Join(l.outside, fmt.Sprintf("shell-%d", i)))
			c, err := sandbox.Command(t.Context(), p, "/bin/sh", "-c", script)
			if err != nil {
				t.Error(err)
				return
			}
			c.Dir = l.work
			c.Env = []string{"PATH=/usr/bin:/bin"}
			if out, err := c.CombinedOutput(); err != nil || strings.Contains(string(out), "SECRET") {
				t.Errorf("%s: %v, output:\n%s", script, err, out)
			}
		})
	}
	cmds.Wait()
	close(stop)
	host.Wait()
	for i := range n {
		if b, err := os.ReadFile(filepath.Join(l.work, fmt.Sprintf("in-%d", i))); err != nil || string(b) != fmt.Sprintf("%d\n", i) {
			t.Errorf("command %d wrote %q in its mount (%v)", i, b, err)
		}
		if _, err := os.Stat(filepath.Join(l.outside, fmt.Sprintf("shell-%d", i))); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("command %d wrote outside its mounts (%v)", i, err)
		}
	}
	hostUnrestricted(t)
}

// TestAllowed checks that what the policy grants works.
func TestAllowed(t *testing.T) {
	abi := testenv.Landlock(t, 1)
	l := newLayout(t)
	p := l.policy(sandbox.Config{})
	ok := map[string]string{
		"read ro mount":  `cat ` + filepath.Join(l.docs, "readme.md"),
		"list ro mount":  `ls ` + l.docs,
		"write rw mount": `echo hello > f.txt && cat f.txt && mkdir -p d/e && mv f.txt d/e/g.txt && rm -r d`,
		"cp ro to rw":    `cp ` + filepath.Join(l.docs, "readme.md") + ` copy.md && cat copy.md`,
		"system":         `ls /usr/bin >/dev/null && cat /etc/passwd >/dev/null && head -c 8 /dev/urandom | wc -c`,
		"dev null":       `echo x > /dev/null && cat /dev/null`,
		"stderr":         `echo x > /dev/stderr`,
		"machine info":   `grep -q . /proc/cpuinfo && grep -q MemTotal /proc/meminfo && cat /sys/devices/system/cpu/online`,
		"pipes":          `echo abc | tr a-z A-Z | grep ABC`,
		"subshell":       `x=$(echo y); [ "$x" = y ]`,
		"kill own child": `sleep 10 & kill $!; wait $!; [ $? -gt 128 ]`,
	}
	if abi >= 2 {
		ok["rename across dirs"] = `mkdir a b && echo x > a/f && mv a/f b/f && ln b/f a/link && cat a/link`
	}
	for name, script := range ok {
		t.Run(name, func(t *testing.T) {
			out, code, _ := sh(t, p, l.work, script)
			if code != 0 {
				t.Errorf("%s: exit %d, output:\n%s", script, code, out)
			}
		})
	}
}

func TestTempDir(t *testing.T) {
	testenv.Landlock(t, 1)
	l := newLayout(t)
	out, code, tmp := sh(t, l.policy(sandbox.Config{}), l.work,
		`echo "tmp=$TMPDIR"; echo data > "$TMPDIR/f" && mkdir "$TMPDIR/d" && mv "$TMPDIR/f" "$TMPDIR/d/g" && cat "$TMPDIR/d/g"; ls "$TMPDIR/.."`)
	if code == 0 || !strings.Contains(out, "tmp="+tmp+"\ndata\n") {
		// ls of the parent of TMPDIR must fail: only TMPDIR itself is open.
		t.Errorf("exit %d, temp %q, output:\n%s", code, tmp, out)
	}
	if !strings.HasPrefix(tmp, os.TempDir()) {
		t.Errorf("temporary directory %q is not under %q", tmp, os.TempDir())
	}
	if _, err := os.Stat(tmp); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("temporary directory left behind: %v", err)
	}
}

// TestSignals checks the ABI 6 signal scope: the sandbox cannot signal
// processes outside it. Under the subreaper the shell's parent is the
// unconfined helper; in a PID namespace the host is out of sight too.
func TestSignals(t *testing.T) {
	testenv.Landlock(t, 6)
	l := newLayout(t)
	for _, containment := range []string{sandbox.ContainmentSubreaper, ""} {
		p := l.policy(sandbox.Config{Containment: containment})
		out, code, _ := sh(t, p, l.work, `kill -0 $PPID`)
		if containment == sandbox.ContainmentSubreaper && code == 0 {
			t.Errorf("signalled the helper; output:\n%s", out)
		}
		out, code, _ = sh(t, p, l.work, `kill -0 `+strconv.Itoa(os.Getpid()))
		if code == 0 {
			t.Errorf("%q: signalled the host; output:\n%s", containment, out)
		}
	}
}

// TestNetwork dials a loopback listener of the host from inside the
// sandbox: under NetworkDeny the command's own network namespace has
// nothing listening on its loopback, so the connection is refused; under
// NetworkAllow it connects.
func TestNetwork(t *testing.T) {
	testenv.Landlock(t, 1)
	testenv.NetNamespace(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go acceptAll(ln)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	l := newLayout(t)
	dial := func(network string) (string, int, sandbox.Status) {
		p := l.policy(sandbox.Config{Network: network, ReadOnly: []string{self}})
		c, err := sandbox.Command(t.Context(), p, self, dialArg, ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		out, _ := c.CombinedOutput()
		return string(out), c.ProcessState.ExitCode(), c.Status
	}
	out, code, st := dial(sandbox.NetworkDeny)
	if code != 3 || !strings.Contains(out, "connection refused") || st.NetworkDeniedBy != sandbox.DeniedByNamespace || !st.TCPDenied || !st.UDPDenied {
		t.Errorf("deny: exit %d, status %+v, output:\n%s", code, st, out)
	}
	out, code, st = dial(sandbox.NetworkAllow)
	if code != 0 || !strings.Contains(out, "connected") || st.TCPDenied || st.NetworkDeniedBy != "" {
		t.Errorf("allow: exit %d, status %+v, output:\n%s", code, st, out)
	}
}
