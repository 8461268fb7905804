//go:build unix && !linux

package builtin

import "syscall"

// newGroupAttr puts the shell in a process group of its own, whose id is
// its pid.
func newGroupAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }
