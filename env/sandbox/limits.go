package sandbox

import (
	"fmt"
	"strings"
	"time"
)

// Limits bound what a command's process tree may use. A zero field sets
// no limit of its kind. Where a limit applies, and by which mechanism
// (a cgroup of the tree or a resource limit of each process), is in
// [Status.LimitsBy]; docs/sandbox.md has the table.
type Limits struct {
	// Processes caps the tasks (processes and threads) alive at once in
	// the tree. A tree that reaches it is killed whole: a fork bomb ends
	// at once rather than spinning on failed forks.
	Processes int
	// Memory caps the tree's memory in bytes (with a cgroup: its RAM,
	// page cache and swap together). The kernel kills the tree's largest
	// process when the tree would exceed it.
	Memory int64
	// CPUTime caps the CPU time the tree may use, all its processes
	// together. A tree that uses it up is killed whole.
	CPUTime time.Duration
	// FileSize caps the size in bytes to which any one file may be
	// written (RLIMIT_FSIZE, rounded down to 512 bytes): a write past it
	// fails with EFBIG and the writer gets SIGXFSZ, which kills it unless
	// it catches the signal. It bounds each file, not the total a tree
	// writes.
	FileSize int64
}

// Names of the limits, the values of [LimitError.Limit]; also the keys
// of the limits in the configuration file and on the wire.
const (
	LimitProcesses = "processes"
	LimitMemory    = "memory"
	LimitCPUTime   = "cpuTime"
	LimitFileSize  = "fileSize"
)

// Mechanisms that enforce a limit, the values of the fields of
// [LimitMechanisms].
const (
	// ByCgroupV1 is a cgroup (version 1) of the command's tree: the pids,
	// memory or cpuacct controller. It bounds the whole tree.
	ByCgroupV1 = "cgroup v1"
	// ByRlimit is a resource limit (setrlimit(2)) of each process of the
	// tree, inherited from its supervisor: RLIMIT_CPU and RLIMIT_DATA
	// bound each process, not the tree; RLIMIT_NPROC counts every process
	// of the user and does not bind root; RLIMIT_FSIZE bounds each file.
	ByRlimit = "rlimit"
)

// LimitMechanisms says which mechanism enforces each kind of limit
// ([ByCgroupV1], [ByRlimit]), or "" where none can.
type LimitMechanisms struct {
	Processes string
	Memory    string
	CPUTime   string
	FileSize  string
}

// validate checks l; what names it in errors.
func (l Limits) validate(what string) error {
	switch {
	case l.Processes < 0:
		return fmt.Errorf("sandbox: %s processes limit %d is negative", what, l.Processes)
	case l.Memory < 0:
		return fmt.Errorf("sandbox: %s memory limit %d is negative", what, l.Memory)
	case l.CPUTime < 0:
		return fmt.Errorf("sandbox: %s CPU time limit %v is negative", what, l.CPUTime)
	case l.FileSize < 0:
		return fmt.Errorf("sandbox: %s file size limit %d is negative", what, l.FileSize)
	case l.FileSize > 0 && l.FileSize < 512:
		return fmt.Errorf("sandbox: %s file size limit %d is below 512 bytes", what, l.FileSize)
	case l.CPUTime > 0 && l.CPUTime < time.Second && l.CPUTime%time.Millisecond != 0:
		return fmt.Errorf("sandbox: %s CPU time limit %v is finer than a millisecond", what, l.CPUTime)
	}
	return nil
}

// Or returns l with each zero field taken from d: l's own limits, with
// d's where l sets none.
func (l Limits) Or(d Limits) Limits {
	if l.Processes == 0 {
		l.Processes = d.Processes
	}
	if l.Memory == 0 {
		l.Memory = d.Memory
	}
	if l.CPUTime == 0 {
		l.CPUTime = d.CPUTime
	}
	if l.FileSize == 0 {
		l.FileSize = d.FileSize
	}
	return l
}

// IsZero reports whether l sets no limit.
func (l Limits) IsZero() bool { return l == Limits{} }

// String lists the limits l sets, as "processes 1024, memory 2 GiB", or
// "none".
func (l Limits) String() string {
	var parts []string
	if l.Processes > 0 {
		parts = append(parts, fmt.Sprintf("processes %d", l.Processes))
	}
	if l.Memory > 0 {
		parts = append(parts, "memory "+FormatBytes(l.Memory))
	}
	if l.CPUTime > 0 {
		parts = append(parts, "CPU time "+l.CPUTime.String())
	}
	if l.FileSize > 0 {
		parts = append(parts, "file size "+FormatBytes(l.FileSize))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// FormatBytes writes n bytes for people: "512 MiB", "1.5 GiB", "100 B".
func FormatBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 5; m /= unit {
		div *= unit
		exp++
	}
	v := float64(n) / float64(div)
	s := fmt.Sprintf("%.1f", v)
	s = strings.TrimSuffix(s, ".0")
	return s + " " + string("KMGTPE"[exp]) + "iB"
}

// LimitError reports that a command's process tree ran into one of its
// limits; [Cmd.Exceeded] returns it once the command has been waited
// for. Its message names the limit, its value and what enforced it, for
// the model and the user to read.
type LimitError struct {
	// Limit is which: [LimitProcesses], [LimitMemory], [LimitCPUTime] or
	// [LimitFileSize].
	Limit string
	// Scope is whose limit it was: "command" (the tree's own), "session"
	// (all the commands of its session together) or "host" (all the
	// commands of the host together).
	Scope string
	// Value is the limit, for people ("1024", "512 MiB", "10s").
	Value string
	// By is the mechanism that enforced it ([ByCgroupV1], [ByRlimit]).
	By string
	// Killed reports that the whole tree was killed for it (the process
	// and CPU time limits); otherwise the kernel refused a write or killed
	// one process, and the rest of the tree went on.
	Killed bool
}

// Error describes the limit that was reached and what happened.
func (e *LimitError) Error() string {
	var what string
	switch e.Limit {
	case LimitProcesses:
		what = "the processes limit"
	case LimitMemory:
		what = "the memory limit"
	case LimitCPUTime:
		what = "the CPU time limit"
	case LimitFileSize:
		what = "the file size limit"
	default:
		what = "the " + e.Limit + " limit"
	}
	scope := "command's"
	switch e.Scope {
	case "session":
		scope = "session's"
	case "host":
		scope = "host's"
	}
	s := fmt.Sprintf("resource limit: %s of the %s", what, scope)
	if e.Scope != "command" && e.Scope != "" {
		s += " commands together"
	}
	if e.Value != "" {
		s += " (" + e.Value
		if e.By != "" {
			s += ", " + e.By
		}
		s += ")"
	}
	s += " was reached"
	switch {
	case e.Killed:
		s += "; the command and everything it started were killed"
	case e.Limit == LimitMemory:
		s += "; the kernel killed the command's largest process"
	case e.Limit == LimitFileSize:
		s += "; a write past it failed (EFBIG, SIGXFSZ)"
	}
	return s
}
