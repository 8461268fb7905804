package openai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"

	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"

	"weft.dev/weft/event"
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
	c   *client
	svc responses.ResponseService
}

// NewResponses returns a Responses provider for cfg. It fails if cfg is
// invalid.
func NewResponses(cfg Config) (*Responses, error) {
	c, err := newClient(ResponsesProviderName, cfg)
	if err != nil {
		return nil, err
	}
	return &Responses{c: c, svc: responses.NewResponseService(c.opts...)}, nil
}

// Stream implements [llm.Provider]. The iterator is single-use; it sends
// the request when iteration starts and closes the response when it ends,
// including on break.
func (p *Responses) Stream(ctx context.Context, req *llm.Request) iter.Seq2[llm.StreamEvent, error] {
	return func(yield func(llm.StreamEvent, error) bool) {
		params, err := p.params(req)
		if err != nil {
			yield(llm.StreamEvent{}, p.c.badRequest(err))
			return
		}
		p.c.stream(ctx, req.Model, yield, func(opts ...option.RequestOption) sdkStream {
			return p.svc.NewStreaming(ctx, params, append(opts, p.c.extra...)...)
		}, &responsesState{c: p.c, yield: yieldEvent(yield), calls: map[int]int{}})
	}
}

// providerState is the Responses provider's [llm.Finish.ProviderState]: the
// response's reasoning items, as the server sent them.
type providerState struct {
	Reasoning []json.RawMessage `json:"openaiResponsesReasoning"`
}

func (p *Responses) params(req *llm.Request) (responses.ResponseNewParams, error) {
	var out responses.ResponseNewParams
	if req == nil {
		return out, errors.New("nil request")
	}
	cfg := &p.c.cfg
	out.Model = req.Model
	out.Store = param.NewOpt(false)
	if req.System != "" {
		out.Instructions = param.NewOpt(req.System)
	}
	if req.MaxTokens > 0 {
		out.MaxOutputTokens = param.NewOpt(int64(req.MaxTokens))
	}
	if req.Temperature != nil {
		out.Temperature = param.NewOpt(*req.Temperature)
	}
	if cfg.ReasoningEffort != "" {
		out.Reasoning.Effort = shared.ReasoningEffort(cfg.ReasoningEffort)
		switch cfg.ReasoningSummary {
		case "":
			out.Reasoning.Summary = shared.ReasoningSummaryAuto
		case "none":
		default:
			out.Reasoning.Summary = shared.ReasoningSummary(cfg.ReasoningSummary)
		}
		out.Include = []responses.ResponseIncludable{responses.ResponseIncludableReasoningEncryptedContent}
	}
	items := make(responses.ResponseInputParam, 0, len(req.Messages))
	for i, m := range req.Messages {
		if err := checkAttachments(i, m); err != nil {
			return out, err
		}
		switch m.Role {
		case llm.RoleUser:
			if len(m.Attachments) > 0 {
				items = append(items, responsesUserMessage(m.Content, m.Attachments))
				break
			}
			items = append(items, message(responses.EasyInputMessageRoleUser, m.Content))
		case llm.RoleAssistant:
			var st providerState
			if len(m.ProviderState) > 0 && json.Unmarshal(m.ProviderState, &st) == nil {
				for _, r := range st.Reasoning {
					items = append(items, responses.ResponseInputItemUnionParam{
						OfReasoning: new(param.Override[responses.ResponseReasoningItemParam](r)),
					})
				}
			}
			if m.Content != "" {
				items = append(items, message(responses.EasyInputMessageRoleAssistant, m.Content))
			}
			for _, tc := range m.ToolCalls {
				items = append(items, responses.ResponseInputItemUnionParam{
					OfFunctionCall: &responses.ResponseFunctionToolCallParam{
						CallID: tc.ID, Name: tc.Name, Arguments: tc.Arguments,
					},
				})
			}
		case llm.RoleTool:
			if m.ToolCallID == "" {
				return out, fmt.Errorf("message %d: tool result without ToolCallID", i)
			}
			output := responses.ResponseInputItemFunctionCallOutputOutputUnionParam{OfString: param.NewOpt(m.Content)}
			if len(m.Attachments) > 0 {
				output = responsesToolOutput(m.Content, m.Attachments)
			}
			items = append(items, responses.ResponseInputItemUnionParam{
				OfFunctionCallOutput: &responses.ResponseInputItemFunctionCallOutputParam{
					CallID: param.NewOpt(m.ToolCallID),
					Output: output,
				},
			})
		default:
			return out, fmt.Errorf("message %d: unknown role %q", i, m.Role)
		}
	}
	out.Input.OfInputItemList = items
	for _, t := range req.Tools {
		params, err := toolParameters(t.Name, t.InputSchema)
		if err != nil {
			return out, err
		}
		fn := &responses.FunctionToolParam{Name: t.Name, Parameters: params, Strict: param.NewOpt(false)}
		if t.Description != "" {
			fn.Description = param.NewOpt(t.Description)
		}
		out.Tools = append(out.Tools, responses.ToolUnionParam{OfFunction: fn})
	}
	return out, nil
}

func message(role responses.EasyInputMessageRole, text string) responses.ResponseInputItemUnionParam {
	return responses.ResponseInputItemUnionParam{OfMessage: &responses.EasyInputMessageParam{
		Role:    role,
		Content: responses.EasyInputMessageContentUnionParam{OfString: param.NewOpt(text)},
	}}
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
