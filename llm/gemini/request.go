package gemini

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"weft.dev/weft/event"
	"weft.dev/weft/llm"
)

// The request of streamGenerateContent, as the Gemini API's JSON names it
// (GenerateContentRequest). Only what weft sends is modelled; the field
// order and omissions are those of google.golang.org/genai, which a test
// checks over random requests.

// wireRequest is the body of a streamGenerateContent request.
type wireRequest struct {
	Contents          []*content        `json:"contents,omitempty"`
	GenerationConfig  *generationConfig `json:"generationConfig,omitempty"`
	SystemInstruction *content          `json:"systemInstruction,omitempty"`
	Tools             []wireTool        `json:"tools,omitempty"`
}

// content is a Content: a role ("user" or "model") and its parts.
type content struct {
	Parts []*wirePart `json:"parts,omitempty"`
	Role  string      `json:"role,omitempty"`
}

// wirePart is a Part; exactly one of its data fields is set.
type wirePart struct {
	FunctionCall     *functionCall     `json:"functionCall,omitempty"`
	FunctionResponse *functionResponse `json:"functionResponse,omitempty"`
	InlineData       *blob             `json:"inlineData,omitempty"`
	Text             string            `json:"text,omitempty"`
	Thought          bool              `json:"thought,omitempty"`
	// ThoughtSignature is base64 on the wire ([]byte in encoding/json).
	ThoughtSignature []byte `json:"thoughtSignature,omitempty"`
}

type functionCall struct {
	Args map[string]any `json:"args,omitempty"`
	ID   string         `json:"id,omitempty"`
	Name string         `json:"name,omitempty"`
}

type functionResponse struct {
	ID       string         `json:"id,omitempty"`
	Name     string         `json:"name,omitempty"`
	Response map[string]any `json:"response,omitempty"`
}

// blob is inline data: a MIME type and the bytes, base64 on the wire.
type blob struct {
	Data     []byte `json:"data,omitempty"`
	MIMEType string `json:"mimeType,omitempty"`
}

type generationConfig struct {
	MaxOutputTokens int32           `json:"maxOutputTokens,omitempty"`
	Temperature     *float32        `json:"temperature,omitempty"`
	ThinkingConfig  *thinkingConfig `json:"thinkingConfig,omitempty"`
}

// thinkingConfig is generationConfig.thinkingConfig.
type thinkingConfig struct {
	IncludeThoughts bool   `json:"includeThoughts,omitempty"`
	ThinkingBudget  *int32 `json:"thinkingBudget,omitempty"`
	// ThinkingLevel is MINIMAL, LOW, MEDIUM or HIGH.
	ThinkingLevel string `json:"thinkingLevel,omitempty"`
}

type wireTool struct {
	FunctionDeclarations []functionDeclaration `json:"functionDeclarations,omitempty"`
}

type functionDeclaration struct {
	Description string `json:"description,omitempty"`
	Name        string `json:"name,omitempty"`
	// ParametersJSONSchema takes JSON Schema as it is, unlike parameters
	// (an OpenAPI subset that rejects, e.g., additionalProperties).
	ParametersJSONSchema json.RawMessage `json:"parametersJsonSchema,omitempty"`
}

// Roles of a content.
const (
	roleUser  = "user"
	roleModel = "model"
)

// modelPath is the path of req's model below the API version: "models/"
// and the name, unless the name already starts with "models/" or
// "tunedModels/". A name that could leave that path or add a query is
// refused.
func modelPath(model string) (string, error) {
	if model == "" {
		return "", errors.New("request has no model")
	}
	if strings.ContainsAny(model, "?&#") || strings.Contains(model, "..") {
		return "", fmt.Errorf("model %q is not a model name", model)
	}
	if strings.HasPrefix(model, "models/") || strings.HasPrefix(model, "tunedModels/") {
		return model, nil
	}
	return "models/" + model, nil
}

// request builds the body of req.
func (p *Provider) request(req *llm.Request) (*wireRequest, error) {
	if req == nil {
		return nil, errors.New("nil request")
	}
	if req.Model == "" {
		return nil, errors.New("request has no model")
	}
	out := &wireRequest{}
	var gen generationConfig
	if p.thinking != nil {
		tc := *p.thinking
		gen.ThinkingConfig = &tc
	}
	if req.System != "" {
		out.SystemInstruction = &content{Role: roleUser, Parts: []*wirePart{{Text: req.System}}}
	}
	if req.MaxTokens > 0 {
		gen.MaxOutputTokens = int32(min(req.MaxTokens, 1<<31-1))
	}
	if req.Temperature != nil {
		t := float32(*req.Temperature)
		gen.Temperature = &t
	}
	out.GenerationConfig = &gen // sent even when empty, as the SDK does
	if len(req.Tools) > 0 {
		decls := make([]functionDeclaration, 0, len(req.Tools))
		for i, t := range req.Tools {
			if t.Name == "" {
				return nil, fmt.Errorf("tools[%d]: no name", i)
			}
			fd := functionDeclaration{Name: t.Name, Description: t.Description}
			if len(t.InputSchema) > 0 {
				var obj map[string]json.RawMessage
				if err := json.Unmarshal(t.InputSchema, &obj); err != nil || obj == nil {
					return nil, fmt.Errorf("tool %q: input schema is not a JSON object", t.Name)
				}
				fd.ParametersJSONSchema = t.InputSchema
			}
			decls = append(decls, fd)
		}
		out.Tools = []wireTool{{FunctionDeclarations: decls}}
	}
	contents, err := contents(req.Messages)
	if err != nil {
		return nil, err
	}
	out.Contents = contents
	return out, nil
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
func contents(msgs []llm.Message) ([]*content, error) {
	var out []*content
	add := func(role string, parts ...*wirePart) {
		if len(parts) == 0 {
			return
		}
		if n := len(out); n > 0 && out[n-1].Role == role {
			out[n-1].Parts = append(out[n-1].Parts, parts...)
			return
		}
		out = append(out, &content{Role: role, Parts: parts})
	}
	names := map[string]string{} // call ID -> function name
	// images holds the images of the tool results of the current run of
	// them: they follow the results' functionResponse parts, in the same
	// content, so that the responses of parallel calls stay together.
	var images []*wirePart
	for i, m := range msgs {
		if m.Role != llm.RoleTool && len(images) > 0 {
			add(roleUser, images...)
			images = nil
		}
		switch m.Role {
		case llm.RoleUser:
			if m.Content != "" {
				add(roleUser, &wirePart{Text: m.Content})
			}
			parts, err := imageParts(m.Attachments)
			if err != nil {
				return nil, fmt.Errorf("messages[%d]: %w", i, err)
			}
			add(roleUser, parts...)
		case llm.RoleAssistant:
			for _, tc := range m.ToolCalls {
				names[tc.ID] = tc.Name
			}
			add(roleModel, modelParts(m)...)
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
			add(roleUser, &wirePart{FunctionResponse: &functionResponse{
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
	add(roleUser, images...)
	return out, nil
}

// imageParts are attachments as inline_data parts (a MIME type and the
// bytes, base64 on the wire).
func imageParts(atts []llm.Attachment) ([]*wirePart, error) {
	var parts []*wirePart
	for _, a := range atts {
		if !strings.HasPrefix(a.MediaType, "image/") {
			return nil, fmt.Errorf("attachment of type %q: only images are sent", a.MediaType)
		}
		parts = append(parts, &wirePart{InlineData: &blob{MIMEType: a.MediaType, Data: a.Data}})
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
func modelParts(m llm.Message) []*wirePart {
	if parts, ok := replay(m, decodeState(m.ProviderState)); ok {
		return parts
	}
	var parts []*wirePart
	if m.Content != "" {
		parts = append(parts, &wirePart{Text: m.Content})
	}
	for _, tc := range m.ToolCalls {
		parts = append(parts, callPart(tc, ""))
	}
	return parts
}

// replay rebuilds a response's parts from its layout. It fails if the
// layout does not fit the message (lengths, calls).
func replay(m llm.Message, layout []segment) ([]*wirePart, bool) {
	if layout == nil {
		return nil, false
	}
	text, reasoning := m.Content, m.Reasoning
	seen := make([]bool, len(m.ToolCalls))
	var parts []*wirePart
	for _, s := range layout {
		switch s.Kind {
		case kindThought:
			if s.Len < 0 || s.Len > len(reasoning) {
				return nil, false
			}
			if s.Sig != "" {
				parts = append(parts, &wirePart{Thought: true, Text: reasoning[:s.Len], ThoughtSignature: decodeSignature(s.Sig)})
			}
			reasoning = reasoning[s.Len:]
		case kindText:
			if s.Len < 0 || s.Len > len(text) {
				return nil, false
			}
			parts = append(parts, &wirePart{Text: text[:s.Len], ThoughtSignature: decodeSignature(s.Sig)})
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
func callPart(tc event.ToolCall, sig string) *wirePart {
	var args map[string]any
	if tc.Arguments != "" {
		if err := json.Unmarshal([]byte(tc.Arguments), &args); err != nil || args == nil {
			args = map[string]any{"_raw": tc.Arguments}
		}
	}
	p := &wirePart{FunctionCall: &functionCall{ID: wireID(tc.ID), Name: tc.Name, Args: args}}
	if sig != "" {
		p.ThoughtSignature = decodeSignature(sig)
	}
	return p
}
