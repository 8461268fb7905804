package env

import (
	"errors"
	"strconv"
)

// Sentinel errors that [Error] wraps. Branch on them with [errors.Is]. The
// RPC layer maps every one of them except [ErrTooLarge] and [ErrDenied] to
// EnvironmentUnavailable (-32031).
var (
	// ErrOutside means the path leaves every mount: an absolute host path,
	// a ".." that climbs above a mount root, or a symbolic link that leads
	// out of the mount.
	ErrOutside = errors.New("outside mount")
	// ErrReadOnly means a write was asked of a read-only mount.
	ErrReadOnly = errors.New("read-only mount")
	// ErrNoMount means the path names no mount of the binding: an unknown
	// id, "/environment" alone, or a binding with no mounts.
	ErrNoMount = errors.New("no such mount")
	// ErrBadPath means the path is malformed: empty, too long or holding a
	// NUL byte.
	ErrBadPath = errors.New("bad path")
	// ErrNotRegular means the file is a device, named pipe, socket or other
	// irregular file, which tools may not open.
	ErrNotRegular = errors.New("not a regular file")
	// ErrTooLarge means a read was capped and the file is bigger than the
	// cap. It is a limit of the call, not an environment failure.
	ErrTooLarge = errors.New("file too large")
	// ErrDenied means the binding's [Guard] refused the file: the approval
	// policy does not let the call open it, wherever the path led. The RPC
	// layer maps it to Denied (-32018).
	ErrDenied = errors.New("denied by policy")
)

// Error is a refusal by the resolver or by a [Path] helper. Its message
// names the path as the caller gave it (or its display path), the mount and
// the reason, for example
//
//	/environment/work/../../etc/passwd: outside mount "work": ".." escapes the mount root
//
// It never contains a host path.
type Error struct {
	// Path is the path as the caller wrote it, or the display path when the
	// refusal came from an operation on a resolved [Path].
	Path string
	// MountID is the mount involved, if any.
	MountID string
	// Reason says why, in words meant for the model.
	Reason string
	// Err is one of the sentinels above.
	Err error
}

// Error implements error.
func (e *Error) Error() string {
	s := e.Path + ": " + e.Err.Error()
	if e.MountID != "" {
		switch e.Err {
		case ErrOutside, ErrReadOnly, ErrNoMount:
			s += " " + strconv.Quote(e.MountID)
		default:
			s += " in mount " + strconv.Quote(e.MountID)
		}
	}
	if e.Reason != "" {
		s += ": " + e.Reason
	}
	return s
}

// Unwrap returns the sentinel, so that errors.Is(err, ErrOutside) works.
func (e *Error) Unwrap() error { return e.Err }
