package openai

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/ssestream"

	"weft.dev/weft/internal/llmhttp"
	"weft.dev/weft/llm"
)

// Provider names used in [llm.Error.Provider].
const (
	ResponsesProviderName = "openai"
	ChatProviderName      = "openai-chat"
)

// DefaultBaseURL is the base URL used when [Config.BaseURL] is empty.
const DefaultBaseURL = "https://api.openai.com/v1/"

// Config configures [NewResponses] and [NewChat]. The constructors copy it;
// changing it afterwards has no effect. The zero value talks to
// [DefaultBaseURL] without credentials.
type Config struct {
	// APIKey is sent as "Authorization: Bearer <APIKey>". Empty sends no
	// Authorization header, as local servers (Ollama, llama.cpp) expect.
	APIKey string
	// BaseURL is the API root, e.g. "http://localhost:11434/v1". Empty means
	// [DefaultBaseURL]. The request path ("responses", "chat/completions")
	// is resolved against it.
	BaseURL string
	// HTTPClient sends the requests. Nil means [http.DefaultClient]. A
	// stream is bounded only by the context passed to Stream and by
	// Timeouts, so the client should have no overall Timeout.
	HTTPClient *http.Client
	// Timeouts bound getting a connection, the wait for the first byte
	// and each wait between stream chunks; a hit limit is a retryable
	// [llm.KindTimeout] error. The zero value means the defaults of
	// [llm.Timeouts].
	Timeouts llm.Timeouts
	// Headers are added to every request (e.g. OpenRouter's HTTP-Referer).
	// Nil means none.
	Headers map[string]string
	// Organization and Project, if set, are sent as the OpenAI-Organization
	// and OpenAI-Project headers.
	Organization string
	Project      string
	// Logger receives debug records about requests and stream outcomes.
	// Nil means silent. Errors are returned, not logged.
	Logger *slog.Logger

	// ReasoningEffort, if set, asks a reasoning model for this effort
	// ("none", "minimal", "low", "medium", "high", "xhigh"). Responses sends
	// reasoning.effort, asks for a reasoning summary and for encrypted
	// reasoning content to round-trip; Chat sends reasoning_effort. Empty
	// sends nothing and leaves the model's default.
	ReasoningEffort string
	// ReasoningSummary is the Responses reasoning.summary setting ("auto",
	// "concise", "detailed"). Empty means "auto" when ReasoningEffort is set;
	// "none" asks for no summary. Chat ignores it.
	ReasoningSummary string

	// MaxTokensField is the Chat request field MaxTokens is sent in:
	// "max_tokens" (the zero value's choice, understood by every compatible
	// server) or "max_completion_tokens" (required by OpenAI's reasoning
	// models). Responses always sends max_output_tokens.
	MaxTokensField string
	// ReasoningReplayField, if set, is the Chat assistant-message field that
	// carries an earlier message's reasoning back to the server, e.g.
	// "reasoning_content" for DeepSeek's thinking mode with tool calls. Empty
	// sends no reasoning back. Responses ignores it.
	ReasoningReplayField string

	// ExtraBody, if set, is a JSON object whose top-level fields are set in
	// every request body, after weft's own fields (so they win), e.g.
	// {"chat_template_kwargs":{"enable_thinking":true}} for vLLM.
	ExtraBody json.RawMessage
}

// client is what both providers share: the validated config and the SDK
// request options built from it.
type client struct {
	provider string
	cfg      Config
	log      *slog.Logger
	opts     []option.RequestOption
	// extra sets Config.ExtraBody's fields in a request's body; it goes
	// with each request, after the body (which Chat encodes itself).
	extra []option.RequestOption
}

func newClient(provider string, cfg Config) (*client, error) {
	cfg.Headers = cloneMap(cfg.Headers)
	cfg.ExtraBody = append(json.RawMessage(nil), cfg.ExtraBody...)
	c := &client{provider: provider, cfg: cfg, log: cfg.Logger}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}

	base := cfg.BaseURL
	if base == "" {
		base = DefaultBaseURL
	}
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%s: BaseURL %q is not an absolute http(s) URL", provider, base)
	}
	hc := llmhttp.Client(cfg.HTTPClient, cfg.Timeouts)
	// The SDK's own NewClient reads OPENAI_* environment variables; the
	// services are built from these options alone, so nothing comes from
	// the environment. The agent loop retries, so the SDK must not.
	c.opts = []option.RequestOption{
		option.WithHTTPClient(hc),
		option.WithBaseURL(base),
		option.WithMaxRetries(0),
	}
	if cfg.APIKey != "" {
		c.opts = append(c.opts, option.WithAPIKey(cfg.APIKey))
	}
	if cfg.Organization != "" {
		c.opts = append(c.opts, option.WithOrganization(cfg.Organization))
	}
	if cfg.Project != "" {
		c.opts = append(c.opts, option.WithProject(cfg.Project))
	}
	for k, v := range cfg.Headers {
		if k == "" || strings.ContainsAny(k, " \t\r\n:") {
			return nil, fmt.Errorf("%s: invalid header name %q", provider, k)
		}
		c.opts = append(c.opts, option.WithHeader(k, v))
	}
	switch cfg.MaxTokensField {
	case "", "max_tokens", "max_completion_tokens":
	default:
		return nil, fmt.Errorf("%s: MaxTokensField %q is neither max_tokens nor max_completion_tokens", provider, cfg.MaxTokensField)
	}
	if len(cfg.ExtraBody) > 0 {
		var fields map[string]json.RawMessage
		if err := json.Unmarshal(cfg.ExtraBody, &fields); err != nil || fields == nil {
			return nil, fmt.Errorf("%s: ExtraBody is not a JSON object: %v", provider, err)
		}
		for k, v := range fields {
			c.extra = append(c.extra, option.WithJSONSet(sjsonKey(k), v))
		}
	}
	return c, nil
}

// sjsonKey escapes the characters sjson treats as path syntax.
func sjsonKey(k string) string {
	var b strings.Builder
	for _, r := range k {
		if strings.ContainsRune(`.*?|#@\:!=<>%`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

func cloneMap(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// requestError classifies the error the SDK returned for a request that
// has not started streaming. res is the response, if one arrived.
func (c *client) requestError(ctx context.Context, err error, res *http.Response) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%s: request: %w", c.provider, ctx.Err())
	}
	if e := llm.TimeoutFrom(c.provider, err); e != nil {
		return e
	}
	var aerr *sdk.Error
	if errors.As(err, &aerr) {
		if aerr.Response != nil {
			res = aerr.Response
		}
		msg := aerr.Message
		if msg == "" && res != nil {
			msg = bodySnippet(res)
		}
		if aerr.Code != "" {
			msg = aerr.Code + ": " + msg
		}
		return c.statusError(aerr.StatusCode, res, errors.New(msg))
	}
	if res != nil && res.StatusCode >= 400 {
		// The SDK could not decode the error body (e.g. vLLM's
		// {"object":"error",...} or a proxy's HTML page).
		return c.statusError(res.StatusCode, res, errors.New(bodySnippet(res)))
	}
	var uerr *url.Error
	var nerr net.Error
	if errors.As(err, &uerr) || errors.As(err, &nerr) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return &llm.Error{Provider: c.provider, Kind: llm.KindConnection, Retryable: true, Err: err}
	}
	return &llm.Error{Provider: c.provider, Kind: llm.KindBadRequest, Err: fmt.Errorf("request: %w", err)}
}

func (c *client) statusError(status int, res *http.Response, err error) *llm.Error {
	var retryAfter time.Duration
	if res != nil {
		retryAfter = llm.ParseRetryAfter(res.Header.Get("Retry-After"), res.Header.Get("Retry-After-Ms"), time.Now())
	}
	return overflow(llm.StatusError(c.provider, status, retryAfter, err))
}

// overflow classifies e by how OpenAI (the context_length_exceeded code) and
// the OpenAI-compatible servers (vLLM, llama.cpp, Ollama) say that a
// request exceeded the model's context window.
func overflow(e *llm.Error) *llm.Error {
	return llm.Overflow(e, "context_length_exceeded", "maximum context length", "context window", "exceeds the context size")
}

// bodySnippet returns the start of an error response's body, which the SDK
// has already read and replaced with an in-memory copy.
func bodySnippet(res *http.Response) string {
	if res.Body == nil {
		return res.Status
	}
	b, _ := io.ReadAll(io.LimitReader(res.Body, 2048))
	s := strings.TrimSpace(string(b))
	var e struct {
		Message string `json:"message"`
		Error   any    `json:"error"`
		Detail  any    `json:"detail"`
	}
	if json.Unmarshal(b, &e) == nil {
		switch {
		case e.Message != "":
			return e.Message
		case e.Error != nil:
			if s, ok := e.Error.(string); ok {
				return s
			}
		}
	}
	if s == "" {
		return res.Status
	}
	return s
}

// streamReadError classifies an error that ended the reading of a stream.
func (c *client) streamReadError(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%s: stream: %w", c.provider, ctx.Err())
	}
	if e := llm.TimeoutFrom(c.provider, err); e != nil {
		return e
	}
	if errors.Is(err, bufio.ErrTooLong) {
		return &llm.Error{Provider: c.provider, Kind: llm.KindMalformed, Err: err}
	}
	return &llm.Error{Provider: c.provider, Kind: llm.KindStreamCut, Retryable: true, Err: fmt.Errorf("reading stream: %w", err)}
}

func (c *client) cut(what string) error {
	return &llm.Error{Provider: c.provider, Kind: llm.KindStreamCut, Retryable: true,
		Err: fmt.Errorf("stream ended without %s", what)}
}

func (c *client) malformed(data []byte, err error) error {
	return &llm.Error{Provider: c.provider, Kind: llm.KindMalformed,
		Err: fmt.Errorf("chunk %.200q: %w", data, err)}
}

// toolParameters turns a tool's JSON Schema into the SDK's map form without
// re-encoding its values (numbers, key order inside nested objects).
func toolParameters(name string, schema json.RawMessage) (map[string]any, error) {
	if len(schema) == 0 {
		return map[string]any{"type": "object", "properties": map[string]any{}}, nil
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(schema, &fields); err != nil || fields == nil {
		return nil, fmt.Errorf("tool %q: input schema is not a JSON object: %v", name, err)
	}
	out := make(map[string]any, len(fields))
	for k, v := range fields {
		out[k] = v
	}
	return out, nil
}

func (c *client) badRequest(err error) error {
	return &llm.Error{Provider: c.provider, Kind: llm.KindBadRequest, Err: err}
}

// openEvents checks a successful response and returns its event decoder.
func (c *client) openEvents(res *http.Response) (ssestream.Decoder, error) {
	if res == nil || res.Body == nil {
		return nil, &llm.Error{Provider: c.provider, Kind: llm.KindConnection, Retryable: true, Err: errors.New("no response body")}
	}
	if mt, _, _ := mime.ParseMediaType(res.Header.Get("Content-Type")); mt == "application/json" {
		// A server that ignores "stream": true answers with one JSON object.
		return nil, &llm.Error{Provider: c.provider, Kind: llm.KindMalformed,
			Err: fmt.Errorf("expected an event stream, got application/json: %s", bodySnippet(res))}
	}
	return ssestream.NewDecoder(res), nil
}

// errStopped reports that the consumer stopped iterating.
var errStopped = errors.New("consumer stopped")

// yieldEvent adapts an iterator's yield to event-only use.
func yieldEvent(yield func(llm.StreamEvent, error) bool) func(llm.StreamEvent) bool {
	return func(ev llm.StreamEvent) bool { return yield(ev, nil) }
}

// pump passes the data of each event of dec to handle until handle reports
// done or fails, or the stream ends. It returns nil at the end of the stream
// and when handle reports done; the caller checks for terminal evidence.
func pump(ctx context.Context, c *client, dec ssestream.Decoder, handle func([]byte) (bool, error)) error {
	for dec.Next() {
		data := bytes.TrimSpace(dec.Event().Data)
		if len(data) == 0 {
			continue
		}
		done, err := handle(data)
		if err != nil || done {
			return err
		}
	}
	if err := dec.Err(); err != nil {
		return c.streamReadError(ctx, err)
	}
	if ctx.Err() != nil {
		return fmt.Errorf("%s: stream: %w", c.provider, ctx.Err())
	}
	return nil
}

// streamError turns an error object sent inside a stream into an
// [*llm.Error]. A numeric HTTP-like code classifies it; otherwise it counts
// as a retryable server failure.
func (c *client) streamError(raw json.RawMessage) error {
	var e struct {
		Message string          `json:"message"`
		Type    string          `json:"type"`
		Code    json.RawMessage `json:"code"`
	}
	if err := json.Unmarshal(raw, &e); err != nil {
		// {"error": "text"}
		var s string
		if json.Unmarshal(raw, &s) == nil {
			e.Message = s
		} else {
			e.Message = string(raw)
		}
	}
	msg := e.Message
	if e.Type != "" {
		msg = e.Type + ": " + msg
	}
	err := fmt.Errorf("error in stream: %s", msg)
	var status int
	if json.Unmarshal(e.Code, &status) == nil && status >= 400 && status <= 599 {
		return overflow(llm.StatusError(c.provider, status, 0, err))
	}
	var code string
	_ = json.Unmarshal(e.Code, &code)
	return codeError(c.provider, code, err)
}

// codeError classifies an OpenAI error code string.
func codeError(provider, code string, err error) *llm.Error {
	e := &llm.Error{Provider: provider, Err: err}
	switch {
	case code == "context_length_exceeded":
		e.Kind = llm.KindContextOverflow
	case strings.Contains(code, "rate_limit"):
		e.Kind, e.Retryable = llm.KindRateLimited, true
	case code == "" || code == "server_error" || strings.Contains(code, "timeout") || strings.Contains(code, "overloaded"):
		e.Kind, e.Retryable = llm.KindServer, true
	case strings.Contains(code, "auth") || strings.Contains(code, "api_key"):
		e.Kind = llm.KindAuth
	default:
		e.Kind = llm.KindBadRequest
	}
	return e
}

// sdkStream is the part of the SDK's *ssestream.Stream the providers use:
// the request's error and closing the response. The events themselves are
// read from the response by [pump].
type sdkStream interface {
	Err() error
	Close() error
}

// streamState decodes one API dialect's events.
type streamState interface {
	// handle handles the data of one event; done reports the terminal event.
	handle(data []byte) (done bool, err error)
	// end yields what a finished stream still owes and returns the finish
	// reason, or the error for a stream without terminal evidence.
	end() (reason string, err error)
	// finished reports whether the stream's content is complete although
	// its terminal event has not come (a Chat finish_reason before
	// [DONE]).
	finished() bool
}

// stream runs one streamed request: send issues it with the given extra
// options, st decodes the events. Every error is yielded, except errStopped.
func (c *client) stream(ctx context.Context, model string, yield func(llm.StreamEvent, error) bool,
	send func(...option.RequestOption) sdkStream, st streamState) {
	start := time.Now()
	var res *http.Response
	s := send(option.WithResponseInto(&res))
	defer s.Close()
	if err := s.Err(); err != nil {
		yield(llm.StreamEvent{}, c.requestError(ctx, err, res))
		return
	}
	dec, err := c.openEvents(res)
	if err != nil {
		yield(llm.StreamEvent{}, err)
		return
	}
	defer dec.Close()
	reason, err := "", pump(ctx, c, dec, st.handle)
	if e, ok := llm.AsError(err); ok && e.Kind == llm.KindTimeout && st.finished() {
		// A server that went silent after the finish reason (without
		// [DONE]) said all it had to say.
		err = nil
	}
	if err == nil {
		reason, err = st.end()
	}
	if err != nil {
		if err != errStopped {
			yield(llm.StreamEvent{}, err)
		}
		return
	}
	c.log.DebugContext(ctx, "llm stream done", "provider", c.provider, "model", model,
		"finish", reason, "duration", time.Since(start))
}
