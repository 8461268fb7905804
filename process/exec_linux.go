package process

import (
	"bytes"
	"os"
	"strconv"
	"syscall"
)

// groupAttr puts a shell in a process group of its own (pgid = pid) and
// kills it if the host dies (Pdeathsig). Without the sandbox helper
// Pdeathsig reaches the shell only; its children are found by the sweep
// at recovery. The helper, whose parent-death signal sandbox.Cmd sets,
// takes the whole tree with it.
func groupAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// ptyAttr starts a shell as a session leader with the pty as its
// controlling terminal (its group id is its pid, as with groupAttr).
func ptyAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setsid: true, Setctty: true, Pdeathsig: syscall.SIGKILL}
}

// sweep kills (SIGKILL) every process whose environment carries
// MarkerEnv=id and returns their pids, whatever their group: the recorded
// group pgid, one they made (setsid), or the shell's own under the
// sandbox helper. The ID is random, so a stranger never carries it; a
// child that cleared its environment is missed.
func sweep(_ int, id string) []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	marker := []byte("\x00" + MarkerEnv + "=" + id + "\x00")
	var killed []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		envb, err := os.ReadFile("/proc/" + e.Name() + "/environ")
		if err != nil || !bytes.Contains(append(append([]byte{0}, envb...), 0), marker) {
			continue
		}
		if syscall.Kill(pid, syscall.SIGKILL) == nil {
			killed = append(killed, pid)
		}
	}
	return killed
}
