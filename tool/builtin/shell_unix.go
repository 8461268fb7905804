//go:build unix

package builtin

import (
	"os"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// signalGroup sends sig to every process in p's group. A group that is
// already gone is not an error.
func signalGroup(p *os.Process, sig syscall.Signal) {
	_ = syscall.Kill(-p.Pid, sig)
}

// exitSignal names the signal that killed a process ("SIGTERM"), or
// returns "".
func exitSignal(st *os.ProcessState) string {
	ws, ok := st.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() {
		return ""
	}
	if name := unix.SignalName(ws.Signal()); name != "" {
		return name
	}
	return "signal " + strconv.Itoa(int(ws.Signal()))
}
