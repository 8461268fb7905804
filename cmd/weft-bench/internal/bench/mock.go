package bench

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"
)

// mockWords is the answer of the mock model, one streamed chunk per word.
var mockWords = [...]string{"Hello", " from", " the", " mock", " model."}

// mockModel is a zero-latency model server on a loopback port. It answers
// every POST to a path ending in /chat/completions with a fixed streamed
// Chat Completions answer (a role chunk, five text chunks, the finish,
// usage, [DONE]), and every POST ending in /responses with the same text
// as a Responses stream (what Codex speaks); anything else is 404. It
// reads each request body to the end and keeps no state beyond a counter.
// Close stops it and waits for its goroutine.
type mockModel struct {
	ln       net.Listener
	srv      *http.Server
	done     chan struct{}
	requests atomic.Int64
	chat     string
}

// startMock listens on 127.0.0.1 (a free port) and serves.
func startMock() (*mockModel, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("mock model: %w", err)
	}
	m := &mockModel{ln: ln, done: make(chan struct{}), chat: chatStream()}
	m.srv = &http.Server{Handler: m, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		defer close(m.done)
		_ = m.srv.Serve(ln)
	}()
	return m, nil
}

// URL is the OpenAI-style base URL, ending in /v1.
func (m *mockModel) URL() string { return "http://" + m.ln.Addr().String() + "/v1" }

// Close stops the server, closing open connections.
func (m *mockModel) Close() error {
	err := m.srv.Close()
	<-m.done
	return err
}

func (m *mockModel) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	if r.Method != http.MethodPost {
		http.NotFound(w, r)
		return
	}
	var body string
	switch {
	case strings.HasSuffix(r.URL.Path, "/chat/completions"):
		body = m.chat
	case strings.HasSuffix(r.URL.Path, "/responses"):
		body = responsesStream(m.requests.Load() + 1)
	default:
		http.NotFound(w, r)
		return
	}
	m.requests.Add(1)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	_, _ = io.WriteString(w, body)
}

// chatStream is the Chat Completions answer, as rpc's BenchmarkWarmTurn
// serves it.
func chatStream() string {
	var sb strings.Builder
	chunk := func(delta, finish string) {
		fmt.Fprintf(&sb, `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"mock-model","choices":[{"index":0,"delta":%s,"finish_reason":%s}]}`+"\n\n", delta, finish)
	}
	chunk(`{"role":"assistant","content":""}`, "null")
	for _, w := range mockWords {
		chunk(`{"content":"`+w+`"}`, "null")
	}
	chunk(`{}`, `"stop"`)
	sb.WriteString(`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"mock-model","choices":[],"usage":{"prompt_tokens":20,"completion_tokens":5,"total_tokens":25}}` + "\n\n")
	sb.WriteString("data: [DONE]\n\n")
	return sb.String()
}

// responsesStream is the same answer in the Responses API's streaming
// format: response.created, response.in_progress, the message item and
// its text part, one output_text.delta per word, the done events and
// response.completed with usage. n makes the IDs unique per request.
func responsesStream(n int64) string {
	resp := fmt.Sprintf("resp_bench%d", n)
	msg := fmt.Sprintf("msg_bench%d", n)
	text := strings.Join(mockWords[:], "")
	var sb strings.Builder
	seq := 0
	ev := func(typ, fields string) {
		fmt.Fprintf(&sb, "event: %s\ndata: {\"type\":%q,\"sequence_number\":%d,%s}\n\n", typ, typ, seq, fields)
		seq++
	}
	response := func(status, output, usage string) string {
		return fmt.Sprintf(`"response":{"id":%q,"object":"response","created_at":1,"status":%q,"error":null,"incomplete_details":null,"model":"mock-model","output":[%s],"parallel_tool_calls":true,"store":false,"tool_choice":"auto","tools":[],"usage":%s}`,
			resp, status, output, usage)
	}
	part := func(t string) string {
		return fmt.Sprintf(`{"type":"output_text","annotations":[],"logprobs":[],"text":%q}`, t)
	}
	item := func(status, content string) string {
		return fmt.Sprintf(`{"id":%q,"type":"message","status":%q,"role":"assistant","content":[%s]}`, msg, status, content)
	}
	ev("response.created", response("in_progress", "", "null"))
	ev("response.in_progress", response("in_progress", "", "null"))
	ev("response.output_item.added", `"output_index":0,"item":`+item("in_progress", ""))
	ev("response.content_part.added", fmt.Sprintf(`"item_id":%q,"output_index":0,"content_index":0,"part":%s`, msg, part("")))
	for _, w := range mockWords {
		ev("response.output_text.delta", fmt.Sprintf(`"item_id":%q,"output_index":0,"content_index":0,"delta":%q,"logprobs":[]`, msg, w))
	}
	ev("response.output_text.done", fmt.Sprintf(`"item_id":%q,"output_index":0,"content_index":0,"text":%q,"logprobs":[]`, msg, text))
	ev("response.content_part.done", fmt.Sprintf(`"item_id":%q,"output_index":0,"content_index":0,"part":%s`, msg, part(text)))
	done := item("completed", part(text))
	ev("response.output_item.done", `"output_index":0,"item":`+done)
	ev("response.completed", response("completed", done,
		`{"input_tokens":20,"input_tokens_details":{"cached_tokens":0},"output_tokens":5,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":25}`))
	return sb.String()
}
