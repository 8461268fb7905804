package sandbox

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// killTreeLimit bounds how long the helper, or the host on its behalf,
// keeps killing a tree whose members refuse to die (uninterruptible sleep,
// or another user's processes the helper may not signal).
const killTreeLimit = 5 * time.Second

// supervise contains, starts and supervises the shell (see [Main]) and
// returns the helper's exit status.
func supervise(w wirePolicy, shell string, argv []string) (int, error) {
	pid1 := os.Getpid() == 1
	deathSig := syscall.SIGKILL
	if !pid1 {
		// Orphans of the shell's tree are re-parented to the helper
		// rather than to init, so it can find and kill them.
		if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
			return ExitCannotRun, fmt.Errorf("prctl(PR_SET_CHILD_SUBREAPER): %w", err)
		}
		deathSig = syscall.SIGTERM // caught: the helper cleans up first
	}
	if err := unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(deathSig), 0, 0, 0); err != nil {
		return ExitCannotRun, fmt.Errorf("prctl(PR_SET_PDEATHSIG): %w", err)
	}
	// Not dumpable: a shell of the same user cannot ptrace the helper
	// (in particular the Landlock-restricted thread it forks from) or
	// read its memory through /proc.
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return ExitCannotRun, fmt.Errorf("prctl(PR_SET_DUMPABLE): %w", err)
	}
	// Catch before anything is started. PID 1 of a namespace ignores
	// every signal it has no handler for, so forwarding needs handlers.
	// On a terminal, SIGTTOU and SIGTTIN would stop the helper, which is
	// not in the foreground group, if it touched the terminal: they are
	// caught and dropped. Caught signals are reset to their defaults in
	// the shell by execve. (Each signal costs some 30 µs here, so only
	// those that matter are caught; once the shell runs the helper writes
	// nothing, so SIGPIPE cannot arise.)
	sigs := make(chan os.Signal, 32)
	caught := []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2}
	if w.TTY {
		caught = append(caught, syscall.SIGWINCH, syscall.SIGTTOU, syscall.SIGTTIN)
	}
	signal.Notify(sigs, caught...)

	// The host may have died before the parent-death signal was set.
	hostDied := make(chan struct{})
	if w.LiveFD > 0 {
		syscall.CloseOnExec(w.LiveFD)
		if hostGone(w.LiveFD) {
			return ExitCannotRun, errors.New("the host is gone")
		}
		go func() {
			// Nobody writes: the read returns when the host's end closes.
			os.NewFile(uintptr(w.LiveFD), "host").Read(make([]byte, 1))
			close(hostDied)
		}()
	}

	if w.NetFD > 0 {
		syscall.CloseOnExec(w.NetFD)
	}
	if w.NetBy == DeniedByNamespace && w.NetFD == 0 {
		// Made with the helper, in its user namespace: its loopback is
		// down until brought up.
		if err := loopbackUp(); err != nil {
			return ExitCannotRun, err
		}
	}
	if err := setRlimits(w.Rlimits); err != nil {
		return ExitCannotRun, err
	}

	files := []uintptr{0, 1, 2}
	for fd := 3; fd < w.LiveFD; fd++ {
		files = append(files, uintptr(fd))
	}
	sys := &syscall.SysProcAttr{Setpgid: true}
	if w.TTY {
		// Setpgid, then the new group becomes the terminal's foreground
		// group (Ctty is the helper's descriptor of the terminal).
		sys.Foreground, sys.Ctty = true, 0
	}
	pid, listener, err := startShell(w, shell, argv, &syscall.ProcAttr{Env: os.Environ(), Files: files, Sys: sys})
	if err != nil {
		return exitCode(err), err
	}
	if listener >= 0 {
		go guardSignals(listener, os.Getpid())
	}
	// The shell holds its standard input and output; the helper lets go
	// of its copies so that it keeps no pipe open. Stderr stays, so that
	// a crash of the helper would be seen; the helper outlives the tree
	// by moments only.
	if null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0); err == nil {
		unix.Dup3(int(null.Fd()), 0, 0)
		unix.Dup3(int(null.Fd()), 1, 0)
		null.Close()
	}

	shellDone := make(chan syscall.WaitStatus, 1)
	empty := make(chan struct{})
	go reap(pid, shellDone, empty)

	status := 128 + int(syscall.SIGKILL) // if the host dies first; nobody reads it then
loop:
	for {
		select {
		case s := <-sigs:
			sig := s.(syscall.Signal)
			switch {
			case sig == syscall.SIGTTOU || sig == syscall.SIGTTIN:
				continue
			case sig == syscall.SIGTERM && w.LiveFD > 0 && hostGone(w.LiveFD):
				break loop // the parent-death signal
			}
			if err := syscall.Kill(-pid, sig); err == syscall.ESRCH {
				syscall.Kill(pid, sig) // the shell left its group
			}
		case ws := <-shellDone:
			status = waitStatus(ws)
			break loop
		case <-hostDied:
			break loop
		}
	}
	endTree(pid1, empty)
	return status, nil
}

// hostGone reports whether the write end of the host's pipe fd is closed.
func hostGone(fd int) bool {
	pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	for {
		n, err := unix.Poll(pfd, 0)
		if err == syscall.EINTR {
			continue
		}
		return err == nil && n > 0 && pfd[0].Revents&(unix.POLLHUP|unix.POLLERR) != 0
	}
}

// reap reaps every child of the helper, the shell and the orphans it
// adopts, sends the shell's status to shellDone and closes empty once the
// helper has no child left. When the shell was the last, empty is closed
// before its status is sent, so that the helper exits without looking for
// descendants.
func reap(shell int, shellDone chan<- syscall.WaitStatus, empty chan<- struct{}) {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, 0, nil)
		switch {
		case err == syscall.EINTR:
		case err != nil:
			close(empty) // ECHILD: nothing of the tree is left
			return
		case pid == shell && !hasChildren():
			close(empty)
			shellDone <- ws
			return
		case pid == shell:
			shellDone <- ws
		}
	}
}

// hasChildren reports whether the helper has a child, running or not,
// without reaping any.
func hasChildren() bool {
	var info unix.Siginfo
	for {
		err := unix.Waitid(unix.P_ALL, 0, &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil)
		if err != syscall.EINTR {
			return err != syscall.ECHILD
		}
	}
}

// waitStatus is the exit status a shell reports for a child that ended
// with ws.
func waitStatus(ws syscall.WaitStatus) int {
	if ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ws.ExitStatus()
}

// endTree kills whatever is left of the tree and returns once the helper
// has no child left (or killTreeLimit has passed). As PID 1 of a
// namespace, kill(-1) reaches every other process in it; as a subreaper
// the helper kills its descendants, found in /proc.
func endTree(pid1 bool, empty <-chan struct{}) {
	deadline := time.NewTimer(killTreeLimit)
	defer deadline.Stop()
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-empty:
			return
		default:
		}
		if pid1 {
			syscall.Kill(-1, syscall.SIGKILL)
		} else {
			killDescendants(os.Getpid())
		}
		select {
		case <-empty:
			return
		case <-deadline.C:
			return
		case <-tick.C:
		}
	}
}
