// Package telemetry builds weft's OpenTelemetry tracing from the standard
// OTEL_* variables, for the CLI: the OTLP/HTTP exporter, the resource
// (service name and attributes), the sampler, and a batching processor
// that never blocks a run and counts the spans it could not deliver.
//
// Tracing is off unless the variables ask for it; off, nothing of it is
// built: no exporter, no goroutine, no span.
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// Config says where tracing's settings come from.
type Config struct {
	// Getenv reads the OTEL_* variables. Nil reads none: tracing is off.
	Getenv func(string) string
	// ServiceVersion is the resource's service.version; empty leaves it out.
	ServiceVersion string
	// Logger receives export failures (once per outage, with the count
	// of spans dropped) and recoveries. Nil means silent.
	Logger *slog.Logger
}

// Tracing is the tracer provider the OTEL_* variables describe, with
// its exporter and processor. Its methods are safe for concurrent use.
// Shutdown flushes what is queued and stops the processor's goroutine.
type Tracing struct {
	tp      *sdktrace.TracerProvider
	batch   *batcher
	content bool
}

// FromEnv builds the tracing the OTEL_* variables of cfg.Getenv ask
// for, or returns nil (and no error) when they ask for none:
//
//   - OTEL_SDK_DISABLED=true, or OTEL_TRACES_EXPORTER=none: off.
//   - OTEL_TRACES_EXPORTER=otlp, or unset with OTEL_EXPORTER_OTLP_ENDPOINT
//     or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT set: OTLP over HTTP, to
//     OTEL_EXPORTER_OTLP_TRACES_ENDPOINT as given, or to
//     OTEL_EXPORTER_OTLP_ENDPOINT plus /v1/traces, or to
//     http://localhost:4318/v1/traces; OTEL_EXPORTER_OTLP_(TRACES_)HEADERS,
//     _TIMEOUT (ms), _COMPRESSION (gzip), _CERTIFICATE, _CLIENT_CERTIFICATE
//     and _CLIENT_KEY as the specification says. The protocol is
//     http/protobuf; other exporters, grpc and http/json are refused with
//     an error that says so.
//   - OTEL_SERVICE_NAME (default weft) and OTEL_RESOURCE_ATTRIBUTES
//     describe the resource; OTEL_TRACES_SAMPLER and _ARG the sampler
//     (default parentbased_always_on).
//   - OTEL_BSP_SCHEDULE_DELAY, OTEL_BSP_EXPORT_TIMEOUT (ms),
//     OTEL_BSP_MAX_QUEUE_SIZE and OTEL_BSP_MAX_EXPORT_BATCH_SIZE bound
//     the processor (defaults 5000, 30000, 2048, 512).
//   - OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true asks for
//     prompts, outputs and tool arguments and results in the spans
//     ([Tracing.Content]); they are left out otherwise.
//
// A variable that does not parse is an error naming it.
func FromEnv(ctx context.Context, cfg Config) (*Tracing, error) {
	get := cfg.Getenv
	if get == nil {
		return nil, nil
	}
	if b, _ := strconv.ParseBool(get("OTEL_SDK_DISABLED")); b {
		return nil, nil
	}
	endpoint := get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
	base := get("OTEL_EXPORTER_OTLP_ENDPOINT")
	switch exp := strings.TrimSpace(get("OTEL_TRACES_EXPORTER")); exp {
	case "none":
		return nil, nil
	case "":
		if endpoint == "" && base == "" {
			return nil, nil
		}
	case "otlp":
	default:
		return nil, fmt.Errorf("OTEL_TRACES_EXPORTER=%q: weft exports traces by OTLP only: set it to otlp or none", exp)
	}
	opts, err := exporterOptions(get, endpoint, base)
	if err != nil {
		return nil, err
	}
	bo, err := batchOptions(get)
	if err != nil {
		return nil, err
	}
	sampler, err := samplerFromEnv(get)
	if err != nil {
		return nil, err
	}
	res, err := resourceFromEnv(get, cfg.ServiceVersion)
	if err != nil {
		return nil, err
	}
	content, err := boolVar(get, "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT")
	if err != nil {
		return nil, err
	}
	exp, err := newExporter(opts)
	if err != nil {
		return nil, err
	}
	bo.logger = cfg.Logger
	b := newBatcher(exp, bo)
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(b), sdktrace.WithResource(res), sdktrace.WithSampler(sampler))
	return &Tracing{tp: tp, batch: b, content: content}, nil
}

// TracerProvider returns the provider that makes the spans: nil (an
// untyped nil interface) when t is nil, so that a host given it traces
// nothing.
func (t *Tracing) TracerProvider() trace.TracerProvider {
	if t == nil {
		return nil
	}
	return t.tp
}

// Content reports whether the spans may carry the runs' text
// (OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true); false when t
// is nil.
func (t *Tracing) Content() bool { return t != nil && t.content }

// Dropped returns how many finished spans were never delivered: they
// found the queue full, or their export failed (the endpoint down,
// refusing or too slow). It never decreases; 0 when t is nil.
func (t *Tracing) Dropped() uint64 {
	if t == nil {
		return 0
	}
	return t.batch.dropped.Load()
}

// Exported returns how many spans were delivered; 0 when t is nil.
func (t *Tracing) Exported() uint64 {
	if t == nil {
		return 0
	}
	return t.batch.exported.Load()
}

// ForceFlush exports the spans queued so far and returns once they are
// delivered or dropped, or ctx is done.
func (t *Tracing) ForceFlush(ctx context.Context) error { return t.tp.ForceFlush(ctx) }

// Shutdown ends the provider: the queued spans are exported (or dropped
// when ctx ends first), the processor's goroutine stops and the exporter
// closes. Later spans are not recorded. It may be called more than once.
func (t *Tracing) Shutdown(ctx context.Context) error { return t.tp.Shutdown(ctx) }

// exporterOptions is the OTLP/HTTP exporter's configuration from the
// variables.
func exporterOptions(get func(string) string, endpoint, base string) (exporterConfig, error) {
	var cfg exporterConfig
	switch {
	case endpoint != "":
		if err := checkURL("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", endpoint); err != nil {
			return cfg, err
		}
		cfg.url = endpoint
	case base != "":
		if err := checkURL("OTEL_EXPORTER_OTLP_ENDPOINT", base); err != nil {
			return cfg, err
		}
		cfg.url = strings.TrimSuffix(base, "/") + "/v1/traces"
	default:
		cfg.url = "http://localhost:4318/v1/traces"
	}
	cfg.headers = map[string]string{}
	for _, k := range []string{"OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS"} {
		if err := parsePairs(k, get(k), cfg.headers); err != nil {
			return cfg, err
		}
	}
	d, err := msVar(get, "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "OTEL_EXPORTER_OTLP_TIMEOUT")
	if err != nil {
		return cfg, err
	}
	cfg.timeout = d
	switch k, v := first(get, "OTEL_EXPORTER_OTLP_TRACES_COMPRESSION", "OTEL_EXPORTER_OTLP_COMPRESSION"); v {
	case "", "none":
	case "gzip":
		cfg.gzip = true
	default:
		return cfg, fmt.Errorf("%s=%q: want gzip or none", k, v)
	}
	switch k, v := first(get, "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"); v {
	case "", "http/protobuf":
	default:
		return cfg, fmt.Errorf("%s=%q: weft exports OTLP over HTTP in protobuf: set it to http/protobuf", k, v)
	}
	_, cfg.caFile = first(get, "OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE", "OTEL_EXPORTER_OTLP_CERTIFICATE")
	_, cfg.certFile = first(get, "OTEL_EXPORTER_OTLP_TRACES_CLIENT_CERTIFICATE", "OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE")
	_, cfg.keyFile = first(get, "OTEL_EXPORTER_OTLP_TRACES_CLIENT_KEY", "OTEL_EXPORTER_OTLP_CLIENT_KEY")
	if (cfg.certFile == "") != (cfg.keyFile == "") {
		return cfg, errors.New("OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE and OTEL_EXPORTER_OTLP_CLIENT_KEY go together: set both or neither")
	}
	return cfg, nil
}

// HeaderValues returns the values of the OTLP exporter's headers
// (OTEL_EXPORTER_OTLP_HEADERS and OTEL_EXPORTER_OTLP_TRACES_HEADERS), which
// often hold a collector's credentials, for the host to mask as secrets.
// Lists that do not parse give what they hold up to the error.
func HeaderValues(get func(string) string) []string {
	h := map[string]string{}
	for _, k := range []string{"OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS"} {
		parsePairs(k, get(k), h)
	}
	var out []string
	for _, v := range h {
		if v != "" {
			out = append(out, v)
		}
	}
	return out
}

func checkURL(name, v string) error {
	u, err := url.Parse(v)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%s=%q: want an http:// or https:// URL", name, v)
	}
	return nil
}

// first returns the first of the variables that is set, and its value.
func first(get func(string) string, names ...string) (name, value string) {
	for _, n := range names {
		if v := strings.TrimSpace(get(n)); v != "" {
			return n, strings.ToLower(v)
		}
	}
	return names[0], ""
}

// msVar is the first of the variables set, in milliseconds.
func msVar(get func(string) string, names ...string) (time.Duration, error) {
	for _, n := range names {
		v := strings.TrimSpace(get(n))
		if v == "" {
			continue
		}
		ms, err := strconv.ParseInt(v, 10, 64)
		if err != nil || ms < 0 {
			return 0, fmt.Errorf("%s=%q: want milliseconds, such as 10000", n, v)
		}
		return time.Duration(ms) * time.Millisecond, nil
	}
	return 0, nil
}

func intVar(get func(string) string, name string, def int) (int, error) {
	v := strings.TrimSpace(get(name))
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("%s=%q: want a positive number", name, v)
	}
	return n, nil
}

func boolVar(get func(string) string, name string) (bool, error) {
	v := strings.TrimSpace(get(name))
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, fmt.Errorf("%s=%q: want true or false", name, v)
	}
	return b, nil
}

// parsePairs adds the pairs of v ("k1=v1,k2=v2", values URL-encoded),
// the W3C baggage form the OTEL_* lists take, to into.
func parsePairs(name, v string, into map[string]string) error {
	for item := range strings.SplitSeq(v, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		k, val, ok := strings.Cut(item, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return fmt.Errorf("%s: %q is not key=value", name, item)
		}
		dec, err := url.PathUnescape(strings.TrimSpace(val))
		if err != nil {
			return fmt.Errorf("%s: the value of %s: %w", name, k, err)
		}
		into[k] = dec
	}
	return nil
}

// batchOptions are the processor's bounds from OTEL_BSP_*.
func batchOptions(get func(string) string) (batchConfig, error) {
	var c batchConfig
	var err error
	if c.delay, err = msVar(get, "OTEL_BSP_SCHEDULE_DELAY"); err != nil {
		return c, err
	}
	if c.timeout, err = msVar(get, "OTEL_BSP_EXPORT_TIMEOUT"); err != nil {
		return c, err
	}
	if c.queue, err = intVar(get, "OTEL_BSP_MAX_QUEUE_SIZE", 2048); err != nil {
		return c, err
	}
	if c.batch, err = intVar(get, "OTEL_BSP_MAX_EXPORT_BATCH_SIZE", 512); err != nil {
		return c, err
	}
	c.batch = min(c.batch, c.queue)
	return c, nil
}

// samplerFromEnv is the sampler OTEL_TRACES_SAMPLER names.
func samplerFromEnv(get func(string) string) (sdktrace.Sampler, error) {
	name := strings.TrimSpace(get("OTEL_TRACES_SAMPLER"))
	arg := strings.TrimSpace(get("OTEL_TRACES_SAMPLER_ARG"))
	ratio := func() (float64, error) {
		if arg == "" {
			return 1, nil
		}
		r, err := strconv.ParseFloat(arg, 64)
		if err != nil || r < 0 || r > 1 {
			return 0, fmt.Errorf("OTEL_TRACES_SAMPLER_ARG=%q: want a ratio from 0 to 1", arg)
		}
		return r, nil
	}
	switch name {
	case "", "parentbased_always_on":
		return sdktrace.ParentBased(sdktrace.AlwaysSample()), nil
	case "always_on":
		return sdktrace.AlwaysSample(), nil
	case "always_off":
		return sdktrace.NeverSample(), nil
	case "parentbased_always_off":
		return sdktrace.ParentBased(sdktrace.NeverSample()), nil
	case "traceidratio", "parentbased_traceidratio":
		r, err := ratio()
		if err != nil {
			return nil, err
		}
		if name == "traceidratio" {
			return sdktrace.TraceIDRatioBased(r), nil
		}
		return sdktrace.ParentBased(sdktrace.TraceIDRatioBased(r)), nil
	}
	return nil, fmt.Errorf("OTEL_TRACES_SAMPLER=%q: want always_on, always_off, traceidratio or their parentbased_ forms", name)
}

// resourceFromEnv describes this process: OTEL_RESOURCE_ATTRIBUTES, then
// service.name from OTEL_SERVICE_NAME (default weft), service.version and
// the SDK's own attributes.
func resourceFromEnv(get func(string) string, version string) (*resource.Resource, error) {
	pairs := map[string]string{}
	if err := parsePairs("OTEL_RESOURCE_ATTRIBUTES", get("OTEL_RESOURCE_ATTRIBUTES"), pairs); err != nil {
		return nil, err
	}
	if n := strings.TrimSpace(get("OTEL_SERVICE_NAME")); n != "" {
		pairs["service.name"] = n
	}
	if pairs["service.name"] == "" {
		pairs["service.name"] = "weft"
	}
	if version != "" {
		pairs["service.version"] = version
	}
	pairs["telemetry.sdk.name"] = "opentelemetry"
	pairs["telemetry.sdk.language"] = "go"
	pairs["telemetry.sdk.version"] = otel.Version()
	attrs := make([]attribute.KeyValue, 0, len(pairs))
	for k, v := range pairs {
		attrs = append(attrs, attribute.String(k, v))
	}
	return resource.NewSchemaless(attrs...), nil
}

// errStopped reports a flush of a processor that has shut down.
var errStopped = errors.New("telemetry: the span processor has shut down")
