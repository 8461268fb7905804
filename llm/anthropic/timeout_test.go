package anthropic_test

import (
	"net/http"
	"testing"

	"weft.dev/weft/internal/llmhttp/llmhttptest"
	"weft.dev/weft/llm"
	"weft.dev/weft/llm/anthropic"
)

// TestTimeouts: a server that never answers, or stalls in the middle of
// a stream, fails the request with a retryable timeout naming the limit,
// with the default limits and with configured ones; the caller's own
// deadline stays its own.
func TestTimeouts(t *testing.T) {
	llmhttptest.TestTimeouts(t, func(hc *http.Client, to llm.Timeouts) (llm.Provider, error) {
		return anthropic.New(anthropic.Config{APIKey: "k", BaseURL: llmhttptest.URL, HTTPClient: hc, Timeouts: to})
	}, "anthropic", (&sse{}).messageStart(5, 0, 0).String(), simpleRequest())
}
