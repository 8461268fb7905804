package telemetry

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// exporter sends spans to an OTLP/HTTP receiver as a protobuf
// ExportTraceServiceRequest (opentelemetry-proto, collector/trace/v1),
// encoded here field by field (wire.go) rather than through the
// generated types and the gRPC status types the SDK's exporter links:
// those would be most of weft's binary and a millisecond of every
// command's start-up, for a feature that is off by default. A test
// decodes what it sends with the official generated types.
type exporter struct {
	url     string
	headers map[string]string
	timeout time.Duration
	gzip    bool
	client  *http.Client
}

// exporterConfig is what the OTEL_EXPORTER_OTLP_* variables set.
type exporterConfig struct {
	url     string
	headers map[string]string
	timeout time.Duration
	gzip    bool
	// caFile, certFile and keyFile are the PEM files of
	// OTEL_EXPORTER_OTLP_(TRACES_)CERTIFICATE, _CLIENT_CERTIFICATE and
	// _CLIENT_KEY.
	caFile, certFile, keyFile string
}

// newExporter returns the exporter of cfg; a certificate that cannot be
// read is an error naming its file.
func newExporter(cfg exporterConfig) (*exporter, error) {
	if cfg.timeout <= 0 {
		cfg.timeout = 10 * time.Second
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if cfg.caFile != "" || cfg.certFile != "" {
		tc := &tls.Config{MinVersion: tls.VersionTLS12}
		if cfg.caFile != "" {
			pem, err := os.ReadFile(cfg.caFile)
			if err != nil {
				return nil, fmt.Errorf("OTLP certificate: %w", err)
			}
			tc.RootCAs = x509.NewCertPool()
			if !tc.RootCAs.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("OTLP certificate %s: no PEM certificate in it", cfg.caFile)
			}
		}
		if cfg.certFile != "" {
			c, err := tls.LoadX509KeyPair(cfg.certFile, cfg.keyFile)
			if err != nil {
				return nil, fmt.Errorf("OTLP client certificate: %w", err)
			}
			tc.Certificates = []tls.Certificate{c}
		}
		tr.TLSClientConfig = tc
	}
	return &exporter{url: cfg.url, headers: cfg.headers, timeout: cfg.timeout, gzip: cfg.gzip,
		client: &http.Client{Transport: tr}}, nil
}

// maxResponse bounds what is read of a receiver's answer.
const maxResponse = 64 << 10

// ExportSpans sends spans in one request, within the exporter's timeout;
// an error means they were not delivered (the processor counts them).
func (e *exporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	if len(spans) == 0 {
		return nil
	}
	body := encodeSpans(spans)
	var enc string
	if e.gzip {
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		if _, err := zw.Write(body); err != nil {
			return err
		}
		if err := zw.Close(); err != nil {
			return err
		}
		body, enc = buf.Bytes(), "gzip"
	}
	ctx, cancel := context.WithTimeout(ctx, e.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.url, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("OTLP export: %w", err)
	}
	for k, v := range e.headers {
		req.Header.Set(k, v)
	}
	req.Header.Set("Content-Type", "application/x-protobuf")
	if enc != "" {
		req.Header.Set("Content-Encoding", enc)
	}
	resp, err := e.client.Do(req)
	if err != nil {
		return fmt.Errorf("OTLP export to %s: %w", e.url, err)
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, maxResponse))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("OTLP export to %s: %s: %s", e.url, resp.Status, bytes.TrimSpace(msg))
	}
	return nil
}

// Shutdown lets go of the exporter's idle connections.
func (e *exporter) Shutdown(context.Context) error {
	e.client.CloseIdleConnections()
	return nil
}

// encodeSpans is the ExportTraceServiceRequest of spans, grouped by
// resource and then by instrumentation scope, in the order they came.
func encodeSpans(spans []sdktrace.ReadOnlySpan) []byte {
	type scopeKey struct {
		res   *resource.Resource
		scope instrumentation.Scope
	}
	var (
		resources []*resource.Resource
		scopes    = map[*resource.Resource][]instrumentation.Scope{}
		byScope   = map[scopeKey][]sdktrace.ReadOnlySpan{}
	)
	for _, s := range spans {
		r, sc := s.Resource(), s.InstrumentationScope()
		k := scopeKey{r, sc}
		if _, ok := scopes[r]; !ok {
			resources = append(resources, r)
			scopes[r] = nil
		}
		if _, ok := byScope[k]; !ok {
			scopes[r] = append(scopes[r], sc)
		}
		byScope[k] = append(byScope[k], s)
	}
	var out []byte
	for _, r := range resources {
		var rs []byte
		if r != nil {
			var res []byte
			for _, kv := range r.Attributes() {
				res = appendMessage(res, 1, appendKeyValue(nil, kv))
			}
			rs = appendMessage(rs, 1, res)
		}
		for _, sc := range scopes[r] {
			var ss []byte
			var scope []byte
			scope = appendString(scope, 1, sc.Name)
			scope = appendString(scope, 2, sc.Version)
			for _, kv := range sc.Attributes.ToSlice() {
				scope = appendMessage(scope, 3, appendKeyValue(nil, kv))
			}
			ss = appendMessage(ss, 1, scope)
			for _, s := range byScope[scopeKey{r, sc}] {
				ss = appendMessage(ss, 2, appendSpan(nil, s))
			}
			ss = appendString(ss, 3, sc.SchemaURL)
			rs = appendMessage(rs, 2, ss)
		}
		if r != nil {
			rs = appendString(rs, 3, r.SchemaURL())
		}
		out = appendMessage(out, 1, rs)
	}
	return out
}

// appendSpan appends the fields of an OTLP Span.
func appendSpan(b []byte, s sdktrace.ReadOnlySpan) []byte {
	sc := s.SpanContext()
	tid, sid := sc.TraceID(), sc.SpanID()
	b = appendBytes(b, 1, tid[:])
	b = appendBytes(b, 2, sid[:])
	b = appendString(b, 3, sc.TraceState().String())
	if p := s.Parent(); p.SpanID().IsValid() {
		psid := p.SpanID()
		b = appendBytes(b, 4, psid[:])
	}
	b = appendString(b, 5, s.Name())
	b = appendVarint(b, 6, uint64(s.SpanKind())) // the same numbers as OTLP's SpanKind
	b = appendFixed64(b, 7, unixNano(s.StartTime()))
	b = appendFixed64(b, 8, unixNano(s.EndTime()))
	for _, kv := range s.Attributes() {
		b = appendMessage(b, 9, appendKeyValue(nil, kv))
	}
	b = appendVarint(b, 10, uint64(max(s.DroppedAttributes(), 0)))
	for _, ev := range s.Events() {
		var e []byte
		e = appendFixed64(e, 1, unixNano(ev.Time))
		e = appendString(e, 2, ev.Name)
		for _, kv := range ev.Attributes {
			e = appendMessage(e, 3, appendKeyValue(nil, kv))
		}
		e = appendVarint(e, 4, uint64(max(ev.DroppedAttributeCount, 0)))
		b = appendMessage(b, 11, e)
	}
	b = appendVarint(b, 12, uint64(max(s.DroppedEvents(), 0)))
	for _, l := range s.Links() {
		var m []byte
		ltid, lsid := l.SpanContext.TraceID(), l.SpanContext.SpanID()
		m = appendBytes(m, 1, ltid[:])
		m = appendBytes(m, 2, lsid[:])
		m = appendString(m, 3, l.SpanContext.TraceState().String())
		for _, kv := range l.Attributes {
			m = appendMessage(m, 4, appendKeyValue(nil, kv))
		}
		m = appendVarint(m, 5, uint64(max(l.DroppedAttributeCount, 0)))
		b = appendMessage(b, 13, m)
	}
	b = appendVarint(b, 14, uint64(max(s.DroppedLinks(), 0)))
	st := s.Status()
	var status []byte
	status = appendString(status, 2, st.Description)
	// OTLP numbers the codes UNSET 0, OK 1, ERROR 2; the API Unset 0,
	// Error 1, Ok 2.
	switch st.Code {
	case codes.Ok:
		status = appendVarint(status, 3, 1)
	case codes.Error:
		status = appendVarint(status, 3, 2)
	}
	b = appendMessage(b, 15, status)
	return appendFixed32(b, 16, uint32(sc.TraceFlags()))
}

// appendKeyValue appends the fields of an OTLP KeyValue.
func appendKeyValue(b []byte, kv attribute.KeyValue) []byte {
	b = appendString(b, 1, string(kv.Key))
	return appendMessage(b, 2, appendAnyValue(nil, kv.Value))
}

// appendAnyValue appends the fields of an OTLP AnyValue.
func appendAnyValue(b []byte, v attribute.Value) []byte {
	switch v.Type() {
	case attribute.BOOL:
		x := uint64(0)
		if v.AsBool() {
			x = 1
		}
		return appendVarintValue(appendTag(b, 2, varintType), x)
	case attribute.INT64:
		return appendVarintValue(appendTag(b, 3, varintType), uint64(v.AsInt64()))
	case attribute.FLOAT64:
		return binary.LittleEndian.AppendUint64(appendTag(b, 4, fixed64Type), math.Float64bits(v.AsFloat64()))
	case attribute.STRING:
		return appendLengthPrefixed(appendTag(b, 1, bytesType), v.AsString())
	case attribute.BOOLSLICE:
		return appendArray(b, v.AsBoolSlice(), attribute.BoolValue)
	case attribute.INT64SLICE:
		return appendArray(b, v.AsInt64Slice(), attribute.Int64Value)
	case attribute.FLOAT64SLICE:
		return appendArray(b, v.AsFloat64Slice(), attribute.Float64Value)
	case attribute.STRINGSLICE:
		return appendArray(b, v.AsStringSlice(), attribute.StringValue)
	}
	return appendLengthPrefixed(appendTag(b, 1, bytesType), v.String())
}

// appendArray appends an AnyValue's array_value of xs.
func appendArray[T any](b []byte, xs []T, value func(T) attribute.Value) []byte {
	var arr []byte
	for _, x := range xs {
		arr = appendMessage(arr, 1, appendAnyValue(nil, value(x)))
	}
	return appendMessage(b, 5, arr)
}

func unixNano(t time.Time) uint64 {
	if t.IsZero() {
		return 0
	}
	return uint64(t.UnixNano())
}

// The append helpers leave out a field at its zero value, as proto3
// encodes it. They are not inlined: the exporter is off by default, and
// inlined into every field of appendSpan they were 14 KB of every weft
// binary's loaded image.

//go:noinline
func appendMessage(b []byte, num fieldNum, m []byte) []byte {
	return appendLengthPrefixed(appendTag(b, num, bytesType), m)
}

//go:noinline
func appendBytes(b []byte, num fieldNum, v []byte) []byte {
	if len(v) == 0 {
		return b
	}
	return appendLengthPrefixed(appendTag(b, num, bytesType), v)
}

//go:noinline
func appendString(b []byte, num fieldNum, v string) []byte {
	if v == "" {
		return b
	}
	return appendLengthPrefixed(appendTag(b, num, bytesType), v)
}

//go:noinline
func appendVarint(b []byte, num fieldNum, v uint64) []byte {
	if v == 0 {
		return b
	}
	return appendVarintValue(appendTag(b, num, varintType), v)
}

//go:noinline
func appendFixed64(b []byte, num fieldNum, v uint64) []byte {
	if v == 0 {
		return b
	}
	return binary.LittleEndian.AppendUint64(appendTag(b, num, fixed64Type), v)
}

//go:noinline
func appendFixed32(b []byte, num fieldNum, v uint32) []byte {
	if v == 0 {
		return b
	}
	return binary.LittleEndian.AppendUint32(appendTag(b, num, fixed32Type), v)
}
