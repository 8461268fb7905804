package openai

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"weft.dev/weft/llm"
)

// benchTokens is the length of the benchmarked response.
const benchTokens = 1000

func benchServer(b *testing.B, body string) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write([]byte(body))
	}))
	b.Cleanup(srv.Close)
	return srv
}

func benchStream(b *testing.B, p llm.Provider) {
	req := simpleRequest()
	b.ReportAllocs()
	for b.Loop() {
		n := 0
		for ev, err := range p.Stream(b.Context(), req) {
			if err != nil {
				b.Fatal(err)
			}
			if ev.Text != "" {
				n++
			}
		}
		if n != benchTokens {
			b.Fatalf("%d text events, want %d", n, benchTokens)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*benchTokens), "ns/token")
}

// BenchmarkChatStream1000 streams a 1,000-token text response through the
// Chat provider from an httptest server.
func BenchmarkChatStream1000(b *testing.B) {
	var sb strings.Builder
	for i := range benchTokens {
		sb.WriteString(textChunk([]string{"The", " quick", " brown", " fox", " jumps", " over", " the", " lazy", " dog", "."}[i%10]))
	}
	sb.WriteString(chunk(`{}`, "stop") + chatUsage + chatDone)
	srv := benchServer(b, sb.String())
	p, err := NewChat(Config{BaseURL: srv.URL, HTTPClient: srv.Client()})
	if err != nil {
		b.Fatal(err)
	}
	benchStream(b, p)
}

// BenchmarkResponsesStream1000 streams a 1,000-token text response through
// the Responses provider from an httptest server.
func BenchmarkResponsesStream1000(b *testing.B) {
	var sb strings.Builder
	sb.WriteString(respCreated())
	for i := range benchTokens {
		sb.WriteString(textDelta([]string{"The", " quick", " brown", " fox", " jumps", " over", " the", " lazy", " dog", "."}[i%10]))
	}
	sb.WriteString(respCompleted())
	srv := benchServer(b, sb.String())
	p, err := NewResponses(Config{BaseURL: srv.URL, HTTPClient: srv.Client()})
	if err != nil {
		b.Fatal(err)
	}
	benchStream(b, p)
}
