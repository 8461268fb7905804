package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// HandleKind is the value of "__handle__" in a process handle.
const HandleKind = "process"

// Errors of [ParseHandle]. Each wraps [ErrBadHandle], so callers that do
// not care which rule was broken test for that one.
var (
	// ErrBadHandle is wrapped by every handle parse error.
	ErrBadHandle = errors.New("bad process handle")
	// ErrHandleNotObject reports a handle that is not a JSON object.
	ErrHandleNotObject = fmt.Errorf("%w: not a JSON object", ErrBadHandle)
	// ErrHandleNoKind reports an object without "__handle__".
	ErrHandleNoKind = fmt.Errorf("%w: missing \"__handle__\"", ErrBadHandle)
	// ErrHandleKind reports a handle of another kind than "process".
	ErrHandleKind = fmt.Errorf("%w: not a process handle", ErrBadHandle)
	// ErrHandleNoID reports a missing or empty "id".
	ErrHandleNoID = fmt.Errorf("%w: empty id", ErrBadHandle)
)

// Handle is the durable reference to a process that the model and clients
// pass around: on the wire the JSON object
//
//	{"__handle__":"process","id":"…"}
//
// A Handle is a plain value; holding one grants nothing (see [Caller] for
// who may address a process).
type Handle struct {
	// ID is the process ID.
	ID string
}

// MarshalJSON encodes h as {"__handle__":"process","id":h.ID}.
func (h Handle) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Kind string `json:"__handle__"`
		ID   string `json:"id"`
	}{HandleKind, h.ID})
}

// UnmarshalJSON parses a handle with [ParseHandle].
func (h *Handle) UnmarshalJSON(b []byte) error {
	v, err := ParseHandle(b)
	if err != nil {
		return err
	}
	*h = v
	return nil
}

// String returns the handle's JSON form.
func (h Handle) String() string {
	b, _ := h.MarshalJSON()
	return string(b)
}

// ParseHandle parses a process handle strictly. It returns an error
// wrapping [ErrHandleNotObject] if raw is not a JSON object,
// [ErrHandleNoKind] if "__handle__" is missing, [ErrHandleKind] if it names
// another kind (or is not a string), [ErrHandleNoID] if "id" is missing or
// empty, and [ErrBadHandle] for any other field or an id that is not a
// string.
func ParseHandle(raw json.RawMessage) (Handle, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '{' {
		return Handle{}, fmt.Errorf("%w: got %s", ErrHandleNotObject, preview(raw))
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		return Handle{}, fmt.Errorf("%w: %v", ErrHandleNotObject, err)
	}
	kindRaw, ok := fields["__handle__"]
	if !ok {
		return Handle{}, fmt.Errorf("%w in %s; want {\"__handle__\":\"process\",\"id\":\"…\"}", ErrHandleNoKind, preview(raw))
	}
	var kind string
	if err := json.Unmarshal(kindRaw, &kind); err != nil || kind != HandleKind {
		return Handle{}, fmt.Errorf("%w: \"__handle__\" is %s, want \"process\"", ErrHandleKind, preview(kindRaw))
	}
	for k := range fields {
		if k != "__handle__" && k != "id" {
			return Handle{}, fmt.Errorf("%w: unknown field %q", ErrBadHandle, k)
		}
	}
	idRaw, ok := fields["id"]
	if !ok {
		return Handle{}, fmt.Errorf("%w: no \"id\"", ErrHandleNoID)
	}
	var id string
	if err := json.Unmarshal(idRaw, &id); err != nil {
		return Handle{}, fmt.Errorf("%w: \"id\" is %s, want a string", ErrBadHandle, preview(idRaw))
	}
	if id == "" {
		return Handle{}, ErrHandleNoID
	}
	return Handle{ID: id}, nil
}

func preview(b []byte) string {
	if len(b) == 0 {
		return "nothing"
	}
	if len(b) > 80 {
		return string(b[:80]) + "…"
	}
	return string(b)
}
