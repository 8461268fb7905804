package jsonrpc

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestLineStreamBounded(t *testing.T) {
	input := "{\"a\":1}\n\n   \n" + strings.Repeat("x", 200_000) + "\n{\"b\":2}\r\n" + strings.Repeat("y", 50) + "\n{\"c\":3}"
	// OneByteReader exercises every split point.
	for name, r := range map[string]io.Reader{"whole": strings.NewReader(input), "onebyte": iotest.OneByteReader(strings.NewReader(input))} {
		t.Run(name, func(t *testing.T) {
			s := NewLineStream(r, io.Discard, 40)
			want := []string{`{"a":1}`, "too large", `{"b":2}`, "too large", `{"c":3}`, "EOF"}
			for _, w := range want {
				b, err := s.Read(context.Background())
				got := string(b)
				switch {
				case errors.Is(err, ErrTooLarge):
					got = "too large"
				case errors.Is(err, io.EOF):
					got = "EOF"
				case err != nil:
					t.Fatal(err)
				}
				if got != w {
					t.Fatalf("got %q want %q", got, w)
				}
			}
		})
	}
}

func TestDecodeFrame(t *testing.T) {
	items, batch, err := DecodeFrame([]byte(` {"jsonrpc":"2.0","id":9007199254740993,"method":"m","params":{"x":1}} `))
	if err != nil || batch || len(items) != 1 || items[0].Request == nil {
		t.Fatalf("%+v %v %v", items, batch, err)
	}
	r := items[0].Request
	if string(r.ID) != "9007199254740993" || r.Method != "m" || string(r.Params) != `{"x":1}` || r.IsNotification() {
		t.Fatalf("%+v", r)
	}
	if _, _, err := DecodeFrame([]byte(`[]`)); err == nil || err.Code != CodeInvalidRequest {
		t.Fatalf("empty batch: %v", err)
	}
	if _, _, err := DecodeFrame([]byte(`{`)); err == nil || err.Code != CodeParseError {
		t.Fatalf("parse: %v", err)
	}
	items, _, _ = DecodeFrame([]byte(`{"jsonrpc":"2.0","id":true,"method":"m"}`))
	if items[0].Err == nil || items[0].ID != nil {
		t.Fatalf("bool id: %+v", items[0])
	}
}

func TestEncode(t *testing.T) {
	got := string(AppendResult(nil, []byte(`"a<b"`), []byte(`{}`)))
	if got != `{"jsonrpc":"2.0","id":"a<b","result":{}}` {
		t.Errorf("result: %s", got)
	}
	got = string(AppendRequest(nil, nil, "events/event", []byte(`{"seq":1}`)))
	if got != `{"jsonrpc":"2.0","method":"events/event","params":{"seq":1}}` {
		t.Errorf("notification: %s", got)
	}
	msgs, err := DecodeMessages([]byte(`[{"jsonrpc":"2.0","id":null,"error":{"code":1}},{"jsonrpc":"2.0","method":"n"}]`))
	if err != nil || len(msgs) != 2 || string(msgs[0].ID) != "null" || !msgs[1].IsNotification() {
		t.Fatalf("%+v %v", msgs, err)
	}
	if _, err := DecodeMessages([]byte(`{"jsonrpc":"1.0","id":1,"result":1}`)); !errors.Is(err, ErrMalformed) {
		t.Errorf("version: %v", err)
	}
}

func FuzzLineStream(f *testing.F) {
	f.Add([]byte("{}\n"+strings.Repeat("x", 100)+"\nabc"), 16)
	f.Fuzz(func(t *testing.T, in []byte, max int) {
		if max <= 0 || max > 1<<16 {
			return
		}
		s := NewLineStream(strings.NewReader(string(in)), io.Discard, int64(max))
		for range len(in) + 2 {
			b, err := s.Read(context.Background())
			if errors.Is(err, io.EOF) {
				return
			}
			if err != nil && !errors.Is(err, ErrTooLarge) {
				t.Fatal(err)
			}
			if len(b) > max {
				t.Fatalf("frame of %d bytes exceeds %d", len(b), max)
			}
		}
		t.Fatal("stream did not end")
	})
}

// FuzzSplitNotification checks the client's shortcut against the full
// decoder: whatever frame SplitNotification takes apart with valid params
// is a notification DecodeMessages reads the same way.
func FuzzSplitNotification(f *testing.F) {
	for _, seed := range []string{
		`{"jsonrpc":"2.0","method":"events/event","params":{"subscriptionId":"sub_1","event":{"seq":1}}}`,
		`{"jsonrpc":"2.0","method":"m","params":[1,2]}`,
		`{"jsonrpc":"2.0","method":"m","params":{"a":1},"id":7}`,
		`{"jsonrpc":"2.0","method":"a\"b","params":{}}`,
		`{"jsonrpc":"2.0","method":"m","params":{} }`,
		`{"jsonrpc":"2.0","method":"m","params":{}}}`,
		`{"jsonrpc":"2.0","id":1,"result":{}}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, frame []byte) {
		method, params, ok := SplitNotification(frame)
		if !ok || !json.Valid(params) {
			return
		}
		msgs, err := DecodeMessages(frame)
		if err != nil {
			t.Fatalf("split %q, but DecodeMessages: %v", frame, err)
		}
		if len(msgs) != 1 || !msgs[0].IsNotification() || msgs[0].Method != method {
			t.Fatalf("split %q as %q, DecodeMessages read %+v", frame, method, msgs)
		}
		var a, b any
		if json.Unmarshal(params, &a) != nil || json.Unmarshal(msgs[0].Params, &b) != nil || !reflect.DeepEqual(a, b) {
			t.Fatalf("split %q: params %s, DecodeMessages: %s", frame, params, msgs[0].Params)
		}
	})
}

func TestSplitNotification(t *testing.T) {
	for _, tc := range []struct {
		frame, method, params string
	}{
		{`{"jsonrpc":"2.0","method":"events/event","params":{"a":1}}`, "events/event", `{"a":1}`},
		{string(AppendRequest(nil, nil, "x/y", json.RawMessage(`[1]`))), "x/y", `[1]`},
		{`{"jsonrpc":"2.0","method":"m","params":{}} `, "", ""},
		{`{"jsonrpc":"2.0", "method":"m","params":{}}`, "", ""},
		{`{"jsonrpc":"2.0","method":"a\"b","params":{}}`, "", ""},
		{`{"jsonrpc":"2.0","method":"m"}`, "", ""},
		{`{"jsonrpc":"2.0","id":1,"method":"m","params":{}}`, "", ""},
		{`[{"jsonrpc":"2.0","method":"m","params":{}}]`, "", ""},
	} {
		method, params, ok := SplitNotification([]byte(tc.frame))
		if ok != (tc.method != "") || method != tc.method || string(params) != tc.params {
			t.Errorf("%s: got %q %s %v", tc.frame, method, params, ok)
		}
	}
}
