//go:build unix

package process

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// killGroup sends SIGKILL to group pgid; a group that is gone is fine.
func killGroup(pgid int) { _ = syscall.Kill(-pgid, syscall.SIGKILL) }

// signalGroup sends sig to group pgid.
func signalGroup(pgid int, sig syscall.Signal) { _ = syscall.Kill(-pgid, sig) }

// signalName returns the name of sig, such as "SIGINT".
func signalName(sig syscall.Signal) string {
	if n := unix.SignalName(sig); n != "" {
		return n
	}
	return sig.String()
}
