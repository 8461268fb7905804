package host_test

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"reflect"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"weft.dev/weft/agent"
	"weft.dev/weft/api"
	"weft.dev/weft/event"
	"weft.dev/weft/host"
	"weft.dev/weft/llm"
	"weft.dev/weft/llm/scripted"
	"weft.dev/weft/store"
	"weft.dev/weft/store/memory"
	"weft.dev/weft/store/storetest"
	"weft.dev/weft/tool"
	"weft.dev/weft/tool/builtin"
)

// logChecker is a model that, before each answer, checks that the
// conversation it was sent is the one the session's log holds: what the
// session owner keeps between runs must never differ from a fresh read.
type logChecker struct {
	t  *testing.T
	st store.Store

	mu      sync.Mutex
	session string
	checked int
}

// checked is a model that checks with a logChecker, then answers as inner.
type checked struct {
	c     *logChecker
	inner llm.Provider
}

func (p checked) Stream(ctx context.Context, req *llm.Request) iter.Seq2[llm.StreamEvent, error] {
	p.c.check(ctx, req)
	return p.inner.Stream(ctx, req)
}

func (c *logChecker) check(ctx context.Context, req *llm.Request) {
	c.mu.Lock()
	sid := c.session
	c.checked++
	c.mu.Unlock()
	want, err := agent.LoadTranscript(context.WithoutCancel(ctx), c.st, sid)
	if err != nil {
		c.t.Errorf("load transcript: %v", err)
	} else if !reflect.DeepEqual(req.Messages, want) {
		c.t.Errorf("the model was sent %d messages, the log holds %d:\n sent %s\n  log %s",
			len(req.Messages), len(want), summary(req.Messages), summary(want))
	}
}

func (c *logChecker) setSession(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.session = id
}

func (c *logChecker) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.checked
}

func summary(ms []llm.Message) string {
	var b strings.Builder
	for _, m := range ms {
		fmt.Fprintf(&b, "[%s %q %d calls %s] ", m.Role, m.Content, len(m.ToolCalls), m.ToolCallID)
	}
	return b.String()
}

// TestTranscriptKeptMatchesLog runs a session through what changes a
// transcript in unusual ways (tool calls, a cancel that closes a call,
// steering, an interrupt, a write that failed after it committed, a
// reload, a budget too small to keep anything) and checks at every model
// request that the conversation sent is the one a fresh read of the log
// gives.
func TestTranscriptKeptMatchesLog(t *testing.T) {
	for _, budget := range []int64{0, 1} {
		t.Run(fmt.Sprintf("budget=%d", budget), func(t *testing.T) {
			fst := &storetest.Faulty{Store: memory.New()}
			checker := &logChecker{t: t, st: fst}
			reg := tool.NewRegistry()
			if err := builtin.Register(reg, builtin.Options{}); err != nil {
				t.Fatal(err)
			}
			cfg := host.Config{
				Store: fst, Tools: reg, CoalesceWindow: time.Millisecond, StorageRetry: time.Millisecond,
				TranscriptBytes: budget,
				ResolveModel: func(name string) (*host.Model, error) {
					key := strings.TrimPrefix(name, "scripted:")
					p, err := scripted.Parse(key+".json", []byte(scripts[key]))
					if err != nil {
						return nil, err
					}
					return &host.Model{Name: name, Provider: checked{checker, p}, Model: key}, nil
				},
			}
			if budget == 1 {
				cfg.TranscriptBytes = 1 // nothing fits: every run start reads the log
			}
			ctx := context.Background()
			h, err := host.New(ctx, cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { h.Close() }()
			sid := session(t, h, "scripted:steps")
			checker.setSession(sid)

			run := func(model string) {
				t.Helper()
				r := start(t, h, api.StartRunParams{SessionID: sid, Model: model, Input: input("go " + model)})
				if got := wait(t, h, r.ID); got.Status != store.RunCompleted {
					t.Fatalf("run %s: %s", r.ID, got.Status)
				}
			}
			for range 3 {
				run("scripted:steps")
			}

			// A cancel while a tool runs: the call is closed in the log.
			r := start(t, h, api.StartRunParams{SessionID: sid, Model: "scripted:tool", Input: input("sleep")})
			waitFor(t, h, sid, r.ID, ofType(event.ToolCallStarted))
			if _, err := h.CancelRun(ctx, api.CancelParams{RunID: r.ID, Reason: "test"}); err != nil {
				t.Fatal(err)
			}
			run("scripted:steps")

			// Steering while the model streams, then an interrupt.
			r = start(t, h, api.StartRunParams{SessionID: sid, Model: "scripted:slow", Input: input("long")})
			waitFor(t, h, sid, r.ID, ofType(event.MessageDelta))
			if _, err := h.SteerRun(ctx, api.SteerParams{RunID: r.ID, Input: input("and also")}); err != nil {
				t.Fatal(err)
			}
			waitFor(t, h, sid, r.ID, ofType(event.SteerConsumed))
			r2 := start(t, h, api.StartRunParams{SessionID: sid, Model: "scripted:steps", Busy: api.BusyInterrupt, Input: input("instead")})
			wait(t, h, r2.ID)

			// A new host over the same store reads the log once.
			h.Close()
			if h, err = host.New(ctx, cfg); err != nil {
				t.Fatal(err)
			}
			run("scripted:steps")
			run("scripted:steps")

			if checker.count() < 10 {
				t.Fatalf("the model was asked %d times", checker.count())
			}
		})
	}
}

// TestTranscriptAfterAmbiguousWrite makes writes commit and then report a
// failure (a connection lost after the commit): the session recovers from
// what the store holds, and the conversation sent to the model afterwards
// is still the log's.
func TestTranscriptAfterAmbiguousWrite(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fst := &storetest.Faulty{Store: memory.New()}
		checker := &logChecker{t: t, st: fst}
		h, err := host.New(context.Background(), host.Config{
			Store: fst, CoalesceWindow: time.Millisecond, StorageRetry: time.Millisecond,
			ResolveModel: func(name string) (*host.Model, error) {
				p, err := scripted.Parse("fast.json", []byte(scripts["fast"]))
				if err != nil {
					return nil, err
				}
				return &host.Model{Name: name, Provider: checked{checker, p}, Model: "fast"}, nil
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		defer h.Close()
		ctx := context.Background()
		sid := session(t, h, "scripted:fast")
		checker.setSession(sid)
		for i := range 5 {
			// The first lie is run/start's run.queued: the call fails,
			// the run is in the log, and recovery ends it as failed.
			if i == 2 {
				fst.FailAfterCommit(3, errors.New("connection reset after commit"))
			}
			r, err := h.StartRun(ctx, api.StartRunParams{SessionID: sid, Input: input(fmt.Sprint("turn ", i))})
			for errors.Is(err, api.ErrStorageUnavailable) {
				time.Sleep(time.Millisecond) // a client retries; the session recovers by itself
				r, err = h.StartRun(ctx, api.StartRunParams{SessionID: sid, Input: input(fmt.Sprint("turn ", i))})
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := wait(t, h, r.ID); !store.IsTerminal(got.Status) {
				t.Fatalf("run %s: %s", r.ID, got.Status)
			}
		}
		if checker.count() < 4 {
			t.Fatalf("the model was asked %d times", checker.count())
		}
	})
}
