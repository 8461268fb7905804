package gemini

import (
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"google.golang.org/genai"

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
	client   *genai.Client
	logger   *slog.Logger
	thinking *genai.ThinkingConfig
}

// New returns a Provider for cfg. It fails if cfg has no APIKey, a BaseURL
// that is not an absolute http(s) URL, an HTTPClient with a Timeout, or an
// unknown ThinkingLevel.
//
// The SDK's client constructor looks up its environment variables
// (GEMINI_API_KEY, GOOGLE_API_KEY, GOOGLE_GENAI_USE_VERTEXAI,
// GOOGLE_GEMINI_BASE_URL, …) and cannot be told not to; New sets every
// setting those would fill (backend, key, base URL, API version, HTTP
// client), so none of them takes effect. The one trace they can leave: if
// both GOOGLE_API_KEY and GEMINI_API_KEY are set, the SDK prints a warning
// through the standard log package.
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
	rt := hc.Transport
	if rt == nil {
		rt = http.DefaultTransport
	}
	p := &Provider{logger: cfg.Logger}
	if p.logger == nil {
		p.logger = slog.New(slog.DiscardHandler)
	}
	if cfg.IncludeThoughts || cfg.ThinkingBudget != nil || cfg.ThinkingLevel != "" {
		p.thinking = &genai.ThinkingConfig{IncludeThoughts: cfg.IncludeThoughts}
		if cfg.ThinkingBudget != nil {
			b := int32(*cfg.ThinkingBudget)
			if int(b) != *cfg.ThinkingBudget || b < -1 {
				return nil, fmt.Errorf("gemini: ThinkingBudget %d is out of range", *cfg.ThinkingBudget)
			}
			p.thinking.ThinkingBudget = &b
		}
		switch lvl := strings.ToUpper(cfg.ThinkingLevel); genai.ThinkingLevel(lvl) {
		case "":
		case genai.ThinkingLevelMinimal, genai.ThinkingLevelLow, genai.ThinkingLevelMedium, genai.ThinkingLevelHigh:
			p.thinking.ThinkingLevel = genai.ThinkingLevel(lvl)
		default:
			return nil, fmt.Errorf("gemini: ThinkingLevel %q is none of minimal, low, medium, high", cfg.ThinkingLevel)
		}
	}

	cc := &genai.ClientConfig{
		APIKey:  cfg.APIKey,
		Backend: genai.BackendGeminiAPI,
		// The SDK's client hands every response to this transport, which
		// passes the real one to Stream (see exchange).
		HTTPClient: &http.Client{Transport: &capture{base: llmhttp.Transport(rt, cfg.Timeouts)}},
		HTTPOptions: genai.HTTPOptions{
			BaseURL:    base,
			APIVersion: version,
			Headers:    cfg.Headers.Clone(),
			// The agent loop retries; the SDK must not. (Timeout stays
			// unset: the SDK would cancel its context, and with it the
			// body Stream reads, when its own iteration ends.)
			RetryOptions: &genai.HTTPRetryOptions{Attempts: genai.Ptr[int32](1)},
		},
	}
	p.client, err = genai.NewClient(context.Background(), cc)
	if err != nil {
		return nil, fmt.Errorf("gemini: %w", err)
	}
	return p, nil
}

// exchange receives the HTTP response (or transport error) of one Stream
// call from [capture]. It travels in the request's context.
type exchange struct {
	res *http.Response
	err error
}

type exchangeKey struct{}

// capture is the SDK client's transport. The SDK builds and sends the
// request (URL, key, headers, body), but its stream iterator cannot tell a
// cut stream from a finished one, drops a response's headers (Retry-After)
// when it fails, fails on SSE comments, and logs read errors through the
// standard log package. So capture hands the real response to the Stream
// call that sent the request and gives the SDK an empty 200 response, which
// it reads as a stream without chunks.
type capture struct {
	base http.RoundTripper
}

func (c *capture) RoundTrip(req *http.Request) (*http.Response, error) {
	ex, _ := req.Context().Value(exchangeKey{}).(*exchange)
	res, err := c.base.RoundTrip(req)
	if ex == nil {
		return res, err
	}
	if ex.res != nil {
		// Not expected: the SDK sends once and the stand-in is no redirect.
		ex.res.Body.Close()
	}
	ex.res, ex.err = res, err
	if err != nil {
		return nil, err
	}
	return &http.Response{
		Status: "200 OK", StatusCode: http.StatusOK,
		Proto: res.Proto, ProtoMajor: res.ProtoMajor, ProtoMinor: res.ProtoMinor,
		Header: http.Header{}, Body: http.NoBody, Request: req,
	}, nil
}

// Stream sends req and streams the response. See [llm.Provider] for the
// iterator's contract: it is single-use, sends the request when iteration
// starts and closes the response when it ends, including on break. Errors
// are *llm.Error values, except for a cancelled or expired ctx, which
// yields ctx.Err() wrapped.
func (p *Provider) Stream(ctx context.Context, req *llm.Request) iter.Seq2[llm.StreamEvent, error] {
	return func(yield func(llm.StreamEvent, error) bool) {
		contents, gcfg, err := p.request(req)
		if err != nil {
			yield(llm.StreamEvent{}, &llm.Error{Provider: providerName, Kind: llm.KindBadRequest, Err: err})
			return
		}
		p.logger.DebugContext(ctx, "gemini request", "model", req.Model, "contents", len(contents), "tools", len(req.Tools))
		start := time.Now()

		ex := &exchange{}
		var sdkErr error
		for _, err := range p.client.Models.GenerateContentStream(context.WithValue(ctx, exchangeKey{}, ex), req.Model, contents, gcfg) {
			// The SDK reads the empty stand-in response: no chunks, at
			// most an error about the request.
			if err != nil {
				sdkErr = err
				break
			}
		}
		res := ex.res
		if res == nil {
			yield(llm.StreamEvent{}, requestError(ctx, ex.err, sdkErr))
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

// requestError classifies a request that got no response: transportErr is
// the transport's error, if it ran; sdkErr what the SDK's iterator said.
func requestError(ctx context.Context, transportErr, sdkErr error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("gemini: request: %w", ctx.Err())
	}
	err := transportErr
	if err == nil {
		err = sdkErr
	}
	if err == nil {
		err = errors.New("no response")
	}
	if e := llm.TimeoutFrom(providerName, err); e != nil {
		return e
	}
	var uerr *url.Error
	var nerr net.Error
	if transportErr != nil || errors.As(err, &uerr) || errors.As(err, &nerr) || errors.Is(err, io.ErrUnexpectedEOF) {
		return &llm.Error{Provider: providerName, Kind: llm.KindConnection, Retryable: true, Err: err}
	}
	// The SDK refused to build the request.
	return &llm.Error{Provider: providerName, Kind: llm.KindBadRequest, Err: err}
}
