package anthropic

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"weft.dev/weft/event"
	"weft.dev/weft/internal/llmhttp"
	"weft.dev/weft/internal/sse"
	"weft.dev/weft/llm"
)

// providerName is the Provider field of every *llm.Error this package returns.
const providerName = "anthropic"

// DefaultBaseURL is the API endpoint used when [Config.BaseURL] is empty.
const DefaultBaseURL = "https://api.anthropic.com/"

// apiVersion is the anthropic-version header sent with every request:
// the version the SDK weft used before sent (anthropic-sdk-go v2.15.0).
const apiVersion = "2026-10-21"

// DefaultMaxTokens is the max_tokens sent when neither the request nor
// [Config.MaxTokens] sets one. The Messages API requires a value.
const DefaultMaxTokens = 8192

// Config configures a [Provider]. The zero value of each field is documented
// beside it; New copies the Config, so later changes have no effect.
type Config struct {
	// APIKey authenticates requests, sent as "Authorization: Bearer <APIKey>".
	// Empty is allowed only if Headers carries an Authorization or X-Api-Key
	// header, e.g. for a gateway.
	APIKey string
	// BaseURL is the API endpoint; empty means [DefaultBaseURL].
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
	hc        *http.Client
	url       string // the messages endpoint
	key       string
	headers   http.Header
	logger    *slog.Logger
	maxTokens int
	thinking  thinkingConfig
}

// New returns a Provider for cfg. It fails if cfg is inconsistent: no
// credentials, a BaseURL that is not an absolute http(s) URL, a negative
// MaxTokens or ThinkingBudget, a ThinkingBudget not below MaxTokens, or
// both ThinkingBudget and AdaptiveThinking. It reads no environment
// variable.
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
	base := DefaultBaseURL
	if cfg.BaseURL != "" {
		base = strings.TrimSuffix(strings.TrimSuffix(cfg.BaseURL, "/"), "/v1") + "/"
	}
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("anthropic: BaseURL %q is not an absolute http(s) URL", cfg.BaseURL)
	}
	p := &Provider{
		hc:        llmhttp.Client(cfg.HTTPClient, cfg.Timeouts),
		url:       u.JoinPath("v1/messages").String(),
		key:       cfg.APIKey,
		headers:   cfg.Headers.Clone(),
		logger:    cfg.Logger,
		maxTokens: cfg.MaxTokens,
	}
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
		p.thinking = thinkingConfig{Type: "enabled", BudgetTokens: int64(cfg.ThinkingBudget)}
	case cfg.AdaptiveThinking:
		p.thinking = thinkingConfig{Type: "adaptive"}
	}
	return p, nil
}

// newRequest builds the HTTP request of req.
func (p *Provider) newRequest(ctx context.Context, req *llm.Request) (*http.Request, int, error) {
	body, err := p.params(req)
	if err != nil {
		return nil, 0, err
	}
	b, err := json.Marshal(body)
	if err != nil {
		return nil, 0, fmt.Errorf("encode request: %w", err)
	}
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, p.url, bytes.NewReader(b))
	if err != nil {
		return nil, 0, err
	}
	hr.Header.Set("Content-Type", "application/json")
	hr.Header.Set("Accept", "application/json")
	hr.Header.Set("anthropic-version", apiVersion)
	if p.key != "" {
		hr.Header.Set("Authorization", "Bearer "+p.key)
	}
	for k, vs := range p.headers {
		for _, v := range vs {
			hr.Header.Add(k, v)
		}
	}
	return hr, len(body.Messages), nil
}

// Stream sends req and streams the response. See [llm.Provider] for the
// iterator's contract. Errors are *llm.Error values, except for a
// cancelled or expired ctx, which yields ctx.Err() wrapped.
func (p *Provider) Stream(ctx context.Context, req *llm.Request) iter.Seq2[llm.StreamEvent, error] {
	return func(yield func(llm.StreamEvent, error) bool) {
		hr, n, err := p.newRequest(ctx, req)
		if err != nil {
			yield(llm.StreamEvent{}, &llm.Error{Provider: providerName, Kind: llm.KindBadRequest, Err: err})
			return
		}
		p.logger.DebugContext(ctx, "anthropic request", "model", req.Model, "messages", n, "tools", len(req.Tools))

		res, err := p.hc.Do(hr)
		if err != nil {
			yield(llm.StreamEvent{}, classify(ctx, err, nil))
			return
		}
		defer res.Body.Close()
		if res.StatusCode < 200 || res.StatusCode > 299 {
			yield(llm.StreamEvent{}, statusError(hr, res))
			return
		}

		dec := sse.NewDecoder(res.Body)
		d := decoder{toolIndex: map[int64]int{}}
		var out []llm.StreamEvent
		for dec.Next() {
			ev := dec.Event()
			data := bytes.TrimSuffix(ev.Data, []byte("\n"))
			switch ev.Type {
			case "ping", "":
				continue
			case "error":
				yield(llm.StreamEvent{}, eventError(data))
				return
			}
			if len(data) == 0 {
				continue
			}
			var se streamEvent
			if err := json.Unmarshal(data, &se); err != nil {
				yield(llm.StreamEvent{}, &llm.Error{Provider: providerName, Kind: llm.KindMalformed, Err: fmt.Errorf("decode stream event: %w", err)})
				return
			}
			out, err = d.handle(&se, out[:0])
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
		if err := dec.Err(); err != nil {
			yield(llm.StreamEvent{}, classify(ctx, err, res))
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

// classify turns an error of the exchange into an *llm.Error, or ctx.Err()
// wrapped if ctx is done. res is the response, if its body was being read.
func classify(ctx context.Context, err error, res *http.Response) error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		return fmt.Errorf("anthropic: stream: %w", ctxErr)
	}
	if e := llm.TimeoutFrom(providerName, err); e != nil {
		return e
	}
	if errors.Is(err, bufio.ErrTooLong) {
		return &llm.Error{Provider: providerName, Kind: llm.KindMalformed, Err: fmt.Errorf("decode stream event: %w", err)}
	}
	if res != nil {
		// The response had started: the body broke off.
		return &llm.Error{Provider: providerName, Kind: llm.KindStreamCut, Retryable: true, Err: fmt.Errorf("read stream: %w", err)}
	}
	return &llm.Error{Provider: providerName, Kind: llm.KindConnection, Retryable: true, Err: err}
}

// maxErrorBody bounds the bytes of an error response kept for its message.
const maxErrorBody = 64 << 10

// statusError classifies an HTTP error response by its status. Its
// message is the SDK's: the request, the status, the request ID and the
// body.
func statusError(hr *http.Request, res *http.Response) error {
	raw, _ := io.ReadAll(io.LimitReader(res.Body, maxErrorBody))
	msg := fmt.Sprintf("%s %q: %d %s", hr.Method, hr.URL, res.StatusCode, http.StatusText(res.StatusCode))
	if id := res.Header.Get("Request-Id"); id != "" {
		msg += fmt.Sprintf(" (Request-ID: %s)", id)
	}
	if body := strings.TrimSpace(string(raw)); body != "" {
		msg += " " + body
	}
	h := res.Header
	ra := llm.ParseRetryAfter(h.Get("Retry-After"), h.Get("Retry-After-Ms"), time.Now())
	return llm.Overflow(llm.StatusError(providerName, res.StatusCode, ra, errors.New(msg)), overflowWording)
}

// overflowWording is how Anthropic says that a request exceeded the
// model's context window (an invalid_request_error, HTTP 400).
const overflowWording = "prompt is too long"

// eventError classifies an "error" event of the stream by its error type.
func eventError(data []byte) *llm.Error {
	var body struct {
		Error struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
	}
	_ = json.Unmarshal(data, &body)
	typ := body.Error.Type
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
	msg := body.Error.Message
	if msg == "" {
		msg = string(data)
	}
	if typ == "" {
		typ = "unknown"
	}
	e.Err = fmt.Errorf("error event %s: %s", typ, msg)
	return llm.Overflow(e, overflowWording)
}

// usage is the usage object of message_start's message and of
// message_delta.
type usage struct {
	InputTokens              int64 `json:"input_tokens"`
	OutputTokens             int64 `json:"output_tokens"`
	CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
	CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
	OutputTokensDetails      struct {
		ThinkingTokens int64 `json:"thinking_tokens"`
	} `json:"output_tokens_details"`
}

func (u *usage) tokens() event.TokenUsage {
	return event.TokenUsage{
		InputTokens:      u.InputTokens,
		OutputTokens:     u.OutputTokens,
		CacheReadTokens:  u.CacheReadInputTokens,
		CacheWriteTokens: u.CacheCreationInputTokens,
		ReasoningTokens:  u.OutputTokensDetails.ThinkingTokens,
	}
}

// streamEvent is the part of a Messages stream event weft reads; which
// fields are set depends on Type.
type streamEvent struct {
	Type    string `json:"type"`
	Index   int64  `json:"index"`
	Message struct {
		Usage usage `json:"usage"`
	} `json:"message"`
	ContentBlock struct {
		Type      string          `json:"type"`
		Text      string          `json:"text"`
		ID        string          `json:"id"`
		Name      string          `json:"name"`
		Input     json.RawMessage `json:"input"`
		Thinking  string          `json:"thinking"`
		Signature string          `json:"signature"`
		Data      string          `json:"data"`
	} `json:"content_block"`
	Delta struct {
		Type        string `json:"type"`
		Text        string `json:"text"`
		PartialJSON string `json:"partial_json"`
		Thinking    string `json:"thinking"`
		Signature   string `json:"signature"`
		StopReason  string `json:"stop_reason"`
	} `json:"delta"`
	Usage usage `json:"usage"`
}

// decoder turns the stream's events into weft stream events. It holds
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
	stopReason string
	stopped    bool
}

// handle appends the events ev produces to out. It sets d.stopped at
// message_stop, after appending the Finish event.
func (d *decoder) handle(ev *streamEvent, out []llm.StreamEvent) ([]llm.StreamEvent, error) {
	switch ev.Type {
	case "message_start":
		out = appendUsage(out, ev.Message.Usage.tokens())
	case "content_block_start":
		cb := &ev.ContentBlock
		switch cb.Type {
		case "text":
			if cb.Text != "" {
				out = append(out, llm.StreamEvent{Text: cb.Text})
			}
		case "tool_use":
			i := len(d.toolIndex)
			d.toolIndex[ev.Index] = i
			if raw := string(cb.Input); raw != "" && raw != "{}" && raw != "null" {
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
		delta := &ev.Delta
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
		out = appendUsage(out, ev.Usage.tokens())
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

func finishReason(r string) string {
	switch r {
	case "end_turn", "stop_sequence":
		return llm.FinishStop
	case "tool_use":
		return llm.FinishToolCalls
	case "max_tokens":
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
