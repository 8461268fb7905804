package openai

import (
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"weft.dev/weft/internal/llmhttp/llmhttptest"
	"weft.dev/weft/llm"
)

// TestTimeouts: a server that never answers, or stalls in the middle of
// a stream, fails the request with a retryable timeout naming the limit,
// for both APIs, with the default limits and with configured ones; the
// caller's own deadline stays its own.
func TestTimeouts(t *testing.T) {
	t.Run("chat", func(t *testing.T) {
		llmhttptest.TestTimeouts(t, func(hc *http.Client, to llm.Timeouts) (llm.Provider, error) {
			return NewChat(Config{BaseURL: llmhttptest.URL + "/v1", HTTPClient: hc, APIKey: "sk-test", Timeouts: to})
		}, ChatProviderName, textChunk("Hel"), simpleRequest())
	})
	t.Run("responses", func(t *testing.T) {
		llmhttptest.TestTimeouts(t, func(hc *http.Client, to llm.Timeouts) (llm.Provider, error) {
			return NewResponses(Config{BaseURL: llmhttptest.URL + "/v1", HTTPClient: hc, APIKey: "sk-test", Timeouts: to})
		}, ResponsesProviderName, respCreated()+textDelta("Hel"), simpleRequest())
	})
}

// TestChatSilentAfterFinish: a Chat server that goes silent after the
// finish_reason, without [DONE], has said all it had to: the stream ends
// when the idle limit is hit, without an error.
func TestChatSilentAfterFinish(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := llmhttptest.NewServer(llmhttptest.Stall(textChunk("ok"), chunk(`{}`, "stop")))
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
