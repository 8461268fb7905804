package sandbox

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// keptCaps are the capabilities a sandboxed command of root keeps:
// those of a container's default set (Docker's) that act on files and
// the tree's own processes, without CAP_MKNOD (a device node in a
// read-write mount would open the disk beneath every rule), CAP_NET_RAW
// and CAP_SETFCAP. Every other capability is dropped from the bounding
// set of the thread the command is forked from, so that no program it
// executes gets it: CAP_SYS_ADMIN (setns(2) into the host's network
// through a pidfd, mounts), CAP_SYS_RESOURCE (raising its resource
// limits), CAP_SYS_MODULE, CAP_SYS_BOOT, CAP_SYS_TIME, CAP_NET_ADMIN,
// CAP_SYS_PTRACE, CAP_SYS_NICE and the rest.
var keptCaps = [...]uintptr{
	unix.CAP_CHOWN, unix.CAP_DAC_OVERRIDE, unix.CAP_DAC_READ_SEARCH, unix.CAP_FOWNER, unix.CAP_FSETID,
	unix.CAP_KILL, unix.CAP_SETGID, unix.CAP_SETUID, unix.CAP_SETPCAP, unix.CAP_NET_BIND_SERVICE,
	unix.CAP_SYS_CHROOT, unix.CAP_AUDIT_WRITE,
}

// dropCaps drops every capability but keptCaps from the calling thread's
// bounding and inheritable sets and clears its ambient set; the caller
// must be locked to a thread that ends after it. For another user than
// root, whose programs start without capabilities (bar file
// capabilities, which no_new_privs ignores), only the ambient set is
// cleared.
func dropCaps() error {
	if os.Geteuid() != 0 {
		unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
		return nil
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return fmt.Errorf("capget: %w", err)
	}
	keep := [2]uint32{}
	for _, c := range keptCaps {
		keep[c/32] |= 1 << (c % 32)
	}
	for c := uintptr(0); c <= unix.CAP_LAST_CAP; c++ {
		if keep[c/32]&(1<<(c%32)) != 0 {
			continue
		}
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, c, 0, 0, 0); err != nil && err != unix.EINVAL {
			return fmt.Errorf("prctl(PR_CAPBSET_DROP, %d): %w", c, err)
		}
	}
	data[0].Inheritable &= keep[0]
	data[1].Inheritable &= keep[1]
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("capset: %w", err)
	}
	// Ambient capabilities survive execve; none is kept.
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil && err != unix.EINVAL {
		return fmt.Errorf("prctl(PR_CAP_AMBIENT_CLEAR_ALL): %w", err)
	}
	return nil
}
