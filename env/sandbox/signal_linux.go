package sandbox

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"unsafe"

	"golang.org/x/sys/unix"
	"weft.dev/weft/internal/seccomp"
)

// Signals where neither a PID namespace hides the host nor Landlock (ABI
// 6) scopes them: a command of the same user could signal weft and every
// other session's processes. There the helper installs [signalFilter] on
// the thread it forks the shell from, which hands every signal the tree
// sends to another process to the helper ([guardSignals]): the helper
// lets it through when every process it reaches is in the helper's tree
// (as a subreaper, every descendant's ancestors lead to it) and fails it
// with EPERM otherwise.

// signalSyscalls are the system calls that send a signal to the process,
// thread or process group their first argument names.
var signalSyscalls = []uint32{
	unix.SYS_KILL, unix.SYS_TKILL, unix.SYS_TGKILL, unix.SYS_RT_SIGQUEUEINFO, unix.SYS_RT_TGSIGQUEUEINFO,
}

// signalFilter is the seccomp program of the signal guard: the system
// calls of signalSyscalls go to the helper (SECCOMP_RET_USER_NOTIF);
// pidfd_send_signal(2), whose target the helper cannot see, fails with
// ENOSYS, on which programs (Go's os package among them) fall back to
// kill(2); the system calls of another ABI fail with EPERM.
func signalFilter() seccomp.Program {
	const (
		jeq = seccomp.JumpEq
		ret = seccomp.Return
	)
	p := seccomp.Prologue(seccomp.Errno(unix.EPERM))
	p = append(p,
		seccomp.Jump(jeq, unix.SYS_PIDFD_SEND_SIGNAL, 0, 1),
		seccomp.Stmt(ret, seccomp.Errno(unix.ENOSYS)),
	)
	n := len(signalSyscalls)
	for i, nr := range signalSyscalls {
		// To the notification, past the remaining tests and the allow.
		p = append(p, seccomp.Jump(jeq, nr, uint8(n-i), 0))
	}
	return append(p,
		seccomp.Stmt(ret, seccomp.Allow),
		seccomp.Stmt(ret, unix.SECCOMP_RET_USER_NOTIF),
	)
}

// installSignalFilter installs signalFilter on the calling thread and
// returns its listener (close-on-exec). The thread must have
// no_new_privs set.
func installSignalFilter() (int, error) {
	if seccomp.Arch() == 0 {
		return -1, errors.New("seccomp: no signal filter on this architecture")
	}
	p := signalFilter()
	prog := unix.SockFprog{Len: uint16(len(p)), Filter: &p[0]}
	fd, _, e := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, unix.SECCOMP_FILTER_FLAG_NEW_LISTENER, uintptr(unsafe.Pointer(&prog)))
	if e != 0 {
		return -1, fmt.Errorf("seccomp(SECCOMP_FILTER_FLAG_NEW_LISTENER): %w", e)
	}
	return int(fd), nil
}

// seccompNotif is struct seccomp_notif: a system call waiting for the
// helper's answer.
type seccompNotif struct {
	id    uint64
	pid   uint32
	flags uint32
	nr    int32
	arch  uint32
	ip    uint64
	args  [6]uint64
}

// seccompNotifResp is struct seccomp_notif_resp, the answer.
type seccompNotifResp struct {
	id    uint64
	val   int64
	error int32
	flags uint32
}

// guardSignals answers the signal filter's notifications on listener
// until the tree has ended (the listener reports an error once no
// process uses the filter), for the helper of pid root. It runs on a
// goroutine of the helper, which ends with the process.
func guardSignals(listener, root int) {
	defer unix.Close(listener)
	for {
		var n seccompNotif
		if err := ioctlPtr(listener, unix.SECCOMP_IOCTL_NOTIF_RECV, unsafe.Pointer(&n)); err != nil {
			if err == unix.EINTR {
				continue
			}
			return
		}
		resp := seccompNotifResp{id: n.id}
		if signalAllowed(int(n.pid), n.nr, int32(n.args[0]), root) {
			resp.flags = unix.SECCOMP_USER_NOTIF_FLAG_CONTINUE
		} else {
			resp.error = -int32(unix.EPERM)
		}
		// ENOENT: the caller is gone, or its call was interrupted.
		ioctlPtr(listener, unix.SECCOMP_IOCTL_NOTIF_SEND, unsafe.Pointer(&resp))
	}
}

func ioctlPtr(fd int, req uint, arg unsafe.Pointer) error {
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), uintptr(req), uintptr(arg)); e != 0 {
		return e
	}
	return nil
}

// signalAllowed decides a signal system call nr of process caller whose
// first argument is target: allowed when every process it reaches is in
// the tree of root. A pid reused between the decision and the call could
// be reached wrongly; the tree cannot choose which pid the kernel hands
// out next, and the guard is the fallback where the kernel scopes
// nothing.
func signalAllowed(caller int, nr int32, target int32, root int) bool {
	switch {
	case target > 0:
		return inTree(int(target), root)
	case uint32(nr) != unix.SYS_KILL && uint32(nr) != unix.SYS_RT_SIGQUEUEINFO:
		return false // tkill, tgkill take a thread
	case target == -1:
		return false // every process the caller may signal
	case target == 0:
		st, ok := readStat(caller)
		return ok && groupInTree(st.pgid, root)
	}
	return groupInTree(int(-target), root)
}

// inTree reports whether pid (a process or thread) descends from root.
// As a subreaper, root adopts its descendants' orphans, so the chain of
// parents of each of its tree's processes leads to it.
func inTree(pid, root int) bool {
	for range 4096 {
		if pid == root {
			return true
		}
		if pid <= 1 {
			return false
		}
		st, ok := readStat(pid)
		if !ok {
			return false
		}
		pid = st.ppid
	}
	return false
}

// groupInTree reports whether process group pgid has members and all of
// them are in root's tree.
func groupInTree(pgid, root int) bool {
	if pgid <= 1 {
		return false
	}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return false
	}
	found := false
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, ok := readStat(pid); ok && st.pgid == pgid {
			if !inTree(pid, root) {
				return false
			}
			found = true
		}
	}
	return found
}
