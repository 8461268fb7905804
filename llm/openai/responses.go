package openai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"

	"weft.dev/weft/event"
	"weft.dev/weft/internal/jsonstr"
	"weft.dev/weft/llm"
)

// Responses is an [llm.Provider] for the Responses API
// (POST {BaseURL}/responses), streamed. It sends store: false, so the server
// keeps nothing between calls and every request carries the whole
// transcript. When [Config.ReasoningEffort] is set it asks for
// reasoning.encrypted_content and returns the reasoning items in
// [llm.Finish.ProviderState]; sent back in the assistant message's
// [llm.Message.ProviderState], they let the model keep its reasoning across
// tool calls.
//
// A Responses is safe for concurrent use. Its errors are [*llm.Error] with
// Provider "openai", or a wrapped context error.
type Responses struct {
	c *client
}

// NewResponses returns a Responses provider for cfg. It fails if cfg is
// invalid.
func NewResponses(cfg Config) (*Responses, error) {
	c, err := newClient(ResponsesProviderName, cfg)
	if err != nil {
		return nil, err
	}
	return &Responses{c: c}, nil
}

// Stream implements [llm.Provider]. The iterator is single-use; it sends
// the request when iteration starts and closes the response when it ends,
// including on break.
func (p *Responses) Stream(ctx context.Context, req *llm.Request) iter.Seq2[llm.StreamEvent, error] {
	return func(yield func(llm.StreamEvent, error) bool) {
		body, err := p.body(req)
		if err != nil {
			yield(llm.StreamEvent{}, p.c.badRequest(err))
			return
		}
		p.c.stream(ctx, req.Model, "responses", body, yield,
			&responsesState{c: p.c, yield: yieldEvent(yield), calls: map[int]int{}})
	}
}

// providerState is the Responses provider's [llm.Finish.ProviderState]: the
// response's reasoning items, as the server sent them.
type providerState struct {
	Reasoning []json.RawMessage `json:"openaiResponsesReasoning"`
}

// responsesTail is a Responses request but its input.
type responsesTail struct {
	Include         []string        `json:"include,omitempty"`
	Instructions    string          `json:"instructions,omitempty"`
	MaxOutputTokens int64           `json:"max_output_tokens,omitempty"`
	Model           string          `json:"model,omitempty"`
	Reasoning       *reasoning      `json:"reasoning,omitempty"`
	Store           bool            `json:"store"`
	Temperature     *float64        `json:"temperature,omitempty"`
	Tools           []responsesTool `json:"tools,omitempty"`
}

type reasoning struct {
	Effort  string `json:"effort,omitempty"`
	Summary string `json:"summary,omitempty"`
}

type responsesTool struct {
	Description string          `json:"description,omitempty"`
	Name        string          `json:"name"`
	Parameters  json.RawMessage `json:"parameters"`
	Strict      bool            `json:"strict"`
	Type        string          `json:"type"`
}

// body encodes a Responses request (but its "stream" field, which the
// sending adds): the input items by appending, then the other fields by
// encoding/json. The result is the SDK's request as JSON (a test compares
// the two over random requests).
func (p *Responses) body(req *llm.Request) ([]byte, error) {
	if req == nil {
		return nil, errors.New("nil request")
	}
	cfg := &p.c.cfg
	t := responsesTail{Model: req.Model, Instructions: req.System, Temperature: req.Temperature}
	if req.MaxTokens > 0 {
		t.MaxOutputTokens = int64(req.MaxTokens)
	}
	if cfg.ReasoningEffort != "" {
		t.Reasoning = &reasoning{Effort: cfg.ReasoningEffort}
		switch cfg.ReasoningSummary {
		case "":
			t.Reasoning.Summary = "auto"
		case "none":
		default:
			t.Reasoning.Summary = cfg.ReasoningSummary
		}
		t.Include = []string{"reasoning.encrypted_content"}
	}
	for _, tool := range req.Tools {
		schema, err := toolSchema(tool.Name, tool.InputSchema)
		if err != nil {
			return nil, err
		}
		t.Tools = append(t.Tools, responsesTool{Type: "function", Name: tool.Name, Description: tool.Description, Parameters: schema})
	}
	b := make([]byte, 0, 64+requestChars(req))
	b = append(b, `{"input":[`...)
	b, err := appendResponsesInput(b, req.Messages)
	if err != nil {
		return nil, err
	}
	b = append(b, "],"...)
	tail, err := json.Marshal(t)
	if err != nil {
		return nil, err
	}
	return append(b, tail[1:]...), nil
}

// appendResponsesInput appends msgs as Responses input items, separated
// by commas.
func appendResponsesInput(b []byte, msgs []llm.Message) ([]byte, error) {
	first := true
	open := func() {
		if !first {
			b = append(b, ',')
		}
		first = false
	}
	for i, m := range msgs {
		if err := checkAttachments(i, m); err != nil {
			return nil, err
		}
		switch m.Role {
		case llm.RoleUser:
			open()
			if len(m.Attachments) > 0 {
				b = append(b, `{"content":[`...)
				b = appendInputParts(b, m.Content, m.Attachments)
				b = append(b, `],"role":"user"}`...)
				break
			}
			b = appendMessageItem(b, "user", m.Content)
		case llm.RoleAssistant:
			var st providerState
			if len(m.ProviderState) > 0 && json.Unmarshal(m.ProviderState, &st) == nil {
				for _, r := range st.Reasoning {
					open()
					b = append(b, r...)
				}
			}
			if m.Content != "" {
				open()
				b = appendMessageItem(b, "assistant", m.Content)
			}
			for _, tc := range m.ToolCalls {
				open()
				b = append(b, `{"arguments":`...)
				b = jsonstr.Append(b, tc.Arguments)
				b = append(b, `,"call_id":`...)
				b = jsonstr.Append(b, tc.ID)
				b = append(b, `,"name":`...)
				b = jsonstr.Append(b, tc.Name)
				b = append(b, `,"type":"function_call"}`...)
			}
		case llm.RoleTool:
			if m.ToolCallID == "" {
				return nil, fmt.Errorf("message %d: tool result without ToolCallID", i)
			}
			open()
			b = append(b, `{"call_id":`...)
			b = jsonstr.Append(b, m.ToolCallID)
			b = append(b, `,"output":`...)
			if len(m.Attachments) > 0 {
				b = append(b, '[')
				b = appendInputParts(b, m.Content, m.Attachments)
				b = append(b, ']')
			} else {
				b = jsonstr.Append(b, m.Content)
			}
			b = append(b, `,"type":"function_call_output"}`...)
		default:
			return nil, fmt.Errorf("message %d: unknown role %q", i, m.Role)
		}
	}
	return b, nil
}

// appendMessageItem appends a message item whose content is text.
func appendMessageItem(b []byte, role, text string) []byte {
	b = append(b, `{"content":`...)
	b = jsonstr.Append(b, text)
	b = append(b, `,"role":"`...)
	b = append(b, role...)
	return append(b, `"}`...)
}

// responsesEvent is the part of a Responses stream event weft reads. Fields
// whose shape depends on the type stay raw until the type is known.
type responsesEvent struct {
	Type         string          `json:"type"`
	OutputIndex  int             `json:"output_index"`
	SummaryIndex int             `json:"summary_index"`
	Delta        json.RawMessage `json:"delta"`
	Item         json.RawMessage `json:"item"`
	Response     json.RawMessage `json:"response"`
	Code         json.RawMessage `json:"code"`
	Message      string          `json:"message"`
	Error        json.RawMessage `json:"error"`
}

type responsesItem struct {
	Type             string   `json:"type"`
	CallID           string   `json:"call_id"`
	Name             string   `json:"name"`
	Arguments        argsText `json:"arguments"`
	EncryptedContent *string  `json:"encrypted_content"`
}

type responsesResponse struct {
	Status string `json:"status"`
	Usage  *struct {
		InputTokens        int64 `json:"input_tokens"`
		OutputTokens       int64 `json:"output_tokens"`
		InputTokensDetails *struct {
			CachedTokens int64 `json:"cached_tokens"`
		} `json:"input_tokens_details"`
		OutputTokensDetails *struct {
			ReasoningTokens int64 `json:"reasoning_tokens"`
		} `json:"output_tokens_details"`
	} `json:"usage"`
	IncompleteDetails *struct {
		Reason string `json:"reason"`
	} `json:"incomplete_details"`
	Error *struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// responsesCall is one function call of the response.
type responsesCall struct {
	args runeJoiner
	sent []byte // argument bytes yielded so far
}

// responsesState is the decoding state of one Responses stream.
type responsesState struct {
	c         *client
	yield     func(llm.StreamEvent) bool
	calls     map[int]int // output_index -> weft call index
	callState []responsesCall
	text      runeJoiner
	reasoning runeJoiner
	reasoned  bool // some reasoning text was yielded
	items     []json.RawMessage
	usage     *event.TokenUsage
	terminal  string // the terminal event's type
	finish    string
	scratch   rawText
}

// handle handles the data of one stream event. It returns done at the
// response's terminal event.
func (s *responsesState) handle(data []byte) (done bool, err error) {
	var ev responsesEvent
	if err := json.Unmarshal(data, &ev); err != nil {
		return false, s.c.malformed(data, err)
	}
	switch ev.Type {
	case "response.output_text.delta", "response.refusal.delta":
		b, err := s.delta(data, ev.Delta)
		if err != nil {
			return false, err
		}
		if t := s.text.push(b); t != "" && !s.yield(llm.StreamEvent{Text: t}) {
			return false, errStopped
		}
	case "response.reasoning_summary_text.delta", "response.reasoning_text.delta":
		b, err := s.delta(data, ev.Delta)
		if err != nil {
			return false, err
		}
		if r := s.reasoning.push(b); r != "" {
			s.reasoned = true
			if !s.yield(llm.StreamEvent{Reasoning: r}) {
				return false, errStopped
			}
		}
	case "response.reasoning_summary_part.added":
		// Summary parts are paragraphs.
		if ev.SummaryIndex > 0 && s.reasoned && !s.yield(llm.StreamEvent{Reasoning: "\n\n"}) {
			return false, errStopped
		}
	case "response.output_item.added", "response.output_item.done":
		return false, s.item(data, ev)
	case "response.function_call_arguments.delta":
		idx, ok := s.calls[ev.OutputIndex]
		if !ok {
			return false, s.c.malformed(data, fmt.Errorf("arguments for unknown output_index %d", ev.OutputIndex))
		}
		b, err := s.delta(data, ev.Delta)
		if err != nil {
			return false, err
		}
		if !s.args(idx, b) {
			return false, errStopped
		}
	case "response.completed", "response.incomplete", "response.failed":
		var r responsesResponse
		if err := json.Unmarshal(ev.Response, &r); err != nil {
			return false, s.c.malformed(data, err)
		}
		if ev.Type == "response.failed" {
			msg, code := "response failed", ""
			if r.Error != nil {
				msg, code = r.Error.Message, r.Error.Code
			}
			return false, codeError(s.c.provider, code, fmt.Errorf("response.failed: %s: %s", code, msg))
		}
		if u := r.Usage; u != nil {
			s.usage = &event.TokenUsage{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens}
			if u.InputTokensDetails != nil {
				s.usage.CacheReadTokens = u.InputTokensDetails.CachedTokens
			}
			if u.OutputTokensDetails != nil {
				s.usage.ReasoningTokens = u.OutputTokensDetails.ReasoningTokens
			}
		}
		s.terminal = ev.Type
		s.finish = llm.FinishStop
		switch {
		case ev.Type == "response.incomplete":
			s.finish = llm.FinishOther
			if r.IncompleteDetails != nil && r.IncompleteDetails.Reason == "max_output_tokens" {
				s.finish = llm.FinishLength
			}
		case len(s.callState) > 0:
			s.finish = llm.FinishToolCalls
		}
		return true, nil
	case "error":
		var code string
		_ = json.Unmarshal(ev.Code, &code)
		return false, codeError(s.c.provider, code, fmt.Errorf("error event: %s: %s", code, ev.Message))
	case "":
		if len(ev.Error) > 0 && string(ev.Error) != "null" {
			return false, s.c.streamError(ev.Error)
		}
	}
	return false, nil
}

// delta decodes a string delta, reusing one buffer.
func (s *responsesState) delta(data []byte, raw json.RawMessage) ([]byte, error) {
	if err := s.scratch.UnmarshalJSON(raw); err != nil {
		return nil, s.c.malformed(data, fmt.Errorf("delta: %w", err))
	}
	return s.scratch, nil
}

// item handles output_item.added and output_item.done.
func (s *responsesState) item(data []byte, ev responsesEvent) error {
	var it responsesItem
	if err := json.Unmarshal(ev.Item, &it); err != nil {
		return s.c.malformed(data, fmt.Errorf("item: %w", err))
	}
	switch it.Type {
	case "function_call":
		idx, ok := s.calls[ev.OutputIndex]
		if !ok {
			idx = len(s.callState)
			s.calls[ev.OutputIndex] = idx
			s.callState = append(s.callState, responsesCall{})
			if !s.yield(llm.StreamEvent{ToolCall: &llm.ToolCallDelta{Index: idx, ID: it.CallID, Name: it.Name}}) {
				return errStopped
			}
		}
		// The added item may carry arguments already and the done item
		// carries them all; yield whatever the deltas did not.
		call := &s.callState[idx]
		if len(it.Arguments) > len(call.sent) && string(it.Arguments[:len(call.sent)]) == string(call.sent) {
			if !s.args(idx, it.Arguments[len(call.sent):]) {
				return errStopped
			}
		}
	case "reasoning":
		if ev.Type == "response.output_item.done" && it.EncryptedContent != nil && *it.EncryptedContent != "" {
			s.items = append(s.items, append(json.RawMessage(nil), ev.Item...))
		}
	}
	return nil
}

// args yields an arguments fragment of call idx.
func (s *responsesState) args(idx int, b []byte) bool {
	call := &s.callState[idx]
	call.sent = append(call.sent, b...)
	a := call.args.push(b)
	return a == "" || s.yield(llm.StreamEvent{ToolCall: &llm.ToolCallDelta{Index: idx, Arguments: a}})
}

// finished is false: only response.completed (or its kin) ends a stream.
func (s *responsesState) finished() bool { return false }

// end yields what a finished stream still owes, or the error for a stream
// without its terminal event.
func (s *responsesState) end() (string, error) {
	if s.terminal == "" {
		return "", s.c.cut("response.completed")
	}
	if r := s.reasoning.flush(); r != "" && !s.yield(llm.StreamEvent{Reasoning: r}) {
		return "", errStopped
	}
	if t := s.text.flush(); t != "" && !s.yield(llm.StreamEvent{Text: t}) {
		return "", errStopped
	}
	for i := range s.callState {
		if a := s.callState[i].args.flush(); a != "" && !s.yield(llm.StreamEvent{ToolCall: &llm.ToolCallDelta{Index: i, Arguments: a}}) {
			return "", errStopped
		}
	}
	if s.usage != nil && !s.yield(llm.StreamEvent{Usage: s.usage}) {
		return "", errStopped
	}
	f := &llm.Finish{Reason: s.finish}
	if len(s.items) > 0 {
		state, err := json.Marshal(providerState{Reasoning: s.items})
		if err != nil {
			return "", s.c.malformed(nil, fmt.Errorf("reasoning items: %w", err))
		}
		f.ProviderState = state
	}
	if !s.yield(llm.StreamEvent{Finish: f}) {
		return "", errStopped
	}
	return s.finish, nil
}
