package sandbox

import "golang.org/x/sys/unix"

// MachineMemory returns the machine's memory in bytes, or 0 when it
// cannot be told.
func MachineMemory() int64 {
	var si unix.Sysinfo_t
	if err := unix.Sysinfo(&si); err != nil {
		return 0
	}
	return int64(si.Totalram) * int64(si.Unit)
}
