package sandbox

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
)

// wireVersion is the version of the policy encoding. A helper refuses a
// policy of another version, which can only come from a different weft
// binary.
const wireVersion = 3

// wirePolicy is the policy as the helper receives it, JSON in its second
// argument.
type wirePolicy struct {
	V int `json:"v"`
	// Unsandboxed: contain the shell but do not apply Landlock.
	Unsandboxed bool     `json:"unsandboxed,omitempty"`
	Network     string   `json:"network"`
	Mounts      []Mount  `json:"mounts,omitempty"`
	ReadOnly    []string `json:"readOnly,omitempty"`
	TempDir     string   `json:"tempDir"`
	// TTY: the helper is a session leader whose standard input is its
	// controlling terminal; the shell becomes the terminal's foreground
	// process group.
	TTY bool `json:"tty,omitempty"`
	// LiveFD is the helper's descriptor for the read end of a pipe whose
	// write end only the host holds: end of file on it means the host is
	// gone. Descriptors below it are passed on to the shell. Zero means
	// none (the shell gets 0, 1 and 2).
	LiveFD int `json:"liveFD,omitempty"`
	// ABI caps the Landlock ABI applied ([Config.LandlockABI]); 0 means
	// the kernel's.
	ABI int `json:"abi,omitempty"`
	// NetBy is what takes a denied network away ([Status.NetworkDeniedBy]):
	// with DeniedByNamespace the shell is forked into the network
	// namespace NetFD, or without one into the helper's own (made with
	// it, in its user namespace), whose loopback the helper brings up,
	// and Landlock leaves the network alone; with DeniedBySeccomp the
	// shell's thread installs the socket filter.
	NetBy string `json:"netBy,omitempty"`
	// NetFD is the helper's descriptor of the network namespace to fork
	// the shell into; 0 means none.
	NetFD int `json:"netFD,omitempty"`
	// Cgroups are the directories of the tree's cgroups, which the thread
	// that forks the shell joins first.
	Cgroups []string `json:"cgroups,omitempty"`
	// Rlimits are set on the helper before it forks the shell, which
	// inherits them.
	Rlimits []wireRlimit `json:"rlimits,omitempty"`
}

// wireRlimit is a resource limit (RLIMIT_*) the helper sets.
type wireRlimit struct {
	Resource int    `json:"resource"`
	Max      uint64 `json:"max"`
}

// decodeWire parses and checks a policy received by the helper.
func decodeWire(s string) (wirePolicy, error) {
	var w wirePolicy
	dec := json.NewDecoder(bytes.NewReader([]byte(s)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&w); err != nil {
		return wirePolicy{}, fmt.Errorf("policy: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return wirePolicy{}, errors.New("policy: trailing data")
	}
	if w.V != wireVersion {
		return wirePolicy{}, fmt.Errorf("policy: version %d, want %d (is the weft binary the same?)", w.V, wireVersion)
	}
	if w.Network != NetworkDeny && w.Network != NetworkAllow {
		return wirePolicy{}, fmt.Errorf("policy: network %q is neither %q nor %q", w.Network, NetworkDeny, NetworkAllow)
	}
	if w.ABI < 0 {
		return wirePolicy{}, fmt.Errorf("policy: Landlock ABI cap %d is negative", w.ABI)
	}
	if !filepath.IsAbs(w.TempDir) {
		return wirePolicy{}, fmt.Errorf("policy: temporary directory %q is not absolute", w.TempDir)
	}
	if w.LiveFD != 0 && w.LiveFD < 3 {
		return wirePolicy{}, fmt.Errorf("policy: host pipe descriptor %d is a standard one", w.LiveFD)
	}
	if w.NetFD != 0 && (w.NetFD < 3 || w.NetFD <= w.LiveFD) {
		return wirePolicy{}, fmt.Errorf("policy: network namespace descriptor %d is not after the host pipe's", w.NetFD)
	}
	switch w.NetBy {
	case "", DeniedByNamespace, DeniedBySeccomp, DeniedByLandlock:
	default:
		return wirePolicy{}, fmt.Errorf("policy: network denied by %q", w.NetBy)
	}
	for _, d := range w.Cgroups {
		if !filepath.IsAbs(d) {
			return wirePolicy{}, fmt.Errorf("policy: cgroup %q is not absolute", d)
		}
	}
	for _, m := range w.Mounts {
		if !filepath.IsAbs(m.Path) {
			return wirePolicy{}, fmt.Errorf("policy: mount path %q is not absolute", m.Path)
		}
	}
	for _, r := range w.ReadOnly {
		if !filepath.IsAbs(r) {
			return wirePolicy{}, fmt.Errorf("policy: read-only path %q is not absolute", r)
		}
	}
	return w, nil
}

// IsHelper reports whether args, the program's os.Args, ask it to act as
// the sandbox helper: the first argument is [HelperArg]. Safe to call
// before anything else in main.
func IsHelper(args []string) bool {
	return len(args) > 1 && args[1] == HelperArg
}

// Exit statuses of the helper when it cannot run the command, as a shell
// reports them.
const (
	// ExitCannotRun means the policy could not be applied or the shell
	// could not be executed.
	ExitCannotRun = 126
	// ExitNotFound means the shell does not exist.
	ExitNotFound = 127
)

// Main runs the helper: args are os.Args of a process for which [IsHelper]
// is true, as [Command] builds them (program, [HelperArg], policy JSON,
// shell, shell arguments). Main supervises the shell until it and
// everything it started have ended:
//
//   - It contains the shell's process tree. Started by [Cmd] in a PID
//     namespace of its own, it is the namespace's init: when it exits for
//     any reason the kernel kills every process left in the namespace.
//     Otherwise it makes itself a child subreaper, so that orphans of the
//     tree are re-parented to it, and kills all its descendants before it
//     exits. It dies with the host (parent-death signal, and end of file
//     on a pipe only the host holds).
//   - Unless the policy is unsandboxed, it restricts one thread of its own
//     with Landlock and forks the shell from it, so the shell and
//     everything it starts are confined while the helper is not.
//   - The shell runs in a process group of its own (on a terminal, the
//     terminal's foreground group); SIGINT, SIGTERM, SIGHUP, SIGQUIT,
//     SIGUSR1, SIGUSR2, and on a terminal SIGWINCH, sent to the helper are
//     forwarded to that group.
//   - It reaps every process that ends in the tree and, once the shell has
//     exited, kills the rest and exits with the shell's status: its exit
//     code, or 128+n when signal n killed it, as a shell reports.
//
// Main never returns. When it cannot apply the policy it writes
// "weft sandbox: <reason>" to stderr and exits with [ExitCannotRun]; when
// the shell cannot be executed it exits with [ExitNotFound] or
// [ExitCannotRun]. It never runs the shell unrestricted unless the policy
// says unsandboxed.
func Main(args []string) {
	code, err := helper(args)
	if err != nil {
		fmt.Fprintf(os.Stderr, "weft sandbox: %v\n", err)
	}
	// Nothing to flush: exit at once. os.Exit would run the runtime's exit
	// hooks, which in a race-instrumented binary (tests) sleep a second.
	syscall.Exit(code)
}

// helper decodes its arguments and supervises the shell; it returns the
// exit status of the helper and what went wrong, if anything.
func helper(args []string) (int, error) {
	if !IsHelper(args) || len(args) < 4 {
		return ExitCannotRun, errors.New("usage: " + HelperArg + " POLICY SHELL [ARG...]")
	}
	w, err := decodeWire(args[2])
	if err != nil {
		return ExitCannotRun, err
	}
	shell := args[3]
	if !filepath.IsAbs(shell) {
		return ExitCannotRun, fmt.Errorf("shell %q is not an absolute path", shell)
	}
	return supervise(w, shell, args[3:])
}

// execError is a failure of execve itself.
type execError struct {
	path string
	err  error
}

func (e *execError) Error() string { return fmt.Sprintf("exec %s: %v", e.path, e.err) }
func (e *execError) Unwrap() error { return e.err }

// exitCode is the helper's status for a failure to start the shell.
func exitCode(err error) int {
	var ee *execError
	if errors.As(err, &ee) && errors.Is(ee.err, syscall.ENOENT) {
		return ExitNotFound
	}
	return ExitCannotRun
}
