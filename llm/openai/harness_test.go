package openai

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"iter"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"go.uber.org/goleak"

	"weft.dev/weft/event"
	"weft.dev/weft/llm"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// reply is one scripted HTTP response.
type reply struct {
	status int
	header map[string]string
	// parts are written in order, each flushed.
	parts []string
	// abort drops the connection after the parts, without ending the
	// chunked body.
	abort bool
	// hold keeps the response open after the parts until the client goes
	// away; then it closes gone, if set.
	hold bool
	gone chan struct{}
}

// recorded is one request the server received.
type recorded struct {
	path   string
	header http.Header
	body   map[string]any
	raw    []byte
}

// server serves scripted replies in order, one per request.
type server struct {
	t       testing.TB
	srv     *httptest.Server
	mu      sync.Mutex
	replies []reply
	reqs    []recorded
}

func newServer(t testing.TB, replies ...reply) *server {
	t.Helper()
	s := &server{t: t, replies: replies}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *server) serve(w http.ResponseWriter, r *http.Request) {
	raw, _ := io.ReadAll(r.Body)
	var body map[string]any
	_ = json.Unmarshal(raw, &body)
	s.mu.Lock()
	s.reqs = append(s.reqs, recorded{path: r.URL.Path, header: r.Header.Clone(), body: body, raw: raw})
	if len(s.replies) == 0 {
		s.mu.Unlock()
		http.Error(w, "no more replies", http.StatusTeapot)
		return
	}
	rep := s.replies[0]
	s.replies = s.replies[1:]
	s.mu.Unlock()

	status := rep.status
	if status == 0 {
		status = http.StatusOK
		w.Header().Set("Content-Type", "text/event-stream")
	}
	for k, v := range rep.header {
		w.Header().Set(k, v)
	}
	w.WriteHeader(status)
	rc := http.NewResponseController(w)
	for _, p := range rep.parts {
		_, _ = io.WriteString(w, p)
		_ = rc.Flush()
	}
	if rep.abort {
		conn, _, err := rc.Hijack()
		if err == nil {
			_ = conn.Close()
		}
		return
	}
	if rep.hold {
		<-r.Context().Done()
		if rep.gone != nil {
			close(rep.gone)
		}
	}
}

func (s *server) requests() []recorded {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]recorded(nil), s.reqs...)
}

func (s *server) config() Config {
	return Config{BaseURL: s.srv.URL + "/v1", HTTPClient: s.srv.Client(), APIKey: "sk-test"}
}

// result is a consumed stream, reassembled.
type result struct {
	events    []llm.StreamEvent
	text      string
	reasoning string
	calls     []event.ToolCall
	usage     *event.TokenUsage
	finish    *llm.Finish
	err       error
}

func collect(t testing.TB, seq iter.Seq2[llm.StreamEvent, error]) result {
	t.Helper()
	var r result
	for ev, err := range seq {
		if err != nil {
			if r.err != nil {
				t.Fatalf("second error %v after %v", err, r.err)
			}
			r.err = err
			continue
		}
		if r.err != nil {
			t.Fatalf("event %+v after error %v", ev, r.err)
		}
		if r.finish != nil {
			t.Fatalf("event %+v after Finish", ev)
		}
		r.events = append(r.events, ev)
		n := 0
		if ev.Text != "" {
			n++
			r.text += ev.Text
			if !utf8.ValidString(ev.Text) {
				t.Errorf("text fragment %q is not valid UTF-8", ev.Text)
			}
		}
		if ev.Reasoning != "" {
			n++
			r.reasoning += ev.Reasoning
		}
		if tc := ev.ToolCall; tc != nil {
			n++
			for len(r.calls) <= tc.Index {
				r.calls = append(r.calls, event.ToolCall{})
			}
			c := &r.calls[tc.Index]
			if tc.ID != "" {
				c.ID = tc.ID
			}
			if tc.Name != "" {
				c.Name = tc.Name
			}
			c.Arguments += tc.Arguments
			if !utf8.ValidString(tc.Arguments) {
				t.Errorf("arguments fragment %q is not valid UTF-8", tc.Arguments)
			}
		}
		if ev.Usage != nil {
			n++
			r.usage = ev.Usage
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
		t.Fatalf("stream ended with neither Finish nor error")
	}
	return r
}

// wantError checks that err is an *llm.Error of kind.
func wantError(t testing.TB, err error, provider, kind string, retryable bool) *llm.Error {
	t.Helper()
	e, ok := llm.AsError(err)
	if !ok {
		t.Fatalf("error %v (%T) is not an *llm.Error", err, err)
	}
	if e.Provider != provider || e.Kind != kind || e.Retryable != retryable {
		t.Fatalf("error %v: got provider %q kind %q retryable %v, want %q %q %v",
			err, e.Provider, e.Kind, e.Retryable, provider, kind, retryable)
	}
	return e
}

// sse formats one server-sent event.
func sse(eventType, data string) string {
	if eventType == "" {
		return "data: " + data + "\n\n"
	}
	return "event: " + eventType + "\ndata: " + data + "\n\n"
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

func ctxT(t testing.TB) context.Context { return t.Context() }

// splitArgs are the arguments the UTF-8 tests stream, and the raw bytes of
// their JSON-string fragments split inside "ü", "日" and "本".
const splitArgs = `{"city":"Zürich","text":"日本"}`

func argFragments(escaped bool) []string {
	if escaped {
		// A server that splits the decoded string between characters
		// and escapes non-ASCII.
		return []string{`{\"city\":\"Z\u00fc`, `rich\",\"text\":\"\u65e5`, `\u672c\"}`}
	}
	// A server that splits bytes: each fragment is a JSON string holding
	// half a character, unescaped.
	b := []byte(strings.ReplaceAll(splitArgs, `"`, `\"`))
	var out []string
	cuts := []int{}
	for i := range b {
		if b[i] == 0xc3 || b[i] == 0xe6 { // lead bytes of ü, 日, 本
			cuts = append(cuts, i+1)
		}
	}
	prev := 0
	for _, c := range cuts {
		out = append(out, string(b[prev:c]))
		prev = c
	}
	out = append(out, string(b[prev:]))
	if len(out) != 4 {
		panic(fmt.Sprint("fragments: ", out))
	}
	return out
}
