package jsonrpc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
)

// Version is the only value of the "jsonrpc" member this package accepts
// and emits.
const Version = "2.0"

// Standard JSON-RPC 2.0 error codes.
const (
	CodeParseError     = -32700
	CodeInvalidRequest = -32600
	CodeMethodNotFound = -32601
	CodeInvalidParams  = -32602
	CodeInternalError  = -32603
)

// Request is one well-formed JSON-RPC call or notification.
//
// ID holds the exact bytes of the id as received (a JSON string or number),
// so that a response can echo it byte for byte; it is nil for a
// notification. Params holds the raw params member, nil when absent; the
// codec does not judge its shape.
type Request struct {
	ID     json.RawMessage
	Method string
	Params json.RawMessage
}

// IsNotification reports whether r carries no id and so must never be
// answered.
func (r *Request) IsNotification() bool { return r.ID == nil }

// DecodeError describes why a frame or one element of a batch is not a
// valid request. Code is a standard JSON-RPC code ([CodeParseError] or
// [CodeInvalidRequest]).
type DecodeError struct {
	Code    int
	Message string
}

// Error implements error.
func (e *DecodeError) Error() string {
	return fmt.Sprintf("jsonrpc: %s (code %d)", e.Message, e.Code)
}

// Item is one element of a decoded frame: either a valid Request or a
// DecodeError together with the id to echo (nil means null).
type Item struct {
	Request *Request
	Err     *DecodeError
	ID      json.RawMessage
}

// DecodeFrame decodes one inbound frame strictly, as a server sees it.
//
// It returns a frame-level error for invalid JSON ([CodeParseError]) and for
// an empty batch ([CodeInvalidRequest]); the caller answers those with a
// single error response whose id is null. Otherwise it returns one Item per
// request (one for a single request, one per element for a batch) and
// whether the frame was a batch. An element that is not a valid request
// object yields an Item with Err set; it is answered even when it has no id,
// as the JSON-RPC 2.0 specification's examples require.
//
// A valid request object has exactly the members "jsonrpc" (the string
// "2.0"), "method" (a non-empty string), and optionally "id" (a string or a
// number; null is rejected) and "params". Any other member makes it invalid.
//
// DecodeFrame never panics and does not retain frame.
func DecodeFrame(frame []byte) (items []Item, batch bool, err *DecodeError) {
	if !json.Valid(frame) {
		return nil, false, &DecodeError{Code: CodeParseError, Message: "parse error: invalid JSON"}
	}
	trimmed := bytes.TrimLeft(frame, " \t\r\n")
	if len(trimmed) > 0 && trimmed[0] == '[' {
		var elems []json.RawMessage
		if e := json.Unmarshal(trimmed, &elems); e != nil {
			return nil, true, &DecodeError{Code: CodeParseError, Message: "parse error: invalid batch"}
		}
		if len(elems) == 0 {
			return nil, true, &DecodeError{Code: CodeInvalidRequest, Message: "invalid request: empty batch"}
		}
		items = make([]Item, len(elems))
		for i, el := range elems {
			items[i] = decodeOne(el)
		}
		return items, true, nil
	}
	return []Item{decodeOne(trimmed)}, false, nil
}

func invalid(id json.RawMessage, format string, args ...any) Item {
	return Item{ID: id, Err: &DecodeError{Code: CodeInvalidRequest, Message: "invalid request: " + fmt.Sprintf(format, args...)}}
}

// decodeOne validates one request object. raw is valid JSON.
func decodeOne(raw json.RawMessage) Item {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '{' {
		return invalid(nil, "request must be an object")
	}
	var members map[string]json.RawMessage
	if err := json.Unmarshal(raw, &members); err != nil {
		return invalid(nil, "request must be an object")
	}
	// Salvage the id first so that later errors can echo it.
	var id json.RawMessage
	if rawID, ok := members["id"]; ok {
		if !IsValidID(rawID) {
			return invalid(nil, "id must be a string or a number")
		}
		id = bytes.Clone(rawID)
	}
	for name := range members {
		switch name {
		case "jsonrpc", "id", "method", "params":
		default:
			return invalid(id, "unknown member %s", strconv.Quote(name))
		}
	}
	rawVersion, ok := members["jsonrpc"]
	if !ok {
		return invalid(id, `missing "jsonrpc" member`)
	}
	var version string
	if err := json.Unmarshal(rawVersion, &version); err != nil || version != Version {
		return invalid(id, `"jsonrpc" must be "2.0"`)
	}
	rawMethod, ok := members["method"]
	if !ok {
		return invalid(id, `missing "method" member`)
	}
	var method string
	if err := json.Unmarshal(rawMethod, &method); err != nil {
		return invalid(id, `"method" must be a string`)
	}
	if method == "" {
		return invalid(id, `"method" must not be empty`)
	}
	req := &Request{ID: id, Method: method}
	if p, ok := members["params"]; ok {
		req.Params = bytes.Clone(p)
	}
	return Item{Request: req, ID: id}
}

// IsValidID reports whether raw is a JSON string or a JSON number, the only
// id forms this package accepts. raw must be valid JSON.
func IsValidID(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return false
	}
	c := raw[0]
	return c == '"' || c == '-' || (c >= '0' && c <= '9')
}

// AppendResult appends a success response to dst. id is echoed verbatim
// (nil means null); result must be valid JSON.
func AppendResult(dst []byte, id, result json.RawMessage) []byte {
	dst = append(dst, `{"jsonrpc":"2.0","id":`...)
	dst = appendID(dst, id)
	dst = append(dst, `,"result":`...)
	dst = append(dst, result...)
	return append(dst, '}')
}

// AppendError appends an error response to dst. id is echoed verbatim (nil
// means null); errObj must be a valid JSON error object.
func AppendError(dst []byte, id, errObj json.RawMessage) []byte {
	dst = append(dst, `{"jsonrpc":"2.0","id":`...)
	dst = appendID(dst, id)
	dst = append(dst, `,"error":`...)
	dst = append(dst, errObj...)
	return append(dst, '}')
}

// AppendRequest appends a request to dst; a nil id makes it a notification
// and nil params omits the params member. params must be valid JSON.
func AppendRequest(dst []byte, id json.RawMessage, method string, params json.RawMessage) []byte {
	dst = append(dst, `{"jsonrpc":"2.0",`...)
	if id != nil {
		dst = append(dst, `"id":`...)
		dst = append(dst, id...)
		dst = append(dst, ',')
	}
	dst = append(dst, `"method":`...)
	m, _ := json.Marshal(method) // a string always marshals
	dst = append(dst, m...)
	if params != nil {
		dst = append(dst, `,"params":`...)
		dst = append(dst, params...)
	}
	return append(dst, '}')
}

// AppendBatch appends the JSON array of the given encoded messages to dst.
func AppendBatch(dst []byte, msgs [][]byte) []byte {
	dst = append(dst, '[')
	for i, m := range msgs {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, m...)
	}
	return append(dst, ']')
}

func appendID(dst []byte, id json.RawMessage) []byte {
	if id == nil {
		return append(dst, "null"...)
	}
	return append(dst, id...)
}

// Message is one inbound message as a client sees it: a response (ID set,
// and Result or Error) or a server-to-client notification (Method set, ID
// nil).
type Message struct {
	ID     json.RawMessage `json:"id,omitempty"`
	Method string          `json:"method,omitempty"`
	Params json.RawMessage `json:"params,omitempty"`
	Result json.RawMessage `json:"result,omitempty"`
	Error  json.RawMessage `json:"error,omitempty"`
}

// IsNotification reports whether m is a server-to-client notification.
func (m *Message) IsNotification() bool { return m.Method != "" && m.ID == nil }

// SplitNotification takes apart a notification in the exact form
// [AppendRequest] writes one, {"jsonrpc":"2.0","method":M,"params":P}
// with no whitespace and a method without escapes, without decoding it:
// a client then decodes a notification's params once, rather than once
// for the envelope and again for its type. P is not validated: the
// caller must decode it (a frame that only looks like this form fails
// there). ok is false for every other frame; [DecodeMessages] decodes
// those.
func SplitNotification(frame []byte) (method string, params json.RawMessage, ok bool) {
	const head = `{"jsonrpc":"2.0","method":"`
	rest, ok := bytes.CutPrefix(frame, []byte(head))
	if !ok {
		return "", nil, false
	}
	end := bytes.IndexByte(rest, '"')
	if end <= 0 || bytes.IndexByte(rest[:end], '\\') >= 0 {
		return "", nil, false
	}
	name := rest[:end]
	rest, ok = bytes.CutPrefix(rest[end+1:], []byte(`,"params":`))
	if !ok || len(rest) < 2 || rest[len(rest)-1] != '}' {
		return "", nil, false
	}
	for _, c := range name {
		if c < 0x20 || c >= 0x7f {
			return "", nil, false
		}
	}
	return string(name), rest[:len(rest)-1], true
}

// ErrMalformed is returned by [DecodeMessages] for frames that are not
// JSON-RPC 2.0 responses or notifications.
var ErrMalformed = errors.New("jsonrpc: malformed message")

// DecodeMessages decodes a frame received by a client: a single message or
// a batch of responses. It checks the "jsonrpc" member and returns an error
// wrapping [ErrMalformed] for anything else. A response with a null id
// (the server could not read the request's id) has ID equal to "null".
func DecodeMessages(frame []byte) ([]Message, error) {
	trimmed := bytes.TrimSpace(frame)
	var raws []json.RawMessage
	if len(trimmed) > 0 && trimmed[0] == '[' {
		if err := json.Unmarshal(trimmed, &raws); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
		}
	} else {
		raws = []json.RawMessage{trimmed}
	}
	msgs := make([]Message, 0, len(raws))
	for _, raw := range raws {
		var wire struct {
			JSONRPC string `json:"jsonrpc"`
			Message
		}
		if err := json.Unmarshal(raw, &wire); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
		}
		if wire.JSONRPC != Version {
			return nil, fmt.Errorf("%w: jsonrpc member is %q", ErrMalformed, wire.JSONRPC)
		}
		msgs = append(msgs, wire.Message)
	}
	return msgs, nil
}
