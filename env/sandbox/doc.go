// Package sandbox runs shell and process commands so that their whole
// process tree is contained and, unless unsandboxed, confined with
// Landlock, the unprivileged Linux security module: a command reaches its
// session's mounts (read-only mounts read-only), a read-only list of
// system directories, a few device files and a private temporary
// directory, and nothing else; its network is taken away unless the
// policy allows it; its resources are bounded; and its signals stay in
// its tree.
//
// # How a command starts
//
// Landlock restricts the thread that asks for it and the processes that
// thread forks afterwards, and no other thread. Where it can, [Cmd.Start]
// uses that in the host itself: it locks a goroutine to a new OS thread,
// sets no_new_privs on that thread and restricts it with the command's
// ruleset, and starts the command from it with os/exec, whose fork runs
// on the calling thread, so the child inherits the domain. No other
// goroutine ever runs on that thread; it stays parked until the command
// has exited (its end would send the command its parent-death signal),
// then its goroutine returns without unlocking it and the runtime ends
// it. Other threads of the host, and the threads the runtime makes
// meanwhile (cloned from its template thread), are never restricted. The
// thread is never one from which another goroutine started a child, whose
// parent-death signal its end would send.
//
// What the host starts is /bin/sh as init of a PID namespace of its own
// (see Containment), running the shell as its child and exiting with its
// status, 128+n when signal n killed it. The shell is not init, which
// would ignore every signal it has no handler for: signals and "kill $$"
// reach it as usual, and its $PPID is 1. This needs /bin/sh, and under
// Landlock a PID namespace without a user namespace (as root);
// unsandboxed commands may also get a user namespace.
//
// Elsewhere (a user namespace under Landlock, whose ID maps the
// restricted thread could not write; no namespaces at all; or a caller
// that starts the embedded exec.Cmd itself after [Cmd.Prepare]) the
// command runs under the helper: the weft executable itself
// (/proc/self/exe) with the hidden first argument [HelperArg] and the
// policy as JSON. The program's main must therefore begin with
//
//	if sandbox.IsHelper(os.Args) {
//		sandbox.Main(os.Args) // never returns
//	}
//
// The helper ([Main]) restricts one thread of its own the same way, forks
// the shell from it (so the shell and everything it starts are confined,
// the helper is not) and stays as the shell's parent until the shell has
// exited and everything it started is dead. Its re-exec costs some
// milliseconds per command (the runtime and package initialisation of the
// weft binary); the host's start costs one more exec, of /bin/sh.
//
// # Containment
//
// Cancel, timeout and the host's death end the whole tree, processes that
// left the shell's process group or session (setsid, double forks)
// included. [Containment] reports which way this process can do it:
//
//   - [ContainmentPIDNamespace]: the command's init, the init shell or
//     the helper, is started in a PID namespace of its own (as root, or
//     through an unprivileged user namespace that maps the caller to
//     itself). When it exits for any reason, the kernel kills every
//     process in the namespace, and the host's Wait returns only after
//     they are gone. Its parent-death signal is SIGKILL, so the host's
//     death ends the namespace even if no host ever starts again. A
//     process cannot leave its PID namespace; what the tree asks a daemon
//     outside to start (systemd, cron, an SSH server), or what a root
//     shell starts after setns(2) into another namespace, is not
//     contained.
//   - [ContainmentSubreaper], where no namespace can be made (for example
//     Ubuntu 24.04's AppArmor restriction of unprivileged user
//     namespaces, or a container's seccomp policy): the helper is a child
//     subreaper, so the tree's orphans are re-parented to it; before it
//     exits, whether the shell ended, the host killed it or the host died
//     (parent-death signal SIGTERM, caught), it kills every descendant it
//     has. A process that makes itself another user's (setuid), that the
//     helper may not signal, or that stops the helper (possible without
//     Landlock's signal scoping, ABI 6) defeats it. The helper also
//     learns of the host's death by end of file on a pipe only the host
//     holds.
//
// [Cmd.Kill] ends the tree in both modes. A consequence: when a shell
// exits, whatever it left running in the background is killed; a
// command's "cmd &" does not outlive it.
//
// [Config.Containment] forces the fallback (tests run both modes on
// machines where namespaces work) or requires a namespace. Without
// namespaces commands still run, in the fallback.
//
// # Network, limits and signals
//
// With the network denied the tree runs in a network namespace whose only
// interface is its loopback: the session's, made once by [Sessions] and
// joined by each of its commands (as root), or one of its own (in an
// unprivileged user namespace). Where no namespace can be made, a seccomp
// filter refuses every socket but UNIX, netlink and TCP ones, and Landlock
// TCP's bind and connect. [Status.NetworkDeniedBy] says which holds.
//
// [Limits] bound each tree (processes, memory, CPU time, file size), and
// [SessionsConfig] a session's commands together and the host's. They
// are enforced by cgroup v1 groups nested host ⊃ session ⊃ command
// where this process may make them, else by rlimits of each process;
// [Status.LimitsBy] says which. [Cmd.Wait] kills a tree whole at its
// first refused fork or when its CPU time is used up, and
// [Cmd.Exceeded] reports the limit a tree ran into as a [LimitError].
//
// A command cannot signal the host or another tree: a PID namespace
// hides them, Landlock (ABI 6) scopes signals, and under the subreaper
// below ABI 6 the helper answers a seccomp user-notification filter on
// every signal system call. The capabilities a root command must not
// keep (CAP_SYS_ADMIN, CAP_SYS_RESOURCE, CAP_NET_ADMIN, …) leave its
// bounding set.
//
// # Temporary directories
//
// Each command gets a private TMPDIR under [Config.TempRoot], named
// after the weft process that made it and removed when the command has
// been waited for. [RemoveStale] removes those of weft processes that are
// gone; the process manager's recovery calls it.
//
// When the kernel has no Landlock, [Command] refuses with an error wrapping
// [ErrNoLandlock] unless [Config.Unsandboxed] is set, which only the user's
// configuration should set; commands are never silently unsandboxed.
// Unsandboxed commands are contained all the same.
//
// Coverage depends on the kernel's Landlock ABI ([Probe]), which
// [Config.LandlockABI] may cap; docs/sandbox.md lists what is and is not
// confined and contained at each ABI. On systems other than
// Linux [Command] works only in unsandboxed mode, starts the shell
// directly and contains nothing ([ContainmentNone]).
package sandbox
