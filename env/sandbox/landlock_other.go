//go:build !linux

package sandbox

import (
	"errors"
	"os"
	"runtime"
)

// Probe returns the kernel's Landlock ABI version: on this system always
// 0, with an error saying Landlock is Linux-only.
func Probe() (abi int, err error) {
	return 0, errors.New("Landlock is Linux-only; this is " + runtime.GOOS)
}

// defaultExecutable is the running binary.
func defaultExecutable() (string, error) { return os.Executable() }

// supervise refuses: the helper is Linux-only ([Command] does not use it
// elsewhere).
func supervise(w wirePolicy, shell string, argv []string) (int, error) {
	return ExitCannotRun, errors.New("refusing to run: the sandbox helper is Linux-only; this is " + runtime.GOOS)
}
