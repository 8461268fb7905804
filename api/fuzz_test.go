package api_test

import (
	"encoding/json"
	"errors"
	"testing"

	"weft.dev/weft/api"
)

// FuzzParseHandle: any bytes parse to a handle or to an error wrapping
// ErrBadHandle, never a panic, and a parsed handle round-trips.
func FuzzParseHandle(f *testing.F) {
	for _, s := range []string{`{"__handle__":"process","id":"proc_1"}`, `{"id":"x"}`, `[]`, `{"__handle__":"process","id":""}`, `{"__handle__":1}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := api.ParseHandle(b)
		if err != nil {
			if !errors.Is(err, api.ErrBadHandle) {
				t.Fatalf("ParseHandle(%q) = %v, not an ErrBadHandle", b, err)
			}
			return
		}
		again, err := api.ParseHandle([]byte(h.String()))
		if err != nil || again != h {
			t.Fatalf("round trip of %q: %v, %v", b, again, err)
		}
	})
}

// FuzzErrorJSON: any error object a server may send decodes to an Error
// with a kind and a code, or fails cleanly; what decodes re-encodes.
func FuzzErrorJSON(f *testing.F) {
	for _, s := range []string{`{"code":-32010,"message":"m","data":{"kind":"not_found","retryable":false,"sessionId":"s"}}`, `{"code":1}`, `{"message":"x"}`, `{"code":-32019,"data":null}`, `{"code":-32602,"data":[1,2]}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var e api.Error
		if err := json.Unmarshal(b, &e); err != nil {
			return
		}
		if e.Kind == "" {
			t.Fatalf("decoded %q without a kind", b)
		}
		if _, err := json.Marshal(&e); err != nil {
			t.Fatalf("re-encode %+v: %v", e, err)
		}
	})
}

// FuzzInput: input is a string or a list of parts; anything else is an
// invalid_params error, never a panic.
func FuzzInput(f *testing.F) {
	for _, s := range []string{`"hi"`, `[{"type":"text","text":"x"}]`, `{}`, `1`, `null`, `[1]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var in api.Input
		err := json.Unmarshal(b, &in)
		var ae *api.Error
		if err != nil && json.Valid(b) && !errors.As(err, &ae) {
			t.Fatalf("Input(%q): %v is not an *api.Error", b, err)
		}
	})
}
