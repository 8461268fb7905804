package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"
)

// codexEnv prepares a Codex home under dir whose config points Codex at
// the bench's mock model (a custom provider speaking the Responses API,
// with a dummy key) and turns off what would reach beyond loopback
// (plugin marketplace sync, analytics and OTLP metrics, update checks),
// and returns the environment of a codex child.
func (r *runner) codexEnv(dir string) ([]string, error) {
	home := filepath.Join(dir, "codex-home")
	tmp := filepath.Join(dir, "tmp")
	for _, d := range []string{home, tmp, filepath.Join(dir, "work")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, err
		}
	}
	cfg := fmt.Sprintf(`# Written by weft-bench: Codex against the bench's mock model, offline.
model = "mock-model"
model_provider = "mock"
approval_policy = "never"
sandbox_mode = "danger-full-access"
check_for_update_on_startup = false

[model_providers.mock]
name = "mock"
base_url = %q
wire_api = "responses"
env_key = "WEFT_BENCH_KEY"

[features]
plugins = false

[analytics]
enabled = false

[otel]
metrics_exporter = "none"
`, r.mock.URL())
	if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte(cfg), 0o600); err != nil {
		return nil, err
	}
	return []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + dir,
		"CODEX_HOME=" + home,
		"TMPDIR=" + tmp,
		"WEFT_BENCH_KEY=bench",
	}, nil
}

// codexServer is a `codex app-server` child spoken to over stdio
// (newline-delimited JSON-RPC). Its reader goroutine ends when the child's
// output does; Close kills the child and waits for both.
type codexServer struct {
	ch   *child
	in   io.WriteCloser
	done chan struct{} // closed when the reader ends

	wmu sync.Mutex // serialises writes to in

	mu      sync.Mutex
	id      int64
	pending map[int64]chan rpcReply
	turns   map[string]chan turnEnd // by thread, for turn/completed
	readErr error
}

type rpcReply struct {
	result json.RawMessage
	err    error
}

type turnEnd struct {
	status string
	err    string
}

// startCodexServer starts `codex app-server` in dir and initializes it.
func (r *runner) startCodexServer(ctx context.Context, dir string) (*codexServer, error) {
	env, err := r.codexEnv(dir)
	if err != nil {
		return nil, err
	}
	c := command(ctx, env, filepath.Join(dir, "work"), r.cfg.Codex, "app-server")
	in, err := c.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := c.StdoutPipe()
	if err != nil {
		return nil, err
	}
	ch, err := startChild(c)
	if err != nil {
		return nil, err
	}
	s := &codexServer{ch: ch, in: in, done: make(chan struct{}), pending: map[int64]chan rpcReply{}, turns: map[string]chan turnEnd{}}
	go s.read(out)
	ictx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := s.call(ictx, "initialize", map[string]any{"clientInfo": map[string]any{"name": "weft-bench", "version": "1"}}, nil); err != nil {
		s.Close()
		return nil, ch.errorf("codex app-server: initialize: %v", err)
	}
	if err := s.write(map[string]any{"jsonrpc": "2.0", "method": "initialized"}); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// read dispatches the server's messages: replies to their callers,
// turn/completed to the thread's waiter; requests from the server (which a
// text turn with approvals off should not make) are refused.
func (s *codexServer) read(out io.Reader) {
	defer close(s.done)
	br := bufio.NewReaderSize(out, 1<<16)
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 {
			s.handle(line)
		}
		if err != nil {
			s.mu.Lock()
			s.readErr = fmt.Errorf("codex app-server output ended: %w", err)
			for id, c := range s.pending {
				c <- rpcReply{err: s.readErr}
				delete(s.pending, id)
			}
			s.mu.Unlock()
			return
		}
	}
}

func (s *codexServer) handle(line []byte) {
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Result json.RawMessage `json:"result"`
		Error  *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
		Params json.RawMessage `json:"params"`
	}
	if json.Unmarshal(line, &m) != nil {
		return
	}
	switch {
	case m.Method != "" && len(m.ID) > 0:
		_ = s.write(map[string]any{"jsonrpc": "2.0", "id": m.ID, "error": map[string]any{"code": -32601, "message": "weft-bench answers no requests"}})
	case m.Method == "turn/completed":
		var p struct {
			ThreadID string `json:"threadId"`
			Turn     struct {
				Status string          `json:"status"`
				Error  json.RawMessage `json:"error"`
			} `json:"turn"`
		}
		if json.Unmarshal(m.Params, &p) != nil {
			return
		}
		s.mu.Lock()
		c := s.turns[p.ThreadID]
		s.mu.Unlock()
		if c != nil {
			select {
			case c <- turnEnd{status: p.Turn.Status, err: string(p.Turn.Error)}:
			default:
			}
		}
	case m.Method == "" && len(m.ID) > 0:
		id, err := strconv.ParseInt(string(m.ID), 10, 64)
		if err != nil {
			return
		}
		s.mu.Lock()
		c := s.pending[id]
		delete(s.pending, id)
		s.mu.Unlock()
		if c == nil {
			return
		}
		if m.Error != nil {
			c <- rpcReply{err: fmt.Errorf("error %d: %s", m.Error.Code, m.Error.Message)}
		} else {
			c <- rpcReply{result: m.Result}
		}
	}
}

func (s *codexServer) write(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	_, err = s.in.Write(append(b, '\n'))
	return err
}

// call sends a request and waits for its reply.
func (s *codexServer) call(ctx context.Context, method string, params, result any) error {
	c := make(chan rpcReply, 1)
	s.mu.Lock()
	if s.readErr != nil {
		s.mu.Unlock()
		return s.readErr
	}
	s.id++
	id := s.id
	s.pending[id] = c
	s.mu.Unlock()
	if err := s.write(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params}); err != nil {
		return err
	}
	select {
	case rep := <-c:
		if rep.err != nil {
			return fmt.Errorf("%s: %w", method, rep.err)
		}
		if result != nil {
			return json.Unmarshal(rep.result, result)
		}
		return nil
	case <-ctx.Done():
		s.mu.Lock()
		delete(s.pending, id)
		s.mu.Unlock()
		return fmt.Errorf("%s: %w", method, ctx.Err())
	}
}

// startThread starts a thread in the working directory.
func (s *codexServer) startThread(ctx context.Context, cwd string) (string, error) {
	var res struct {
		Thread struct {
			ID string `json:"id"`
		} `json:"thread"`
	}
	if err := s.call(ctx, "thread/start", map[string]any{"cwd": cwd}, &res); err != nil {
		return "", err
	}
	if res.Thread.ID == "" {
		return "", errors.New("thread/start: no thread id")
	}
	s.mu.Lock()
	s.turns[res.Thread.ID] = make(chan turnEnd, 1)
	s.mu.Unlock()
	return res.Thread.ID, nil
}

// turn runs one turn on a thread and returns its latency: from the
// turn/start call to the turn/completed notification.
func (s *codexServer) turn(ctx context.Context, thread string) (time.Duration, error) {
	s.mu.Lock()
	done := s.turns[thread]
	s.mu.Unlock()
	t0 := time.Now()
	input := []map[string]any{{"type": "text", "text": prompt}}
	if err := s.call(ctx, "turn/start", map[string]any{"threadId": thread, "input": input}, nil); err != nil {
		return 0, err
	}
	select {
	case end := <-done:
		if end.status != "completed" {
			return 0, fmt.Errorf("codex turn ended %s: %s", end.status, end.err)
		}
		return time.Since(t0), nil
	case <-s.done:
		return 0, s.ch.errorf("codex app-server exited during a turn")
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

// Close ends the child and waits for the reader.
func (s *codexServer) Close() {
	s.in.Close()
	s.ch.Stop()
	<-s.done
}
