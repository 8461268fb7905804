package openai

import (
	"context"
	"errors"
	"io"
	"iter"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"weft.dev/weft/internal/llmhttp/llmhttptest"
	"weft.dev/weft/llm"
)

// stall answers with the parts, flushed, then says nothing more until
// the client goes away.
func stall(parts ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		if parts == nil {
			<-r.Context().Done() // not even a header
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		for _, p := range parts {
			io.WriteString(w, p)
			w.(http.Flusher).Flush()
		}
		<-r.Context().Done()
	}
}

// TestTimeouts: a server that never answers, or stalls in the middle of
// a stream, fails the request with a retryable timeout naming the limit,
// for both APIs, with the default limits and with configured ones.
func TestTimeouts(t *testing.T) {
	apis := map[string]struct {
		provider string
		first    string // the first chunk of a stream
		new      func(Config) (llm.Provider, error)
	}{
		"chat":      {ChatProviderName, textChunk("Hel"), func(c Config) (llm.Provider, error) { return NewChat(c) }},
		"responses": {ResponsesProviderName, respCreated() + textDelta("Hel"), func(c Config) (llm.Provider, error) { return NewResponses(c) }},
	}
	for name, api := range apis {
		for _, tc := range []struct {
			name     string
			handler  http.HandlerFunc // nil: the server is unreachable
			timeouts llm.Timeouts
			limit    string
			after    time.Duration
		}{
			{"unreachable", nil, llm.Timeouts{}, llm.LimitConnect, llm.DefaultConnectTimeout},
			{"never answers", stall(), llm.Timeouts{}, llm.LimitFirstByte, llm.DefaultFirstByteTimeout},
			{"stalls mid-stream", stall(api.first), llm.Timeouts{}, llm.LimitIdle, llm.DefaultIdleTimeout},
			{"configured connect", nil, llm.Timeouts{Connect: 3 * time.Second}, llm.LimitConnect, 3 * time.Second},
			{"configured first byte", stall(), llm.Timeouts{FirstByte: 20 * time.Second}, llm.LimitFirstByte, 20 * time.Second},
			{"configured idle", stall(api.first), llm.Timeouts{Idle: 45 * time.Second}, llm.LimitIdle, 45 * time.Second},
		} {
			t.Run(name+"/"+tc.name, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					hc := llmhttptest.Unreachable()
					if tc.handler != nil {
						srv := llmhttptest.NewServer(tc.handler)
						defer srv.Close()
						hc = srv.Client()
					}
					defer hc.CloseIdleConnections()
					p, err := api.new(Config{BaseURL: llmhttptest.URL + "/v1", HTTPClient: hc, APIKey: "sk-test", Timeouts: tc.timeouts})
					if err != nil {
						t.Fatal(err)
					}
					start := time.Now()
					err = streamErr(p.Stream(t.Context(), simpleRequest()))
					e := wantError(t, err, api.provider, llm.KindTimeout, true)
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
}

// TestTimeoutsLeaveCancelAlone: the caller's context still ends a
// request with its own error, not a timeout.
func TestTimeoutsLeaveCancelAlone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := llmhttptest.NewServer(stall(textChunk("Hel")))
		defer srv.Close()
		p, err := NewChat(Config{BaseURL: llmhttptest.URL + "/v1", HTTPClient: srv.Client()})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		err = streamErr(p.Stream(ctx, simpleRequest()))
		if _, ok := llm.AsError(err); ok || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err = %v, want the context's", err)
		}
	})
}

// streamErr consumes seq and returns its error.
func streamErr(seq iter.Seq2[llm.StreamEvent, error]) error {
	for _, err := range seq {
		if err != nil {
			return err
		}
	}
	return nil
}

// TestChatSilentAfterFinish: a Chat server that goes silent after the
// finish_reason, without [DONE], has said all it had to: the stream ends
// when the idle limit is hit, without an error.
func TestChatSilentAfterFinish(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := llmhttptest.NewServer(stall(textChunk("ok"), chunk(`{}`, "stop")))
		defer srv.Close()
		p, err := NewChat(Config{BaseURL: llmhttptest.URL + "/v1", HTTPClient: srv.Client(), Timeouts: llm.Timeouts{Idle: time.Minute}})
		if err != nil {
			t.Fatal(err)
		}
		r := collect(t, p.Stream(t.Context(), simpleRequest()))
		if r.err != nil || r.text != "ok" || r.finish.Reason != llm.FinishStop {
			t.Fatalf("got %q %+v, %v", r.text, r.finish, r.err)
		}
	})
}
