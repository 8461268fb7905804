//go:build !unix

package mcp

import (
	"fmt"
	"os/exec"
)

func setGroup(*exec.Cmd) {}

func terminate(c *exec.Cmd) {
	if c.Process != nil {
		c.Process.Kill()
	}
}

func killGroup(c *exec.Cmd) {
	if c.Process != nil {
		c.Process.Kill()
	}
}

func exitStatus(ee *exec.ExitError) string {
	return fmt.Sprintf("exited with status %d", ee.ExitCode())
}
