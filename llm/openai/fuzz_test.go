package openai

import (
	"bytes"
	"encoding/json"
	"testing"
	"unicode/utf8"

	"weft.dev/weft/llm"
)

func FuzzUnquote(f *testing.F) {
	for _, s := range []string{`""`, `"a\"b\\c\/\b\f\n\r\t"`, `"\u00e9\u65e5"`, `"\ud83d\ude00"`, `"\ud83d"`,
		`"\udc00x"`, "\"Z\xc3\"", `"\u12"`, `"\x"`, `"a`, `null`, `1`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var got rawText
		err := got.UnmarshalJSON(b)
		var want string
		stdErr := json.Unmarshal(b, &want)
		if !utf8.Valid(b) || bytes.Equal(b, []byte("null")) {
			return // encoding/json replaces invalid bytes; rawText keeps them
		}
		if (err == nil) != (stdErr == nil) {
			t.Fatalf("%q: rawText err %v, encoding/json err %v", b, err, stdErr)
		}
		if err == nil && string(got) != want {
			t.Fatalf("%q: rawText %q, encoding/json %q", b, got, want)
		}
	})
}

func FuzzRuneJoiner(f *testing.F) {
	f.Add([]byte("Zürich 日本 😀"), uint8(3))
	f.Add([]byte("\xe6\x97"), uint8(1))
	f.Add([]byte("a\xffb\xc3"), uint8(2))
	f.Fuzz(func(t *testing.T, b []byte, step uint8) {
		n := int(step%7) + 1
		var j runeJoiner
		var out []byte
		for i := 0; i < len(b); i += n {
			s := j.push(b[i:min(i+n, len(b))])
			if utf8.Valid(b) && !utf8.ValidString(s) {
				t.Fatalf("fragment %q of valid input %q is not valid", s, b)
			}
			out = append(out, s...)
		}
		out = append(out, j.flush()...)
		if !bytes.Equal(out, b) {
			t.Fatalf("joined %q, want %q", out, b)
		}
	})
}

// FuzzStreams feeds arbitrary event data, one event per line, to both
// decoders: they must not panic, and every error must be an *llm.Error.
func FuzzStreams(f *testing.F) {
	f.Add([]byte(`{"choices":[{"index":0,"delta":{"content":"hi","tool_calls":[{"index":3,"id":"a","function":{"name":"f","arguments":"{"}}]},"finish_reason":"stop"}],"usage":{"prompt_tokens":1}}` + "\n[DONE]"))
	f.Add([]byte(`{"type":"response.output_item.added","output_index":2,"item":{"type":"function_call","call_id":"c","name":"f","arguments":"{\"a"}}` + "\n" +
		`{"type":"response.function_call_arguments.delta","output_index":2,"delta":"\u00e9"}` + "\n" +
		`{"type":"response.output_item.done","output_index":0,"item":{"type":"reasoning","encrypted_content":"x"}}` + "\n" +
		`{"type":"response.completed","response":{"usage":{"input_tokens":1}}}`))
	f.Add([]byte(`{"error":{"code":429}}`))
	f.Add([]byte(`{"type":"error","code":null}`))
	c := &client{provider: "fuzz"}
	f.Fuzz(func(t *testing.T, data []byte) {
		lines := bytes.Split(data, []byte("\n"))
		check := func(err error) {
			if err != nil && err != errStopped {
				if _, ok := llm.AsError(err); !ok {
					t.Fatalf("error %v (%T) is not an *llm.Error", err, err)
				}
			}
		}
		yield := func(ev llm.StreamEvent) bool { return len(ev.Text) < 1000 }

		cs := chatState{c: c, yield: yield, calls: map[int]int{}}
		var err error
		for _, l := range lines {
			var done bool
			if done, err = cs.handle(l); err != nil || done {
				break
			}
		}
		if err == nil {
			_, err = cs.end()
		}
		check(err)

		rs := responsesState{c: c, yield: yield, calls: map[int]int{}}
		err = nil
		for _, l := range lines {
			var done bool
			if done, err = rs.handle(l); err != nil || done {
				break
			}
		}
		if err == nil {
			_, err = rs.end()
		}
		check(err)
	})
}
