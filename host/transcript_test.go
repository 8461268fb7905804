package host_test

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"reflect"
	"slices"
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
	"weft.dev/weft/store/record"
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
	if req.Purpose == "" { // a summary request adds its instruction
		p.c.check(ctx, req)
	}
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
				if got := wait(t, h, r.ID); got.Status != record.RunCompleted {
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

			// A new host over the same store reads the log once, from a
			// snapshot in the middle of it (inside a step's results).
			h.Close()
			plantSnapshot(t, fst, sid)
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
			if got := wait(t, h, r.ID); !record.IsTerminal(got.Status) {
				t.Fatalf("run %s: %s", r.ID, got.Status)
			}
		}
		if checker.count() < 4 {
			t.Fatalf("the model was asked %d times", checker.count())
		}
	})
}

// plantSnapshot stores a snapshot of session sid's transcript through a
// tool result in the middle of its log, as the session would have.
func plantSnapshot(t *testing.T, st store.Store, sid string) {
	t.Helper()
	ctx := context.Background()
	evs, err := st.Read(ctx, store.ReadParams{SessionID: sid, Limit: 1 << 20, Types: agent.TranscriptTypes()})
	if err != nil {
		t.Fatal(err)
	}
	cut := len(evs) / 2
	for cut < len(evs)-1 && evs[cut].Type != event.ToolCallCompleted {
		cut++
	}
	var b agent.TranscriptBuilder
	for _, e := range evs[:cut+1] {
		if err := b.Add(e); err != nil {
			t.Fatal(err)
		}
	}
	data, err := b.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	if err := st.PutSnapshot(ctx, record.Snapshot{SessionID: sid, Kind: record.SnapshotTranscript, Seq: evs[cut].Seq, Data: data}); err != nil {
		t.Fatal(err)
	}
}

// recorder is a model that records the conversations it is sent.
type recorder struct {
	inner llm.Provider

	mu   sync.Mutex
	sent [][]llm.Message
}

func (r *recorder) Stream(ctx context.Context, req *llm.Request) iter.Seq2[llm.StreamEvent, error] {
	r.mu.Lock()
	r.sent = append(r.sent, slices.Clone(req.Messages)) // a provider keeps nothing of req
	r.mu.Unlock()
	return r.inner.Stream(ctx, req)
}

func (r *recorder) last() []llm.Message {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.sent[len(r.sent)-1]
}

// TestTranscriptSnapshot checks the snapshots a session stores of its
// transcript: written once enough of the log is not in one, through a
// seq of the log, with the log's transcript; read at the first run start
// after a load (a planted snapshot that differs from the log is what the
// model is sent, proving it was read); and ignored when it does not
// decode, the log read instead.
func TestTranscriptSnapshot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memory.New()
		reg := tool.NewRegistry()
		if err := builtin.Register(reg, builtin.Options{}); err != nil {
			t.Fatal(err)
		}
		rec := &recorder{}
		cfg := host.Config{
			Store: st, Tools: reg, CoalesceWindow: time.Millisecond,
			ResolveModel: func(name string) (*host.Model, error) {
				p, err := scripted.Parse("steps.json", []byte(scripts["steps"]))
				if err != nil {
					return nil, err
				}
				rec.inner = p
				return &host.Model{Name: name, Provider: rec, Model: "steps"}, nil
			},
		}
		ctx := context.Background()
		h, err := host.New(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { h.Close() }()
		sid := session(t, h, "scripted:steps")

		// Each run folds four transcript events (input, a call, its
		// result, the answer): 70 runs pass the 256 that make a snapshot
		// due.
		for i := range 70 {
			r := start(t, h, api.StartRunParams{SessionID: sid, Input: input(fmt.Sprint("turn ", i))})
			if got := wait(t, h, r.ID); got.Status != record.RunCompleted {
				t.Fatalf("run %s: %s", r.ID, got.Status)
			}
		}
		synctest.Wait()
		snap, err := st.Snapshot(ctx, sid, record.SnapshotTranscript)
		if err != nil {
			t.Fatalf("no snapshot after 70 runs: %v", err)
		}
		var b agent.TranscriptBuilder
		if err := b.UnmarshalBinary(snap.Data); err != nil {
			t.Fatal(err)
		}
		rest, err := st.Read(ctx, store.ReadParams{SessionID: sid, After: snap.Seq, Limit: 1 << 20, Types: agent.TranscriptTypes()})
		if err != nil {
			t.Fatal(err)
		}
		if snap.Seq < 256 || len(rest) >= 256 {
			t.Fatalf("snapshot through seq %d, %d transcript events after it", snap.Seq, len(rest))
		}
		for _, e := range rest {
			if err := b.Add(e); err != nil {
				t.Fatal(err)
			}
		}
		want, err := agent.LoadTranscript(ctx, st, sid)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(b.Messages(), want) {
			t.Fatalf("snapshot and the log after it hold %d messages, the log %d", len(b.Messages()), len(want))
		}

		// A planted snapshot through the last seq, with a marker: the next
		// host sends it, so it was read instead of the log.
		h.Close()
		last, err := st.LastSeq(ctx, sid)
		if err != nil {
			t.Fatal(err)
		}
		var marked agent.TranscriptBuilder
		if err := marked.Add(mustEvent(t, event.MessageUser, event.MessageUserData{Content: event.TextParts("from the snapshot")})); err != nil {
			t.Fatal(err)
		}
		data, _ := marked.MarshalBinary()
		if err := st.PutSnapshot(ctx, record.Snapshot{SessionID: sid, Kind: record.SnapshotTranscript, Seq: last, Data: data}); err != nil {
			t.Fatal(err)
		}
		if h, err = host.New(ctx, cfg); err != nil {
			t.Fatal(err)
		}
		r := start(t, h, api.StartRunParams{SessionID: sid, Input: input("after the restart")})
		wait(t, h, r.ID)
		if got := rec.last(); len(got) < 2 || got[0].Content != "from the snapshot" {
			t.Fatalf("the model was sent %s; want the planted snapshot first", summary(got))
		}

		// A snapshot that does not decode is ignored: the log is read.
		h.Close()
		if last, err = st.LastSeq(ctx, sid); err != nil {
			t.Fatal(err)
		}
		if err := st.PutSnapshot(ctx, record.Snapshot{SessionID: sid, Kind: record.SnapshotTranscript, Seq: last, Data: []byte("WTX2\xff\xff")}); err != nil {
			t.Fatal(err)
		}
		if h, err = host.New(ctx, cfg); err != nil {
			t.Fatal(err)
		}
		r = start(t, h, api.StartRunParams{SessionID: sid, Input: input("after a corrupt snapshot")})
		wait(t, h, r.ID)
		sent := rec.sent[len(rec.sent)-2] // the run's first request: the log before it and the input
		want, err = agent.LoadTranscript(ctx, st, sid)
		if err != nil {
			t.Fatal(err)
		}
		if len(sent) < 1 || sent[0].Content != "turn 0" || len(sent) != len(want)-3 {
			t.Fatalf("after a corrupt snapshot the model was sent %d messages starting %s; the log holds %d", len(sent), summary(sent[:1]), len(want))
		}
	})
}

func mustEvent(t *testing.T, typ event.Type, v any) event.Event {
	t.Helper()
	e, err := event.New("run", typ, v)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// An idle session lets go of its transcript after TranscriptIdle, a busy
// or watched one keeps it, and the next run after the release sends the
// model the conversation the log holds.
func TestIdleSessionReleasesTranscript(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memory.New()
		checker := &logChecker{t: t, st: st}
		h, err := host.New(context.Background(), host.Config{
			Store: st, CoalesceWindow: time.Millisecond, TranscriptIdle: 10 * time.Second,
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
		var first string
		turn := func(text string) {
			t.Helper()
			r, err := h.StartRun(ctx, api.StartRunParams{SessionID: sid, Input: input(text)})
			if err != nil {
				t.Fatal(err)
			}
			if got := wait(t, h, r.ID); got.Status != record.RunCompleted {
				t.Fatalf("run %s: %s", r.ID, got.Status)
			}
			if first == "" {
				first = r.ID
			}
		}
		turn("one")
		turn("two") // the second run start keeps what the first built
		if host.TranscriptBytes(h) == 0 {
			t.Fatal("no transcript kept after two runs")
		}
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if host.TranscriptBytes(h) == 0 {
			t.Fatal("the transcript was let go after 5 s idle")
		}
		// A subscriber keeps the session busy.
		sctx, cancel := context.WithCancel(ctx)
		events, err := h.Subscribe(sctx, api.SubscribeParams{SessionID: sid})
		if err != nil {
			t.Fatal(err)
		}
		watched := make(chan struct{})
		go func() {
			defer close(watched)
			for range events {
			}
		}()
		time.Sleep(30 * time.Second)
		synctest.Wait()
		if host.TranscriptBytes(h) == 0 {
			t.Fatal("a watched session let go of its transcript")
		}
		cancel()
		<-watched
		time.Sleep(30 * time.Second)
		synctest.Wait()
		if n := host.TranscriptBytes(h); n != 0 {
			t.Fatalf("%d bytes of transcript kept after 30 s idle", n)
		}
		// The idle session forgot its ended runs too: their records
		// come from the store.
		if r, err := h.GetRun(ctx, api.RunIDParams{RunID: first}); err != nil || r.Run.Status != record.RunCompleted {
			t.Fatalf("run %s after the release: %+v, %v", first, r, err)
		}
		before := checker.count()
		turn("three")
		if checker.count() != before+1 {
			t.Fatalf("the model was asked %d times for one run", checker.count()-before)
		}
	})
}
