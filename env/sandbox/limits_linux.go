package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
	"weft.dev/weft/internal/seccomp"
)

// watchInterval is how often [Cmd.Wait] looks at a tree's cgroup for the
// limits that need watching: a fork refused by the processes limit, CPU
// time used up.
const watchInterval = 50 * time.Millisecond

// limitMechanisms says what enforces each limit l sets, on this machine.
func limitMechanisms(l Limits) LimitMechanisms {
	var m LimitMechanisms
	r := cgroups()
	by := func(set bool, ctrl string, fallback string) string {
		switch {
		case !set:
			return ""
		case r.has(ctrl):
			return ByCgroupV1
		}
		return fallback
	}
	m.Processes = by(l.Processes > 0, ctrlPids, "") // RLIMIT_NPROC counts the user's processes, not the tree's
	m.Memory = by(l.Memory > 0, ctrlMemory, ByRlimit)
	m.CPUTime = by(l.CPUTime > 0, ctrlCPUAcct, ByRlimit)
	m.FileSize = by(l.FileSize > 0, "", ByRlimit)
	return m
}

// networkDeniedBy says what takes a denied network away from a command
// whose supervisor is cloned with flags; see [newStatus] for probe.
func networkDeniedBy(flags uintptr, probe bool) string {
	if !probe {
		if seccomp.Arch() != 0 {
			return DeniedBySeccomp
		}
		return DeniedByLandlock
	}
	np := networks()
	switch {
	case np.prepared, np.userNS && flags&syscall.CLONE_NEWUSER != 0:
		return DeniedByNamespace
	case np.filter:
		return DeniedBySeccomp
	}
	return DeniedByLandlock
}

// netCloneFlags returns the clone flag of a network namespace when the
// helper is to make its own, in its user namespace, where this process
// cannot prepare one.
func netCloneFlags(st *Status, flags uintptr) uintptr {
	if st.NetworkDeniedBy == DeniedByNamespace && !networks().prepared && flags&syscall.CLONE_NEWUSER != 0 {
		return syscall.CLONE_NEWNET
	}
	return 0
}

// prepareResources holds the command's share of its session's state and
// makes the tree's cgroups and its network namespace, as Status says.
func (c *Cmd) prepareResources() error {
	if c.sessions != nil && c.session != "" {
		st, err := c.sessions.acquire(c.session)
		if err != nil {
			return err
		}
		c.state = st
	}
	if r := cgroups(); len(r.own) > 0 {
		parent := r.rootNode()
		if c.sessions != nil {
			var g *cgroupNode
			var err error
			if c.state != nil {
				g, err = c.sessions.group(c.state)
			} else {
				g, err = c.sessions.host.get(r, c.sessions.cfg.Host)
			}
			if err != nil {
				return err
			}
			if g != nil {
				parent = g
				c.parent, c.before = g, g.counters()
			}
		}
		ctrls := []string{ctrlPids}
		if c.Status.Limits.Memory > 0 {
			ctrls = append(ctrls, ctrlMemory)
		}
		if c.Status.Limits.CPUTime > 0 {
			ctrls = append(ctrls, ctrlCPUAcct)
		}
		// The CPU controller is the session's: a group of it per command
		// made and removed costs milliseconds once tasks have run in it
		// (its removal waits on RCU), and a command alone needs no share.
		tree, err := parent.child(r, filepath.Base(c.tempDir), ctrls, c.Status.Limits)
		if err != nil {
			return err
		}
		c.tree = tree
	}
	if c.Status.NetworkDeniedBy == DeniedByNamespace && networks().prepared {
		var err error
		if c.state != nil {
			c.netFD, err = c.state.netnsFD()
		} else {
			c.netFD, err = newLoopbackNetns()
			c.ownNetFD = err == nil
		}
		if err != nil {
			c.netFD = -1
			return err
		}
	}
	return nil
}

// releaseNetFD closes a network namespace made for the command alone,
// which its tree holds once started.
func (c *Cmd) releaseNetFD() {
	if c.ownNetFD && c.netFD >= 0 {
		unix.Close(c.netFD)
		c.netFD, c.ownNetFD = -1, false
	}
}

// closeResources removes the tree's cgroups and releases the session's
// state; the tree has ended.
func (c *Cmd) closeResources() error {
	c.releaseNetFD()
	var err error
	if c.tree != nil {
		err = c.tree.remove()
	}
	if c.state != nil {
		c.sessions.release(c.state)
		c.state = nil
	}
	return err
}

// rlimits are the resource limits the tree's supervisor sets for it: the
// file size always, and CPU time and memory (RLIMIT_DATA) where no cgroup
// bounds them.
func (c *Cmd) rlimits() []wireRlimit {
	l, by := c.Status.Limits, c.Status.LimitsBy
	var out []wireRlimit
	if l.FileSize > 0 {
		out = append(out, wireRlimit{Resource: unix.RLIMIT_FSIZE, Max: uint64(l.FileSize) &^ 511})
	}
	if l.CPUTime > 0 && by.CPUTime == ByRlimit {
		out = append(out, wireRlimit{Resource: unix.RLIMIT_CPU, Max: uint64(max((l.CPUTime+time.Second-1)/time.Second, 1))})
	}
	if l.Memory > 0 && by.Memory == ByRlimit {
		out = append(out, wireRlimit{Resource: unix.RLIMIT_DATA, Max: uint64(l.Memory)})
	}
	return out
}

// ulimitArgs are the init shell's arguments that set rlimits with ulimit
// (POSIX's -f in 512-byte blocks; -t in seconds and -d in KiB, which
// every /bin/sh of note has), before the "--" that ends them.
func ulimitArgs(rs []wireRlimit) []string {
	var out []string
	for _, r := range rs {
		switch r.Resource {
		case unix.RLIMIT_FSIZE:
			out = append(out, "-f", strconv.FormatUint(r.Max/512, 10))
		case unix.RLIMIT_CPU:
			out = append(out, "-t", strconv.FormatUint(r.Max, 10))
		case unix.RLIMIT_DATA:
			out = append(out, "-d", strconv.FormatUint(max(r.Max/1024, 1), 10))
		}
	}
	return append(out, "--")
}

// setRlimits sets rs on the calling process (the helper, whose children
// inherit them): soft and hard limit alike, but RLIMIT_CPU, whose hard
// limit is a second later, so that SIGXCPU comes before SIGKILL.
func setRlimits(rs []wireRlimit) error {
	for _, r := range rs {
		lim := unix.Rlimit{Cur: r.Max, Max: r.Max}
		if r.Resource == unix.RLIMIT_CPU {
			lim.Max++
		}
		if err := unix.Setrlimit(r.Resource, &lim); err != nil {
			return fmt.Errorf("setrlimit(%d): %w", r.Resource, err)
		}
	}
	return nil
}

// needsWatch reports whether Wait watches the tree's cgroups: for the
// processes limit (a fork bomb is killed whole, not left spinning on
// refused forks) and the CPU time limit.
func (c *Cmd) needsWatch() bool {
	return c.tree != nil && (c.tree.dir[ctrlPids] != "" || c.tree.dir[ctrlCPUAcct] != "")
}

// watch returns once process pid (the tree's supervisor) has exited,
// without reaping it. Meanwhile it looks at the tree's cgroups every
// watchInterval and kills the tree when a fork was refused for lack of
// processes or when it used up its CPU time.
func (c *Cmd) watch(pid int) {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		fd = -1
	}
	defer func() {
		if fd >= 0 {
			unix.Close(fd)
		}
	}()
	limit := c.Status.Limits.CPUTime
	for {
		if fd >= 0 {
			pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
			n, err := unix.Poll(pfd, int(watchInterval/time.Millisecond))
			if n > 0 {
				return
			}
			if err != nil && !errors.Is(err, unix.EINTR) {
				fd = -1
			}
		} else {
			var info unix.Siginfo
			if err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil); err != nil || info.Signo != 0 {
				return
			}
			time.Sleep(watchInterval)
		}
		if c.watched != "" {
			continue
		}
		cnt := c.tree.counters()
		switch {
		case cnt.forkFailed > 0:
			c.watched = LimitProcesses
		case limit > 0 && cnt.cpu >= limit:
			c.watched = LimitCPUTime
		default:
			continue
		}
		c.Kill()
	}
}

// exceeded tells which limit, if any, the tree ran into, from what the
// watch did, the cgroups' counters and the supervisor's exit status.
func (c *Cmd) exceeded() *LimitError {
	st := &c.Status
	e := func(limit, scope, value, by string, killed bool) *LimitError {
		return &LimitError{Limit: limit, Scope: scope, Value: value, By: by, Killed: killed}
	}
	if c.tree != nil {
		cnt := c.tree.counters()
		switch {
		case c.watched == LimitProcesses || cnt.forkFailed > 0:
			// The tree's own limit, unless it never reached it (pids.max
			// is the limit plus one, for the thread that forks the
			// supervisor into the group): then its session's group, or
			// the host's, refused the fork.
			scope, l := "command", st.Limits
			if peak, ok := c.tree.readUint(ctrlPids, "pids.peak"); l.Processes == 0 || (ok && peak <= uint64(l.Processes)) {
				scope, l = "session", st.SessionLimits
				if l.Processes == 0 {
					scope, l = "host", st.HostLimits
				}
			}
			return e(LimitProcesses, scope, strconv.Itoa(l.Processes), ByCgroupV1, true)
		case c.watched == LimitCPUTime:
			return e(LimitCPUTime, "command", st.Limits.CPUTime.String(), ByCgroupV1, true)
		case cnt.oomKills > 0:
			return e(LimitMemory, "command", FormatBytes(st.Limits.Memory), ByCgroupV1, false)
		}
		if c.parent != nil && !c.failedOK() {
			if after := c.parent.counters(); after.oomKills > c.before.oomKills {
				return e(LimitMemory, "session", FormatBytes(st.SessionLimits.Memory), ByCgroupV1, false)
			}
		}
	}
	code := -1
	if c.ProcessState != nil {
		code = c.ProcessState.ExitCode()
	}
	switch {
	case st.Limits.FileSize > 0 && code == 128+int(syscall.SIGXFSZ):
		return e(LimitFileSize, "command", FormatBytes(st.Limits.FileSize)+" per file", ByRlimit, false)
	case st.Limits.CPUTime > 0 && st.LimitsBy.CPUTime == ByRlimit && (code == 128+int(syscall.SIGXCPU) || code == 128+int(syscall.SIGKILL)):
		return e(LimitCPUTime, "command", st.Limits.CPUTime.String()+" per process", ByRlimit, true)
	}
	return nil
}

// failedOK reports whether the command exited 0: a session's memory
// killing another command's process is not this one's failure.
func (c *Cmd) failedOK() bool {
	return c.ProcessState != nil && c.ProcessState.Success()
}

// dupFile returns a copy of descriptor fd as a file, for the helper.
func dupFile(fd int, name string) (*os.File, error) {
	d, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 3)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(d), name), nil
}

// treeDirs are the directories of the tree's cgroups, for the helper.
func (c *Cmd) treeDirs() []string {
	if c.tree == nil {
		return nil
	}
	return c.tree.dirs()
}

// attachSelfThread moves the calling thread into the tree's cgroups, so
// that what it forks starts there; [leaveTree] moves it back.
func (c *Cmd) attachSelfThread() error {
	if c.tree == nil {
		return nil
	}
	return c.tree.attachThread(unix.Gettid())
}

// killTreeGroup kills every process of the tree's cgroups: the tree,
// wherever its members went (a set-user-ID program, a process that
// stopped the helper), but not the helper, which is not in them.
func (c *Cmd) killTreeGroup() {
	if c.tree != nil {
		c.tree.killAll()
	}
}
