//go:build unix

package sqlite_test

import (
	"syscall"
	"time"
)

// cpuTime returns the CPU time (user and system) the process has used; on
// a loaded machine it is a steadier measure of a benchmark's cost than the
// wall clock.
func cpuTime() (time.Duration, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
