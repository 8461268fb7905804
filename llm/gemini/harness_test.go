package gemini_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"go.uber.org/goleak"

	"weft.dev/weft/event"
	"weft.dev/weft/llm"
	"weft.dev/weft/llm/gemini"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// fixture returns a file of testdata: stream bytes recorded by hand after
// the API's documentation and published recordings.
func fixture(t testing.TB, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// sse formats one event of a Gemini stream.
func sse(data string) string { return "data: " + data + "\n\n" }

type obj = map[string]any

// chunk encodes a GenerateContentResponse with one candidate.
func chunk(parts []obj, finish string, usage obj) string {
	cand := obj{"content": obj{"parts": parts, "role": "model"}, "index": 0}
	if finish != "" {
		cand["finishReason"] = finish
	}
	c := obj{"candidates": []any{cand}, "modelVersion": "gemini-2.5-flash", "responseId": "resp-1"}
	if usage != nil {
		c["usageMetadata"] = usage
	}
	b, err := json.Marshal(c)
	if err != nil {
		panic(err)
	}
	return sse(string(b))
}

func text(s string) obj { return obj{"text": s} }

// reply is one scripted HTTP response.
type reply struct {
	status int
	header http.Header
	body   string
	// chunk, if positive, writes the body in pieces of this many bytes,
	// flushing each.
	chunk int
	// abort drops the connection after the body, without ending it.
	abort bool
	// hold keeps the response open after the body until the client goes
	// away.
	hold bool
}

// recorded is one request the server received.
type recorded struct {
	method, path, query string
	header              http.Header
	body                []byte
}

// server serves replies in order, the last one again for any further
// request, and records the requests.
type server struct {
	*httptest.Server
	mu      sync.Mutex
	replies []reply
	reqs    []recorded
}

func newServer(t testing.TB, replies ...reply) *server {
	t.Helper()
	s := &server{replies: replies}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

func (s *server) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	n := len(s.reqs)
	s.reqs = append(s.reqs, recorded{method: r.Method, path: r.URL.Path, query: r.URL.RawQuery, header: r.Header.Clone(), body: body})
	rep := s.replies[min(n, len(s.replies)-1)]
	s.mu.Unlock()

	for k, vs := range rep.header {
		w.Header()[k] = vs
	}
	status := max(rep.status, http.StatusOK)
	if w.Header().Get("Content-Type") == "" {
		if status == http.StatusOK {
			w.Header().Set("Content-Type", "text/event-stream")
		} else {
			w.Header().Set("Content-Type", "application/json; charset=UTF-8")
		}
	}
	w.WriteHeader(status)
	rc := http.NewResponseController(w)
	b := []byte(rep.body)
	step := rep.chunk
	if step <= 0 {
		step = len(b)
	}
	for len(b) > 0 {
		k := min(step, len(b))
		if _, err := w.Write(b[:k]); err != nil {
			return
		}
		_ = rc.Flush()
		b = b[k:]
	}
	if rep.hold {
		<-r.Context().Done()
	}
	if rep.abort {
		panic(http.ErrAbortHandler)
	}
}

func (s *server) request(t testing.TB, i int) recorded {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if i >= len(s.reqs) {
		t.Fatalf("server got %d requests, want more than %d", len(s.reqs), i)
	}
	return s.reqs[i]
}

func (s *server) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.reqs)
}

func newProvider(t testing.TB, s *server, mod ...func(*gemini.Config)) *gemini.Provider {
	t.Helper()
	cfg := gemini.Config{APIKey: "test-key", BaseURL: s.URL, HTTPClient: s.Client()}
	for _, f := range mod {
		f(&cfg)
	}
	p, err := gemini.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// result is a stream collected; collect checks the iterator's contract.
type result struct {
	text, reasoning string
	calls           []event.ToolCall
	deltas          []llm.ToolCallDelta
	usage           []event.TokenUsage
	finish          *llm.Finish
	err             error
	events          int
}

func collect(t testing.TB, ctx context.Context, p llm.Provider, req *llm.Request) result {
	t.Helper()
	var r result
	for ev, err := range p.Stream(ctx, req) {
		if err != nil {
			if r.err != nil {
				t.Fatalf("second error %v after %v", err, r.err)
			}
			r.err = err
			continue
		}
		if r.err != nil || r.finish != nil {
			t.Fatalf("event %+v after the end (err %v)", ev, r.err)
		}
		r.events++
		n := 0
		if ev.Text != "" {
			n++
			r.text += ev.Text
			if !utf8.ValidString(ev.Text) {
				t.Errorf("text %q is not valid UTF-8", ev.Text)
			}
		}
		if ev.Reasoning != "" {
			n++
			r.reasoning += ev.Reasoning
		}
		if d := ev.ToolCall; d != nil {
			n++
			r.deltas = append(r.deltas, *d)
			for len(r.calls) <= d.Index {
				r.calls = append(r.calls, event.ToolCall{})
			}
			c := &r.calls[d.Index]
			if d.ID != "" {
				c.ID = d.ID
			}
			if d.Name != "" {
				c.Name = d.Name
			}
			c.Arguments += d.Arguments
		}
		if ev.Usage != nil {
			n++
			r.usage = append(r.usage, *ev.Usage)
		}
		if ev.Finish != nil {
			n++
			r.finish = ev.Finish
		}
		if n != 1 {
			t.Errorf("event %+v sets %d fields, want 1", ev, n)
		}
	}
	if r.err == nil && r.finish == nil {
		t.Fatal("stream ended with neither Finish nor error")
	}
	return r
}

func simpleRequest() *llm.Request {
	return &llm.Request{Model: "gemini-2.5-flash", Messages: []llm.Message{{Role: llm.RoleUser, Content: "hi"}}}
}

func wantKind(t testing.TB, err error, kind string, retryable bool) *llm.Error {
	t.Helper()
	e, ok := llm.AsError(err)
	if !ok {
		t.Fatalf("error = %v (%T), want *llm.Error of kind %s", err, err, kind)
	}
	if e.Kind != kind || e.Retryable != retryable || e.Provider != "gemini" {
		t.Fatalf("error = %v (kind %s retryable %v provider %s), want kind %s retryable %v provider gemini",
			e, e.Kind, e.Retryable, e.Provider, kind, retryable)
	}
	return e
}

// body decodes a recorded request body.
func (r recorded) json(t testing.TB) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("request body: %v\n%s", err, r.body)
	}
	return m
}

func mustJSON(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// crlf turns a recorded stream's line ends into CRLF.
func crlf(s string) string { return strings.ReplaceAll(s, "\n", "\r\n") }
