//go:build linux

package sandbox_test

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"weft.dev/weft/env/sandbox"
)

// TestEscapes runs the shell escapes of the spec against a real Landlock
// sandbox: each must fail, and the host tree must be unchanged.
func TestEscapes(t *testing.T) {
	needLandlock(t, 1)
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

// TestAllowed checks that what the policy grants works.
func TestAllowed(t *testing.T) {
	abi := needLandlock(t, 1)
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
	needLandlock(t, 1)
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
// processes outside it.
func TestSignals(t *testing.T) {
	needLandlock(t, 6)
	l := newLayout(t)
	out, code, _ := sh(t, l.policy(sandbox.Config{}), l.work, `kill -0 $PPID`)
	if code == 0 {
		t.Errorf("signalled the parent; output:\n%s", out)
	}
}

// TestNetwork dials a loopback listener from inside the sandbox: denied
// under NetworkDeny (ABI 4 or later), allowed under NetworkAllow.
func TestNetwork(t *testing.T) {
	needLandlock(t, 4)
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
	if code != 3 || !strings.Contains(out, "permission denied") || !st.TCPDenied {
		t.Errorf("deny: exit %d, status %+v, output:\n%s", code, st, out)
	}
	out, code, st = dial(sandbox.NetworkAllow)
	if code != 0 || !strings.Contains(out, "connected") || st.TCPDenied {
		t.Errorf("allow: exit %d, status %+v, output:\n%s", code, st, out)
	}
}
