package sandbox

import (
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// initShell is the program the host starts as init of a command's PID
// namespace when it starts the command itself (see [startsInit]).
const initShell = "/bin/sh"

// initName is $0 of the init shell, which names it in its messages.
const initName = "weft sandbox"

// initScript is the init shell's program: it runs the command ($1 and
// the rest) as its child and exits with its status, 128+n when signal n
// killed it. While it waits it reaps whatever the tree re-parents to it.
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
// group, session and terminal.
func (c *Cmd) prepareInit() {
	c.Path = initShell
	c.Args = append([]string{initShell, "-c", initScript, initName}, c.Args[3:]...)
	a := syscall.SysProcAttr{}
	if c.SysProcAttr != nil {
		a = *c.SysProcAttr
	}
	nsAttr(&a, c.cloneFlags)
	// The signal comes when the thread that forks ends, not the
	// process: see startInit. (The check os/exec makes after setting it,
	// whether the parent is still there, cannot see a parent outside the
	// namespace and signals the init shell, which as init ignores it.)
	a.Pdeathsig = syscall.SIGKILL
	c.SysProcAttr = &a
}

// startInit starts the command prepared by prepareInit. Unsandboxed, it
// starts it from the calling thread, which the runtime never ends (no
// [goDisposable] thread takes one with children). Under Landlock it
// makes the ruleset, then restricts a disposable thread with it and
// starts the command from there, so the init shell and everything it
// starts inherit the domain and no other thread of the host does. That
// thread waits, parked, until the init shell has exited, because its end
// would send the init shell its parent-death signal; then it ends, and
// [Cmd.Wait] waits for that.
func (c *Cmd) startInit() error {
	if c.Status.Unsandboxed {
		return c.Cmd.Start()
	}
	w := c.wire
	w.TempDir = c.tempDir
	fd, flags, err := ruleset(w, c.Status.ABI)
	if err != nil {
		return fmt.Errorf("sandbox: %w", err)
	}
	defer unix.Close(fd)
	started := make(chan error, 1)
	c.threadDone = goDisposable(func() {
		if err := restrictThread(fd, flags); err != nil {
			started <- fmt.Errorf("sandbox: %w", err)
			return
		}
		// fork runs on the calling thread and copies its credentials,
		// the Landlock domain among them.
		if err := c.Cmd.Start(); err != nil {
			started <- err
			return
		}
		pid := c.Process.Pid
		started <- nil
		waitExited(pid)
	})
	return <-started
}
