package llmhttp_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"weft.dev/weft/internal/llmhttp"
	"weft.dev/weft/internal/llmhttp/llmhttptest"
	"weft.dev/weft/llm"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// exchange sends a GET through hc with t enforced and reads the whole
// body, pausing pause after each Read that returned data. It returns the
// body, how long it took and the error.
func exchange(ctx context.Context, hc *http.Client, t llm.Timeouts, pause time.Duration) (string, time.Duration, error) {
	start := time.Now()
	req, _ := http.NewRequestWithContext(ctx, "GET", llmhttptest.URL+"/", nil)
	res, err := llmhttp.Client(hc, t).Do(req)
	if err != nil {
		return "", time.Since(start), err
	}
	defer res.Body.Close()
	var b strings.Builder
	buf := make([]byte, 64)
	for {
		n, err := res.Body.Read(buf)
		b.Write(buf[:n])
		if err == io.EOF {
			return b.String(), time.Since(start), nil
		}
		if err != nil {
			return b.String(), time.Since(start), err
		}
		if n > 0 && pause > 0 {
			time.Sleep(pause)
		}
	}
}

// chunks writes each part after its delay, flushed, then waits for the
// client to go (hold) or ends the response.
func chunks(hold bool, parts ...any) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for _, p := range parts {
			switch p := p.(type) {
			case time.Duration:
				select {
				case <-time.After(p):
				case <-r.Context().Done():
					return
				}
			case string:
				io.WriteString(w, p)
				w.(http.Flusher).Flush()
			}
		}
		if hold {
			<-r.Context().Done()
		}
	}
}

func wantTimeout(t *testing.T, err error, limit string, took, want time.Duration) {
	t.Helper()
	var te *llm.TimeoutError
	if !errors.As(err, &te) || te.Limit != limit {
		t.Fatalf("err = %v, want the %s limit", err, limit)
	}
	if took != want {
		t.Errorf("took %v, want %v", took, want)
	}
}

func TestTimeouts(t *testing.T) {
	for _, tc := range []struct {
		name    string
		handler http.Handler // nil: a server that never accepts
		t       llm.Timeouts
		pause   time.Duration
		limit   string // "" for none
		took    time.Duration
		body    string
	}{
		{name: "never connects", limit: llm.LimitConnect, took: llm.DefaultConnectTimeout},
		{name: "never answers", handler: chunks(true), limit: llm.LimitFirstByte, took: llm.DefaultFirstByteTimeout},
		{name: "header then nothing", handler: chunks(true, ""), limit: llm.LimitFirstByte, took: llm.DefaultFirstByteTimeout},
		{name: "stalls mid-stream", handler: chunks(true, "data: a\n\n", time.Minute, "data: b\n\n"),
			limit: llm.LimitIdle, took: time.Minute + llm.DefaultIdleTimeout, body: "data: a\n\ndata: b\n\n"},
		{name: "configured limits", handler: chunks(true, 2*time.Second, "data: a\n\n"),
			t: llm.Timeouts{FirstByte: time.Second}, limit: llm.LimitFirstByte, took: time.Second},
		{name: "configured idle", handler: chunks(true, "data: a\n\n"),
			t: llm.Timeouts{Idle: 10 * time.Second}, limit: llm.LimitIdle, took: 10 * time.Second, body: "data: a\n\n"},
		// Chunks four minutes apart for twenty minutes: every wait is
		// below the limits, however long the whole.
		{name: "slow but steady", handler: chunks(false, 4*time.Minute, "a", 4*time.Minute, "b", 4*time.Minute, "c", 4*time.Minute, "d", 4*time.Minute, "e"),
			took: 20 * time.Minute, body: "abcde"},
		// A consumer that takes its time is not a silent server.
		{name: "slow consumer", handler: chunks(false, "a", "b"), pause: time.Hour, took: 2 * time.Hour, body: "ab"},
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
				body, took, err := exchange(t.Context(), hc, tc.t, tc.pause)
				if tc.limit == "" {
					if err != nil {
						t.Fatal(err)
					}
					if took != tc.took {
						t.Errorf("took %v, want %v", took, tc.took)
					}
				} else {
					wantTimeout(t, err, tc.limit, took, tc.took)
				}
				if body != tc.body {
					t.Errorf("body %q, want %q", body, tc.body)
				}
			})
		})
	}
}

// TestNoLimit: a negative limit is none; the caller's context still ends
// the request, with its own error.
func TestNoLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := llmhttptest.NewServer(chunks(true))
		defer srv.Close()
		ctx, cancel := context.WithTimeout(t.Context(), 24*time.Hour)
		defer cancel()
		_, took, err := exchange(ctx, srv.Client(), llm.Timeouts{FirstByte: -1}, 0)
		var te *llm.TimeoutError
		if errors.As(err, &te) || !errors.Is(err, context.DeadlineExceeded) || took != 24*time.Hour {
			t.Fatalf("err = %v after %v, want the context's deadline after 24h", err, took)
		}
	})
}

func TestTimeoutFrom(t *testing.T) {
	te := &llm.TimeoutError{Limit: llm.LimitIdle, After: time.Minute}
	e := llm.TimeoutFrom("openai", &wrapped{te})
	if e == nil || e.Kind != llm.KindTimeout || !e.Retryable || e.Provider != "openai" {
		t.Fatalf("TimeoutFrom = %+v", e)
	}
	if got, want := e.Error(), "openai: timeout: the model stream sent nothing for 1m0s (idle timeout)"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if llm.TimeoutFrom("openai", io.EOF) != nil {
		t.Error("TimeoutFrom(io.EOF) is not nil")
	}
}

type wrapped struct{ err error }

func (w *wrapped) Error() string { return "wrapped: " + w.err.Error() }
func (w *wrapped) Unwrap() error { return w.err }

// TestPooledClientReusesConnections checks that a pooled client keeps the
// connections of many concurrent requests to one host: rounds of ten at
// once open ten connections in all, not ten less two a round as
// http.DefaultTransport's two idle connections a host would.
func TestPooledClientReusesConnections(t *testing.T) {
	var (
		mu    sync.Mutex
		conns int
	)
	release := make(chan struct{})
	var arrived sync.WaitGroup
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		mu.Lock()
		rel := release
		mu.Unlock()
		arrived.Done()
		<-rel
		_, _ = io.WriteString(w, "ok")
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			mu.Lock()
			conns++
			mu.Unlock()
		}
	}
	srv.Start()
	defer srv.Close()
	hc := llmhttp.NewPooledClient()
	defer hc.CloseIdleConnections()
	const n, rounds = 10, 3
	body := strings.Repeat("x", 40<<10) // fits WriteBufferSize
	for range rounds {
		arrived.Add(n)
		var wg sync.WaitGroup
		errs := make(chan error, n)
		for range n {
			wg.Go(func() {
				res, err := hc.Post(srv.URL, "text/plain", strings.NewReader(body))
				if err != nil {
					errs <- err
					return
				}
				_, _ = io.Copy(io.Discard, res.Body)
				res.Body.Close()
			})
		}
		arrived.Wait() // all n at once: n connections
		mu.Lock()
		close(release)
		release = make(chan struct{})
		mu.Unlock()
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if conns != n {
		t.Errorf("%d connections for %d rounds of %d requests at once, want %d", conns, rounds, n, n)
	}
}
