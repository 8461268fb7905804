package testenv

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
	"weft.dev/weft/env/sandbox"
)

// auditArch is the AUDIT_ARCH_* value of this architecture, which the
// seccomp filter checks, or 0 where the filter's assumptions (the system
// call numbers of package unix, the low word of the first argument at
// offset 16, little-endian) have not been checked.
func auditArch() uint32 {
	switch runtime.GOARCH {
	case "amd64":
		return unix.AUDIT_ARCH_X86_64
	case "arm64":
		return unix.AUDIT_ARCH_AARCH64
	}
	return 0
}

func supported(lack Lack) error {
	if lack == 0 || lack&^(NoLandlock|NoNamespaces|NoDACOverride) != 0 {
		return fmt.Errorf("unknown features %v", lack)
	}
	if lack&(NoLandlock|NoNamespaces) != 0 && auditArch() == 0 {
		return fmt.Errorf("the seccomp filter does not know the system calls of %s", runtime.GOARCH)
	}
	return nil
}

// startWithout starts cmd from a thread of its own that lacks what lack
// names; the child inherits the thread's seccomp filter and capability
// bounding set. The thread is never unlocked, so it ends with its
// goroutine and nothing else ever runs on it (the runtime makes new
// threads from its template thread while a goroutine is locked). A
// failure to take the features away is a *lackError.
func startWithout(cmd *exec.Cmd, lack Lack) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		errc <- func() error {
			if lack&NoDACOverride != 0 {
				if err := dropDAC(); err != nil {
					return &lackError{err}
				}
			}
			if f := filter(lack); f != nil {
				if err := install(f); err != nil {
					return &lackError{err}
				}
			}
			// os/exec forks on the calling thread.
			return cmd.Start()
		}()
	}()
	return <-errc
}

// dacCaps are the capabilities that let a process ignore file permissions.
var dacCaps = [...]uintptr{unix.CAP_DAC_OVERRIDE, unix.CAP_DAC_READ_SEARCH}

// hasDAC reports whether the calling thread has a capability of dacCaps
// in its effective or permitted set.
func hasDAC() (bool, error) {
	var data [2]unix.CapUserData
	if err := unix.Capget(&unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}, &data[0]); err != nil {
		return false, fmt.Errorf("capget: %w", err)
	}
	for _, c := range dacCaps {
		if (data[0].Effective|data[0].Permitted)&(1<<c) != 0 {
			return true, nil
		}
	}
	return false, nil
}

// dropDAC drops dacCaps from the calling thread's bounding set, so that
// a program it executes does not get them, even as root.
func dropDAC() error {
	if has, err := hasDAC(); err != nil || !has {
		return err // nothing to drop
	}
	for _, c := range dacCaps {
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, c, 0, 0, 0); err != nil {
			return fmt.Errorf("prctl(PR_CAPBSET_DROP, %d): %w", c, err)
		}
	}
	return nil
}

// filter returns the seccomp program that takes away what lack names, or
// nil when no system call needs filtering.
func filter(lack Lack) []unix.SockFilter {
	if lack&(NoLandlock|NoNamespaces) == 0 {
		return nil
	}
	stmt := func(code uint16, k uint32) unix.SockFilter { return unix.SockFilter{Code: code, K: k} }
	jump := func(code uint16, k uint32, jt, jf uint8) unix.SockFilter {
		return unix.SockFilter{Code: code, Jt: jt, Jf: jf, K: k}
	}
	const (
		ld    = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
		jeq   = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
		jset  = unix.BPF_JMP | unix.BPF_JSET | unix.BPF_K
		ret   = unix.BPF_RET | unix.BPF_K
		allow = unix.SECCOMP_RET_ALLOW
		// struct seccomp_data: nr at 0, arch at 4, args[0] at 16.
		offNr, offArch, offArg0 = 0, 4, 16
	)
	errno := func(e unix.Errno) uint32 { return unix.SECCOMP_RET_ERRNO | uint32(e) }
	f := []unix.SockFilter{
		stmt(ld, offArch),
		jump(jeq, auditArch(), 1, 0),
		stmt(ret, allow), // another architecture's calls (none are made)
		stmt(ld, offNr),
	}
	if lack&NoLandlock != 0 {
		for _, nr := range []uint32{unix.SYS_LANDLOCK_CREATE_RULESET, unix.SYS_LANDLOCK_ADD_RULE, unix.SYS_LANDLOCK_RESTRICT_SELF} {
			f = append(f, jump(jeq, nr, 0, 1), stmt(ret, errno(unix.ENOSYS)))
		}
	}
	if lack&NoNamespaces != 0 {
		f = append(f,
			jump(jeq, unix.SYS_CLONE3, 0, 1), // its flags are in memory, out of the filter's sight
			stmt(ret, errno(unix.ENOSYS)),
			jump(jeq, unix.SYS_CLONE, 1, 0),
			jump(jeq, unix.SYS_UNSHARE, 0, 3),
			stmt(ld, offArg0), // the flags
			jump(jset, unix.CLONE_NEWUSER|unix.CLONE_NEWPID, 0, 1),
			stmt(ret, errno(unix.EPERM)),
		)
	}
	return append(f, stmt(ret, allow))
}

// install applies the seccomp program f to the calling thread, which
// passes it on to the processes it forks.
func install(f []unix.SockFilter) error {
	prog := unix.SockFprog{Len: uint16(len(f)), Filter: &f[0]}
	err := seccomp(&prog)
	if errors.Is(err, unix.EACCES) {
		// Without CAP_SYS_ADMIN, a filter needs no_new_privs first.
		if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
			return fmt.Errorf("prctl(PR_SET_NO_NEW_PRIVS): %w", err)
		}
		err = seccomp(&prog)
	}
	runtime.KeepAlive(f)
	return err
}

func seccomp(prog *unix.SockFprog) error {
	if _, _, e := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, 0, uintptr(unsafe.Pointer(prog))); e != 0 {
		return fmt.Errorf("seccomp(SECCOMP_SET_MODE_FILTER): %w", e)
	}
	return nil
}

// check verifies, in the child, that it lacks what lack names.
func check(lack Lack) error {
	if lack&(NoLandlock|NoNamespaces) != 0 {
		status, err := os.ReadFile("/proc/self/status")
		if err != nil {
			return err
		}
		if !strings.Contains(string(status), "\nSeccomp:\t2\n") {
			return errors.New("no seccomp filter")
		}
	}
	if lack&NoLandlock != 0 {
		if abi, _ := sandbox.Probe(); abi != 0 {
			return fmt.Errorf("Landlock ABI %d", abi)
		}
	}
	if lack&NoDACOverride != 0 {
		if has, err := hasDAC(); err != nil || has {
			return fmt.Errorf("CAP_DAC_OVERRIDE or CAP_DAC_READ_SEARCH (%v)", err)
		}
	}
	return nil
}
