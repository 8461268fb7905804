package llmhttptest

import (
	"context"
	"errors"
	"io"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"weft.dev/weft/llm"
)

// Stall returns a handler that reads the request, answers with parts as
// an event stream, each flushed, and then says nothing more until the
// client goes away. With no parts it sends not even a header.
func Stall(parts ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		if len(parts) > 0 {
			w.Header().Set("Content-Type", "text/event-stream")
			for _, p := range parts {
				io.WriteString(w, p)
				w.(http.Flusher).Flush()
			}
		}
		<-r.Context().Done()
	}
}

// NewProvider makes the provider under test: one that reaches the server
// at [URL] through hc, with the timeouts to.
type NewProvider func(hc *http.Client, to llm.Timeouts) (llm.Provider, error)

// TestTimeouts is the timeout conformance suite every provider passes: a
// server that cannot be reached, one that never answers and one that
// stalls after the first chunk of a stream fail the request, after
// exactly the limit (the default, then a configured one), with a
// retryable *llm.Error of kind timeout from provider whose
// *llm.TimeoutError names the limit. first is the first chunk of a
// stream in the provider's wire format; req is a request it sends.
func TestTimeouts(t *testing.T, newProvider NewProvider, provider, first string, req *llm.Request) {
	t.Helper()
	for _, tc := range []struct {
		name     string
		handler  http.HandlerFunc // nil: the server is unreachable
		timeouts llm.Timeouts
		limit    string
		after    time.Duration
	}{
		{"unreachable", nil, llm.Timeouts{}, llm.LimitConnect, llm.DefaultConnectTimeout},
		{"never answers", Stall(), llm.Timeouts{}, llm.LimitFirstByte, llm.DefaultFirstByteTimeout},
		{"stalls mid-stream", Stall(first), llm.Timeouts{}, llm.LimitIdle, llm.DefaultIdleTimeout},
		{"configured connect", nil, llm.Timeouts{Connect: 3 * time.Second}, llm.LimitConnect, 3 * time.Second},
		{"configured first byte", Stall(), llm.Timeouts{FirstByte: 20 * time.Second}, llm.LimitFirstByte, 20 * time.Second},
		{"configured idle", Stall(first), llm.Timeouts{Idle: 45 * time.Second}, llm.LimitIdle, 45 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				hc := Unreachable()
				if tc.handler != nil {
					srv := NewServer(tc.handler)
					defer srv.Close()
					hc = srv.Client()
				}
				defer hc.CloseIdleConnections()
				p, err := newProvider(hc, tc.timeouts)
				if err != nil {
					t.Fatal(err)
				}
				start := time.Now()
				err = streamErr(t.Context(), p, req)
				e, ok := llm.AsError(err)
				if !ok || e.Kind != llm.KindTimeout || !e.Retryable || e.Provider != provider {
					t.Fatalf("err = %v (%T), want a retryable %s error of kind %s", err, err, provider, llm.KindTimeout)
				}
				var te *llm.TimeoutError
				if !errors.As(e, &te) || te.Limit != tc.limit || te.After != tc.after {
					t.Fatalf("err = %v, want the %s limit of %v", err, tc.limit, tc.after)
				}
				if took := time.Since(start); took != tc.after {
					t.Errorf("failed after %v, want %v", took, tc.after)
				}
			})
		})
	}
	t.Run("cancel", func(t *testing.T) {
		// The caller's context still ends a request with its own error,
		// not a timeout.
		synctest.Test(t, func(t *testing.T) {
			srv := NewServer(Stall())
			defer srv.Close()
			p, err := newProvider(srv.Client(), llm.Timeouts{})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			err = streamErr(ctx, p, req)
			if _, ok := llm.AsError(err); ok || !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("err = %v, want the context's", err)
			}
		})
	})
}

// streamErr streams req and returns the stream's error.
func streamErr(ctx context.Context, p llm.Provider, req *llm.Request) error {
	for _, err := range p.Stream(ctx, req) {
		if err != nil {
			return err
		}
	}
	return nil
}
