package session

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"weft.dev/weft/agent"
	"weft.dev/weft/event"
	"weft.dev/weft/store/memory"
	"weft.dev/weft/store/storetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testConfig is a session Config on st with no model a run could use.
// The session gets no more of st than its role ([Store]).
func testConfig(st *storetest.Faulty) *Config {
	var n atomic.Int64
	return &Config{
		Store:        struct{ Store }{st},
		ResolveModel: func(name string) (*agent.Model, error) { return nil, fmt.Errorf("no model %q", name) },
		NewID:        func(prefix string) string { return fmt.Sprintf("%s_%d", prefix, n.Add(1)) },
		Logger:       slog.New(slog.DiscardHandler),
		RetryBackoff: time.Second,
	}
}

// When a write fails, the run that wrote it may be done with it and start
// the next queued run before the session's watcher marks the session
// failed: startNext must not start a run on a journal that has failed
// (its writes are all refused, and recovery would fail a run that never
// started), however the two goroutines are scheduled. The session's lock
// is held here to stand for the watcher being late.
func TestStartNextRefusesOnAFailedJournal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		fst := &storetest.Faulty{Store: memory.New()}
		s, err := Create(ctx, testConfig(fst), "ses_1", event.SessionCreatedData{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		e, err := event.New("run_1", event.RunQueued, event.RunQueuedData{Input: event.TextParts("go")})
		if err != nil {
			t.Fatal(err)
		}
		s.mu.Lock()
		fst.Fail(errors.New("disk full"))
		if _, err := s.j.Append(ctx, e); err == nil {
			t.Fatal("an append succeeded on a full disk")
		}
		s.queue = append(s.queue, queuedRun{id: "run_1"})
		s.startNext()
		started := s.active != nil
		s.mu.Unlock()
		if started {
			t.Fatal("the next queued run started on a journal that has failed")
		}
	})
}
