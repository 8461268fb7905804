package openai

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"sync"

	"weft.dev/weft/internal/jsonstr"
	"weft.dev/weft/llm"
)

// chatBody encodes a Chat Completions request (but its "stream" field,
// which the sending adds): the messages by appending, in front, then
// the other fields by encoding/json. The SDK's reflection-based encoder,
// used before, cost more than the rest of a warm turn once a session's
// history reached a few hundred messages, and the messages are the part
// that grows; their shapes are few and fixed. The result is the SDK's
// request as JSON (a test compares the two over random requests).
func (p *Chat) chatBody(req *llm.Request) ([]byte, error) {
	if req == nil {
		return nil, fmt.Errorf("nil request")
	}
	tail, err := p.tail.get(req, func() ([]byte, error) {
		return p.chatTail(req)
	})
	if err != nil {
		return nil, err
	}
	if len(tail) < 2 || tail[0] != '{' {
		return nil, fmt.Errorf("unexpected encoding of the request: %.40q", tail)
	}
	if req.System == "" && len(req.Messages) == 0 {
		// The SDK leaves the field out. tail is shared: clipped, so that
		// finishBody's append copies it.
		return slices.Clip(tail), nil
	}
	// +16: room for finishBody's "stream" field.
	b := make([]byte, 0, len(tail)+64+16+requestChars(req))
	b = append(b, `{"messages":[`...)
	if b, err = p.appendMessages(b, req); err != nil {
		return nil, err
	}
	b = append(b, ']')
	if string(tail) != "{}" {
		b = append(b, ',')
	}
	return append(b, tail[1:]...), nil
}

// requestChars estimates the bytes of req's messages, to size the buffer.
func requestChars(req *llm.Request) int {
	n := len(req.System)
	for _, m := range req.Messages {
		n += 48 + len(m.Content) + len(m.Reasoning) + len(m.ToolCallID)
		for _, a := range m.Attachments {
			n += 64 + len(a.MediaType) + base64.StdEncoding.EncodedLen(len(a.Data))
		}
		for _, c := range m.ToolCalls {
			n += 64 + len(c.ID) + len(c.Name) + len(c.Arguments)
		}
	}
	return n
}

// appendMessages appends req's system prompt and messages as the SDK
// would encode them (see params in sdkref_test.go), separated by commas.
func (p *Chat) appendMessages(b []byte, req *llm.Request) ([]byte, error) {
	first := true
	open := func() {
		if !first {
			b = append(b, ',')
		}
		first = false
	}
	if req.System != "" {
		open()
		b = append(b, `{"content":`...)
		b = jsonstr.Append(b, req.System)
		b = append(b, `,"role":"system"}`...)
	}
	replay := p.c.cfg.ReasoningReplayField
	for i, m := range chatMessages(req.Messages) {
		if err := checkAttachments(i, m); err != nil {
			return nil, err
		}
		switch m.Role {
		case llm.RoleUser:
			open()
			if len(m.Attachments) > 0 {
				b = appendChatUserImages(b, m.Content, m.Attachments)
				break
			}
			b = append(b, `{"content":`...)
			b = jsonstr.Append(b, m.Content)
			b = append(b, `,"role":"user"}`...)
		case llm.RoleAssistant:
			open()
			b = append(b, '{')
			if m.Content != "" || len(m.ToolCalls) == 0 {
				b = append(b, `"content":`...)
				b = jsonstr.Append(b, m.Content)
				b = append(b, ',')
			}
			b = append(b, `"role":"assistant"`...)
			if len(m.ToolCalls) > 0 {
				b = append(b, `,"tool_calls":[`...)
				for k, tc := range m.ToolCalls {
					if k > 0 {
						b = append(b, ',')
					}
					b = append(b, `{"id":`...)
					b = jsonstr.Append(b, tc.ID)
					if tc.Name != "" || tc.Arguments != "" { // the SDK leaves out a zero function
						b = append(b, `,"function":{"arguments":`...)
						b = jsonstr.Append(b, tc.Arguments)
						b = append(b, `,"name":`...)
						b = jsonstr.Append(b, tc.Name)
						b = append(b, '}')
					}
					b = append(b, `,"type":"function"}`...)
				}
				b = append(b, ']')
			}
			if replay != "" && m.Reasoning != "" {
				b = append(b, ',')
				b = jsonstr.Append(b, replay)
				b = append(b, ':')
				b = jsonstr.Append(b, m.Reasoning)
			}
			b = append(b, '}')
		case llm.RoleTool:
			if m.ToolCallID == "" {
				return nil, fmt.Errorf("message %d: tool result without ToolCallID", i)
			}
			open()
			b = append(b, `{"content":`...)
			b = jsonstr.Append(b, m.Content)
			b = append(b, `,"role":"tool","tool_call_id":`...)
			b = jsonstr.Append(b, m.ToolCallID)
			b = append(b, '}')
		default:
			return nil, fmt.Errorf("message %d: unknown role %q", i, m.Role)
		}
	}
	return b, nil
}

// chatTailBody is a Chat Completions request but its messages.
type chatTailBody struct {
	MaxCompletionTokens int64         `json:"max_completion_tokens,omitempty"`
	MaxTokens           int64         `json:"max_tokens,omitempty"`
	Model               string        `json:"model,omitempty"`
	ReasoningEffort     string        `json:"reasoning_effort,omitempty"`
	StreamOptions       streamOptions `json:"stream_options"`
	Temperature         *float64      `json:"temperature,omitempty"`
	// The tools, the last field ("tools", omitted when none), are
	// appended by chatTail.
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// chatTail encodes req's fields but its system prompt and messages.
func (p *Chat) chatTail(req *llm.Request) ([]byte, error) {
	cfg := &p.c.cfg
	out := chatTailBody{Model: req.Model, StreamOptions: streamOptions{IncludeUsage: true},
		Temperature: req.Temperature, ReasoningEffort: cfg.ReasoningEffort}
	if req.MaxTokens > 0 {
		if cfg.MaxTokensField == "max_completion_tokens" {
			out.MaxCompletionTokens = int64(req.MaxTokens)
		} else {
			out.MaxTokens = int64(req.MaxTokens)
		}
	}
	b, err := json.Marshal(out)
	if err != nil || len(req.Tools) == 0 {
		return b, err
	}
	// The tools, the last field, are appended: json.Marshal would compact
	// each schema, which cost as much as the rest of the request. The
	// bytes are json.Marshal's (a test compares them).
	b = append(b[:len(b)-1], `,"tools":[`...)
	for i, t := range req.Tools {
		schema, err := toolSchema(t.Name, t.InputSchema)
		if err != nil {
			return nil, err
		}
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"function":{`...)
		if t.Description != "" {
			b = append(b, `"description":`...)
			b = jsonstr.Append(b, t.Description)
			b = append(b, ',')
		}
		b = append(b, `"name":`...)
		b = jsonstr.Append(b, t.Name)
		b = append(b, `,"parameters":`...)
		if b, err = appendCompactJSON(b, schema); err != nil {
			return nil, err
		}
		b = append(b, `},"type":"function"}`...)
	}
	return append(b, "]}"...), nil
}

// appendCompactJSON appends raw, valid JSON, as json.Marshal writes a
// json.RawMessage: compacted, with <, >, &, U+2028 and U+2029 escaped.
// JSON that is compact already, without those characters, is appended as
// it is after one cheap pass (see compactSafe).
func appendCompactJSON(b, raw []byte) ([]byte, error) {
	if compactSafe(raw) {
		return append(b, raw...), nil
	}
	c, err := json.Marshal(json.RawMessage(raw))
	if err != nil {
		return nil, err
	}
	return append(b, c...), nil
}

// compactSafe reports whether json.Marshal would leave raw, valid JSON,
// as it is: no space outside strings, and no <, > or & or byte 0xE2
// (which starts U+2028 and U+2029, and other characters: a false no
// costs only the slow path) anywhere.
func compactSafe(raw []byte) bool {
	in, esc := false, false
	for _, c := range raw {
		switch {
		case esc:
			esc = false
		case c == '\\':
			esc = in
		case c == '"':
			in = !in
		case c == '<' || c == '>' || c == '&' || c == 0xe2:
			return false
		case !in && (c == ' ' || c == '\t' || c == '\n' || c == '\r'):
			return false
		}
	}
	return true
}

// appendChatUserImages appends a Chat Completions user message with
// images: its content a list of a text part (if any) and image_url parts
// holding data URLs.
func appendChatUserImages(b []byte, text string, atts []llm.Attachment) []byte {
	b = append(b, `{"content":[`...)
	if text != "" {
		b = append(b, `{"text":`...)
		b = jsonstr.Append(b, text)
		b = append(b, `,"type":"text"}`...)
	}
	for i, a := range atts {
		if i > 0 || text != "" {
			b = append(b, ',')
		}
		b = append(b, `{"image_url":{"url":`...)
		b = jsonstr.Append(b, dataURL(a))
		b = append(b, `},"type":"image_url"}`...)
	}
	return append(b, `],"role":"user"}`...)
}

// tailCache keeps the encoding of a request's fields other than its
// messages (model, limits and above all the tools' schemas, which the
// SDK decoded and encoded again), which stay the same from one request
// of a run to the next. Safe for concurrent use.
type tailCache struct {
	mu    sync.Mutex
	key   llm.Request // Model, MaxTokens, Temperature and Tools of the cached request, copied
	temp  float64     // what key.Temperature points to
	valid bool
	tail  []byte // read-only once cached
}

// get returns the encoding of req's fields but its messages: the cached
// one when they equal the cached request's, else encode's, which it
// keeps.
func (c *tailCache) get(req *llm.Request, encode func() ([]byte, error)) ([]byte, error) {
	c.mu.Lock()
	if c.valid && c.matches(req) {
		defer c.mu.Unlock()
		return c.tail, nil
	}
	c.mu.Unlock()
	tail, err := encode()
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.key = llm.Request{Model: req.Model, MaxTokens: req.MaxTokens, Tools: slices.Clone(req.Tools)}
	for i, t := range c.key.Tools {
		c.key.Tools[i].InputSchema = bytes.Clone(t.InputSchema)
	}
	if req.Temperature != nil {
		c.temp = *req.Temperature
		c.key.Temperature = &c.temp
	}
	c.tail, c.valid = tail, true
	return tail, nil
}

// matches reports whether req's fields but its messages equal the cached
// request's.
func (c *tailCache) matches(req *llm.Request) bool {
	k := &c.key
	if req.Model != k.Model || req.MaxTokens != k.MaxTokens || (req.Temperature == nil) != (k.Temperature == nil) ||
		req.Temperature != nil && *req.Temperature != *k.Temperature || len(req.Tools) != len(k.Tools) {
		return false
	}
	for i, t := range req.Tools {
		kt := k.Tools[i]
		if t.Name != kt.Name || t.Description != kt.Description || !bytes.Equal(t.InputSchema, kt.InputSchema) {
			return false
		}
	}
	return true
}
