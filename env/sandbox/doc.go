// Package sandbox confines shell and process commands with Landlock, the
// unprivileged Linux security module: a command reaches its session's
// mounts (read-only mounts read-only), a read-only list of system
// directories, a few device files and a private temporary directory, and
// nothing else; TCP is denied unless the policy allows the network.
//
// weft stays one static binary: [Command] returns a [Cmd] that runs the
// weft executable itself (/proc/self/exe) with the hidden first argument
// [HelperArg] and the policy as JSON. That helper applies Landlock to
// itself and then execs the shell, so the restriction covers the shell and
// everything it starts. The program's main must therefore begin with
//
//	if sandbox.IsHelper(os.Args) {
//		sandbox.Main(os.Args) // never returns
//	}
//
// When the kernel has no Landlock, [Command] refuses with an error wrapping
// [ErrNoLandlock] unless [Config.Unsandboxed] is set, which only the user's
// configuration should set; commands are never silently unsandboxed.
//
// Coverage depends on the kernel's Landlock ABI ([Probe]); docs/sandbox.md
// lists what is and is not confined. On systems other than Linux [Command]
// works only in unsandboxed mode.
package sandbox
