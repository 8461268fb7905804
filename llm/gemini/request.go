package gemini

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"google.golang.org/genai"

	"weft.dev/weft/event"
	"weft.dev/weft/llm"
)

// request builds the SDK's contents and config for req.
func (p *Provider) request(req *llm.Request) ([]*genai.Content, *genai.GenerateContentConfig, error) {
	if req == nil {
		return nil, nil, errors.New("nil request")
	}
	if req.Model == "" {
		return nil, nil, errors.New("request has no model")
	}
	cfg := &genai.GenerateContentConfig{
		// The SDK would send the request again with a continuation token
		// when a response stops early; weft sees that as a finish.
		AutomaticContinuation: genai.Ptr(false),
	}
	if p.thinking != nil {
		tc := *p.thinking
		cfg.ThinkingConfig = &tc
	}
	if req.System != "" {
		cfg.SystemInstruction = &genai.Content{Role: genai.RoleUser, Parts: []*genai.Part{{Text: req.System}}}
	}
	if req.MaxTokens > 0 {
		cfg.MaxOutputTokens = int32(min(req.MaxTokens, 1<<31-1))
	}
	if req.Temperature != nil {
		cfg.Temperature = genai.Ptr(float32(*req.Temperature))
	}
	if len(req.Tools) > 0 {
		decls := make([]*genai.FunctionDeclaration, 0, len(req.Tools))
		for i, t := range req.Tools {
			if t.Name == "" {
				return nil, nil, fmt.Errorf("tools[%d]: no name", i)
			}
			fd := &genai.FunctionDeclaration{Name: t.Name, Description: t.Description}
			if len(t.InputSchema) > 0 {
				var obj map[string]json.RawMessage
				if err := json.Unmarshal(t.InputSchema, &obj); err != nil || obj == nil {
					return nil, nil, fmt.Errorf("tool %q: input schema is not a JSON object", t.Name)
				}
				// parametersJsonSchema takes JSON Schema as it is, unlike
				// parameters (an OpenAPI subset that rejects, e.g.,
				// additionalProperties).
				fd.ParametersJsonSchema = t.InputSchema
			}
			decls = append(decls, fd)
		}
		cfg.Tools = []*genai.Tool{{FunctionDeclarations: decls}}
	}
	contents, err := contents(req.Messages)
	if err != nil {
		return nil, nil, err
	}
	return contents, cfg, nil
}

// assistantTurns counts the assistant messages of a transcript.
func assistantTurns(msgs []llm.Message) int {
	n := 0
	for _, m := range msgs {
		if m.Role == llm.RoleAssistant {
			n++
		}
	}
	return n
}

// contents maps the transcript onto Gemini contents. Consecutive messages
// that map to the same role are merged into one content, so the results of
// parallel calls travel together, as the API wants.
func contents(msgs []llm.Message) ([]*genai.Content, error) {
	var out []*genai.Content
	add := func(role string, parts ...*genai.Part) {
		if len(parts) == 0 {
			return
		}
		if n := len(out); n > 0 && out[n-1].Role == role {
			out[n-1].Parts = append(out[n-1].Parts, parts...)
			return
		}
		out = append(out, &genai.Content{Role: role, Parts: parts})
	}
	names := map[string]string{} // call ID -> function name
	// images holds the images of the tool results of the current run of
	// them: they follow the results' functionResponse parts, in the same
	// content, so that the responses of parallel calls stay together.
	var images []*genai.Part
	for i, m := range msgs {
		if m.Role != llm.RoleTool && len(images) > 0 {
			add(genai.RoleUser, images...)
			images = nil
		}
		switch m.Role {
		case llm.RoleUser:
			if m.Content != "" {
				add(genai.RoleUser, &genai.Part{Text: m.Content})
			}
			parts, err := imageParts(m.Attachments)
			if err != nil {
				return nil, fmt.Errorf("messages[%d]: %w", i, err)
			}
			add(genai.RoleUser, parts...)
		case llm.RoleAssistant:
			for _, tc := range m.ToolCalls {
				names[tc.ID] = tc.Name
			}
			add(genai.RoleModel, modelParts(m)...)
		case llm.RoleTool:
			name := m.ToolName
			if name == "" {
				name = names[m.ToolCallID]
			}
			if name == "" {
				return nil, fmt.Errorf("messages[%d]: tool result for %q without a tool name", i, m.ToolCallID)
			}
			key := "output"
			if m.IsError {
				key = "error"
			}
			add(genai.RoleUser, &genai.Part{FunctionResponse: &genai.FunctionResponse{
				ID: wireID(m.ToolCallID), Name: name, Response: map[string]any{key: m.Content},
			}})
			parts, err := imageParts(m.Attachments)
			if err != nil {
				return nil, fmt.Errorf("messages[%d]: %w", i, err)
			}
			images = append(images, parts...)
		default:
			return nil, fmt.Errorf("messages[%d]: unknown role %q", i, m.Role)
		}
	}
	add(genai.RoleUser, images...)
	return out, nil
}

// imageParts are attachments as inline_data parts (a MIME type and the
// bytes, base64 on the wire): one wire shape per function, so that an
// encoder without the SDK can carry it over.
func imageParts(atts []llm.Attachment) ([]*genai.Part, error) {
	var parts []*genai.Part
	for _, a := range atts {
		if !strings.HasPrefix(a.MediaType, "image/") {
			return nil, fmt.Errorf("attachment of type %q: only images are sent", a.MediaType)
		}
		parts = append(parts, &genai.Part{InlineData: &genai.Blob{MIMEType: a.MediaType, Data: a.Data}})
	}
	return parts, nil
}

// wireID is the call ID sent to the API: none for IDs weft made up.
func wireID(id string) string {
	if isSyntheticID(id) {
		return ""
	}
	return id
}

// modelParts returns the parts of an assistant message: in the order and
// with the thought signatures of the response, if its provider state says
// so; else its text, then its calls. Thoughts go back only with a
// signature: without one the API has no use for them.
func modelParts(m llm.Message) []*genai.Part {
	if parts, ok := replay(m, decodeState(m.ProviderState)); ok {
		return parts
	}
	var parts []*genai.Part
	if m.Content != "" {
		parts = append(parts, &genai.Part{Text: m.Content})
	}
	for _, tc := range m.ToolCalls {
		parts = append(parts, callPart(tc, ""))
	}
	return parts
}

// replay rebuilds a response's parts from its layout. It fails if the
// layout does not fit the message (lengths, calls).
func replay(m llm.Message, layout []segment) ([]*genai.Part, bool) {
	if layout == nil {
		return nil, false
	}
	text, reasoning := m.Content, m.Reasoning
	seen := make([]bool, len(m.ToolCalls))
	var parts []*genai.Part
	for _, s := range layout {
		switch s.Kind {
		case kindThought:
			if s.Len < 0 || s.Len > len(reasoning) {
				return nil, false
			}
			if s.Sig != "" {
				parts = append(parts, &genai.Part{Thought: true, Text: reasoning[:s.Len], ThoughtSignature: decodeSignature(s.Sig)})
			}
			reasoning = reasoning[s.Len:]
		case kindText:
			if s.Len < 0 || s.Len > len(text) {
				return nil, false
			}
			parts = append(parts, &genai.Part{Text: text[:s.Len], ThoughtSignature: decodeSignature(s.Sig)})
			text = text[s.Len:]
		case kindCall:
			if s.Call < 0 || s.Call >= len(m.ToolCalls) || seen[s.Call] {
				return nil, false
			}
			seen[s.Call] = true
			parts = append(parts, callPart(m.ToolCalls[s.Call], s.Sig))
		default:
			return nil, false
		}
	}
	if text != "" || reasoning != "" {
		return nil, false
	}
	for _, ok := range seen {
		if !ok {
			return nil, false
		}
	}
	return parts, true
}

// callPart is the functionCall part of a call. Arguments that are not a
// JSON object (a model can produce invalid JSON, and the transcript must
// still be sendable) go as {"_raw": "<arguments text>"}.
func callPart(tc event.ToolCall, sig string) *genai.Part {
	var args map[string]any
	if tc.Arguments != "" {
		if err := json.Unmarshal([]byte(tc.Arguments), &args); err != nil || args == nil {
			args = map[string]any{"_raw": tc.Arguments}
		}
	}
	p := &genai.Part{FunctionCall: &genai.FunctionCall{ID: wireID(tc.ID), Name: tc.Name, Args: args}}
	if sig != "" {
		p.ThoughtSignature = decodeSignature(sig)
	}
	return p
}
