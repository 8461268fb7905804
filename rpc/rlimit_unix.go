//go:build unix

package rpc

import "syscall"

// openFileLimit returns the process's soft limit on open files, or 0
// when it cannot be read or is unlimited (or as good as).
func openFileLimit() uint64 {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil || lim.Cur >= 1<<62 {
		return 0
	}
	return uint64(lim.Cur)
}
