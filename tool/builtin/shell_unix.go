//go:build unix

package builtin

import (
	"os"
	"syscall"
)

// signalGroup sends sig to every process in p's group. A group that is
// already gone is not an error.
func signalGroup(p *os.Process, sig syscall.Signal) {
	_ = syscall.Kill(-p.Pid, sig)
}
