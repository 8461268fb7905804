package console_test

import (
	"os/exec"
	"syscall"
)

// dieWithTest has c killed when the test binary dies.
func dieWithTest(c *exec.Cmd) {
	c.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
