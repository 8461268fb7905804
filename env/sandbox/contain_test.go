//go:build linux

package sandbox_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"weft.dev/weft/env/sandbox"
	"weft.dev/weft/internal/proctest"
	"weft.dev/weft/internal/testenv"
)

// eachContainment runs f under each containment mode: a PID namespace
// (testenv.PIDNamespace), and the subreaper fallback, forced. Each gets
// an unsandboxed and a sandboxed policy (testenv.Landlock).
func eachContainment(t *testing.T, f func(t *testing.T, p sandbox.Policy)) {
	for _, mode := range []string{sandbox.ContainmentPIDNamespace, sandbox.ContainmentSubreaper} {
		t.Run(mode, func(t *testing.T) {
			if mode == sandbox.ContainmentPIDNamespace {
				testenv.PIDNamespace(t)
			}
			l := newLayout(t)
			for _, sandboxed := range []bool{false, true} {
				name := "unsandboxed"
				if sandboxed {
					name = "landlock"
				}
				t.Run(name, func(t *testing.T) {
					if sandboxed {
						testenv.Landlock(t, 1)
					}
					p := l.policy(sandbox.Config{Unsandboxed: !sandboxed, Containment: mode})
					p.TempRoot = t.TempDir()
					f(t, p)
				})
			}
		})
	}
}

// marked prepares script under p with a fresh marker in its environment.
func marked(t *testing.T, ctx context.Context, p sandbox.Policy, script string) (*sandbox.Cmd, string) {
	t.Helper()
	c, err := sandbox.Command(ctx, p, "/bin/sh", "-c", script)
	if err != nil {
		t.Fatal(err)
	}
	if c.Status.Containment != p.Containment {
		t.Fatalf("containment %q, want %q", c.Status.Containment, p.Containment)
	}
	m := proctest.NewMarker()
	c.Dir = p.Mounts[0].Path
	c.Env = []string{"PATH=/usr/bin:/bin", proctest.Env(m)}
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return c, m
}

func exitOf(t *testing.T, err error, c *sandbox.Cmd) int {
	t.Helper()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatal(err)
	}
	return c.ProcessState.ExitCode()
}

// TestContainedExitAndStdio: statuses, stdin and stdout pass through the
// helper unchanged.
func TestContainedExitAndStdio(t *testing.T) {
	eachContainment(t, func(t *testing.T, p sandbox.Policy) {
		for script, want := range map[string]int{
			"exit 0":        0,
			"exit 3":        3,
			"exit 255":      255,
			"kill -TERM $$": 128 + int(syscall.SIGTERM),
			"kill -KILL $$": 128 + int(syscall.SIGKILL),
		} {
			c, _ := marked(t, t.Context(), p, script)
			if got := exitOf(t, c.Run(), c); got != want {
				t.Errorf("%s: exit %d, want %d", script, got, want)
			}
		}
		// The shell's parent is the helper: init of the namespace, or not.
		c, _ := marked(t, t.Context(), p, `echo $PPID`)
		out, err := c.Output()
		if ns := p.Containment == sandbox.ContainmentPIDNamespace; err != nil || (string(out) == "1\n") != ns {
			t.Errorf("%s: the shell's parent is %q (%v)", p.Containment, out, err)
		}
		c, _ = marked(t, t.Context(), p, `read a; read b; echo "got $a $b"; echo err >&2; cat`)
		c.Stdin = strings.NewReader("one\ntwo\nrest\n")
		out, err = c.Output()
		if err != nil || string(out) != "got one two\nrest\n" {
			t.Errorf("stdio: %q, %v", out, err)
		}
		for shell, want := range map[string]int{"/nonexistent/sh": sandbox.ExitNotFound, "/dev/null": sandbox.ExitCannotRun} {
			p := p
			p.ReadOnly = append(p.ReadOnly, "/dev/null")
			c, err := sandbox.Command(t.Context(), p, shell)
			if err != nil {
				t.Fatal(err)
			}
			out, err := c.CombinedOutput()
			if got := exitOf(t, err, c); got != want || !strings.Contains(string(out), "weft sandbox: exec "+shell) {
				t.Errorf("%s: exit %d, want %d: %q", shell, got, want, out)
			}
		}
	})
}

// TestContainedLeftoversDie: what a shell leaves running in the
// background, setsid and double-forked included, dies when it exits.
func TestContainedLeftoversDie(t *testing.T) {
	eachContainment(t, func(t *testing.T, p sandbox.Policy) {
		c, m := marked(t, t.Context(), p, `setsid sleep 300 & (sleep 301 &); sleep 302 & exit 0`)
		if err := c.Run(); err != nil {
			t.Fatal(err)
		}
		proctest.WaitGone(t, m)
	})
}

// TestContainedKill: Kill and the context end the whole tree, setsid and
// double-forked descendants included.
func TestContainedKill(t *testing.T) {
	eachContainment(t, func(t *testing.T, p sandbox.Policy) {
		c, m := marked(t, t.Context(), p, proctest.Tree)
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		proctest.WaitTree(t, m, "300", "301", "302")
		if err := c.Kill(); err != nil {
			t.Fatal(err)
		}
		c.Wait()
		proctest.WaitGone(t, m)
		if err := c.Kill(); !errors.Is(err, os.ErrProcessDone) {
			t.Errorf("Kill after Wait = %v", err)
		}

		ctx, cancel := context.WithCancel(t.Context())
		c, m = marked(t, ctx, p, proctest.Tree)
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		proctest.WaitTree(t, m, "300", "301", "302")
		cancel()
		if err := c.Wait(); err == nil {
			t.Error("Wait after cancel = nil")
		}
		proctest.WaitGone(t, m)
	})
}

// TestContainedSignals: signals sent to the group of the command's
// init reach the shell, which handles them (a trap) or dies of them (a
// shell that becomes sleep), and the command reports what the shell did.
func TestContainedSignals(t *testing.T) {
	eachContainment(t, func(t *testing.T, p sandbox.Policy) {
		for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGUSR1} {
			for script, want := range map[string]struct {
				code int
				out  string
			}{
				`trap 'echo got; exit 3' ` + strings.TrimPrefix(sigName(sig), "SIG") + `; sleep 302 & wait`: {3, "got\n"},
				`exec sleep 302`: {128 + int(sig), ""},
			} {
				c, m := marked(t, t.Context(), p, script)
				var out strings.Builder
				c.Stdout = &out
				if err := c.Start(); err != nil {
					t.Fatal(err)
				}
				proctest.WaitTree(t, m, "302")
				// As the process manager does: to the group of the
				// command's init.
				syscall.Kill(-c.Process.Pid, sig)
				if got := exitOf(t, c.Wait(), c); got != want.code || out.String() != want.out {
					t.Errorf("%v: %s: exit %d, output %q", sig, script, got, out.String())
				}
				proctest.WaitGone(t, m)
			}
		}
	})
}

// TestConfinedInEachContainment: the shell is confined the same way
// whether the host or the helper started it; unsandboxed, it is not.
func TestConfinedInEachContainment(t *testing.T) {
	testenv.Landlock(t, 1)
	eachContainment(t, func(t *testing.T, p sandbox.Policy) {
		outside := t.TempDir()
		secret := filepath.Join(outside, "secret.txt")
		write(t, secret, "SECRET\n")
		if p.Unsandboxed {
			c, _ := marked(t, t.Context(), p, `cat `+secret+` && echo x > `+filepath.Join(outside, "new.txt"))
			if out, err := c.CombinedOutput(); err != nil || string(out) != "SECRET\n" {
				t.Errorf("unsandboxed, the shell cannot reach outside its mounts: %v, output:\n%s", err, out)
			}
			return
		}
		for script, wantOK := range map[string]bool{
			`echo x > in.txt && cat in.txt`:                 true,
			`echo x > ` + filepath.Join(outside, "new.txt"): false,
			`cat ` + secret: false,
			`cat /proc/$PPID/environ /proc/1/environ`: false,
			`ls /proc`:                    false,
			`echo x > /proc/self/uid_map`: false,
			`sh -c 'echo x > ` + filepath.Join(outside, "n") + `'`: false,
		} {
			c, _ := marked(t, t.Context(), p, script)
			out, err := c.CombinedOutput()
			if ok := exitOf(t, err, c) == 0; ok != wantOK || strings.Contains(string(out), "SECRET") {
				t.Errorf("%s: exit %d, output:\n%s", script, c.ProcessState.ExitCode(), out)
			}
		}
		if ents, _ := os.ReadDir(outside); len(ents) != 1 {
			t.Errorf("the shell wrote outside its mounts: %v", ents)
		}
	})
}

// TestPrepared: a command whose caller starts the embedded exec.Cmd
// after Prepare runs under the helper, which confines and contains it.
func TestPrepared(t *testing.T) {
	testenv.Landlock(t, 1)
	eachContainment(t, func(t *testing.T, p sandbox.Policy) {
		outside := t.TempDir()
		secret := filepath.Join(outside, "secret.txt")
		write(t, secret, "SECRET\n")
		c, m := marked(t, t.Context(), p, `cat `+secret+`; setsid sleep 300 & exit 0`)
		if err := c.Prepare(); err != nil {
			t.Fatal(err)
		}
		if c.Args[1] != sandbox.HelperArg {
			t.Fatalf("prepared %q", c.Args)
		}
		var out strings.Builder
		c.Stdout, c.Stderr = &out, &out
		if err := c.Cmd.Start(); err != nil {
			t.Fatal(err)
		}
		err := c.Wait()
		if secretRead := strings.Contains(out.String(), "SECRET"); secretRead == !p.Unsandboxed || err != nil {
			t.Errorf("unsandboxed=%v: %v, output:\n%s", p.Unsandboxed, err, out.String())
		}
		proctest.WaitGone(t, m)
	})
}

// TestOnlyTheTreeRestricted: only the shell's tree is confined. The
// shell has no_new_privs (and with it the Landlock domain); the host can
// still write where the shell may not while the shell runs; no thread of
// a helper, nor any of the host once the command has been waited for,
// has no_new_privs: the thread that was restricted to fork the shell, the
// helper's or the host's, is gone. Unsandboxed, nothing is restricted.
func TestOnlyTheTreeRestricted(t *testing.T) {
	testenv.Landlock(t, 1)
	eachContainment(t, func(t *testing.T, p sandbox.Policy) {
		outside := t.TempDir()
		c, m := marked(t, t.Context(), p, `echo x > `+filepath.Join(outside, "shell.txt")+`; sleep 302`)
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { c.Kill(); c.Wait() }()
		proctest.WaitTree(t, m, "302")
		sleep := proctest.Running(m, "sleep", "302")[0].Pid
		if p.Unsandboxed {
			// Nothing is restricted: not the shell, not the host.
			if got := noNewPrivs(t, sleep, sleep); got != "0" {
				t.Errorf("the unsandboxed shell's NoNewPrivs = %q", got)
			}
			if _, err := os.Stat(filepath.Join(outside, "shell.txt")); err != nil {
				t.Errorf("the unsandboxed shell could not write outside its mounts: %v", err)
			}
			if n := restrictedThreads(t, os.Getpid()); n != 0 {
				t.Errorf("%d threads of the host have no_new_privs for an unsandboxed command", n)
			}
			return
		}
		if got := noNewPrivs(t, sleep, sleep); got != "1" {
			t.Errorf("the shell's NoNewPrivs = %q", got)
		}
		if _, err := os.Stat(filepath.Join(outside, "shell.txt")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the shell wrote outside its mounts: %v", err)
		}
		write(t, filepath.Join(outside, "host.txt"), "the host is not confined\n")
		if !isHelper(c.Process.Pid) {
			// The host's thread that forked the init shell waits for it.
			if n := restrictedThreads(t, os.Getpid()); n != 1 {
				t.Errorf("%d threads of the host have no_new_privs while the command runs, want 1", n)
			}
		} else {
			proctest.Eventually(t, 5*time.Second, func() string { return "a thread of the helper has no_new_privs" }, func() bool {
				return restrictedThreads(t, c.Process.Pid) == 0
			})
		}
		c.Kill()
		c.Wait()
		proctest.WaitGone(t, m)
		hostUnrestricted(t)
	})
}

// hostUnrestricted waits until no thread of this process has
// no_new_privs: a thread restricted to start a command ends moments
// after the command has been waited for.
func hostUnrestricted(t *testing.T) {
	t.Helper()
	proctest.Eventually(t, 5*time.Second, func() string { return "a thread of the host has no_new_privs" }, func() bool {
		return restrictedThreads(t, os.Getpid()) == 0
	})
}

// restrictedThreads returns how many threads of pid have no_new_privs.
func restrictedThreads(t *testing.T, pid int) int {
	tasks, _ := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/task")
	n := 0
	for _, task := range tasks {
		tid, _ := strconv.Atoi(task.Name())
		if noNewPrivs(t, pid, tid) == "1" {
			n++
		}
	}
	return n
}

// isHelper reports whether pid runs the sandbox helper, rather than the
// init shell that the host starts itself.
func isHelper(pid int) bool {
	b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	args := strings.Split(string(b), "\x00")
	return len(args) > 1 && args[1] == sandbox.HelperArg
}

// noNewPrivs returns the NoNewPrivs flag of thread tid of pid.
func noNewPrivs(t *testing.T, pid, tid int) string {
	b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/task/" + strconv.Itoa(tid) + "/status")
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "NoNewPrivs:"); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

func sigName(s syscall.Signal) string {
	return map[syscall.Signal]string{syscall.SIGINT: "INT", syscall.SIGTERM: "TERM", syscall.SIGHUP: "HUP", syscall.SIGUSR1: "USR1"}[s]
}

// TestContainmentStatus: the mode is reported, and a forced mode is
// validated.
func TestContainmentStatus(t *testing.T) {
	mode, err := sandbox.Containment()
	t.Logf("containment %s (%v)", mode, err)
	if mode != sandbox.ContainmentPIDNamespace && mode != sandbox.ContainmentSubreaper {
		t.Fatalf("Containment() = %q", mode)
	}
	st := sandbox.Config{Unsandboxed: true, Containment: sandbox.ContainmentSubreaper}.Status()
	if st.Containment != sandbox.ContainmentSubreaper || !strings.Contains(st.String(), "subreaper") {
		t.Errorf("status %+v %q", st, st)
	}
	if _, err := sandbox.Command(t.Context(), sandbox.Policy{Config: sandbox.Config{Unsandboxed: true, Containment: "jail"}}, "/bin/sh"); err == nil {
		t.Error("unknown containment accepted")
	}
	if _, err := sandbox.Command(t.Context(), sandbox.Policy{Config: sandbox.Config{Unsandboxed: true, TempRoot: "tmp"}}, "/bin/sh"); err == nil {
		t.Error("relative TempRoot accepted")
	}
}

// TestRemoveStale: the directories of a dead owner go, a live owner's
// stay, whatever the owner.
func TestRemoveStale(t *testing.T) {
	root := t.TempDir()
	// Our own command's directory: its owner (this test) is alive.
	c, err := sandbox.Command(t.Context(), sandbox.Policy{Config: sandbox.Config{Unsandboxed: true, TempRoot: root}}, "/bin/true")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Prepare(); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	mine := c.TempDir()
	if filepath.Dir(mine) != root || !strings.HasPrefix(filepath.Base(mine), "weft-cmd-") {
		t.Fatalf("temporary directory %s not under %s", mine, root)
	}
	// Another live process's, then the same once it is dead.
	other := exec.Command("/bin/sleep", "300")
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	defer other.Process.Kill()
	otherDir := filepath.Join(root, "weft-cmd-"+pidStart(t, other.Process.Pid)+"-123")
	// A dead owner (a pid that never started at that time), a name of an
	// older weft, and a file.
	deadDir := filepath.Join(root, "weft-cmd-"+pidStart(t, os.Getpid())+"9-456")
	oldDir := filepath.Join(root, "weft-cmd-789")
	for _, d := range []string{otherDir, deadDir, oldDir} {
		if err := os.MkdirAll(filepath.Join(d, "sub"), 0o700); err != nil {
			t.Fatal(err)
		}
		os.Chmod(filepath.Join(d, "sub"), 0) // removed all the same
	}
	write(t, filepath.Join(root, "weft-cmd-1-1-file"), "x")

	n, err := sandbox.RemoveStale(root)
	if err != nil || n != 1 {
		t.Errorf("RemoveStale = %d, %v; want 1", n, err)
	}
	for _, d := range []string{mine, otherDir, oldDir, filepath.Join(root, "weft-cmd-1-1-file")} {
		if _, err := os.Lstat(d); err != nil {
			t.Errorf("%s removed: %v", filepath.Base(d), err)
		}
	}
	if _, err := os.Lstat(deadDir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("dead owner's directory kept: %v", err)
	}

	other.Process.Kill()
	other.Wait()
	if n, err := sandbox.RemoveStale(root); err != nil || n != 1 {
		t.Errorf("after the owner died: RemoveStale = %d, %v; want 1", n, err)
	}
	if _, err := os.Lstat(otherDir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("dead owner's directory kept: %v", err)
	}
	if _, err := os.Lstat(mine); err != nil {
		t.Errorf("live owner's directory removed: %v", err)
	}
}

// pidStart returns "PID-START" of a running process, as temporary
// directory names hold it.
func pidStart(t *testing.T, pid int) string {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return strconv.Itoa(pid) + "-" + f[19]
}
