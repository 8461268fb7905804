package sandbox

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// usesHelper reports whether commands run through the helper: always on
// Linux, sandboxed or not.
const usesHelper = true

// nsProbe is what probeNamespaces found.
type nsProbe struct {
	flags uintptr // clone flags of the helper's namespaces; 0 when none can be made
	err   error   // why none can be made
}

// namespaces probes once per process whether the helper can be started in
// a PID namespace. The answer depends only on the kernel, the process's
// credentials and its security policy, none of which weft changes, so it
// is kept for the life of the process.
var namespaces = sync.OnceValue(probeNamespaces)

// probeNamespaces starts a process with the clone flags the helper would
// get and a program that does not exist: an exec error (ENOENT) means the
// clone, and with it the namespaces, succeeded; any other error came from
// clone or from writing the user namespace's ID maps. As root it tries a
// PID namespace alone first, then (also for other users) a user namespace
// with a PID namespace. Costs well under a millisecond.
func probeNamespaces() nsProbe {
	tries := []uintptr{syscall.CLONE_NEWUSER | syscall.CLONE_NEWPID}
	if os.Geteuid() == 0 {
		tries = append([]uintptr{syscall.CLONE_NEWPID}, tries...)
	}
	var errs []error
	for _, fl := range tries {
		attr := &syscall.ProcAttr{Sys: nsAttr(&syscall.SysProcAttr{}, fl)}
		_, err := syscall.ForkExec("/nonexistent/weft-containment-probe", []string{"probe"}, attr)
		if errors.Is(err, syscall.ENOENT) {
			return nsProbe{flags: fl}
		}
		errs = append(errs, fmt.Errorf("%s: %w", cloneName(fl), err))
	}
	return nsProbe{err: errors.Join(errs...)}
}

func cloneName(fl uintptr) string {
	if fl&syscall.CLONE_NEWUSER != 0 {
		return "user and PID namespace"
	}
	return "PID namespace"
}

// nsAttr adds the namespaces of flags to a, with the caller's user and
// group mapped to themselves in a new user namespace.
func nsAttr(a *syscall.SysProcAttr, flags uintptr) *syscall.SysProcAttr {
	a.Cloneflags |= flags
	if flags&syscall.CLONE_NEWUSER != 0 {
		a.UidMappings = []syscall.SysProcIDMap{{ContainerID: os.Geteuid(), HostID: os.Geteuid(), Size: 1}}
		a.GidMappings = []syscall.SysProcIDMap{{ContainerID: os.Getegid(), HostID: os.Getegid(), Size: 1}}
	}
	return a
}

// Containment returns how this process can contain commands:
// [ContainmentPIDNamespace] when it can start the helper in a PID
// namespace (as root, or through an unprivileged user namespace), else
// [ContainmentSubreaper] with an error saying why no namespace could be
// made (for example Ubuntu's AppArmor restriction of unprivileged user
// namespaces, or a container's seccomp policy). The first call probes by
// starting a short-lived process; the answer is kept for the life of the
// process. Safe for concurrent use.
func Containment() (string, error) {
	p := namespaces()
	if p.flags == 0 {
		return ContainmentSubreaper, p.err
	}
	return ContainmentPIDNamespace, nil
}

// resolveContainment returns the containment a command under p gets and
// the clone flags of its helper.
func (p *Policy) resolveContainment() (string, uintptr, error) {
	switch p.Containment {
	case ContainmentSubreaper:
		return ContainmentSubreaper, 0, nil
	case "", ContainmentPIDNamespace:
		ns := namespaces()
		switch {
		case ns.flags != 0:
			return ContainmentPIDNamespace, ns.flags, nil
		case p.Containment == ContainmentPIDNamespace:
			return "", 0, fmt.Errorf("sandbox: containment %q asked for, but no PID namespace can be made: %w", ContainmentPIDNamespace, ns.err)
		}
		return ContainmentSubreaper, 0, nil
	}
	return "", 0, fmt.Errorf("sandbox: containment %q is neither %q nor %q", p.Containment, ContainmentPIDNamespace, ContainmentSubreaper)
}

// onTerminal reports whether the helper starts as a session leader with a
// controlling terminal.
func (c *Cmd) onTerminal() bool { return c.SysProcAttr != nil && c.SysProcAttr.Setctty }

// contain completes the helper's SysProcAttr (a copy of the caller's) for
// the command's containment.
func (c *Cmd) contain() {
	a := syscall.SysProcAttr{}
	if c.SysProcAttr != nil {
		a = *c.SysProcAttr
	}
	if c.cloneFlags != 0 {
		// The helper sets its own parent-death signal: with CLONE_NEWPID
		// the child's getppid() is 0, and the check os/exec makes after
		// setting it would take the parent for dead and kill the helper.
		a.Pdeathsig = 0
		nsAttr(&a, c.cloneFlags)
	} else {
		// Caught by the helper, which kills its tree and exits.
		a.Pdeathsig = syscall.SIGTERM
	}
	c.SysProcAttr = &a
}

// killHelperTree ends the command's whole tree: in a PID namespace,
// killing the helper is enough (the kernel kills the rest when the
// namespace's init dies); as a subreaper the helper's descendants are
// killed first, while the helper still adopts their orphans, then the
// members of the tree's cgroups, and the helper last.
func (c *Cmd) killHelperTree() error {
	if c.Status.Containment == ContainmentSubreaper {
		killTree(c.Process.Pid, killTreeLimit)
		// Whatever left the helper's reach is still in the tree's
		// cgroups.
		c.killTreeGroup()
	}
	return c.Process.Kill()
}

// waitExited blocks until process pid has exited, without reaping it: its
// pid stays reserved, so its descendants can still be told apart.
func waitExited(pid int) {
	var info unix.Siginfo
	for {
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if err != syscall.EINTR {
			return
		}
	}
}
