//go:build !unix

package builtin

import (
	"os"
	"syscall"
)

// newGroupAttr: process groups are Unix-only; elsewhere only the shell
// itself is signalled.
func newGroupAttr() *syscall.SysProcAttr { return nil }

// signalGroup kills the shell process; its children may survive.
func signalGroup(p *os.Process, sig syscall.Signal) {
	_ = p.Kill()
}

// exitSignal: signals are Unix-only.
func exitSignal(*os.ProcessState) string { return "" }
