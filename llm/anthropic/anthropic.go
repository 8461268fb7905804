package anthropic

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/anthropics/anthropic-sdk-go/v2/packages/param"

	"weft.dev/weft/event"
	"weft.dev/weft/internal/llmhttp"
	"weft.dev/weft/llm"
)

// providerName is the Provider field of every *llm.Error this package returns.
const providerName = "anthropic"

// DefaultMaxTokens is the max_tokens sent when neither the request nor
// [Config.MaxTokens] sets one. The Messages API requires a value.
const DefaultMaxTokens = 8192

// Config configures a [Provider]. The zero value of each field is documented
// beside it; New copies the Config, so later changes have no effect.
type Config struct {
	// APIKey authenticates requests (the SDK sends it as a bearer token).
	// Empty is allowed only if Headers carries an Authorization or X-Api-Key
	// header, e.g. for a gateway.
	APIKey string
	// BaseURL is the API endpoint; empty means https://api.anthropic.com/.
	// Requests go to BaseURL/v1/messages; a BaseURL that already ends in
	// /v1 (the form of the other providers' base URLs) is taken without
	// it, so both https://api.anthropic.com and https://api.anthropic.com/v1
	// work.
	BaseURL string
	// HTTPClient sends the requests; nil means http.DefaultClient. A
	// whole request is bounded by the context and Timeouts, not by the
	// client, because a streaming response may legitimately last minutes.
	HTTPClient *http.Client
	// Timeouts bound getting a connection, the wait for the first byte
	// and each wait between stream chunks; a hit limit is a retryable
	// [llm.KindTimeout] error. The zero value means the defaults of
	// [llm.Timeouts].
	Timeouts llm.Timeouts
	// Headers are added to every request (e.g. anthropic-beta); nil adds none.
	Headers http.Header
	// Logger receives debug records of each request; nil means silent.
	Logger *slog.Logger
	// MaxTokens is the max_tokens used when a request leaves
	// [llm.Request.MaxTokens] at zero; zero means [DefaultMaxTokens].
	MaxTokens int
	// ThinkingBudget, if positive, enables extended thinking with that many
	// budget tokens (the API wants at least 1024 and fewer than max_tokens).
	// Zero leaves thinking off.
	ThinkingBudget int
	// AdaptiveThinking enables adaptive thinking (the model decides how much
	// to think). It cannot be combined with ThinkingBudget.
	AdaptiveThinking bool
}

// Provider streams responses from the Anthropic Messages API. It is safe
// for concurrent use; it holds no per-request state.
type Provider struct {
	client    anthropic.Client
	logger    *slog.Logger
	maxTokens int
	thinking  anthropic.ThinkingConfigParamUnion
}

// New returns a Provider for cfg. It fails if cfg is inconsistent: no
// credentials, a negative MaxTokens or ThinkingBudget, a ThinkingBudget not
// below MaxTokens, or both ThinkingBudget and AdaptiveThinking.
func New(cfg Config) (*Provider, error) {
	if cfg.APIKey == "" && cfg.Headers.Get("Authorization") == "" && cfg.Headers.Get("X-Api-Key") == "" {
		return nil, errors.New("anthropic: APIKey is required (or an Authorization or X-Api-Key header)")
	}
	if cfg.MaxTokens < 0 {
		return nil, fmt.Errorf("anthropic: MaxTokens %d is negative", cfg.MaxTokens)
	}
	if cfg.ThinkingBudget < 0 {
		return nil, fmt.Errorf("anthropic: ThinkingBudget %d is negative", cfg.ThinkingBudget)
	}
	if cfg.ThinkingBudget > 0 && cfg.AdaptiveThinking {
		return nil, errors.New("anthropic: set ThinkingBudget or AdaptiveThinking, not both")
	}
	p := &Provider{logger: cfg.Logger, maxTokens: cfg.MaxTokens}
	if p.logger == nil {
		p.logger = slog.New(slog.DiscardHandler)
	}
	if p.maxTokens == 0 {
		p.maxTokens = DefaultMaxTokens
	}
	switch {
	case cfg.ThinkingBudget > 0:
		if cfg.ThinkingBudget >= p.maxTokens {
			return nil, fmt.Errorf("anthropic: ThinkingBudget %d must be below MaxTokens %d", cfg.ThinkingBudget, p.maxTokens)
		}
		p.thinking.OfEnabled = &anthropic.ThinkingConfigEnabledParam{BudgetTokens: int64(cfg.ThinkingBudget)}
	case cfg.AdaptiveThinking:
		p.thinking.OfAdaptive = &anthropic.ThinkingConfigAdaptiveParam{}
	}

	httpClient := llmhttp.Client(cfg.HTTPClient, cfg.Timeouts)
	opts := []option.RequestOption{
		// Without this marker NewClient prepends DefaultClientOptions, which
		// read ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL, ANTHROPIC_CUSTOM_HEADERS,
		// profiles and more from the environment (client.go, NewClient).
		option.WithoutEnvironmentDefaults(),
		option.WithHTTPClient(httpClient),
		option.WithMaxRetries(0),
	}
	if cfg.APIKey != "" {
		opts = append(opts, option.WithAPIKey(cfg.APIKey))
	}
	if cfg.BaseURL != "" {
		base := strings.TrimSuffix(strings.TrimSuffix(cfg.BaseURL, "/"), "/v1")
		opts = append(opts, option.WithBaseURL(base+"/"))
	}
	for k, vs := range cfg.Headers {
		for _, v := range vs {
			opts = append(opts, option.WithHeaderAdd(k, v))
		}
	}
	p.client = anthropic.NewClient(opts...)
	return p, nil
}

// Stream sends req and streams the response. See [llm.Provider] for the
// iterator's contract. Errors are *llm.Error values, except for a
// cancelled or expired ctx, which yields ctx.Err() wrapped.
func (p *Provider) Stream(ctx context.Context, req *llm.Request) iter.Seq2[llm.StreamEvent, error] {
	return func(yield func(llm.StreamEvent, error) bool) {
		params, err := p.params(req)
		if err != nil {
			yield(llm.StreamEvent{}, &llm.Error{Provider: providerName, Kind: llm.KindBadRequest, Err: err})
			return
		}
		p.logger.DebugContext(ctx, "anthropic request", "model", req.Model, "messages", len(params.Messages), "tools", len(params.Tools))

		var resp *http.Response
		stream := p.client.Messages.NewStreaming(ctx, params, option.WithResponseInto(&resp))
		defer stream.Close()

		d := decoder{toolIndex: map[int64]int{}}
		var out []llm.StreamEvent
		for stream.Next() {
			out, err = d.handle(stream.Current(), out[:0])
			for _, ev := range out {
				if !yield(ev, nil) {
					return
				}
			}
			if err != nil {
				yield(llm.StreamEvent{}, err)
				return
			}
			if d.stopped {
				return
			}
		}
		if err := stream.Err(); err != nil {
			yield(llm.StreamEvent{}, classify(ctx, err, resp))
			return
		}
		if ctx.Err() != nil {
			yield(llm.StreamEvent{}, fmt.Errorf("anthropic: stream: %w", ctx.Err()))
			return
		}
		yield(llm.StreamEvent{}, &llm.Error{
			Provider: providerName, Kind: llm.KindStreamCut, Retryable: true,
			Err: errors.New("stream ended without message_stop"),
		})
	}
}

// classify turns an error from the SDK into an *llm.Error, or ctx.Err()
// wrapped if ctx is done. resp is the HTTP response, if one arrived.
func classify(ctx context.Context, err error, resp *http.Response) error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		return fmt.Errorf("anthropic: stream: %w", ctxErr)
	}
	if e := llm.TimeoutFrom(providerName, err); e != nil {
		return e
	}
	var apiErr *anthropic.Error
	if errors.As(err, &apiErr) {
		if apiErr.StatusCode >= 400 {
			var ra time.Duration
			if apiErr.Response != nil {
				h := apiErr.Response.Header
				ra = llm.ParseRetryAfter(h.Get("Retry-After"), h.Get("Retry-After-Ms"), time.Now())
			}
			return llm.Overflow(llm.StatusError(providerName, apiErr.StatusCode, ra, err), overflowWording)
		}
		// An "error" SSE event inside a 200 response: the SDK builds an
		// *anthropic.Error with the response's status (200), so the kind
		// comes from the error type in the event body.
		return eventError(apiErr)
	}
	var syntaxErr *json.SyntaxError
	var typeErr *json.UnmarshalTypeError
	if errors.As(err, &syntaxErr) || errors.As(err, &typeErr) {
		return &llm.Error{Provider: providerName, Kind: llm.KindMalformed, Err: fmt.Errorf("decode stream event: %w", err)}
	}
	if resp != nil && resp.StatusCode < 400 {
		// The response had started: the body broke off.
		return &llm.Error{Provider: providerName, Kind: llm.KindStreamCut, Retryable: true, Err: fmt.Errorf("read stream: %w", err)}
	}
	return &llm.Error{Provider: providerName, Kind: llm.KindConnection, Retryable: true, Err: err}
}

// overflowWording is how Anthropic says that a request exceeded the
// model's context window (an invalid_request_error, HTTP 400).
const overflowWording = "prompt is too long"

// eventError classifies an "error" event of the stream by its error type.
func eventError(apiErr *anthropic.Error) *llm.Error {
	typ := string(apiErr.Type())
	e := &llm.Error{Provider: providerName}
	switch typ {
	case "rate_limit_error":
		e.Kind, e.Retryable = llm.KindRateLimited, true
	case "authentication_error", "permission_error":
		e.Kind = llm.KindAuth
	case "invalid_request_error", "not_found_error", "billing_error", "request_too_large":
		e.Kind = llm.KindBadRequest
	default: // overloaded_error, api_error, timeout_error and unknown types
		e.Kind, e.Retryable = llm.KindServer, true
	}
	msg := apiErr.Message
	if msg == "" {
		msg = apiErr.RawJSON()
	}
	if typ == "" {
		typ = "unknown"
	}
	e.Err = fmt.Errorf("error event %s: %s", typ, msg)
	return llm.Overflow(e, overflowWording)
}

// decoder turns the SDK's stream events into weft stream events. It holds
// the state of one response.
type decoder struct {
	// toolIndex maps a content block index to its 0-based tool call index.
	toolIndex map[int64]int
	// toolArgs records, per content block index, whether input_json_delta
	// fragments arrived for a tool_use block.
	toolArgs   map[int64]bool
	toolInput  map[int64]string
	thinking   []thinkingBlock
	thinkingAt map[int64]int
	stopReason anthropic.StopReason
	stopped    bool
}

// handle appends the events ev produces to out. It sets d.stopped at
// message_stop, after appending the Finish event.
func (d *decoder) handle(ev anthropic.MessageStreamEventUnion, out []llm.StreamEvent) ([]llm.StreamEvent, error) {
	switch ev.Type {
	case "message_start":
		u := ev.Message.Usage
		out = appendUsage(out, event.TokenUsage{
			InputTokens:      u.InputTokens,
			OutputTokens:     u.OutputTokens,
			CacheReadTokens:  u.CacheReadInputTokens,
			CacheWriteTokens: u.CacheCreationInputTokens,
			ReasoningTokens:  u.OutputTokensDetails.ThinkingTokens,
		})
	case "content_block_start":
		cb := ev.ContentBlock
		switch cb.Type {
		case "text":
			if cb.Text != "" {
				out = append(out, llm.StreamEvent{Text: cb.Text})
			}
		case "tool_use":
			i := len(d.toolIndex)
			d.toolIndex[ev.Index] = i
			if raw := cb.JSON.Input.Raw(); raw != "" && raw != "{}" && raw != "null" {
				if d.toolInput == nil {
					d.toolInput = map[int64]string{}
				}
				d.toolInput[ev.Index] = raw
			}
			out = append(out, llm.StreamEvent{ToolCall: &llm.ToolCallDelta{Index: i, ID: cb.ID, Name: cb.Name}})
		case "thinking":
			if d.thinkingAt == nil {
				d.thinkingAt = map[int64]int{}
			}
			d.thinkingAt[ev.Index] = len(d.thinking)
			d.thinking = append(d.thinking, thinkingBlock{Type: "thinking", Thinking: cb.Thinking, Signature: cb.Signature})
			if cb.Thinking != "" {
				out = append(out, llm.StreamEvent{Reasoning: cb.Thinking})
			}
		case "redacted_thinking":
			d.thinking = append(d.thinking, thinkingBlock{Type: "redacted_thinking", Data: cb.Data})
		}
	case "content_block_delta":
		delta := ev.Delta
		switch delta.Type {
		case "text_delta":
			if delta.Text != "" {
				out = append(out, llm.StreamEvent{Text: delta.Text})
			}
		case "input_json_delta":
			i, ok := d.toolIndex[ev.Index]
			if !ok {
				return out, &llm.Error{Provider: providerName, Kind: llm.KindMalformed,
					Err: fmt.Errorf("input_json_delta for content block %d, which is not a tool_use block", ev.Index)}
			}
			if delta.PartialJSON != "" {
				if d.toolArgs == nil {
					d.toolArgs = map[int64]bool{}
				}
				d.toolArgs[ev.Index] = true
				out = append(out, llm.StreamEvent{ToolCall: &llm.ToolCallDelta{Index: i, Arguments: delta.PartialJSON}})
			}
		case "thinking_delta":
			if j, ok := d.thinkingAt[ev.Index]; ok {
				d.thinking[j].Thinking += delta.Thinking
			}
			if delta.Thinking != "" {
				out = append(out, llm.StreamEvent{Reasoning: delta.Thinking})
			}
		case "signature_delta":
			if j, ok := d.thinkingAt[ev.Index]; ok {
				d.thinking[j].Signature += delta.Signature
			}
		}
	case "content_block_stop":
		if i, ok := d.toolIndex[ev.Index]; ok && !d.toolArgs[ev.Index] {
			// A tool_use block without input_json_delta: its input is the
			// one in content_block_start, normally {}.
			args := d.toolInput[ev.Index]
			if args == "" {
				args = "{}"
			}
			out = append(out, llm.StreamEvent{ToolCall: &llm.ToolCallDelta{Index: i, Arguments: args}})
		}
	case "message_delta":
		if ev.Delta.StopReason != "" {
			d.stopReason = ev.Delta.StopReason
		}
		u := ev.Usage
		out = appendUsage(out, event.TokenUsage{
			InputTokens:      u.InputTokens,
			OutputTokens:     u.OutputTokens,
			CacheReadTokens:  u.CacheReadInputTokens,
			CacheWriteTokens: u.CacheCreationInputTokens,
			ReasoningTokens:  u.OutputTokensDetails.ThinkingTokens,
		})
	case "message_stop":
		f := &llm.Finish{Reason: finishReason(d.stopReason)}
		if len(d.thinking) > 0 {
			state, err := json.Marshal(providerState{Provider: providerName, Thinking: d.thinking})
			if err != nil {
				return out, &llm.Error{Provider: providerName, Kind: llm.KindMalformed, Err: fmt.Errorf("encode thinking state: %w", err)}
			}
			f.ProviderState = state
		}
		out = append(out, llm.StreamEvent{Finish: f})
		d.stopped = true
	}
	return out, nil
}

func appendUsage(out []llm.StreamEvent, u event.TokenUsage) []llm.StreamEvent {
	if u == (event.TokenUsage{}) {
		return out
	}
	return append(out, llm.StreamEvent{Usage: &u})
}

func finishReason(r anthropic.StopReason) string {
	switch r {
	case anthropic.StopReasonEndTurn, anthropic.StopReasonStopSequence:
		return llm.FinishStop
	case anthropic.StopReasonToolUse:
		return llm.FinishToolCalls
	case anthropic.StopReasonMaxTokens:
		return llm.FinishLength
	default:
		return llm.FinishOther
	}
}

// providerState is the JSON of Finish.ProviderState and Message.ProviderState.
type providerState struct {
	Provider string          `json:"provider"`
	Thinking []thinkingBlock `json:"thinking,omitempty"`
}

// thinkingBlock is a thinking or redacted_thinking content block.
type thinkingBlock struct {
	Type      string `json:"type"`
	Thinking  string `json:"thinking,omitempty"`
	Signature string `json:"signature,omitempty"`
	Data      string `json:"data,omitempty"`
}

// params builds the Messages API request for req.
func (p *Provider) params(req *llm.Request) (anthropic.MessageNewParams, error) {
	var params anthropic.MessageNewParams
	if req == nil {
		return params, errors.New("nil request")
	}
	if req.Model == "" {
		return params, errors.New("request has no model")
	}
	params.Model = anthropic.Model(req.Model)
	params.MaxTokens = int64(p.maxTokens)
	if req.MaxTokens > 0 {
		params.MaxTokens = int64(req.MaxTokens)
	}
	if req.Temperature != nil {
		// SDK v2 no longer models temperature (deprecated by the API), so it
		// travels as an extra field; models that reject it return a 400.
		params.SetExtraFields(map[string]any{"temperature": *req.Temperature})
	}
	params.Thinking = p.thinking
	if req.System != "" {
		params.System = []anthropic.TextBlockParam{{Text: req.System}}
	}
	msgs, err := messages(req.Messages)
	if err != nil {
		return params, err
	}
	params.Messages = msgs
	for i, t := range req.Tools {
		if t.Name == "" {
			return params, fmt.Errorf("tools[%d]: no name", i)
		}
		schema := t.InputSchema
		if len(schema) == 0 {
			schema = json.RawMessage(`{"type":"object"}`)
		} else if !json.Valid(schema) {
			return params, fmt.Errorf("tool %q: input schema is not valid JSON", t.Name)
		}
		tp := &anthropic.ToolParam{
			Name: t.Name,
			// Override sends the caller's JSON Schema verbatim instead of
			// re-shaping it into the SDK's properties/required fields.
			InputSchema: param.Override[anthropic.ToolInputSchemaParam](schema),
		}
		if t.Description != "" {
			tp.Description = anthropic.String(t.Description)
		}
		params.Tools = append(params.Tools, anthropic.ToolUnionParam{OfTool: tp})
	}
	return params, nil
}

// turn is a message under construction; consecutive messages of one role
// are merged into one turn.
type turn struct {
	assistant bool
	blocks    []anthropic.ContentBlockParamUnion
}

// messages maps the transcript onto Messages API messages.
func messages(msgs []llm.Message) ([]anthropic.MessageParam, error) {
	var turns []turn
	add := func(assistant bool, blocks ...anthropic.ContentBlockParamUnion) {
		if len(blocks) == 0 {
			return
		}
		if n := len(turns); n > 0 && turns[n-1].assistant == assistant {
			turns[n-1].blocks = append(turns[n-1].blocks, blocks...)
			return
		}
		turns = append(turns, turn{assistant: assistant, blocks: blocks})
	}
	for i, m := range msgs {
		switch m.Role {
		case llm.RoleUser:
			if m.Content != "" {
				add(false, anthropic.NewTextBlock(m.Content))
			}
			for _, a := range m.Attachments {
				img, err := imageBlock(a)
				if err != nil {
					return nil, fmt.Errorf("messages[%d]: %w", i, err)
				}
				add(false, anthropic.ContentBlockParamUnion{OfImage: img})
			}
		case llm.RoleAssistant:
			var blocks []anthropic.ContentBlockParamUnion
			blocks = append(blocks, thinkingBlocks(m.ProviderState)...)
			if m.Content != "" {
				blocks = append(blocks, anthropic.NewTextBlock(m.Content))
			}
			for _, tc := range m.ToolCalls {
				blocks = append(blocks, anthropic.NewToolUseBlock(tc.ID, toolInput(tc.Arguments), tc.Name))
			}
			add(true, blocks...)
		case llm.RoleTool:
			if m.ToolCallID == "" {
				return nil, fmt.Errorf("messages[%d]: tool result without a tool call id", i)
			}
			tr := &anthropic.ToolResultBlockParam{ToolUseID: m.ToolCallID}
			if m.Content != "" {
				tr.Content = []anthropic.ToolResultBlockParamContentUnion{{OfText: &anthropic.TextBlockParam{Text: m.Content}}}
			}
			for _, a := range m.Attachments {
				img, err := imageBlock(a)
				if err != nil {
					return nil, fmt.Errorf("messages[%d]: %w", i, err)
				}
				tr.Content = append(tr.Content, anthropic.ToolResultBlockParamContentUnion{OfImage: img})
			}
			if m.IsError {
				tr.IsError = anthropic.Bool(true)
			}
			add(false, anthropic.ContentBlockParamUnion{OfToolResult: tr})
		default:
			return nil, fmt.Errorf("messages[%d]: unknown role %q", i, m.Role)
		}
	}
	out := make([]anthropic.MessageParam, len(turns))
	for i, t := range turns {
		if t.assistant {
			out[i] = anthropic.NewAssistantMessage(t.blocks...)
		} else {
			out[i] = anthropic.NewUserMessage(t.blocks...)
		}
	}
	return out, nil
}

// thinkingBlocks decodes the thinking blocks of an assistant message's
// provider state. State that is not this provider's yields none: its
// signatures could not be verified anyway.
func thinkingBlocks(state json.RawMessage) []anthropic.ContentBlockParamUnion {
	if len(state) == 0 {
		return nil
	}
	var st providerState
	if err := json.Unmarshal(state, &st); err != nil || st.Provider != providerName {
		return nil
	}
	var blocks []anthropic.ContentBlockParamUnion
	for _, b := range st.Thinking {
		switch b.Type {
		case "thinking":
			blocks = append(blocks, anthropic.NewThinkingBlock(b.Signature, b.Thinking))
		case "redacted_thinking":
			blocks = append(blocks, anthropic.NewRedactedThinkingBlock(b.Data))
		}
	}
	return blocks
}

// toolInput returns the tool_use input for a call's arguments text: the
// object itself if it is a JSON object, {} if empty, else {"_raw": text}.
func toolInput(args string) any {
	if args == "" {
		return json.RawMessage(`{}`)
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal([]byte(args), &obj); err == nil && obj != nil {
		return json.RawMessage(args)
	}
	return map[string]string{"_raw": args}
}
