package telemetry

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// receiver is an OTLP/HTTP endpoint that decodes what it is sent with
// the official generated types.
type receiver struct {
	mu    sync.Mutex
	reqs  []*coltracepb.ExportTraceServiceRequest
	hdrs  []http.Header
	fails int // answer 503 to this many requests first
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err == nil && r.Header.Get("Content-Encoding") == "gzip" {
		var zr *gzip.Reader
		if zr, err = gzip.NewReader(bytes.NewReader(body)); err == nil {
			body, err = io.ReadAll(zr)
		}
	}
	var req coltracepb.ExportTraceServiceRequest
	if err == nil {
		err = proto.Unmarshal(body, &req)
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if err != nil || r.Header.Get("Content-Type") != "application/x-protobuf" {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	if rc.fails > 0 {
		rc.fails--
		http.Error(w, "busy", http.StatusServiceUnavailable)
		return
	}
	rc.reqs = append(rc.reqs, &req)
	rc.hdrs = append(rc.hdrs, r.Header.Clone())
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.Write(nil)
}

func (rc *receiver) spans() []*tracepb.Span {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	var out []*tracepb.Span
	for _, r := range rc.reqs {
		for _, rs := range r.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				out = append(out, ss.Spans...)
			}
		}
	}
	return out
}

func attrs(kvs []*commonpb.KeyValue) map[string]any {
	m := map[string]any{}
	for _, kv := range kvs {
		switch v := kv.Value.Value.(type) {
		case *commonpb.AnyValue_StringValue:
			m[kv.Key] = v.StringValue
		case *commonpb.AnyValue_IntValue:
			m[kv.Key] = v.IntValue
		case *commonpb.AnyValue_BoolValue:
			m[kv.Key] = v.BoolValue
		case *commonpb.AnyValue_DoubleValue:
			m[kv.Key] = v.DoubleValue
		case *commonpb.AnyValue_ArrayValue:
			var xs []string
			for _, x := range v.ArrayValue.Values {
				xs = append(xs, x.GetStringValue())
			}
			m[kv.Key] = xs
		}
	}
	return m
}

// What the exporter sends decodes with the official OTLP types into the
// spans that were made: IDs, parent, kind, times, attributes of every
// type, events, links, status, the resource and the scope; gzip and the
// headers as the variables say; a receiver that refuses gets its spans
// counted dropped.
func TestExporterSpeaksOTLP(t *testing.T) {
	rc := &receiver{}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	env := map[string]string{
		"OTEL_EXPORTER_OTLP_ENDPOINT":    srv.URL,
		"OTEL_EXPORTER_OTLP_HEADERS":     "x-api-key=secret%201",
		"OTEL_EXPORTER_OTLP_COMPRESSION": "gzip",
		"OTEL_SERVICE_NAME":              "weft-test",
		"OTEL_RESOURCE_ATTRIBUTES":       "deployment.environment=ci",
	}
	tr, err := FromEnv(context.Background(), Config{Getenv: envOf(env), ServiceVersion: "1.2.3"})
	if err != nil || tr == nil {
		t.Fatalf("FromEnv: %v, %v", tr, err)
	}
	ctx := context.Background()
	tracer := tr.TracerProvider().Tracer("weft.dev/weft/host", trace.WithInstrumentationVersion("v9"))
	start := time.Unix(1_700_000_000, 123)
	ctx, parent := tracer.Start(ctx, "run", trace.WithTimestamp(start), trace.WithSpanKind(trace.SpanKindInternal))
	_, child := tracer.Start(ctx, "chat gpt-5", trace.WithSpanKind(trace.SpanKindClient), trace.WithTimestamp(start.Add(time.Millisecond)),
		trace.WithLinks(trace.Link{SpanContext: parent.SpanContext(), Attributes: []attribute.KeyValue{attribute.String("why", "x")}}))
	child.SetAttributes(attribute.String("gen_ai.request.model", "gpt-5"), attribute.Int64("gen_ai.usage.input_tokens", 12),
		attribute.Float64("weft.cost_usd", 0.25), attribute.Bool("weft.cached", true), attribute.StringSlice("gen_ai.response.finish_reasons", []string{"stop"}),
		attribute.Int64("neg", -5))
	child.AddEvent("retry", trace.WithTimestamp(start.Add(2*time.Millisecond)), trace.WithAttributes(attribute.Int("attempt", 2)))
	child.SetStatus(codes.Error, "rate limited")
	child.End(trace.WithTimestamp(start.Add(3 * time.Millisecond)))
	parent.SetStatus(codes.Ok, "")
	parent.End(trace.WithTimestamp(start.Add(4 * time.Millisecond)))
	if err := tr.ForceFlush(ctx); err != nil {
		t.Fatal(err)
	}
	got := rc.spans()
	if len(got) != 2 {
		t.Fatalf("the receiver got %d spans, want 2", len(got))
	}
	c, p := got[0], got[1]
	pid, cid := parent.SpanContext().SpanID(), child.SpanContext().SpanID()
	tid := parent.SpanContext().TraceID()
	switch {
	case hex.EncodeToString(c.TraceId) != tid.String() || hex.EncodeToString(p.TraceId) != tid.String():
		t.Errorf("trace IDs %x %x, want %s", c.TraceId, p.TraceId, tid)
	case hex.EncodeToString(c.SpanId) != cid.String() || hex.EncodeToString(c.ParentSpanId) != pid.String() || len(p.ParentSpanId) != 0:
		t.Errorf("span %x parent %x; parent span %x has parent %x", c.SpanId, c.ParentSpanId, p.SpanId, p.ParentSpanId)
	case c.Name != "chat gpt-5" || c.Kind != tracepb.Span_SPAN_KIND_CLIENT || p.Kind != tracepb.Span_SPAN_KIND_INTERNAL:
		t.Errorf("name %q kind %v, parent kind %v", c.Name, c.Kind, p.Kind)
	case c.StartTimeUnixNano != uint64(start.Add(time.Millisecond).UnixNano()) || c.EndTimeUnixNano != uint64(start.Add(3*time.Millisecond).UnixNano()):
		t.Errorf("times %d–%d", c.StartTimeUnixNano, c.EndTimeUnixNano)
	case c.Status.GetCode() != tracepb.Status_STATUS_CODE_ERROR || c.Status.GetMessage() != "rate limited" || p.Status.GetCode() != tracepb.Status_STATUS_CODE_OK:
		t.Errorf("status %v, parent's %v", c.Status, p.Status)
	case len(c.Events) != 1 || c.Events[0].Name != "retry" || attrs(c.Events[0].Attributes)["attempt"] != int64(2):
		t.Errorf("events %v", c.Events)
	case len(c.Links) != 1 || hex.EncodeToString(c.Links[0].SpanId) != pid.String() || attrs(c.Links[0].Attributes)["why"] != "x":
		t.Errorf("links %v", c.Links)
	case c.Flags&0xff != uint32(parent.SpanContext().TraceFlags()):
		t.Errorf("flags %x", c.Flags)
	}
	a := attrs(c.Attributes)
	if a["gen_ai.request.model"] != "gpt-5" || a["gen_ai.usage.input_tokens"] != int64(12) || a["weft.cost_usd"] != 0.25 ||
		a["weft.cached"] != true || a["neg"] != int64(-5) || len(a["gen_ai.response.finish_reasons"].([]string)) != 1 {
		t.Errorf("attributes %v", a)
	}
	rs := rc.reqs[0].ResourceSpans[0]
	ra := attrs(rs.Resource.Attributes)
	if ra["service.name"] != "weft-test" || ra["service.version"] != "1.2.3" || ra["deployment.environment"] != "ci" {
		t.Errorf("resource %v", ra)
	}
	if sc := rs.ScopeSpans[0].Scope; sc.Name != "weft.dev/weft/host" || sc.Version != "v9" {
		t.Errorf("scope %v", sc)
	}
	if h := rc.hdrs[0]; h.Get("X-Api-Key") != "secret 1" || h.Get("Content-Encoding") != "gzip" {
		t.Errorf("headers %v", h)
	}
	// A refusal: the spans are dropped and counted.
	rc.mu.Lock()
	rc.fails = 1
	rc.mu.Unlock()
	_, s := tracer.Start(context.Background(), "lost")
	s.End()
	tr.ForceFlush(ctx)
	if tr.Dropped() != 1 || tr.Exported() != 2 {
		t.Errorf("dropped %d exported %d; want 1 and 2", tr.Dropped(), tr.Exported())
	}
	if err := tr.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
}
