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
const wireVersion = 1

// wirePolicy is the policy as the helper receives it, JSON in its second
// argument.
type wirePolicy struct {
	V        int      `json:"v"`
	Network  string   `json:"network"`
	Mounts   []Mount  `json:"mounts,omitempty"`
	ReadOnly []string `json:"readOnly,omitempty"`
	TempDir  string   `json:"tempDir"`
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
	if !filepath.IsAbs(w.TempDir) {
		return wirePolicy{}, fmt.Errorf("policy: temporary directory %q is not absolute", w.TempDir)
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
// shell, shell arguments). Main restricts the process with Landlock and
// then replaces it with the shell, keeping its pid, process group,
// parent-death signal, working directory, environment and open files.
//
// Main never returns. When it cannot apply the policy it writes
// "weft sandbox: <reason>" to stderr and exits with [ExitCannotRun]; when
// the shell cannot be executed it exits with [ExitNotFound] or
// [ExitCannotRun]. It never runs the shell unrestricted.
func Main(args []string) {
	err := helper(args)
	code := ExitCannotRun
	var ee *execError
	if errors.As(err, &ee) && errors.Is(ee.err, syscall.ENOENT) {
		code = ExitNotFound
	}
	fmt.Fprintf(os.Stderr, "weft sandbox: %v\n", err)
	os.Exit(code)
}

// helper applies the policy and execs the shell; it returns only on
// failure.
func helper(args []string) error {
	if !IsHelper(args) || len(args) < 4 {
		return errors.New("usage: " + HelperArg + " POLICY SHELL [ARG...]")
	}
	w, err := decodeWire(args[2])
	if err != nil {
		return err
	}
	shell := args[3]
	if !filepath.IsAbs(shell) {
		return fmt.Errorf("shell %q is not an absolute path", shell)
	}
	return restrictAndExec(w, shell, args[3:])
}

// execError is a failure of execve itself.
type execError struct {
	path string
	err  error
}

func (e *execError) Error() string { return fmt.Sprintf("exec %s: %v", e.path, e.err) }
func (e *execError) Unwrap() error { return e.err }
