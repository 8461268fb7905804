package anthropic

import (
	"encoding/json"
	"errors"
	"fmt"

	"weft.dev/weft/llm"
)

// The Messages API request, as its JSON names it. Only what weft sends is
// modelled; a test checks over random requests that the body is the one
// github.com/anthropics/anthropic-sdk-go built.

// messagesRequest is the body of POST /v1/messages.
type messagesRequest struct {
	MaxTokens   int64           `json:"max_tokens"`
	Messages    []message       `json:"messages"`
	Model       string          `json:"model"`
	Stream      bool            `json:"stream"`
	System      []contentBlock  `json:"system,omitempty"`
	Temperature *float64        `json:"temperature,omitempty"`
	Thinking    *thinkingConfig `json:"thinking,omitempty"`
	Tools       []tool          `json:"tools,omitempty"`
}

// thinkingConfig is the request's thinking setting: Type "enabled" with
// a budget, or "adaptive"; the zero value sends none.
type thinkingConfig struct {
	BudgetTokens int64  `json:"budget_tokens,omitempty"`
	Type         string `json:"type"`
}

type message struct {
	Content []contentBlock `json:"content"`
	Role    string         `json:"role"`
}

// contentBlock is a block of a message: Type is text, image, tool_use,
// tool_result, thinking or redacted_thinking, and the fields of that type
// are set.
type contentBlock struct {
	Type string `json:"type"`

	Text string `json:"text,omitempty"` // text

	Source *imageSource `json:"source,omitempty"` // image

	ID    string          `json:"id,omitempty"`    // tool_use
	Input json.RawMessage `json:"input,omitempty"` // tool_use
	Name  string          `json:"name,omitempty"`  // tool_use

	ToolUseID string         `json:"tool_use_id,omitempty"` // tool_result
	Content   []contentBlock `json:"content,omitempty"`     // tool_result: text and image blocks
	IsError   bool           `json:"is_error,omitempty"`    // tool_result

	Signature string `json:"signature,omitempty"` // thinking
	Thinking  string `json:"thinking,omitempty"`  // thinking
	Data      string `json:"data,omitempty"`      // redacted_thinking
}

// MarshalJSON sends the fields a block's type requires even when empty
// (a text block's text, a thinking block's thinking and signature).
func (b contentBlock) MarshalJSON() ([]byte, error) {
	type plain contentBlock
	switch b.Type {
	case "text":
		return json.Marshal(struct {
			Text string `json:"text"`
			Type string `json:"type"`
		}{b.Text, b.Type})
	case "thinking":
		return json.Marshal(struct {
			Signature string `json:"signature"`
			Thinking  string `json:"thinking"`
			Type      string `json:"type"`
		}{b.Signature, b.Thinking, b.Type})
	case "redacted_thinking":
		return json.Marshal(struct {
			Data string `json:"data"`
			Type string `json:"type"`
		}{b.Data, b.Type})
	case "tool_use":
		return json.Marshal(struct {
			ID    string          `json:"id"`
			Input json.RawMessage `json:"input"`
			Name  string          `json:"name"`
			Type  string          `json:"type"`
		}{b.ID, b.Input, b.Name, b.Type})
	}
	return json.Marshal(plain(b))
}

// imageSource is an image block's base64 source.
type imageSource struct {
	Data      string `json:"data"`
	MediaType string `json:"media_type"`
	Type      string `json:"type"`
}

type tool struct {
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"input_schema"`
	Name        string          `json:"name"`
}

// params builds the Messages API request for req.
func (p *Provider) params(req *llm.Request) (*messagesRequest, error) {
	if req == nil {
		return nil, errors.New("nil request")
	}
	if req.Model == "" {
		return nil, errors.New("request has no model")
	}
	out := &messagesRequest{Model: req.Model, MaxTokens: int64(p.maxTokens), Stream: true}
	if req.MaxTokens > 0 {
		out.MaxTokens = int64(req.MaxTokens)
	}
	// The API deprecated temperature; models
	// that reject it return a 400.
	out.Temperature = req.Temperature
	if p.thinking.Type != "" {
		th := p.thinking
		out.Thinking = &th
	}
	if req.System != "" {
		out.System = []contentBlock{{Type: "text", Text: req.System}}
	}
	msgs, err := messages(req.Messages)
	if err != nil {
		return nil, err
	}
	out.Messages = msgs
	for i, t := range req.Tools {
		if t.Name == "" {
			return nil, fmt.Errorf("tools[%d]: no name", i)
		}
		schema := t.InputSchema
		if len(schema) == 0 {
			schema = json.RawMessage(`{"type":"object"}`)
		} else if !json.Valid(schema) {
			return nil, fmt.Errorf("tool %q: input schema is not valid JSON", t.Name)
		}
		// The caller's JSON Schema goes as it is.
		out.Tools = append(out.Tools, tool{Name: t.Name, Description: t.Description, InputSchema: schema})
	}
	return out, nil
}

// messages maps the transcript onto Messages API messages; consecutive
// messages of one role are merged into one.
func messages(msgs []llm.Message) ([]message, error) {
	out := []message{} // sent as [], not null, when empty
	add := func(role string, blocks ...contentBlock) {
		if len(blocks) == 0 {
			return
		}
		if n := len(out); n > 0 && out[n-1].Role == role {
			out[n-1].Content = append(out[n-1].Content, blocks...)
			return
		}
		out = append(out, message{Role: role, Content: blocks})
	}
	for i, m := range msgs {
		switch m.Role {
		case llm.RoleUser:
			if m.Content != "" {
				add("user", contentBlock{Type: "text", Text: m.Content})
			}
			for _, a := range m.Attachments {
				img, err := imageBlock(a)
				if err != nil {
					return nil, fmt.Errorf("messages[%d]: %w", i, err)
				}
				add("user", img)
			}
		case llm.RoleAssistant:
			blocks := thinkingBlocks(m.ProviderState)
			if m.Content != "" {
				blocks = append(blocks, contentBlock{Type: "text", Text: m.Content})
			}
			for _, tc := range m.ToolCalls {
				blocks = append(blocks, contentBlock{Type: "tool_use", ID: tc.ID, Name: tc.Name, Input: toolInput(tc.Arguments)})
			}
			add("assistant", blocks...)
		case llm.RoleTool:
			if m.ToolCallID == "" {
				return nil, fmt.Errorf("messages[%d]: tool result without a tool call id", i)
			}
			tr := contentBlock{Type: "tool_result", ToolUseID: m.ToolCallID, IsError: m.IsError}
			if m.Content != "" {
				tr.Content = []contentBlock{{Type: "text", Text: m.Content}}
			}
			for _, a := range m.Attachments {
				img, err := imageBlock(a)
				if err != nil {
					return nil, fmt.Errorf("messages[%d]: %w", i, err)
				}
				tr.Content = append(tr.Content, img)
			}
			add("user", tr)
		default:
			return nil, fmt.Errorf("messages[%d]: unknown role %q", i, m.Role)
		}
	}
	return out, nil
}

// thinkingBlocks decodes the thinking blocks of an assistant message's
// provider state. State that is not this provider's yields none: its
// signatures could not be verified anyway.
func thinkingBlocks(state json.RawMessage) []contentBlock {
	if len(state) == 0 {
		return nil
	}
	var st providerState
	if err := json.Unmarshal(state, &st); err != nil || st.Provider != providerName {
		return nil
	}
	var blocks []contentBlock
	for _, b := range st.Thinking {
		switch b.Type {
		case "thinking":
			blocks = append(blocks, contentBlock{Type: "thinking", Signature: b.Signature, Thinking: b.Thinking})
		case "redacted_thinking":
			blocks = append(blocks, contentBlock{Type: "redacted_thinking", Data: b.Data})
		}
	}
	return blocks
}

// toolInput returns the tool_use input for a call's arguments text: the
// object itself if it is a JSON object, {} if empty, else {"_raw": text}.
func toolInput(args string) json.RawMessage {
	if args == "" {
		return json.RawMessage(`{}`)
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal([]byte(args), &obj); err == nil && obj != nil {
		return json.RawMessage(args)
	}
	raw, _ := json.Marshal(map[string]string{"_raw": args})
	return raw
}
