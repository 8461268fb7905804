package rpc

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"
)

type fuzzParams struct {
	A int    `json:"a"`
	S string `json:"s,omitempty"`
}

// FuzzDecode feeds arbitrary frames through the decoder and dispatcher:
// it must never panic, and whatever it writes must be a well-formed
// JSON-RPC response (or batch of responses) with error.data.kind set.
func FuzzDecode(f *testing.F) {
	for _, seed := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"f","params":{"a":1}}`,
		`{"jsonrpc":"2.0","method":"f","params":{"a":1}}`,
		`[{"jsonrpc":"2.0","id":"x","method":"f","params":{"a":1,"s":"y"}},{"jsonrpc":"2.0","id":2,"method":"nope"},1,{}]`,
		`[]`, `[[]]`, `{`, `null`, `"x"`, `{"jsonrpc":"2.0","id":null,"method":"f"}`,
		`{"jsonrpc":"2.0","id":1e999,"method":"f","params":[1]}`,
		`{"jsonrpc":"2.0","id":1,"method":"f","params":{"a":"1","b":2}}`,
		`{"jsonrpc":"2.0","id":1,"method":"rpc.discover"}`,
	} {
		f.Add([]byte(seed))
	}
	s := NewServer(Config{})
	Register(s, "f", "F.", func(_ context.Context, p *fuzzParams) (*fuzzParams, error) { return p, nil })
	f.Fuzz(func(t *testing.T, frame []byte) {
		c := s.newConn(context.Background(), TransportHTTP, nil)
		var out []byte
		c.handleFrame(frame, func(b []byte) { out = b })
		c.handlers.Wait()
		c.cancel()
		if out == nil {
			return
		}
		if !json.Valid(out) {
			t.Fatalf("invalid JSON output %q for %q", out, frame)
		}
		var resps []json.RawMessage
		if bytes.HasPrefix(out, []byte("[")) {
			if err := json.Unmarshal(out, &resps); err != nil || len(resps) == 0 {
				t.Fatalf("bad batch output %q", out)
			}
		} else {
			resps = []json.RawMessage{out}
		}
		for _, r := range resps {
			var m map[string]json.RawMessage
			if err := json.Unmarshal(r, &m); err != nil {
				t.Fatalf("response not an object: %q", r)
			}
			if string(m["jsonrpc"]) != `"2.0"` {
				t.Fatalf("bad jsonrpc in %q", r)
			}
			id, ok := m["id"]
			if !ok || !(string(id) == "null" || len(id) > 0 && (id[0] == '"' || id[0] == '-' || id[0] >= '0' && id[0] <= '9')) {
				t.Fatalf("bad id in %q", r)
			}
			_, hasRes := m["result"]
			e, hasErr := m["error"]
			if hasRes == hasErr || len(m) != 3 {
				t.Fatalf("need exactly one of result/error in %q", r)
			}
			if hasErr {
				var we struct {
					Code *int `json:"code"`
					Data struct {
						Kind      string `json:"kind"`
						Retryable *bool  `json:"retryable"`
					} `json:"data"`
				}
				if json.Unmarshal(e, &we) != nil || we.Code == nil || we.Data.Kind == "" || we.Data.Retryable == nil {
					t.Fatalf("bad error object in %q", r)
				}
			}
		}
	})
}
