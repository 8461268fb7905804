package sandbox

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
	"weft.dev/weft/internal/seccomp"
)

// initShell is the program the host starts as init of a command's PID
// namespace when it starts the command itself (see [startsInit]).
const initShell = "/bin/sh"

// initName is $0 of the init shell, which names it in its messages.
const initName = "weft sandbox"

// initScript is the init shell's program: it sets the resource limits
// its first arguments name (ulimit's option and value, in pairs, up to
// "--"; see [ulimitArgs]), then runs the command (the rest) as its child
// and exits with its status, 128+n when signal n killed it. While it waits it reaps whatever the tree re-parents to it.
// The command must not be exec'd in its place: as init of the namespace
// it would ignore every signal it has no handler for, from the host too
// (pid_namespaces(7)), and "kill $$" would not end it. The init shell
// traps the signals the host sends to the group it shares with the
// shell, so that they do not end it: dash and bash catch SIGINT under -c
// and would exit 130 whatever the shell did; a trap runs after the
// command and leaves $? alone. Caught signals are reset to their default
// in the shell by execve. Commands that do not exist or cannot be
// executed fail as under the helper; see [ExitNotFound] and
// [ExitCannotRun].
const initScript = `trap : INT TERM HUP QUIT USR1 USR2
while [ "$1" != -- ]; do ulimit "$1" "$2" || exit 126; shift 2; done; shift
[ -e "$1" ] || { printf '` + initName + `: exec %s: no such file or directory\n' "$1" >&2; exit 127; }
[ -f "$1" ] && [ -x "$1" ] || { printf '` + initName + `: exec %s: permission denied\n' "$1" >&2; exit 126; }
"$@"
exit $?`

// initShellState is what probing initShell found.
type initShellState struct {
	usable bool // it can be executed
	system bool // it lies in the system directories, where Landlock lets every command execute
}

// probeInitShell probes initShell once: it does not change while weft
// runs. (Where it lies elsewhere, as /nix/store on NixOS, sandboxed
// commands run under the helper, whose shell may lie in a mount or
// Config.ReadOnly.)
var probeInitShell = sync.OnceValue(func() initShellState {
	if unix.Access(initShell, unix.X_OK) != nil {
		return initShellState{}
	}
	st := initShellState{usable: true}
	if p, err := filepath.EvalSymlinks(initShell); err == nil {
		for _, dir := range systemReadOnly() {
			if d, err := filepath.EvalSymlinks(dir); err == nil && strings.HasPrefix(p, d+"/") {
				st.system = true
			}
		}
	}
	return st
})

// startsInit reports whether a command contained by mode, whose namespaces
// are cloned with flags, is started by the host under the init shell
// rather than under the helper. That needs a PID namespace, and under
// Landlock no user namespace: the host writes a new user namespace's ID
// maps from the thread that forks, which Landlock would keep out of /proc.
// Where it is false, the helper does what the init shell and the host's
// thread do.
func startsInit(mode string, flags uintptr, unsandboxed bool) bool {
	sh := probeInitShell()
	if mode != ContainmentPIDNamespace || !sh.usable {
		return false
	}
	return unsandboxed || (sh.system && flags&syscall.CLONE_NEWUSER == 0)
}

// prepareInit makes the command the init shell running the shell and its
// arguments, in the namespaces of the containment, with SIGKILL as its
// parent-death signal: its death (the host's, or Kill) makes the kernel
// kill every process in the namespace. The caller's SysProcAttr is
// copied, and applies to the init shell: the shell runs in its process
// group (a new one unless the caller asks for a new session), session and
// terminal.
func (c *Cmd) prepareInit() {
	c.Path = initShell
	c.Args = append(append([]string{initShell, "-c", initScript, initName}, ulimitArgs(c.rlimits())...), c.Args[3:]...)
	a := syscall.SysProcAttr{}
	if c.SysProcAttr != nil {
		a = *c.SysProcAttr
	}
	nsAttr(&a, c.cloneFlags)
	if !a.Setsid {
		// Never in the host's process group: kill(0) from the tree, or
		// a signal to the group, would reach the host whatever the
		// namespace (below Landlock ABI 6).
		a.Setpgid, a.Pgid = true, 0
	}
	// The signal comes when the thread that forks ends, not the
	// process: see startInit. (The check os/exec makes after setting it,
	// whether the parent is still there, cannot see a parent outside the
	// namespace and signals the init shell, which as init ignores it.)
	a.Pdeathsig = syscall.SIGKILL
	c.SysProcAttr = &a
}

// startInit starts the command prepared by prepareInit from a disposable
// thread of the host (see [goDisposable]), which first joins the tree's
// cgroups and network namespace, if any, and under Landlock drops the
// capabilities a command must not have ([dropCaps]), restricts itself
// with the ruleset and, where the network is denied by a filter,
// installs it; so the init shell and everything it starts inherit all
// that, and no other thread of the host does. Once the init shell runs,
// the thread moves back into the host's cgroups (through files it opened
// before Landlock closed them) and waits, parked, until the init shell
// has exited, because its end would send the init shell its parent-death
// signal; then it ends, and [Cmd.Wait] waits for that.
func (c *Cmd) startInit() error {
	fd, flags := -1, uint32(0)
	if !c.Status.Unsandboxed {
		w := c.wire
		w.TempDir = c.tempDir
		w.NetBy = c.Status.NetworkDeniedBy
		var err error
		if fd, flags, err = ruleset(w, c.Status.ABI); err != nil {
			return fmt.Errorf("sandbox: %w", err)
		}
		defer unix.Close(fd)
	}
	started := make(chan error, 1)
	c.threadDone = goDisposable(func() {
		home, err := c.enterTree()
		if err != nil {
			started <- fmt.Errorf("sandbox: %w", err)
			return
		}
		if fd >= 0 {
			err = c.confineThread(fd, flags)
		}
		if err == nil {
			// fork runs on the calling thread and copies its
			// credentials, namespaces and cgroups, the Landlock domain
			// and the seccomp filter among them.
			err = c.Cmd.Start()
		}
		leaveTree(home)
		if err != nil {
			started <- err
			return
		}
		pid := c.Process.Pid
		started <- nil
		waitExited(pid)
	})
	return <-started
}

// enterTree moves the calling (disposable) thread into the tree's
// cgroups and network namespace. It returns the host's "tasks" files of
// those cgroup hierarchies, opened first, for [leaveTree].
func (c *Cmd) enterTree() ([]*os.File, error) {
	var home []*os.File
	if c.tree != nil {
		own := cgroups().own
		for ctrl := range c.tree.dir {
			d := own[ctrl]
			if d == "" || slices.ContainsFunc(home, func(f *os.File) bool { return f.Name() == d+"/tasks" }) {
				continue
			}
			f, err := os.OpenFile(d+"/tasks", os.O_WRONLY, 0)
			if err != nil {
				leaveTree(home)
				return nil, fmt.Errorf("cgroup: %w", err)
			}
			home = append(home, f)
		}
		if err := c.attachSelfThread(); err != nil {
			leaveTree(home)
			return nil, err
		}
	}
	if c.netFD >= 0 {
		if err := joinNetns(c.netFD); err != nil {
			leaveTree(home)
			return nil, err
		}
	}
	return home, nil
}

// leaveTree moves the calling thread back into the host's cgroups,
// whose "tasks" files home holds, and closes them.
func leaveTree(home []*os.File) {
	tid := []byte(strconv.Itoa(unix.Gettid()))
	for _, f := range home {
		f.Write(tid)
		f.Close()
	}
}

// confineThread confines the calling (disposable) thread as a sandboxed
// command is: the capabilities it must not have dropped, no_new_privs,
// the Landlock ruleset fd, and the socket filter where it takes the
// network away.
func (c *Cmd) confineThread(fd int, flags uint32) error {
	if err := dropCaps(); err != nil {
		return fmt.Errorf("sandbox: %w", err)
	}
	if err := restrictThread(fd, flags); err != nil {
		return fmt.Errorf("sandbox: %w", err)
	}
	if c.Status.NetworkDeniedBy == DeniedBySeccomp {
		if err := seccomp.Install(socketFilter(c.Status.ABI >= 4)); err != nil {
			return fmt.Errorf("sandbox: %w", err)
		}
	}
	return nil
}
