package gemini_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"weft.dev/weft/internal/llmhttp/llmhttptest"
	"weft.dev/weft/llm"
	"weft.dev/weft/llm/gemini"
)

// stall answers with body, flushed, then says nothing more until the
// client goes away; an empty body sends not even a header.
func stall(body string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		if body != "" {
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, body)
			w.(http.Flusher).Flush()
		}
		<-r.Context().Done()
	}
}

// TestTimeouts: a server that never answers, or stalls in the middle of
// a stream, fails the request with a retryable timeout naming the limit,
// with the default limits and with configured ones.
func TestTimeouts(t *testing.T) {
	first := chunk([]obj{text("Hel")}, "", nil)
	for _, tc := range []struct {
		name     string
		handler  http.HandlerFunc // nil: the server is unreachable
		timeouts llm.Timeouts
		limit    string
		after    time.Duration
	}{
		{"unreachable", nil, llm.Timeouts{}, llm.LimitConnect, llm.DefaultConnectTimeout},
		{"never answers", stall(""), llm.Timeouts{}, llm.LimitFirstByte, llm.DefaultFirstByteTimeout},
		{"stalls mid-stream", stall(first), llm.Timeouts{}, llm.LimitIdle, llm.DefaultIdleTimeout},
		{"configured connect", nil, llm.Timeouts{Connect: 3 * time.Second}, llm.LimitConnect, 3 * time.Second},
		{"configured first byte", stall(""), llm.Timeouts{FirstByte: 20 * time.Second}, llm.LimitFirstByte, 20 * time.Second},
		{"configured idle", stall(first), llm.Timeouts{Idle: 45 * time.Second}, llm.LimitIdle, 45 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				hc := llmhttptest.Unreachable()
				if tc.handler != nil {
					srv := llmhttptest.NewServer(tc.handler)
					defer srv.Close()
					hc = srv.Client()
				}
				defer hc.CloseIdleConnections()
				p, err := gemini.New(gemini.Config{APIKey: "k", BaseURL: llmhttptest.URL, HTTPClient: hc, Timeouts: tc.timeouts})
				if err != nil {
					t.Fatal(err)
				}
				start := time.Now()
				err = streamErr(t.Context(), p)
				e := wantKind(t, err, llm.KindTimeout, true)
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
}

// TestTimeoutsLeaveCancelAlone: the caller's context still ends a
// request with its own error, not a timeout.
func TestTimeoutsLeaveCancelAlone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := llmhttptest.NewServer(stall(""))
		defer srv.Close()
		p, err := gemini.New(gemini.Config{APIKey: "k", BaseURL: llmhttptest.URL, HTTPClient: srv.Client()})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		err = streamErr(ctx, p)
		if _, ok := llm.AsError(err); ok || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err = %v, want the context's", err)
		}
	})
}

// streamErr streams simpleRequest and returns the stream's error.
func streamErr(ctx context.Context, p llm.Provider) error {
	for _, err := range p.Stream(ctx, simpleRequest()) {
		if err != nil {
			return err
		}
	}
	return nil
}
