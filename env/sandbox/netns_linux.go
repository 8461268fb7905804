package sandbox

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
	"weft.dev/weft/internal/seccomp"
)

// netProbe is what probeNetworks found: how a command's network can be
// taken away.
type netProbe struct {
	// prepared: this process may make network namespaces itself (as
	// root) and a command may join one (setns) before it starts, so
	// that the commands of a session share one, prepared once.
	prepared bool
	// userNS: a helper started in a new user namespace may make a
	// network namespace of its own (CLONE_NEWUSER|CLONE_NEWNET).
	userNS bool
	// filter: the seccomp filter of the fallback can be installed here.
	filter bool
	// err says why no namespace can be made.
	err error
}

// networks probes once per process how commands' networks can be taken
// away; like [Containment], the answer depends only on the kernel, the
// process's credentials and its security policy.
var networks = sync.OnceValue(probeNetworks)

func probeNetworks() netProbe {
	var p netProbe
	p.filter = seccomp.Arch() != 0
	var errs []error
	if os.Geteuid() == 0 {
		fd, err := newLoopbackNetns()
		if err == nil {
			unix.Close(fd)
			p.prepared = true
			return p
		}
		errs = append(errs, err)
	}
	attr := &syscall.ProcAttr{Sys: nsAttr(&syscall.SysProcAttr{}, syscall.CLONE_NEWUSER|syscall.CLONE_NEWNET)}
	_, err := syscall.ForkExec("/nonexistent/weft-network-probe", []string{"probe"}, attr)
	if errors.Is(err, syscall.ENOENT) {
		p.userNS = true
		return p
	}
	p.err = errors.Join(append(errs, fmt.Errorf("user and network namespace: %w", err))...)
	return p
}

// newLoopbackNetns makes a network namespace whose only interface is its
// loopback, up, and returns a descriptor of it (close-on-exec), which
// keeps it alive. It makes it from a thread of its own, which ends
// afterwards.
func newLoopbackNetns() (int, error) {
	fd := -1
	var err error
	<-goDisposable(func() {
		if err = unix.Unshare(unix.CLONE_NEWNET); err != nil {
			err = fmt.Errorf("unshare(CLONE_NEWNET): %w", err)
			return
		}
		if err = loopbackUp(); err != nil {
			return
		}
		fd, err = unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			err = fmt.Errorf("network namespace: %w", err)
		}
	})
	return fd, err
}

// loopbackUp brings up the loopback interface of the calling thread's
// network namespace, which a new namespace has down.
func loopbackUp() error {
	s, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("loopback: %w", err)
	}
	defer unix.Close(s)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return fmt.Errorf("loopback: %w", err)
	}
	if err := unix.IoctlIfreq(s, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("loopback: SIOCGIFFLAGS: %w", err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(s, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("loopback: SIOCSIFFLAGS: %w", err)
	}
	return nil
}

// joinNetns moves the calling thread into the network namespace fd.
func joinNetns(fd int) error {
	if err := unix.Setns(fd, unix.CLONE_NEWNET); err != nil {
		return fmt.Errorf("setns(CLONE_NEWNET): %w", err)
	}
	return nil
}

// socketFilter is the seccomp program that takes the network away where
// no network namespace can be made: socket(2) and socketpair(2) may make
// UNIX and netlink sockets, and Internet sockets only of plain TCP when
// Landlock refuses its bind and connect (tcp); everything else — UDP,
// ICMP, raw and packet sockets, Multipath TCP, SCTP, vsock, every other
// family — fails with EACCES. io_uring, whose requests make sockets out
// of the filter's sight, fails with EPERM, and so do the system calls of
// another ABI (32-bit, x32), whose socketcall(2) hides its arguments.
func socketFilter(tcp bool) seccomp.Program {
	const (
		ld  = seccomp.LoadWord
		jeq = seccomp.JumpEq
		and = seccomp.And
		ret = seccomp.Return
	)
	stmt, jump := seccomp.Stmt, seccomp.Jump
	deny := seccomp.Errno(unix.EACCES)
	p := seccomp.Prologue(seccomp.Errno(unix.EPERM))
	p = append(p,
		jump(jeq, unix.SYS_IO_URING_SETUP, 0, 1),
		stmt(ret, seccomp.Errno(unix.EPERM)),
		jump(jeq, unix.SYS_SOCKET, 1, 0),
		jump(jeq, unix.SYS_SOCKETPAIR, 0, 5), // to allow
		stmt(ld, seccomp.OffArg(0)),          // the family
		jump(jeq, unix.AF_UNIX, 3, 0),        // to allow
		jump(jeq, unix.AF_NETLINK, 2, 0),     // to allow
		jump(jeq, unix.AF_INET, 3, 0),        // to inet
		jump(jeq, unix.AF_INET6, 2, 1),       // to inet, else deny
		stmt(ret, seccomp.Allow),
		stmt(ret, deny),
	)
	// inet:
	if !tcp {
		return append(p, stmt(ret, deny))
	}
	return append(p,
		stmt(ld, seccomp.OffArg(1)), // the type, with its flags
		stmt(and, ^uint32(unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC)),
		jump(jeq, unix.SOCK_STREAM, 1, 0),
		stmt(ret, deny),
		stmt(ld, seccomp.OffArg(2)), // the protocol
		jump(jeq, 0, 1, 0),
		jump(jeq, unix.IPPROTO_TCP, 0, 1),
		stmt(ret, seccomp.Allow),
		stmt(ret, deny),
	)
}
