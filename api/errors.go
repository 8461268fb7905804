package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
)

// Kind names a class of error on the wire. It is carried in every error
// response as error.data.kind so that clients branch on a stable string
// rather than on a message.
type Kind string

// The kinds of the error table, each with its code below.
const (
	KindParse                  Kind = "parse"
	KindInvalidRequest         Kind = "invalid_request"
	KindTooLarge               Kind = "too_large"
	KindMethodNotFound         Kind = "method_not_found"
	KindInvalidParams          Kind = "invalid_params"
	KindInternal               Kind = "internal"
	KindOverloaded             Kind = "overloaded"
	KindNotFound               Kind = "not_found"
	KindAlreadyExists          Kind = "already_exists"
	KindIdempotencyConflict    Kind = "idempotency_conflict"
	KindRunConflict            Kind = "run_conflict"
	KindAlreadyResolved        Kind = "already_resolved"
	KindCursorInvalid          Kind = "cursor_invalid"
	KindUnauthorized           Kind = "unauthorized"
	KindDenied                 Kind = "denied"
	KindStorageUnavailable     Kind = "storage_unavailable"
	KindEnvironmentUnavailable Kind = "environment_unavailable"
)

// The JSON-RPC error codes.
const (
	CodeParse                  = -32700
	CodeInvalidRequest         = -32600 // also used by KindTooLarge
	CodeMethodNotFound         = -32601
	CodeInvalidParams          = -32602
	CodeInternal               = -32603
	CodeOverloaded             = -32001
	CodeNotFound               = -32010
	CodeAlreadyExists          = -32011
	CodeIdempotencyConflict    = -32012
	CodeRunConflict            = -32013
	CodeAlreadyResolved        = -32014
	CodeCursorInvalid          = -32016
	CodeUnauthorized           = -32017
	CodeDenied                 = -32018
	CodeStorageUnavailable     = -32019
	CodeEnvironmentUnavailable = -32031
)

// Sentinels that callers branch on with errors.Is. Every error the host
// returns for one of these kinds, in process or over the wire, matches
// its sentinel: [Error.Is] compares kinds.
var (
	ErrInvalidParams       = NewError(KindInvalidParams, "invalid params")
	ErrOverloaded          = NewError(KindOverloaded, "overloaded")
	ErrNotFound            = NewError(KindNotFound, "not found")
	ErrAlreadyExists       = NewError(KindAlreadyExists, "already exists")
	ErrIdempotencyConflict = NewError(KindIdempotencyConflict, "idempotency conflict")
	ErrRunConflict         = NewError(KindRunConflict, "run conflict")
	ErrAlreadyResolved     = NewError(KindAlreadyResolved, "already resolved")
	ErrCursorInvalid       = NewError(KindCursorInvalid, "cursor invalid")
	ErrUnauthorized        = NewError(KindUnauthorized, "unauthorized")
	ErrDenied              = NewError(KindDenied, "denied")
	ErrStorageUnavailable  = NewError(KindStorageUnavailable, "storage unavailable")
	ErrEnvUnavailable      = NewError(KindEnvironmentUnavailable, "environment unavailable")
)

// tableEntry is one row of the error table.
type tableEntry struct {
	code      int
	retryable bool
}

// lookup is the one mapping from kind to code and default retryability
// (a switch rather than a map so that no package state exists to mutate).
func lookup(kind Kind) (tableEntry, bool) {
	switch kind {
	case KindParse:
		return tableEntry{CodeParse, false}, true
	case KindInvalidRequest, KindTooLarge:
		return tableEntry{CodeInvalidRequest, false}, true
	case KindMethodNotFound:
		return tableEntry{CodeMethodNotFound, false}, true
	case KindInvalidParams:
		return tableEntry{CodeInvalidParams, false}, true
	case KindInternal:
		return tableEntry{CodeInternal, false}, true
	case KindOverloaded:
		return tableEntry{CodeOverloaded, true}, true
	case KindNotFound:
		return tableEntry{CodeNotFound, false}, true
	case KindAlreadyExists:
		return tableEntry{CodeAlreadyExists, false}, true
	case KindIdempotencyConflict:
		return tableEntry{CodeIdempotencyConflict, false}, true
	case KindRunConflict:
		return tableEntry{CodeRunConflict, false}, true
	case KindAlreadyResolved:
		return tableEntry{CodeAlreadyResolved, false}, true
	case KindCursorInvalid:
		return tableEntry{CodeCursorInvalid, false}, true
	case KindUnauthorized:
		return tableEntry{CodeUnauthorized, false}, true
	case KindDenied:
		return tableEntry{CodeDenied, false}, true
	case KindStorageUnavailable:
		return tableEntry{CodeStorageUnavailable, true}, true
	case KindEnvironmentUnavailable:
		return tableEntry{CodeEnvironmentUnavailable, false}, true
	}
	return tableEntry{}, false
}

// Kinds returns every kind in the error table, in code order.
func Kinds() []Kind {
	return []Kind{
		KindParse, KindInvalidRequest, KindTooLarge, KindMethodNotFound, KindInvalidParams,
		KindInternal, KindOverloaded, KindNotFound, KindAlreadyExists, KindIdempotencyConflict,
		KindRunConflict, KindAlreadyResolved, KindCursorInvalid, KindUnauthorized, KindDenied,
		KindStorageUnavailable, KindEnvironmentUnavailable,
	}
}

// CodeOf returns the JSON-RPC code for kind and whether kind is in the
// table.
func CodeOf(kind Kind) (int, bool) {
	e, ok := lookup(kind)
	return e.code, ok
}

// KindOf returns the kind for a code. For -32600, shared by
// [KindInvalidRequest] and [KindTooLarge], it returns KindInvalidRequest.
// Unknown codes map to [KindInternal] and false.
func KindOf(code int) (Kind, bool) {
	for _, k := range Kinds() {
		if e, _ := lookup(k); e.code == code {
			return k, true
		}
	}
	return KindInternal, false
}

// Error is a weft error: a kind from the table, a message safe to show,
// details for machines, and (in process only) the cause.
//
// On the wire it is {"code": Code, "message": Message, "data": {"kind":
// Kind, "retryable": Retryable, ...Data}}; the keys "kind" and
// "retryable" in Data are ignored in favour of the fields. The cause never
// crosses the wire: it is for the host's log and for errors.Is in process,
// so that an error matches both its kind's sentinel and what caused it.
//
// Clients receive *Error for every error response. An Error is not safe
// for concurrent mutation; treat it as immutable once returned.
type Error struct {
	Code      int
	Kind      Kind
	Message   string
	Retryable bool
	Data      map[string]any
	cause     error
}

// NewError returns an Error of the given kind, with the code and default
// retryability from the table. An unknown kind yields an internal error
// carrying msg.
func NewError(kind Kind, msg string) *Error {
	e, ok := lookup(kind)
	if !ok {
		return &Error{Code: CodeInternal, Kind: KindInternal, Message: msg}
	}
	return &Error{Code: e.code, Kind: kind, Message: msg, Retryable: e.retryable}
}

// Errorf is [NewError] with a formatted message. It never wraps an error
// (format errors with %v); use [Wrap] to keep a cause.
func Errorf(kind Kind, format string, args ...any) *Error {
	return NewError(kind, fmt.Sprintf(format, args...))
}

// Wrap returns an Error of kind whose message is the formatted text and
// whose cause is cause, so that errors.Is matches both the kind's
// sentinel and cause.
func Wrap(kind Kind, cause error, format string, args ...any) *Error {
	e := Errorf(kind, format, args...)
	e.cause = cause
	return e
}

// With returns a copy of e with key set to v in Data. It is convenient for
// details such as {"sessionId": id}.
func (e *Error) With(key string, v any) *Error {
	c := *e
	c.Data = maps.Clone(e.Data)
	if c.Data == nil {
		c.Data = map[string]any{}
	}
	c.Data[key] = v
	return &c
}

// Error implements error.
func (e *Error) Error() string {
	return fmt.Sprintf("%s (%d %s)", e.Message, e.Code, e.Kind)
}

// Unwrap returns the cause, if any.
func (e *Error) Unwrap() error { return e.cause }

// Is reports whether target is an *Error of the same kind (and the same
// code, when target's code is set), so that errors.Is(err, api.ErrNotFound)
// works whatever the message.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	if !ok {
		return false
	}
	if t.Kind != "" && t.Kind != e.Kind {
		return false
	}
	return t.Code == 0 || t.Code == e.Code
}

// Normalize returns e with a missing code or kind filled in from the
// table.
func (e *Error) Normalize() *Error {
	if e.Code != 0 && e.Kind != "" {
		return e
	}
	c := *e
	switch {
	case c.Kind == "" && c.Code == 0:
		c.Kind, c.Code = KindInternal, CodeInternal
	case c.Kind == "":
		c.Kind, _ = KindOf(c.Code)
	default:
		code, ok := CodeOf(c.Kind)
		if !ok {
			code = CodeInternal
		}
		c.Code = code
	}
	return &c
}

// MarshalJSON encodes e as a JSON-RPC error object.
func (e *Error) MarshalJSON() ([]byte, error) {
	n := e.Normalize()
	data := make(map[string]any, len(n.Data)+2)
	maps.Copy(data, n.Data)
	data["kind"] = n.Kind
	data["retryable"] = n.Retryable
	b, err := json.Marshal(struct {
		Code    int            `json:"code"`
		Message string         `json:"message"`
		Data    map[string]any `json:"data"`
	}{n.Code, n.Message, data})
	if err != nil {
		return nil, fmt.Errorf("api: marshal error data: %w", err)
	}
	return b, nil
}

// UnmarshalJSON decodes a JSON-RPC error object. A missing data.kind is
// derived from the code; data.kind and data.retryable are moved into the
// fields and the remaining data members into Data.
func (e *Error) UnmarshalJSON(b []byte) error {
	var w struct {
		Code    *int            `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(b, &w); err != nil {
		return fmt.Errorf("api: decode error object: %w", err)
	}
	if w.Code == nil {
		return errors.New("api: decode error object: missing code")
	}
	*e = Error{Code: *w.Code, Message: w.Message}
	var data map[string]any
	if len(w.Data) > 0 && json.Unmarshal(w.Data, &data) == nil {
		if k, ok := data["kind"].(string); ok {
			e.Kind = Kind(k)
		}
		if r, ok := data["retryable"].(bool); ok {
			e.Retryable = r
		}
		delete(data, "kind")
		delete(data, "retryable")
		if len(data) > 0 {
			e.Data = data
		}
	} else if len(w.Data) > 0 && string(w.Data) != "null" {
		e.Data = map[string]any{"value": json.RawMessage(w.Data)}
	}
	if e.Kind == "" {
		e.Kind, _ = KindOf(e.Code)
	}
	return nil
}

// ErrLagged ends a subscription whose consumer fell behind (its buffer
// overflowed or its connection stayed stalled past the write deadline);
// the consumer resumes from the last cursor it has.
var ErrLagged = errors.New("subscriber lagged behind: resume from the last cursor")
