package builtin

import "syscall"

// newGroupAttr puts the shell in a process group of its own, whose id is
// its pid, and kills the shell if weft dies (Pdeathsig), so a crashed host
// does not leave the foreground shell running.
func newGroupAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
