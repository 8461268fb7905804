package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
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

// codexServer is a `codex app-server` child driven over stdio
// (newline-delimited JSON-RPC) by a [stdioServer].
type codexServer struct {
	*stdioServer

	mu    sync.Mutex
	turns map[string]chan turnEnd // by thread, for turn/completed
}

// turnEnd is how a turn ended and when its notification was read.
type turnEnd struct {
	status string
	err    string
	at     time.Time
}

// startCodexServer starts `codex app-server` in dir and initializes it.
func (r *runner) startCodexServer(ctx context.Context, dir string) (*codexServer, error) {
	env, err := r.codexEnv(dir)
	if err != nil {
		return nil, err
	}
	s := &codexServer{turns: map[string]chan turnEnd{}}
	c := command(ctx, env, filepath.Join(dir, "work"), r.cfg.Codex, "app-server")
	if s.stdioServer, err = startStdioServer(c, "codex app-server", s.notified); err != nil {
		return nil, err
	}
	ictx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := s.call(ictx, "initialize", map[string]any{"clientInfo": map[string]any{"name": "weft-bench", "version": "1"}}, nil); err != nil {
		s.Close()
		return nil, s.ch.errorf("codex app-server: initialize: %v", err)
	}
	if err := s.write(map[string]any{"jsonrpc": "2.0", "method": "initialized"}); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// notified hands turn/completed to the thread's waiter.
func (s *codexServer) notified(method string, params json.RawMessage, at time.Time) {
	if method != "turn/completed" {
		return
	}
	var p struct {
		ThreadID string `json:"threadId"`
		Turn     struct {
			Status string          `json:"status"`
			Error  json.RawMessage `json:"error"`
		} `json:"turn"`
	}
	if json.Unmarshal(params, &p) != nil {
		return
	}
	s.mu.Lock()
	c := s.turns[p.ThreadID]
	s.mu.Unlock()
	if c != nil {
		select {
		case c <- turnEnd{status: p.Turn.Status, err: string(p.Turn.Error), at: at}:
		default:
		}
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

// turn runs one turn on a thread and returns its latency: from writing
// turn/start to reading the turn/completed notification.
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
		return end.at.Sub(t0), nil
	case <-s.done:
		return 0, s.ch.errorf("codex app-server exited during a turn")
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}
