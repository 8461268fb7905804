package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"

	"github.com/landlock-lsm/go-landlock/landlock"
	llsys "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
	"weft.dev/weft/internal/seccomp"
)

// Probe returns the kernel's Landlock ABI version, 0 when Landlock is
// unavailable, with an error saying why. Like go-landlock, it reports
// ABI 6 or later as 5 when the kernel lacks the fix for the signal
// scoping bug (erratum 2). Safe for concurrent use; one system call.
func Probe() (abi int, err error) {
	v, err := llsys.LandlockGetABIVersion()
	switch {
	case errors.Is(err, syscall.ENOSYS):
		return 0, errors.New("the kernel is built without Landlock (Linux 5.13 or later with CONFIG_SECURITY_LANDLOCK is needed)")
	case errors.Is(err, syscall.EOPNOTSUPP):
		return 0, errors.New("landlock is built in but disabled; add landlock to the lsm= kernel parameter")
	case err != nil:
		return 0, fmt.Errorf("landlock_create_ruleset: %w", err)
	case v <= 0:
		return 0, fmt.Errorf("the kernel reports Landlock ABI %d", v)
	}
	if v >= 6 {
		if errata, err := llsys.LandlockGetErrata(); err != nil || errata&0x2 == 0 {
			v = 5
		}
	}
	return v, nil
}

// defaultExecutable is the running binary, even if replaced on disk: the
// child resolves /proc/self/exe before its own exec, while it is still a
// copy of this process.
func defaultExecutable() (string, error) { return "/proc/self/exe", nil }

// systemReadOnly lists the directories every command may read and
// execute from. Missing ones are skipped.
func systemReadOnly() []string {
	return []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc"}
}

// systemInfoFiles lists the files of /proc every command may read.
func systemInfoFiles() []string {
	return []string{"/proc/cpuinfo", "/proc/meminfo", "/proc/stat", "/proc/loadavg", "/proc/uptime", "/proc/version"}
}

// rules builds the Landlock rules for w at the given ABI.
func rules(w wirePolicy, abi int) []landlock.Rule {
	// Renames and links between directories need "refer" (ABI 2); without
	// it tools such as git, which rename into other directories, fail.
	// ABI 1 always forbids them.
	rw := func(paths ...string) landlock.FSRule {
		r := landlock.RWDirs(paths...)
		if abi >= 2 {
			r = r.WithRefer()
		}
		return r
	}
	rs := []landlock.Rule{
		landlock.RODirs(systemReadOnly()...).IgnoreIfMissing(),
		// Not /proc as a whole: Landlock's ptrace rule does not close
		// other processes' environ there (weft's holds API keys). These
		// files describe the machine, not processes.
		landlock.ROFiles(systemInfoFiles()...).IgnoreIfMissing(),
		landlock.RODirs("/sys/devices/system/cpu").IgnoreIfMissing(),
		landlock.RWFiles("/dev/null").IgnoreIfMissing(),
		landlock.ROFiles("/dev/zero", "/dev/full", "/dev/random", "/dev/urandom").IgnoreIfMissing(),
		rw(w.TempDir),
	}
	for _, p := range w.ReadOnly {
		if fi, err := os.Stat(p); err != nil {
			continue
		} else if fi.IsDir() {
			rs = append(rs, landlock.RODirs(p))
		} else {
			rs = append(rs, landlock.ROFiles(p))
		}
	}
	for _, m := range w.Mounts {
		if m.Write {
			rs = append(rs, rw(m.Path))
		} else {
			rs = append(rs, landlock.RODirs(m.Path))
		}
	}
	return rs
}

// abiConfig returns go-landlock's configuration of ABI abi: everything
// that version can restrict (the latest known for later ones).
func abiConfig(abi int) landlock.Config {
	switch abi {
	case 0, 1:
		return landlock.V1
	case 2:
		return landlock.V2
	case 3:
		return landlock.V3
	case 4:
		return landlock.V4
	case 5:
		return landlock.V5
	case 6:
		return landlock.V6
	case 7:
		return landlock.V7
	case 8:
		return landlock.V8
	case 9:
		return landlock.V9
	case 10:
		return landlock.V10
	}
	return landlock.V11
}

// ruleset makes the Landlock ruleset of w at ABI abi, the kernel's or
// the policy's cap (everything that ABI restricts, lowered to what the
// kernel supports; a kernel with Landlock enforces at least ABI 1's file
// rules). It opens
// every path of the policy, so a missing mount fails here. It returns the
// ruleset's descriptor (close-on-exec; the caller closes it) and the
// flags for [restrictThread].
func ruleset(w wirePolicy, abi int) (fd int, flags uint32, err error) {
	cfg := abiConfig(abi).BestEffort()
	if w.Network == NetworkAllow || w.NetBy == DeniedByNamespace {
		// In its own network namespace the tree reaches nothing but its
		// loopback, which its servers and tests may use.
		cfg.HandledAccessNet = 0
	}
	fd, flags, err = cfg.NewRulesetFD(rules(w, abi)...)
	if err != nil {
		return -1, 0, fmt.Errorf("landlock: %w", err)
	}
	if fd < 0 {
		return -1, 0, errors.New("landlock: nothing to enforce; refusing to run unsandboxed")
	}
	// One thread only: never synchronise the domain to the others.
	return fd, flags &^ llsys.FlagRestrictSelfTSync, nil
}

// restrictThread sets no_new_privs on the calling thread and restricts it
// with the ruleset fd; both hold for that thread alone and for the
// processes it forks afterwards, which inherit its credentials. The
// caller must be locked to a thread that ends after it ([goDisposable]),
// whether restrictThread succeeds or not.
func restrictThread(fd int, flags uint32) error {
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("prctl(PR_SET_NO_NEW_PRIVS): %w", err)
	}
	if err := llsys.LandlockRestrictSelf(fd, flags); err != nil {
		return fmt.Errorf("landlock_restrict_self: %w", err)
	}
	return nil
}

// startShell forks and execs the shell with attr and returns its pid. It
// forks from a disposable thread of the helper, which first joins the
// tree's cgroups and network namespace (w.Cgroups, w.NetFD), and unless w
// is unsandboxed drops the capabilities a command must not have, sets
// no_new_privs, restricts itself with Landlock and, where w.NetBy says
// so, installs the socket filter; so the shell and everything it starts
// inherit all that, while the helper's other threads, which go on to
// supervise, do not. The thread ends as soon as the shell runs. Where
// neither a PID namespace nor Landlock keeps the tree's signals in the
// tree, it also installs the signal filter, whose listener it returns
// for [guardSignals] (-1 otherwise). Exec failures come back as
// *execError.
func startShell(w wirePolicy, shell string, argv []string, attr *syscall.ProcAttr) (pid, listener int, err error) {
	fd, flags := -1, uint32(0)
	listener = -1
	guard := false
	if !w.Unsandboxed {
		abi, perr := Probe()
		if abi <= 0 {
			return 0, -1, fmt.Errorf("refusing to run unsandboxed: this kernel has no Landlock (%v)", perr)
		}
		abi = capABI(abi, w.ABI)
		if fd, flags, err = ruleset(w, abi); err != nil {
			return 0, -1, err
		}
		defer unix.Close(fd) // close-on-exec: the shell does not get it
		w.ABI = abi
		// Outside a PID namespace (the helper is not its init) and below
		// ABI 6, nothing else keeps the tree's signals in the tree.
		guard = os.Getpid() != 1 && abi < 6 && seccomp.Arch() != 0
	}
	<-goDisposable(func() {
		tid := strconv.Itoa(unix.Gettid())
		for _, d := range w.Cgroups {
			if err = os.WriteFile(filepath.Join(d, "tasks"), []byte(tid), 0); err != nil {
				err = fmt.Errorf("cgroup: %w", err)
				return
			}
		}
		if w.NetFD > 0 {
			if err = joinNetns(w.NetFD); err != nil {
				return
			}
		}
		if fd >= 0 {
			if err = dropCaps(); err != nil {
				return
			}
			if err = restrictThread(fd, flags); err != nil {
				return
			}
			if w.NetBy == DeniedBySeccomp {
				if err = seccomp.Install(socketFilter(w.ABI >= 4)); err != nil {
					return
				}
			}
			if guard {
				if listener, err = installSignalFilter(); err != nil {
					return
				}
			}
		}
		// fork runs on the calling thread and copies its credentials,
		// namespaces and cgroups, the Landlock domain and the seccomp
		// filter among them.
		if pid, err = syscall.ForkExec(shell, argv, attr); err != nil {
			err = &execError{path: shell, err: err}
		}
	})
	if err != nil && listener >= 0 {
		unix.Close(listener)
		listener = -1
	}
	return pid, listener, err
}
