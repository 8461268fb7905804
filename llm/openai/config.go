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
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"weft.dev/weft/internal/jsonstr"
	"weft.dev/weft/internal/llmhttp"
	events "weft.dev/weft/internal/sse"
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

// client is what both providers share: the validated config and what
// every request carries.
type client struct {
	provider string
	cfg      Config
	log      *slog.Logger
	hc       *http.Client
	base     *url.URL // the API root, ending in "/"
	header   http.Header
	// extra holds Config.ExtraBody's fields, set in a request's body
	// after weft's own; nil for none.
	extra []field
}

// field is one top-level field of a JSON object.
type field struct {
	key   string
	value json.RawMessage
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
	if !strings.HasSuffix(u.Path, "/") {
		u.Path += "/"
	}
	c.base = u
	c.hc = llmhttp.Client(cfg.HTTPClient, cfg.Timeouts)
	// Nothing comes from the environment (the SDK's NewClient read
	// OPENAI_* variables); the agent loop retries, so nothing here does.
	c.header = http.Header{}
	c.header.Set("Content-Type", "application/json")
	c.header.Set("Accept", "application/json")
	if cfg.APIKey != "" {
		c.header.Set("Authorization", "Bearer "+cfg.APIKey)
	}
	if cfg.Organization != "" {
		c.header.Set("OpenAI-Organization", cfg.Organization)
	}
	if cfg.Project != "" {
		c.header.Set("OpenAI-Project", cfg.Project)
	}
	for k, v := range cfg.Headers {
		if k == "" || strings.ContainsAny(k, " \t\r\n:") {
			return nil, fmt.Errorf("%s: invalid header name %q", provider, k)
		}
		c.header.Set(k, v)
	}
	switch cfg.MaxTokensField {
	case "", "max_tokens", "max_completion_tokens":
	default:
		return nil, fmt.Errorf("%s: MaxTokensField %q is neither max_tokens nor max_completion_tokens", provider, cfg.MaxTokensField)
	}
	if len(cfg.ExtraBody) > 0 {
		fields, err := objectFields(cfg.ExtraBody)
		if err != nil || fields == nil {
			return nil, fmt.Errorf("%s: ExtraBody is not a JSON object: %v", provider, err)
		}
		c.extra = fields
	}
	return c, nil
}

// objectFields returns the top-level fields of a JSON object in their
// order; nil, and maybe an error, if b is not an object.
func objectFields(b []byte) ([]field, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, err
	}
	fields := []field{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, err
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		fields = append(fields, field{key: t.(string), value: v})
	}
	if _, err := dec.Token(); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("data after the object")
	}
	return fields, nil
}

// finishBody sets the extra fields and "stream": true in a request body
// (a JSON object weft encoded): a field the body has is replaced where it
// is, others are added at the end. It may append to body in place: the
// caller gives body up (its builders leave room for the field; a shared
// one must be clipped).
func (c *client) finishBody(body []byte) ([]byte, error) {
	set := append(c.extra[:len(c.extra):len(c.extra)], field{key: "stream", value: json.RawMessage("true")})
	if len(c.extra) == 0 && !bytes.Contains(body, []byte(`"stream"`)) {
		// The common case: weft's body has no stream field, so it is
		// added at the end.
		if len(body) < 2 || body[len(body)-1] != '}' {
			return nil, fmt.Errorf("unexpected encoding of the request: %.40q", body)
		}
		// In place when body has the room: the request builders
		// leave it, and body is theirs to give.
		out := body[:len(body)-1]
		if len(body) > 2 {
			out = append(out, ',')
		}
		return append(out, `"stream":true}`...), nil
	}
	fields, err := objectFields(body)
	if err != nil || fields == nil {
		return nil, fmt.Errorf("unexpected encoding of the request: %v", err)
	}
	for _, s := range set {
		i := slices.IndexFunc(fields, func(f field) bool { return f.key == s.key })
		if i >= 0 {
			fields[i].value = s.value
		} else {
			fields = append(fields, s)
		}
	}
	out := make([]byte, 0, len(body)+64)
	out = append(out, '{')
	for i, f := range fields {
		if i > 0 {
			out = append(out, ',')
		}
		out = jsonstr.Append(out, f.key)
		out = append(out, ':')
		out = append(out, f.value...)
	}
	return append(out, '}'), nil
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

// maxErrorBody bounds the bytes of an error response weft reads.
const maxErrorBody = 64 << 10

// requestError classifies an error of a request that got no response.
func (c *client) requestError(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%s: request: %w", c.provider, ctx.Err())
	}
	if e := llm.TimeoutFrom(c.provider, err); e != nil {
		return e
	}
	return &llm.Error{Provider: c.provider, Kind: llm.KindConnection, Retryable: true, Err: err}
}

// httpError classifies an error response: by its status, with the
// message of its {"error": {...}} object (prefixed by its code), else the
// start of its body.
func (c *client) httpError(res *http.Response) error {
	raw, _ := io.ReadAll(io.LimitReader(res.Body, maxErrorBody))
	var wrapped struct {
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(raw, &wrapped) == nil && len(wrapped.Error) > 0 && wrapped.Error[0] == '{' {
		var e struct {
			Message string          `json:"message"`
			Code    json.RawMessage `json:"code"`
		}
		if json.Unmarshal(wrapped.Error, &e) == nil {
			msg := e.Message
			if msg == "" {
				msg = bodySnippet(raw, res.Status)
			}
			if code := codeText(e.Code); code != "" {
				msg = code + ": " + msg
			}
			return c.statusError(res.StatusCode, res, errors.New(msg))
		}
	}
	// A body without an OpenAI error object (e.g. vLLM's
	// {"object":"error",...} or a proxy's HTML page).
	return c.statusError(res.StatusCode, res, errors.New(bodySnippet(raw, res.Status)))
}

// codeText is an error object's code as text: a string as it is, a
// number in digits, nothing for null.
func codeText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var n json.Number
	if json.Unmarshal(raw, &n) == nil {
		return n.String()
	}
	return ""
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

// bodySnippet returns the message of an error body, or its start, or
// status when it is empty.
func bodySnippet(b []byte, status string) string {
	b = b[:min(len(b), 2048)]
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
		return status
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

// toolSchema returns a tool's JSON Schema as it is sent: as it is,
// without re-encoding its values (numbers, key order), after checking
// that it is an object; an object without properties if there is none.
func toolSchema(name string, schema json.RawMessage) (json.RawMessage, error) {
	if len(schema) == 0 {
		return json.RawMessage(`{"type":"object","properties":{}}`), nil
	}
	// One scan for the common case, without decoding the object.
	if s := bytes.TrimLeft(schema, " \t\r\n"); len(s) > 0 && s[0] == '{' && json.Valid(schema) {
		return schema, nil
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(schema, &fields); err != nil || fields == nil {
		return nil, fmt.Errorf("tool %q: input schema is not a JSON object: %v", name, err)
	}
	return schema, nil
}

func (c *client) badRequest(err error) error {
	return &llm.Error{Provider: c.provider, Kind: llm.KindBadRequest, Err: err}
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
func pump(ctx context.Context, c *client, dec *events.Decoder, handle func([]byte) (bool, error)) error {
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

// stream runs one streamed request: body is the encoded request, path the
// endpoint below the API root; st decodes the events. Every error is
// yielded, except errStopped.
func (c *client) stream(ctx context.Context, model, path string, body []byte, yield func(llm.StreamEvent, error) bool, st streamState) {
	start := time.Now()
	body, err := c.finishBody(body)
	if err != nil {
		yield(llm.StreamEvent{}, c.badRequest(err))
		return
	}
	u := c.base.ResolveReference(&url.URL{Path: path})
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), bytes.NewReader(body))
	if err != nil {
		yield(llm.StreamEvent{}, c.badRequest(err))
		return
	}
	for k, vs := range c.header {
		hr.Header[k] = vs
	}
	res, err := c.hc.Do(hr)
	if err != nil {
		yield(llm.StreamEvent{}, c.requestError(ctx, err))
		return
	}
	defer res.Body.Close()
	if res.StatusCode >= 400 {
		yield(llm.StreamEvent{}, c.httpError(res))
		return
	}
	if mt, _, _ := mime.ParseMediaType(res.Header.Get("Content-Type")); mt == "application/json" {
		// A server that ignores "stream": true answers with one JSON object.
		raw, _ := io.ReadAll(io.LimitReader(res.Body, maxErrorBody))
		yield(llm.StreamEvent{}, &llm.Error{Provider: c.provider, Kind: llm.KindMalformed,
			Err: fmt.Errorf("expected an event stream, got application/json: %s", bodySnippet(raw, res.Status))})
		return
	}
	reason, err := "", pump(ctx, c, events.NewDecoder(res.Body), st.handle)
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
