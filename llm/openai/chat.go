package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"iter"

	"weft.dev/weft/event"
	"weft.dev/weft/llm"
)

// Chat is an [llm.Provider] for the Chat Completions API
// (POST {BaseURL}/chat/completions), streamed with
// stream_options.include_usage. It is the dialect of OpenAI-compatible
// servers; reasoning arrives in the non-standard reasoning_content or
// reasoning delta fields (vLLM, DeepSeek, OpenRouter, Ollama).
//
// A Chat is safe for concurrent use. Its errors are [*llm.Error] with
// Provider "openai-chat", or a wrapped context error.
type Chat struct {
	c    *client
	tail tailCache // the encoding of the last request's fields but its messages
}

// NewChat returns a Chat provider for cfg. It fails if cfg is invalid.
func NewChat(cfg Config) (*Chat, error) {
	c, err := newClient(ChatProviderName, cfg)
	if err != nil {
		return nil, err
	}
	return &Chat{c: c}, nil
}

// Stream implements [llm.Provider]. The iterator is single-use; it sends
// the request when iteration starts and closes the response when it ends,
// including on break.
func (p *Chat) Stream(ctx context.Context, req *llm.Request) iter.Seq2[llm.StreamEvent, error] {
	return func(yield func(llm.StreamEvent, error) bool) {
		body, err := p.chatBody(req)
		if err != nil {
			yield(llm.StreamEvent{}, p.c.badRequest(err))
			return
		}
		p.c.stream(ctx, req.Model, "chat/completions", body, yield,
			&chatState{c: p.c, yield: yieldEvent(yield), calls: map[int]int{}})
	}
}

// chatChunk is the part of a chat.completion.chunk weft reads.
type chatChunk struct {
	Choices []struct {
		Index int `json:"index"`
		Delta struct {
			Content          rawText `json:"content"`
			Refusal          rawText `json:"refusal"`
			ReasoningContent rawText `json:"reasoning_content"`
			Reasoning        rawText `json:"reasoning"`
			ToolCalls        []struct {
				Index    *int   `json:"index"`
				ID       string `json:"id"`
				Function struct {
					Name      string   `json:"name"`
					Arguments argsText `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens        int64 `json:"prompt_tokens"`
		CompletionTokens    int64 `json:"completion_tokens"`
		PromptTokensDetails *struct {
			CachedTokens int64 `json:"cached_tokens"`
		} `json:"prompt_tokens_details"`
		CompletionTokensDetails *struct {
			ReasoningTokens int64 `json:"reasoning_tokens"`
		} `json:"completion_tokens_details"`
	} `json:"usage"`
	Error json.RawMessage `json:"error"`
}

// chatCall is one tool call of the response, by weft's index.
type chatCall struct {
	announced bool // ID and Name were yielded
	args      runeJoiner
}

// chatState is the decoding state of one Chat stream.
type chatState struct {
	c         *client
	yield     func(llm.StreamEvent) bool
	calls     map[int]int // server tool-call index -> weft index
	callState []chatCall
	text      runeJoiner
	reasoning runeJoiner
	usage     *event.TokenUsage
	finish    string
}

// handle handles the data of one event. It returns done at "[DONE]".
func (s *chatState) handle(data []byte) (done bool, err error) {
	if bytes.Equal(data, doneMarker) {
		return true, nil
	}
	var ch chatChunk
	if err := json.Unmarshal(data, &ch); err != nil {
		return false, s.c.malformed(data, err)
	}
	if len(ch.Error) > 0 && string(ch.Error) != "null" {
		return false, s.c.streamError(ch.Error)
	}
	if u := ch.Usage; u != nil {
		tu := &event.TokenUsage{InputTokens: u.PromptTokens, OutputTokens: u.CompletionTokens}
		if u.PromptTokensDetails != nil {
			tu.CacheReadTokens = u.PromptTokensDetails.CachedTokens
		}
		if u.CompletionTokensDetails != nil {
			tu.ReasoningTokens = u.CompletionTokensDetails.ReasoningTokens
		}
		s.usage = tu
	}
	for i := range ch.Choices {
		choice := &ch.Choices[i]
		if choice.Index != 0 {
			continue // weft asks for one choice
		}
		d := &choice.Delta
		reasoning := d.ReasoningContent
		if len(reasoning) == 0 {
			// vLLM renamed reasoning_content to reasoning; a server in
			// transition may send both, so only one is read.
			reasoning = d.Reasoning
		}
		if len(reasoning) > 0 {
			if r := s.reasoning.push(reasoning); r != "" && !s.yield(llm.StreamEvent{Reasoning: r}) {
				return false, errStopped
			}
		}
		for _, text := range []rawText{d.Content, d.Refusal} {
			if len(text) > 0 {
				if t := s.text.push(text); t != "" && !s.yield(llm.StreamEvent{Text: t}) {
					return false, errStopped
				}
			}
		}
		for j, tc := range d.ToolCalls {
			key := j
			if tc.Index != nil {
				key = *tc.Index
			}
			idx, ok := s.calls[key]
			if !ok {
				idx = len(s.callState)
				s.calls[key] = idx
				s.callState = append(s.callState, chatCall{})
			}
			call := &s.callState[idx]
			delta := llm.ToolCallDelta{Index: idx, Arguments: call.args.push(tc.Function.Arguments)}
			if !call.announced && (tc.ID != "" || tc.Function.Name != "") {
				delta.ID, delta.Name = tc.ID, tc.Function.Name
				call.announced = tc.ID != "" && tc.Function.Name != ""
			}
			if delta.ID == "" && delta.Name == "" && delta.Arguments == "" {
				continue
			}
			if !s.yield(llm.StreamEvent{ToolCall: &delta}) {
				return false, errStopped
			}
		}
		if fr := choice.FinishReason; fr != nil && *fr != "" {
			s.finish = *fr
		}
	}
	return false, nil
}

func (s *chatState) finished() bool { return s.finish != "" }

// end yields what a finished stream still owes: held-back bytes, the usage
// and the Finish, or the error for a stream without a finish_reason.
func (s *chatState) end() (string, error) {
	if s.finish == "" {
		return "", s.c.cut("a finish_reason")
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
	reason := chatFinishReason(s.finish, len(s.callState) > 0)
	if !s.yield(llm.StreamEvent{Finish: &llm.Finish{Reason: reason}}) {
		return "", errStopped
	}
	return reason, nil
}

// chatFinishReason normalises a Chat finish_reason. A server that says
// "stop" after asking for tool calls (older Ollama) means tool_calls.
func chatFinishReason(fr string, hadToolCalls bool) string {
	switch fr {
	case "tool_calls", "function_call":
		return llm.FinishToolCalls
	case "stop", "eos", "end_turn", "stop_sequence":
		if hadToolCalls {
			return llm.FinishToolCalls
		}
		return llm.FinishStop
	case "length", "max_tokens":
		return llm.FinishLength
	default:
		return llm.FinishOther
	}
}

var doneMarker = []byte("[DONE]")
