package anthropic_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"weft.dev/weft/llm"
	"weft.dev/weft/llm/anthropic"
)

// TestBaseURLWithVersion: a base URL that ends in /v1 (as other
// providers' base URLs do) reaches /v1/messages, not /v1/v1/messages.
func TestBaseURLWithVersion(t *testing.T) {
	for _, suffix := range []string{"", "/", "/v1", "/v1/"} {
		t.Run(suffix, func(t *testing.T) {
			paths := make(chan string, 1)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				select {
				case paths <- r.URL.Path:
				default:
				}
				http.Error(w, `{"type":"error","error":{"type":"invalid_request_error","message":"no"}}`, 400)
			}))
			defer srv.Close()
			p, err := anthropic.New(anthropic.Config{APIKey: "k", BaseURL: srv.URL + suffix, HTTPClient: srv.Client()})
			if err != nil {
				t.Fatal(err)
			}
			for range p.Stream(context.Background(), &llm.Request{Model: "m", Messages: []llm.Message{{Role: llm.RoleUser, Content: "hi"}}}) {
				break
			}
			if got := <-paths; got != "/v1/messages" {
				t.Errorf("base %q: path %q, want /v1/messages", srv.URL+suffix, got)
			}
		})
	}
}
