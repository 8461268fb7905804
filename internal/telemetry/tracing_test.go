package telemetry

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func envOf(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

// Without an endpoint or an exporter asked for, tracing is off: nothing
// is built, no goroutine starts.
func TestTracingOffByDefault(t *testing.T) {
	before := runtime.NumGoroutine()
	for _, env := range []map[string]string{
		nil,
		{"OTEL_SERVICE_NAME": "x"},
		{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_TRACES_EXPORTER": "none"},
		{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_SDK_DISABLED": "true"},
	} {
		tr, err := FromEnv(context.Background(), Config{Getenv: envOf(env)})
		if err != nil || tr != nil {
			t.Errorf("env %v: tracing %v, err %v; want off", env, tr, err)
		}
		if tr.TracerProvider() != nil || tr.Content() || tr.Dropped() != 0 {
			t.Errorf("a nil Tracing is not inert")
		}
	}
	if n := runtime.NumGoroutine(); n > before {
		t.Errorf("%d goroutines after, %d before", n, before)
	}
}

// Variables that do not parse are refused with their name.
func TestTracingBadVariables(t *testing.T) {
	ep := "http://127.0.0.1:4318"
	for _, c := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, "OTEL_TRACES_EXPORTER"},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "localhost:4318"}, "OTEL_EXPORTER_OTLP_ENDPOINT"},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": ep, "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, "OTEL_EXPORTER_OTLP_PROTOCOL"},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": ep, "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, "OTEL_EXPORTER_OTLP_PROTOCOL"},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": ep, "OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE": "/x.pem"}, "OTEL_EXPORTER_OTLP_CLIENT_KEY"},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": ep, "OTEL_EXPORTER_OTLP_TIMEOUT": "10s"}, "OTEL_EXPORTER_OTLP_TIMEOUT"},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": ep, "OTEL_EXPORTER_OTLP_HEADERS": "novalue"}, "OTEL_EXPORTER_OTLP_HEADERS"},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": ep, "OTEL_TRACES_SAMPLER": "sometimes"}, "OTEL_TRACES_SAMPLER"},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": ep, "OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "2"}, "OTEL_TRACES_SAMPLER_ARG"},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": ep, "OTEL_BSP_MAX_QUEUE_SIZE": "-1"}, "OTEL_BSP_MAX_QUEUE_SIZE"},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": ep, "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "yes please"}, "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"},
	} {
		tr, err := FromEnv(context.Background(), Config{Getenv: envOf(c.env)})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("env %v: err %v, want one naming %s", c.env, err, c.want)
		}
		if tr != nil {
			tr.Shutdown(context.Background())
		}
	}
}

// slowExporter blocks each export until release is closed, then fails.
type slowExporter struct {
	calls   atomic.Int64
	release chan struct{}
}

func (e *slowExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	e.calls.Add(1)
	select {
	case <-e.release:
	case <-ctx.Done():
	}
	return errors.New("endpoint down")
}

func (e *slowExporter) Shutdown(context.Context) error { return nil }

// A span ends without waiting while the exporter hangs: beyond the
// queue, spans are dropped and counted, and so are those of the export
// that fails.
func TestBatcherNeverBlocksAndCounts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		exp := &slowExporter{release: make(chan struct{})}
		b := newBatcher(exp, batchConfig{delay: time.Millisecond, timeout: time.Hour, queue: 4, batch: 2})
		tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(b))
		tracer := tp.Tracer("test")
		end := func(n int) {
			for range n {
				_, s := tracer.Start(context.Background(), "s")
				s.End()
			}
		}
		end(2) // one batch: the exporter takes it and hangs
		synctest.Wait()
		time.Sleep(time.Millisecond)
		synctest.Wait()
		if exp.calls.Load() != 1 {
			t.Fatalf("%d exports, want 1 in flight", exp.calls.Load())
		}
		end(10) // 4 queue, 6 dropped at once
		if d := b.dropped.Load(); d != 6 {
			t.Errorf("dropped %d with the queue full, want 6", d)
		}
		close(exp.release) // every export fails from now on
		if err := tp.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
		if d, x := b.dropped.Load(), b.exported.Load(); d != 12 || x != 0 {
			t.Errorf("dropped %d exported %d, want 12 and 0", d, x)
		}
	})
}

// The OTLP headers' values are what the host must mask: a collector's
// credentials.
func TestHeaderValues(t *testing.T) {
	got := HeaderValues(envOf(map[string]string{
		"OTEL_EXPORTER_OTLP_HEADERS":        "api-key=s3cret%20value,x=",
		"OTEL_EXPORTER_OTLP_TRACES_HEADERS": "authorization=Bearer tok",
	}))
	slices.Sort(got)
	if want := []string{"Bearer tok", "s3cret value"}; !slices.Equal(got, want) {
		t.Errorf("HeaderValues = %q, want %q", got, want)
	}
}
