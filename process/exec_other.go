//go:build unix && !linux

package process

import "syscall"

// groupAttr puts a shell in a process group of its own. Pdeathsig is
// Linux-only: elsewhere a crashed host's shells are found by the sweep.
func groupAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

// ptyAttr starts a shell as a session leader on the pty.
func ptyAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setsid: true, Setctty: true} }

// sweep kills group pgid without checking its members: without /proc
// the marker cannot be read.
func sweep(pgid int, _ string) []int {
	if syscall.Kill(-pgid, syscall.SIGKILL) == nil {
		return []int{pgid}
	}
	return nil
}
