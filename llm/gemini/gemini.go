package gemini

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"time"

	"weft.dev/weft/internal/llmhttp"
	"weft.dev/weft/llm"
)

// providerName is the Provider field of every *llm.Error this package returns.
const providerName = "gemini"

// DefaultBaseURL is the API root used when [Config.BaseURL] is empty.
const DefaultBaseURL = "https://generativelanguage.googleapis.com/"

// DefaultAPIVersion is the API version used when [Config.APIVersion] is empty.
const DefaultAPIVersion = "v1beta"

// Config configures a [Provider]. New copies it; later changes have no
// effect. The zero value of each field is documented beside it.
type Config struct {
	// APIKey is sent as the x-goog-api-key header. Required.
	APIKey string
	// BaseURL is the API root without the version, e.g.
	// "http://localhost:8080/" for a proxy; requests go to
	// {BaseURL}/{APIVersion}/models/{model}:streamGenerateContent?alt=sse.
	// Empty means [DefaultBaseURL].
	BaseURL string
	// APIVersion is the path segment after BaseURL; empty means
	// [DefaultAPIVersion].
	APIVersion string
	// HTTPClient's Transport sends the requests; nil means
	// http.DefaultClient. Its Timeout must be zero: a stream may last
	// minutes and is bounded by the context passed to Stream. Redirects
	// are not followed.
	HTTPClient *http.Client
	// Timeouts bound getting a connection, the wait for the first byte
	// and each wait between stream chunks; a hit limit is a retryable
	// [llm.KindTimeout] error. The zero value means the defaults of
	// [llm.Timeouts].
	Timeouts llm.Timeouts
	// Headers are added to every request; nil adds none.
	Headers http.Header
	// Logger receives debug records of each request; nil means silent.
	// Errors are returned, not logged.
	Logger *slog.Logger

	// IncludeThoughts asks a thinking model for summaries of its thoughts,
	// streamed as [llm.StreamEvent.Reasoning]. False asks for none (the
	// model still thinks if it does by default).
	IncludeThoughts bool
	// ThinkingBudget, if set, is sent as thinkingConfig.thinkingBudget:
	// the tokens a Gemini 2.5 model may think, 0 to switch thinking off
	// where the model allows it, -1 to let the model decide. Nil sends
	// nothing and leaves the model's default.
	ThinkingBudget *int
	// ThinkingLevel, if set, is sent as thinkingConfig.thinkingLevel
	// ("minimal", "low", "medium" or "high"; Gemini 3 models). Empty sends
	// nothing.
	ThinkingLevel string
}

// Provider streams responses from the Gemini API's streamGenerateContent
// method. It is safe for concurrent use; it holds no per-request state.
type Provider struct {
	hc       *http.Client
	base     *url.URL // BaseURL joined with the API version
	key      string
	headers  http.Header
	logger   *slog.Logger
	thinking *thinkingConfig
}

// New returns a Provider for cfg. It fails if cfg has no APIKey, a BaseURL
// that is not an absolute http(s) URL, an HTTPClient with a Timeout, or an
// unknown ThinkingLevel. It reads no environment variable.
func New(cfg Config) (*Provider, error) {
	if cfg.APIKey == "" {
		return nil, errors.New("gemini: APIKey is required")
	}
	base := cfg.BaseURL
	if base == "" {
		base = DefaultBaseURL
	}
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("gemini: BaseURL %q is not an absolute http(s) URL", base)
	}
	version := cfg.APIVersion
	if version == "" {
		version = DefaultAPIVersion
	}
	hc := cfg.HTTPClient
	if hc == nil {
		hc = http.DefaultClient
	}
	if hc.Timeout != 0 {
		return nil, errors.New("gemini: HTTPClient.Timeout must be zero; bound a stream with its context")
	}
	p := &Provider{
		// Redirects are not followed: a 3xx is an error like any other
		// status but 2xx.
		hc: &http.Client{
			Transport:     llmhttp.Transport(hc.Transport, cfg.Timeouts),
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
		base:    u.JoinPath(version),
		key:     cfg.APIKey,
		headers: cfg.Headers.Clone(),
		logger:  cfg.Logger,
	}
	if p.logger == nil {
		p.logger = slog.New(slog.DiscardHandler)
	}
	if cfg.IncludeThoughts || cfg.ThinkingBudget != nil || cfg.ThinkingLevel != "" {
		p.thinking = &thinkingConfig{IncludeThoughts: cfg.IncludeThoughts}
		if cfg.ThinkingBudget != nil {
			b := int32(*cfg.ThinkingBudget)
			if int(b) != *cfg.ThinkingBudget || b < -1 {
				return nil, fmt.Errorf("gemini: ThinkingBudget %d is out of range", *cfg.ThinkingBudget)
			}
			p.thinking.ThinkingBudget = &b
		}
		switch lvl := strings.ToUpper(cfg.ThinkingLevel); lvl {
		case "":
		case "MINIMAL", "LOW", "MEDIUM", "HIGH":
			p.thinking.ThinkingLevel = lvl
		default:
			return nil, fmt.Errorf("gemini: ThinkingLevel %q is none of minimal, low, medium, high", cfg.ThinkingLevel)
		}
	}
	return p, nil
}

// newRequest builds the HTTP request of req.
func (p *Provider) newRequest(ctx context.Context, req *llm.Request) (*http.Request, int, error) {
	body, err := p.request(req)
	if err != nil {
		return nil, 0, err
	}
	path, err := modelPath(req.Model)
	if err != nil {
		return nil, 0, err
	}
	b, err := json.Marshal(body)
	if err != nil {
		return nil, 0, fmt.Errorf("encode request: %w", err)
	}
	u := p.base.JoinPath(path + ":streamGenerateContent")
	u.RawQuery = "alt=sse"
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), bytes.NewReader(b))
	if err != nil {
		return nil, 0, err
	}
	for k, vs := range p.headers {
		hr.Header[http.CanonicalHeaderKey(k)] = vs
	}
	hr.Header.Set("Content-Type", "application/json")
	hr.Header.Set("x-goog-api-key", p.key)
	return hr, len(body.Contents), nil
}

// Stream sends req and streams the response. See [llm.Provider] for the
// iterator's contract: it is single-use, sends the request when iteration
// starts and closes the response when it ends, including on break. Errors
// are *llm.Error values, except for a cancelled or expired ctx, which
// yields ctx.Err() wrapped.
func (p *Provider) Stream(ctx context.Context, req *llm.Request) iter.Seq2[llm.StreamEvent, error] {
	return func(yield func(llm.StreamEvent, error) bool) {
		hr, n, err := p.newRequest(ctx, req)
		if err != nil {
			yield(llm.StreamEvent{}, &llm.Error{Provider: providerName, Kind: llm.KindBadRequest, Err: err})
			return
		}
		p.logger.DebugContext(ctx, "gemini request", "model", req.Model, "contents", n, "tools", len(req.Tools))
		start := time.Now()

		res, err := p.hc.Do(hr)
		if err != nil {
			yield(llm.StreamEvent{}, requestError(ctx, err))
			return
		}
		defer res.Body.Close()
		if res.StatusCode < 200 || res.StatusCode > 299 {
			yield(llm.StreamEvent{}, statusError(res))
			return
		}
		if mt, _, _ := mime.ParseMediaType(res.Header.Get("Content-Type")); mt == "application/json" {
			// A server that ignored alt=sse answers with a JSON array.
			yield(llm.StreamEvent{}, &llm.Error{Provider: providerName, Kind: llm.KindMalformed,
				Err: fmt.Errorf("expected an event stream, got application/json: %s", snippet(res.Body))})
			return
		}
		d := decoder{yield: yield, turn: assistantTurns(req.Messages)}
		reason, err := d.run(ctx, newEvents(res.Body))
		if err != nil {
			if err != errStopped {
				yield(llm.StreamEvent{}, err)
			}
			return
		}
		p.logger.DebugContext(ctx, "gemini stream done", "model", req.Model, "finish", reason, "duration", time.Since(start))
	}
}

// requestError classifies a request that got no response.
func requestError(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("gemini: request: %w", ctx.Err())
	}
	if e := llm.TimeoutFrom(providerName, err); e != nil {
		return e
	}
	return &llm.Error{Provider: providerName, Kind: llm.KindConnection, Retryable: true, Err: err}
}
