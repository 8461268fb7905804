// Package proctest finds and waits for real processes in tests, by a
// marker in their environment: a process and everything it starts carry
// the variables it was given, whichever process group, session or PID
// namespace they end up in. It reads /proc and is Linux-only in effect:
// elsewhere no process is ever found.
package proctest

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"weft.dev/weft/env/sandbox"
	"weft.dev/weft/internal/testenv"
)

// MarkerKey is the environment variable tests mark processes with.
const MarkerKey = "WEFT_TEST_MARK"

// NewMarker returns a fresh marker value.
func NewMarker() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Env returns the KEY=VALUE entry that marks a process with marker.
func Env(marker string) string { return MarkerKey + "=" + marker }

// Proc is a live process carrying a marker.
type Proc struct {
	Pid  int
	Argv []string
}

// Marked returns the live (not zombie) processes whose environment holds
// MarkerKey=marker, in the test's PID namespace.
func Marked(marker string) []Proc {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	want := []byte("\x00" + Env(marker) + "\x00")
	var out []Proc
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || !alive(pid) {
			continue
		}
		env, err := os.ReadFile("/proc/" + e.Name() + "/environ")
		if err != nil || !bytes.Contains(append(append([]byte{0}, env...), 0), want) {
			continue
		}
		cmdline, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		out = append(out, Proc{Pid: pid, Argv: strings.Split(strings.TrimSuffix(string(cmdline), "\x00"), "\x00")})
	}
	return out
}

// alive reports whether pid exists and is not a zombie.
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && i+2 < len(s) && s[i+2] != 'Z'
}

// Running returns the marked processes whose argv is exactly argv.
func Running(marker string, argv ...string) []Proc {
	var out []Proc
	for _, p := range Marked(marker) {
		if strings.Join(p.Argv, "\x00") == strings.Join(argv, "\x00") {
			out = append(out, p)
		}
	}
	return out
}

// Eventually polls cond until it holds or limit passes, and fails t with
// what() when it does not: what describes the state at the failure.
func Eventually(t testing.TB, limit time.Duration, what func() string, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	deadline := time.NewTimer(limit)
	defer deadline.Stop()
	for !cond() {
		select {
		case <-tick.C:
		case <-deadline.C:
			t.Fatalf("after %v: %s", limit, what())
		}
	}
}

// WaitTree waits until the marked sleeps "sleep N" for each N in secs run.
func WaitTree(t testing.TB, marker string, secs ...string) {
	t.Helper()
	Eventually(t, 10*time.Second, func() string { return "the tree never started: " + describe(marker) }, func() bool {
		for _, s := range secs {
			if len(Running(marker, "sleep", s)) == 0 {
				return false
			}
		}
		return true
	})
}

// WaitGone waits until no process carries marker.
func WaitGone(t testing.TB, marker string) {
	t.Helper()
	Eventually(t, 10*time.Second, func() string { return "survivors: " + describe(marker) }, func() bool { return len(Marked(marker)) == 0 })
}

func describe(marker string) string {
	var b strings.Builder
	for _, p := range Marked(marker) {
		b.WriteString(strconv.Itoa(p.Pid) + " " + strings.Join(p.Argv, " ") + "; ")
	}
	return b.String()
}

// Tree is the shell command of the containment tests: a setsid child, a
// double-forked one and a foreground one, sleeping 300, 301 and 302
// seconds (see WaitTree).
const Tree = `setsid sh -c 'sleep 300' & (sleep 301 &) ; sleep 302`

// EachContainment runs f once per containment mode, with an unsandboxed
// sandbox configuration forcing it: a PID namespace (where this machine
// allows none, skipped, or failed under CI: [testenv.PIDNamespace]), and
// the subreaper fallback. A third run, "no-namespaces", asks for no mode
// in a child test binary that cannot make namespaces
// ([testenv.Without]), where weft falls back to the subreaper by itself.
func EachContainment(t *testing.T, f func(t *testing.T, cfg sandbox.Config)) {
	for _, mode := range []string{sandbox.ContainmentPIDNamespace, sandbox.ContainmentSubreaper} {
		t.Run(mode, func(t *testing.T) {
			if mode == sandbox.ContainmentPIDNamespace {
				testenv.PIDNamespace(t)
			}
			f(t, sandbox.Config{Unsandboxed: true, Containment: mode, TempRoot: t.TempDir()})
		})
	}
	t.Run("no-namespaces", func(t *testing.T) {
		if testenv.Without(t, testenv.NoNamespaces) {
			return
		}
		if mode, err := sandbox.Containment(); mode != sandbox.ContainmentSubreaper {
			t.Fatalf("without namespaces, containment %s (%v); want the subreaper", mode, err)
		}
		f(t, sandbox.Config{Unsandboxed: true, TempRoot: t.TempDir()})
	})
}
