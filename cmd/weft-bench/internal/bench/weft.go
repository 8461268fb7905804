package bench

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"net"
	"os"
	"path/filepath"
	"time"

	"weft.dev/weft/api"
	"weft.dev/weft/client"
	"weft.dev/weft/event"
)

// weftModel is the model weft children use: Chat Completions against the
// bench's mock.
const weftModel = "openai-chat:mock-model"

// prompt is the input of every turn, weft's and Codex's.
const prompt = "Say hello."

// weftEnv returns the environment of a weft child working in dir: a
// private home, configuration and state under dir, the store dir/weft.db,
// and the mock model as its OpenAI-compatible endpoint.
func (r *runner) weftEnv(dir string) ([]string, error) {
	home := filepath.Join(dir, "home")
	tmp := filepath.Join(dir, "tmp")
	for _, d := range []string{home, tmp, filepath.Join(dir, "work")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, err
		}
	}
	return []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + home,
		"XDG_CONFIG_HOME=" + filepath.Join(home, ".config"),
		"XDG_DATA_HOME=" + filepath.Join(home, ".local", "share"),
		"XDG_STATE_HOME=" + filepath.Join(home, ".local", "state"),
		"XDG_CACHE_HOME=" + filepath.Join(home, ".cache"),
		"TMPDIR=" + tmp,
		"WEFT_STORE=" + filepath.Join(dir, "weft.db"),
		"OPENAI_API_KEY=bench",
		"OPENAI_BASE_URL=" + r.mock.URL(),
	}, nil
}

// weftSession drives turns on one session through a client: run/start,
// then the session's subscription up to the run's run.completed. Not safe
// for concurrent use; close it to end the subscription.
type weftSession struct {
	c      *client.Client
	id     string
	next   func() (event.Event, error, bool)
	stop   func()
	cancel context.CancelFunc
}

// openSession creates a session on c and subscribes to it.
func openSession(ctx context.Context, c *client.Client) (*weftSession, error) {
	s, err := c.CreateSession(ctx, api.CreateSessionParams{Title: "bench", Model: weftModel})
	if err != nil {
		return nil, fmt.Errorf("session/create: %w", err)
	}
	sctx, cancel := context.WithCancel(ctx)
	seq, err := c.Subscribe(sctx, api.SubscribeParams{SessionID: s.Session.ID, After: s.Session.LastSeq})
	if err != nil {
		cancel()
		return nil, fmt.Errorf("events/subscribe: %w", err)
	}
	next, stop := iter.Pull2(seq)
	return &weftSession{c: c, id: s.Session.ID, next: next, stop: stop, cancel: cancel}, nil
}

// turn runs one turn and returns its latency: from the run/start call to
// the arrival of its run.completed event.
func (s *weftSession) turn(ctx context.Context) (time.Duration, error) {
	t0 := time.Now()
	// busy=queue: run.completed can arrive a moment before the session is
	// idle again, when the default (reject) would refuse the next turn.
	r, err := s.c.StartRun(ctx, api.StartRunParams{SessionID: s.id, Input: api.Input(event.TextParts(prompt)), Busy: api.BusyQueue})
	if err != nil {
		return 0, fmt.Errorf("run/start: %w", err)
	}
	for {
		e, err, ok := s.next()
		if !ok {
			return 0, errors.New("subscription ended")
		}
		if err != nil {
			return 0, fmt.Errorf("subscription: %w", err)
		}
		if e.RunID != r.ID || !event.IsTerminalRun(e.Type) {
			continue
		}
		if e.Type != event.RunCompleted {
			return 0, fmt.Errorf("run %s ended with %s: %s", r.ID, e.Type, e.Data)
		}
		return time.Since(t0), nil
	}
}

func (s *weftSession) close() {
	s.cancel()
	s.stop()
}

// freePort returns a loopback address with a port free a moment ago.
func freePort() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}
