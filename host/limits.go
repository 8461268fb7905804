package host

import (
	"weft.dev/weft/api"
	"weft.dev/weft/event"
)

// checkLimits checks a session's own limits of each command against the
// host's ceiling: each field zero (the host's default) or positive, and
// at most the ceiling's where it sets one. A file size below 512 bytes
// is refused: the kernel counts it in 512-byte blocks.
func checkLimits(field string, l *event.Limits, ceiling event.Limits) error {
	if l == nil {
		return nil
	}
	type limit struct {
		key    string
		v, max int64
	}
	for _, x := range []limit{
		{"processes", int64(l.Processes), int64(ceiling.Processes)},
		{"memoryBytes", l.MemoryBytes, ceiling.MemoryBytes},
		{"cpuTimeMs", l.CPUTimeMs, ceiling.CPUTimeMs},
		{"fileSizeBytes", l.FileSizeBytes, ceiling.FileSizeBytes},
	} {
		switch {
		case x.v < 0:
			return invalid(field, "limits.%s %d: want a positive number, or leave it out for the host's default", x.key, x.v)
		case x.max > 0 && x.v > x.max:
			return api.Errorf(api.KindInvalidParams, "limits.%s %d is over the host's ceiling of %d", x.key, x.v, x.max).
				With("field", field).With("limit", x.key).With("ceiling", x.max)
		}
	}
	if l.FileSizeBytes > 0 && l.FileSizeBytes < 512 {
		return invalid(field, "limits.fileSizeBytes %d: at least 512", l.FileSizeBytes)
	}
	return nil
}
