package testenv

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"

	"golang.org/x/sys/unix"
	"weft.dev/weft/env/sandbox"
	"weft.dev/weft/internal/seccomp"
)

func supported(lack Lack) error {
	if lack == 0 || lack&^(NoLandlock|NoNamespaces|NoDACOverride|NoCgroups) != 0 {
		return fmt.Errorf("unknown features %v", lack)
	}
	if lack&(NoLandlock|NoNamespaces) != 0 && seccomp.Arch() == 0 {
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
			if lack&NoCgroups != 0 {
				if err := unmountCgroups(); err != nil {
					return &lackError{err}
				}
			}
			if lack&NoDACOverride != 0 {
				if err := dropDAC(); err != nil {
					return &lackError{err}
				}
			}
			if f := filter(lack); f != nil {
				if err := seccomp.Install(f); err != nil {
					return &lackError{err}
				}
			}
			// os/exec forks on the calling thread.
			return cmd.Start()
		}()
	}()
	return <-errc
}

// unmountCgroups moves the calling thread into a mount namespace of its
// own (private, so nothing propagates back) and unmounts the cgroup file
// systems there.
func unmountCgroups() error {
	if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
		return fmt.Errorf("unshare(CLONE_NEWNS): %w", err)
	}
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("mount --make-rprivate /: %w", err)
	}
	if err := unix.Unmount("/sys/fs/cgroup", unix.MNT_DETACH); err != nil {
		return fmt.Errorf("umount /sys/fs/cgroup: %w", err)
	}
	return nil
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
func filter(lack Lack) seccomp.Program {
	if lack&(NoLandlock|NoNamespaces) == 0 {
		return nil
	}
	const (
		ld   = seccomp.LoadWord
		jeq  = seccomp.JumpEq
		jset = seccomp.JumpSet
		ret  = seccomp.Return
	)
	stmt, jump, errno := seccomp.Stmt, seccomp.Jump, seccomp.Errno
	f := seccomp.Program{
		stmt(ld, seccomp.OffArch),
		jump(jeq, seccomp.Arch(), 1, 0),
		stmt(ret, seccomp.Allow), // another architecture's calls (none are made)
		stmt(ld, seccomp.OffNr),
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
			jump(jeq, unix.SYS_SETNS, 0, 1), // joining a namespace made elsewhere
			stmt(ret, errno(unix.EPERM)),
			jump(jeq, unix.SYS_CLONE, 1, 0),
			jump(jeq, unix.SYS_UNSHARE, 0, 3),
			stmt(ld, seccomp.OffArg(0)), // the flags
			jump(jset, unix.CLONE_NEWUSER|unix.CLONE_NEWPID|unix.CLONE_NEWNET, 0, 1),
			stmt(ret, errno(unix.EPERM)),
		)
	}
	return append(f, stmt(ret, seccomp.Allow))
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
	if lack&NoCgroups != 0 {
		mi, err := os.ReadFile("/proc/self/mountinfo")
		if err != nil {
			return err
		}
		if strings.Contains(string(mi), " - cgroup ") || strings.Contains(string(mi), " - cgroup2 ") {
			return errors.New("a cgroup file system is mounted")
		}
	}
	if lack&NoDACOverride != 0 {
		if has, err := hasDAC(); err != nil || has {
			return fmt.Errorf("CAP_DAC_OVERRIDE or CAP_DAC_READ_SEARCH (%v)", err)
		}
	}
	return nil
}
