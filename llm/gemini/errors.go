package gemini

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"weft.dev/weft/llm"
)

// apiStatus is a google.rpc.Status, the "error" object of an error
// response or of an error sent inside a stream.
type apiStatus struct {
	Code    int               `json:"code"`
	Message string            `json:"message"`
	Status  string            `json:"status"`
	Details []json.RawMessage `json:"details"`
}

// detail is the part of a google.rpc error detail weft reads: RetryInfo's
// retryDelay and ErrorInfo's reason.
type detail struct {
	Type       string `json:"@type"`
	RetryDelay string `json:"retryDelay"`
	Reason     string `json:"reason"`
}

// retryDelay returns the delay of the status's google.rpc.RetryInfo, or
// zero.
func (s *apiStatus) retryDelay() time.Duration {
	for _, raw := range s.Details {
		var d detail
		if json.Unmarshal(raw, &d) == nil && strings.HasSuffix(d.Type, "google.rpc.RetryInfo") {
			if v, ok := parseDuration(d.RetryDelay); ok {
				return v
			}
		}
	}
	return 0
}

// reason returns the reason of the status's google.rpc.ErrorInfo, if any.
func (s *apiStatus) reason() string {
	for _, raw := range s.Details {
		var d detail
		if json.Unmarshal(raw, &d) == nil && strings.HasSuffix(d.Type, "google.rpc.ErrorInfo") && d.Reason != "" {
			return d.Reason
		}
	}
	return ""
}

func (s *apiStatus) text() string {
	msg := s.Message
	if s.Status != "" {
		msg = s.Status + ": " + msg
	}
	if r := s.reason(); r != "" {
		msg += " (" + r + ")"
	}
	return msg
}

// parseDuration parses a google.protobuf.Duration in its JSON form
// ("37s", "0.5s", "1.000340s").
func parseDuration(s string) (time.Duration, bool) {
	num, ok := strings.CutSuffix(strings.TrimSpace(s), "s")
	if !ok {
		return 0, false
	}
	secs, err := strconv.ParseFloat(num, 64)
	if err != nil || secs <= 0 || secs > 1e6 {
		return 0, false
	}
	return time.Duration(secs * float64(time.Second)), true
}

// decodeStatus decodes an error body: {"error": {...}}, or the same
// wrapped in an array as the non-SSE stream sends it. It returns nil if b
// is neither.
func decodeStatus(b []byte) *apiStatus {
	b = bytes.TrimSpace(b)
	var wrapped struct {
		Error *apiStatus `json:"error"`
	}
	if len(b) > 0 && b[0] == '[' {
		var arr []json.RawMessage
		if json.Unmarshal(b, &arr) != nil || len(arr) == 0 {
			return nil
		}
		b = arr[0]
	}
	if json.Unmarshal(b, &wrapped) != nil {
		return nil
	}
	return wrapped.Error
}

// statusError classifies an HTTP error response. Its delay is the
// google.rpc.RetryInfo of the body, else the Retry-After header.
func statusError(res *http.Response) *llm.Error {
	body, _ := io.ReadAll(io.LimitReader(res.Body, 64<<10))
	retryAfter := llm.ParseRetryAfter(res.Header.Get("Retry-After"), "", time.Now())
	st := decodeStatus(body)
	var msg string
	if st != nil {
		if d := st.retryDelay(); d > 0 {
			retryAfter = d
		}
		msg = st.text()
	} else {
		msg = strings.TrimSpace(string(body))
		if len(msg) > 512 {
			msg = msg[:512] + "…"
		}
		if msg == "" {
			msg = res.Status
		}
	}
	e := llm.StatusError(providerName, res.StatusCode, retryAfter, errors.New(msg))
	if st != nil && res.StatusCode == http.StatusBadRequest && isKeyError(st) {
		// The API answers a bad key with 400 INVALID_ARGUMENT.
		e.Kind = llm.KindAuth
	}
	return overflow(e)
}

// overflow classifies e by how Gemini says that a request exceeded the
// model's context window: "The input token count (N) exceeds the maximum
// number of tokens allowed (M)." (400 INVALID_ARGUMENT).
func overflow(e *llm.Error) *llm.Error {
	return llm.Overflow(e, "exceeds the maximum number of tokens", "input token count")
}

func isKeyError(st *apiStatus) bool {
	r := st.reason()
	return r == "API_KEY_INVALID" || r == "API_KEY_EXPIRED" || strings.Contains(st.Message, "API key not valid")
}

// streamError classifies an error object sent inside a 200 stream: by its
// numeric code when it has one, else by its status name.
func streamError(st *apiStatus) *llm.Error {
	code := st.Code
	if code < 400 || code > 599 {
		code = statusCode(st.Status)
		if code == 0 {
			code = http.StatusInternalServerError
		}
	}
	return overflow(llm.StatusError(providerName, code, st.retryDelay(), fmt.Errorf("error in stream: %s", st.text())))
}

// statusCode maps a google.rpc.Code name to the HTTP status the API gives
// it; zero if unknown.
func statusCode(name string) int {
	switch name {
	case "INVALID_ARGUMENT", "FAILED_PRECONDITION", "OUT_OF_RANGE":
		return 400
	case "UNAUTHENTICATED":
		return 401
	case "PERMISSION_DENIED":
		return 403
	case "NOT_FOUND":
		return 404
	case "ABORTED", "ALREADY_EXISTS":
		return 409
	case "RESOURCE_EXHAUSTED":
		return 429
	case "CANCELLED":
		return 499
	case "INTERNAL", "UNKNOWN", "DATA_LOSS":
		return 500
	case "NOT_IMPLEMENTED":
		return 501
	case "UNAVAILABLE":
		return 503
	case "DEADLINE_EXCEEDED":
		return 504
	}
	return 0
}

// snippet returns the start of a body for an error message.
func snippet(r io.Reader) string {
	b, _ := io.ReadAll(io.LimitReader(r, 512))
	return strings.TrimSpace(string(b))
}
