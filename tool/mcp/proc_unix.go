//go:build unix

package mcp

import (
	"fmt"
	"os/exec"
	"syscall"
)

// setGroup makes the command lead a process group of its own, so that
// the group can be signalled.
func setGroup(c *exec.Cmd) {
	if c.SysProcAttr == nil {
		c.SysProcAttr = &syscall.SysProcAttr{}
	}
	c.SysProcAttr.Setpgid = true
}

// terminate sends SIGTERM to the command's group (a sandbox helper
// forwards it to the command's).
func terminate(c *exec.Cmd) {
	if c.Process != nil {
		syscall.Kill(-c.Process.Pid, syscall.SIGTERM)
	}
}

// killGroup kills the command's group.
func killGroup(c *exec.Cmd) {
	if c.Process != nil {
		syscall.Kill(-c.Process.Pid, syscall.SIGKILL)
	}
}

func exitStatus(ee *exec.ExitError) string {
	if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return fmt.Sprintf("killed by %v", ws.Signal())
	}
	return fmt.Sprintf("exited with status %d", ee.ExitCode())
}
