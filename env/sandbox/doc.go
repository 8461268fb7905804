// Package sandbox runs shell and process commands under a supervisor
// that contains their whole process tree and, unless unsandboxed,
// confines them with Landlock, the unprivileged Linux security module: a
// command reaches its session's mounts (read-only mounts read-only), a
// read-only list of system directories, a few device files and a private
// temporary directory, and nothing else; TCP is denied unless the policy
// allows the network.
//
// weft stays one static binary: [Command] returns a [Cmd] that runs the
// weft executable itself (/proc/self/exe) with the hidden first argument
// [HelperArg] and the policy as JSON. The program's main must therefore
// begin with
//
//	if sandbox.IsHelper(os.Args) {
//		sandbox.Main(os.Args) // never returns
//	}
//
// The helper ([Main]) restricts one thread of its own with Landlock, forks
// the shell from it (so the shell and everything it starts are confined,
// the helper is not) and stays as the shell's parent until the shell has
// exited and everything it started is dead.
//
// # Containment
//
// Cancel, timeout and the host's death end the whole tree, processes that
// left the shell's process group or session (setsid, double forks)
// included. [Containment] reports which way this process can do it:
//
//   - [ContainmentPIDNamespace]: the helper is started in a PID namespace
//     of its own (as root, or through an unprivileged user namespace that
//     maps the caller to itself) and is its init. When it exits for any
//     reason, the kernel kills every process in the namespace, and the
//     host's Wait returns only after they are gone. Its parent-death
//     signal is SIGKILL, so the host's death ends the namespace even if no
//     host ever starts again. A process cannot leave its PID namespace;
//     what the tree asks a daemon outside to start (systemd, cron, an SSH
//     server), or what a root shell starts after setns(2) into another
//     namespace, is not contained.
//   - [ContainmentSubreaper], where no namespace can be made (for example
//     Ubuntu 24.04's AppArmor restriction of unprivileged user
//     namespaces, or a container's seccomp policy): the helper is a child
//     subreaper, so the tree's orphans are re-parented to it; before it
//     exits, whether the shell ended, the host killed it or the host died
//     (parent-death signal SIGTERM, caught), it kills every descendant it
//     has. A process that makes itself another user's (setuid), that the
//     helper may not signal, or that stops the helper (possible without
//     Landlock's signal scoping, ABI 6) defeats it.
//
// Either way the helper also learns of the host's death by end of file on
// a pipe only the host holds. [Cmd.Kill] ends the tree in both modes. A
// consequence: when a shell exits, whatever it left running in the
// background is killed; a command's "cmd &" does not outlive it.
//
// [Config.Containment] forces the fallback (tests run both modes on
// machines where namespaces work) or requires a namespace. Without
// namespaces commands still run, in the fallback.
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
// Unsandboxed commands still run under the helper and are contained.
//
// Coverage depends on the kernel's Landlock ABI ([Probe]); docs/sandbox.md
// lists what is and is not confined and contained. On systems other than
// Linux [Command] works only in unsandboxed mode, starts the shell
// directly and contains nothing ([ContainmentNone]).
package sandbox
