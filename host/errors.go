package host

import (
	"errors"
	"fmt"
)

// Sentinel errors that callers branch on with errors.Is. The rpc package
// maps each to its JSON-RPC code; an *Error carries details.
var (
	ErrNotFound            = errors.New("not found")
	ErrAlreadyExists       = errors.New("already exists")
	ErrInvalidParams       = errors.New("invalid params")
	ErrIdempotencyConflict = errors.New("idempotency conflict")
	ErrRunConflict         = errors.New("run conflict")
	ErrCursorInvalid       = errors.New("cursor invalid")
	ErrEnvUnavailable      = errors.New("environment unavailable")
	ErrOverloaded          = errors.New("overloaded")
	ErrDenied              = errors.New("denied")
	ErrClosed              = errors.New("host closed")
)

// Error is a host failure with a kind (one of the sentinels) and
// machine-readable details for the client.
type Error struct {
	Kind    error
	Message string
	// Data holds details such as the active run's ID or both binding versions.
	Data map[string]any
}

func (e *Error) Error() string { return e.Message }

// Unwrap returns the sentinel kind.
func (e *Error) Unwrap() error { return e.Kind }

func errf(kind error, data map[string]any, format string, args ...any) error {
	return &Error{Kind: kind, Message: fmt.Sprintf(format, args...), Data: data}
}
