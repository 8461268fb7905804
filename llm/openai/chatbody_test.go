package openai

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"weft.dev/weft/event"
	"weft.dev/weft/llm"
)

// sameJSON reports whether a and b decode to the same value.
func sameJSON(t *testing.T, a, b []byte) bool {
	t.Helper()
	var va, vb any
	if err := json.Unmarshal(a, &va); err != nil {
		t.Fatalf("%v: %s", err, a)
	}
	if err := json.Unmarshal(b, &vb); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	return reflect.DeepEqual(va, vb)
}

// checkBody compares chatBody's encoding of req with the SDK's.
func checkBody(t *testing.T, p *Chat, req *llm.Request) {
	t.Helper()
	params, perr := p.params(req)
	body, berr := p.chatBody(req)
	if (perr == nil) != (berr == nil) {
		t.Fatalf("params error %v, chatBody error %v", perr, berr)
	}
	if perr != nil {
		return
	}
	want, err := params.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	if !sameJSON(t, body, want) {
		t.Fatalf("chatBody\n%s\nthe SDK\n%s", body, want)
	}
}

// randomText makes strings with what JSON must escape: quotes,
// backslashes, control bytes, HTML characters, U+2028, multi-byte
// characters and bytes that are not UTF-8.
func randomText(r *rand.Rand) string {
	pieces := []string{"a", "Zürich", "日本", "😀", `"`, `\`, "\n", "\t", "\r", "\x00", "\x1f", "\x7f", "<", ">", "&",
		"\u2028", "\u2029", "\xff", "\xe6\x97", " ", "{}", "\u00e9"}
	var b strings.Builder
	for range r.IntN(12) {
		b.WriteString(pieces[r.IntN(len(pieces))])
	}
	return b.String()
}

// TestChatBodyIsTheSDKs checks over random requests that the body weft
// encodes itself is the SDK's request, for every message shape, with and
// without a reasoning replay field, and that both refuse the same bad
// requests.
func TestChatBodyIsTheSDKs(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for _, replay := range []string{"", "reasoning_content", "re\"asoning"} {
		c, err := newClient("openai", Config{APIKey: "k", ReasoningReplayField: replay, MaxTokensField: "max_completion_tokens"})
		if err != nil {
			t.Fatal(err)
		}
		p := &Chat{c: c}
		for range 300 {
			req := &llm.Request{Model: "m-" + randomText(r), MaxTokens: r.IntN(3) * 100}
			if r.IntN(2) == 0 {
				req.System = randomText(r)
			}
			if r.IntN(3) == 0 {
				req.Tools = []llm.ToolSpec{{Name: "t", Description: randomText(r),
					InputSchema: json.RawMessage(`{"type":"object","properties":{"x":{"type":"string"}}}`)}}
			}
			for range r.IntN(8) {
				m := llm.Message{Content: randomText(r)}
				switch r.IntN(4) {
				case 0:
					m.Role = llm.RoleUser
				case 1:
					m.Role = llm.RoleAssistant
					if r.IntN(2) == 0 {
						m.Reasoning = randomText(r)
					}
					for k := range r.IntN(3) {
						m.ToolCalls = append(m.ToolCalls, event.ToolCall{ID: fmt.Sprint("c", k, randomText(r)), Name: randomText(r), Arguments: randomText(r)})
					}
				case 2:
					m.Role, m.ToolCallID = llm.RoleTool, randomText(r)
				case 3:
					m.Role = llm.Role(randomText(r)) // mostly unknown: both refuse
				}
				req.Messages = append(req.Messages, m)
			}
			checkBody(t, p, req)
		}
		checkBody(t, p, &llm.Request{}) // no model, no messages

		// What the cache keys on changes in place between requests.
		temp := 0.5
		schema := json.RawMessage(`{"type":"object","properties":{"a":{"type":"string"}}}`)
		req := &llm.Request{Model: "m", Temperature: &temp, Messages: []llm.Message{{Role: llm.RoleUser, Content: "hi"}},
			Tools: []llm.ToolSpec{{Name: "t", InputSchema: schema}}}
		checkBody(t, p, req)
		temp = 0.7
		checkBody(t, p, req)
		schema[bytes.IndexByte(schema, 'a')] = 'b' // "properties":{"a" becomes {"b", in place
		checkBody(t, p, req)
		req.Tools[0].Description = "now described"
		checkBody(t, p, req)
	}
}

func BenchmarkChatBody(b *testing.B) {
	c, err := newClient("openai", Config{APIKey: "k"})
	if err != nil {
		b.Fatal(err)
	}
	p := &Chat{c: c}
	req := &llm.Request{Model: "m", System: strings.Repeat("Be helpful. ", 50)}
	for i := range 400 {
		role := llm.RoleUser
		if i%2 == 1 {
			role = llm.RoleAssistant
		}
		req.Messages = append(req.Messages, llm.Message{Role: role, Content: strings.Repeat("Say hello. ", 5)})
	}
	b.Run("weft", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := p.chatBody(req); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("sdk", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			params, err := p.params(req)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := params.MarshalJSON(); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// chatTailRef is the tail as json.Marshal encoded it, tools included,
// before chatTail appended them.
type chatTailRef struct {
	chatTailBody
	Tools []chatToolRef `json:"tools,omitempty"`
}

type chatToolRef struct {
	Function chatFunctionRef `json:"function"`
	Type     string          `json:"type"`
}

type chatFunctionRef struct {
	Description string          `json:"description,omitempty"`
	Name        string          `json:"name"`
	Parameters  json.RawMessage `json:"parameters"`
}

// TestChatTailIsMarshals checks over random tools that the tail with the
// tools appended is byte for byte what json.Marshal writes, schemas with
// space, HTML characters and U+2028 included.
func TestChatTailIsMarshals(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	c, err := newClient("openai", Config{APIKey: "k"})
	if err != nil {
		t.Fatal(err)
	}
	p := &Chat{c: c}
	schemas := []string{"", `{"type":"object","properties":{}}`, "{ \"type\": \"object\",\n\t\"properties\": {\"a\": {\"type\": \"string\"}} }",
		`{"description":"a <b> & c","type":"object"}`, "{\"description\":\"line\u2028sep \u2014 dash\"}", `{"x":1.50,"y":[1, 2]}`,
		`{"d":"Zürich 日本 😀"}`, "  {\"lead\":true}", `{"e":"\u003c"}`, `{"description":"spaces inside, \"quoted\" \\ too","type":"object"}`}
	for range 300 {
		req := &llm.Request{Model: "m-" + randomText(r)}
		if r.IntN(2) == 0 {
			temp := r.Float64()
			req.Temperature = &temp
		}
		ref := chatTailRef{chatTailBody: chatTailBody{Model: req.Model, StreamOptions: streamOptions{IncludeUsage: true}, Temperature: req.Temperature}}
		for k := range r.IntN(4) {
			tool := llm.ToolSpec{Name: fmt.Sprint("t", k, randomText(r)), InputSchema: json.RawMessage(schemas[r.IntN(len(schemas))])}
			if r.IntN(2) == 0 {
				tool.Description = randomText(r)
			}
			req.Tools = append(req.Tools, tool)
			schema, err := toolSchema(tool.Name, tool.InputSchema)
			if err != nil {
				t.Fatal(err)
			}
			ref.Tools = append(ref.Tools, chatToolRef{Type: "function", Function: chatFunctionRef{Description: tool.Description, Name: tool.Name, Parameters: schema}})
		}
		got, err := p.chatTail(req)
		if err != nil {
			t.Fatal(err)
		}
		want, err := json.Marshal(ref)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("chatTail\n%s\njson.Marshal\n%s", got, want)
		}
	}
	// What the fast path copies is what json.Marshal writes, and a
	// compact schema with space in its strings takes it.
	for _, sc := range append(schemas[1:], `{"a":"x\\"," b":" "}`, `{"a":"\\"}`, `{"a":["\"", " "]}`) {
		m, err := json.Marshal(json.RawMessage(sc))
		if err != nil {
			t.Fatal(err)
		}
		if compactSafe([]byte(sc)) && string(m) != sc {
			t.Errorf("compactSafe(%s), but json.Marshal writes %s", sc, m)
		}
	}
	if !compactSafe([]byte(schemas[len(schemas)-1])) {
		t.Errorf("compactSafe(%s) = false", schemas[len(schemas)-1])
	}
	for _, bad := range []string{`[1]`, `null`, `{"a":`, `"s"`} {
		if _, err := p.chatTail(&llm.Request{Model: "m", Tools: []llm.ToolSpec{{Name: "t", InputSchema: json.RawMessage(bad)}}}); err == nil {
			t.Errorf("schema %s: no error", bad)
		}
	}
}
