//go:build !linux

package sandbox

// MachineMemory returns 0 off Linux, where commands get no limits.
func MachineMemory() int64 { return 0 }
