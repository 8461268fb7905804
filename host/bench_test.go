package host_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"weft.dev/weft/api"
	"weft.dev/weft/event"
	"weft.dev/weft/host"
	"weft.dev/weft/llm/scripted"
	"weft.dev/weft/store"
	"weft.dev/weft/store/sqlite"
	"weft.dev/weft/tool"
)

// benchScripts are the scripted models of the host benchmarks.
var benchScripts = map[string]string{
	// fanout: 39 steps of a short text and 10 parallel no-op tool calls
	// (about 24 events a step), then a final answer; looped, so that every
	// run of a session is answered the same way.
	"fanout": func() string {
		calls := strings.TrimSuffix(strings.Repeat(`{"name":"noop","arguments":{"n":1}},`, 10), ",")
		step := `{"text":"Calling the tools now.","toolCalls":[` + calls + `]}`
		return `{"loop":true,"steps":[` + strings.Repeat(step+",", 39) + `{"text":"done"}]}`
	}(),
	// gated: every step writes a file through a noop call that the
	// session's policy asks about; looped.
	"gated": `{"loop":true,"steps":[{"toolCalls":[{"name":"noop","arguments":{"n":1}}]}]}`,
	// stream: a step streams 100 words, one every millisecond, forever.
	"stream": `{"loop":true,"steps":[{"text":"` + strings.TrimSpace(strings.Repeat("tok ", 100)) + `","delayMs":1}]}`,
	// text: one short answer, for every run.
	"text": `{"loop":true,"steps":[{"text":"Done."}]}`,
}

// newBenchHost starts a host over a SQLite file in a temp dir with the
// bench scripts and a no-op tool (see benchHostConfig).
func newBenchHost(b *testing.B, cfg host.Config) (*host.Host, *sqlite.Store) {
	b.Helper()
	st := openBenchStore(b)
	bc := benchHostConfig(b, st)
	cfg.Store, cfg.Tools, cfg.ResolveModel = bc.Store, bc.Tools, bc.ResolveModel
	h, err := host.New(context.Background(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { h.Close() })
	return h, st
}

// benchHostConfig is a host configuration over st with the bench scripts
// as models ("scripted:NAME") and a no-op tool.
func benchHostConfig(b testing.TB, st store.Store) host.Config {
	b.Helper()
	type noopIn struct {
		N int `json:"n"`
	}
	noop, err := tool.Func("noop", "Does nothing.", func(context.Context, *tool.Call, noopIn) (tool.Result, error) {
		return tool.Result{Output: "ok"}, nil
	})
	if err != nil {
		b.Fatal(err)
	}
	reg := tool.NewRegistry()
	if err := reg.Add(noop); err != nil {
		b.Fatal(err)
	}
	return host.Config{Store: st, Tools: reg, ResolveModel: func(name string) (*host.Model, error) {
		key := strings.TrimPrefix(name, "scripted:")
		src, ok := benchScripts[key]
		if !ok {
			return nil, fmt.Errorf("unknown model %q", name)
		}
		p, err := scripted.Parse(key+".json", []byte(src))
		if err != nil {
			return nil, err
		}
		return &host.Model{Name: name, Provider: p, Model: key}, nil
	}}
}

func openBenchStore(b *testing.B) *sqlite.Store {
	b.Helper()
	st, err := sqlite.Open(context.Background(), sqlite.Config{Path: filepath.Join(b.TempDir(), "weft.db")})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	return st
}

// latencies is a histogram of delivery latencies with 10 µs buckets up to
// one second, safe for concurrent use.
type latencies struct {
	buckets [100_001]atomic.Int64
	n       atomic.Int64
}

func (l *latencies) add(d time.Duration) {
	i := min(max(int(d/(10*time.Microsecond)), 0), len(l.buckets)-1)
	l.buckets[i].Add(1)
	l.n.Add(1)
}

// quantile returns the q-quantile in milliseconds (the bucket's upper edge).
func (l *latencies) quantile(q float64) float64 {
	want := int64(math.Ceil(q * float64(l.n.Load())))
	var seen int64
	for i := range l.buckets {
		seen += l.buckets[i].Load()
		if seen >= want && seen > 0 {
			return float64(i+1) * 0.01
		}
	}
	return math.NaN()
}

// BenchmarkFanout measures delivery to in-process subscribers (host.Subscribe)
// of one session while a run on it produces events as fast as it can: one
// iteration is one 40-step run of the "fanout" script (about 950 events) on
// SQLite. Latency is from the event's commit stamp (event.Time, taken just
// before the store transaction) to its receipt by the subscriber, over
// every event and subscriber. events/s is the run's own throughput.
func BenchmarkFanout(b *testing.B) {
	for _, subs := range []int{0, 1000} {
		b.Run(fmt.Sprintf("subs=%d", subs), func(b *testing.B) {
			h, _ := newBenchHost(b, host.Config{})
			ctx := context.Background()
			s, err := h.CreateSession(ctx, api.CreateSessionParams{Model: "scripted:fanout"})
			if err != nil {
				b.Fatal(err)
			}
			sctx, stop := context.WithCancel(ctx)
			var (
				wg     sync.WaitGroup
				lat    latencies
				lagged atomic.Int64
			)
			// drained is closed once the subscribers have received every
			// event of the runs, or one of them lagged. How many events that
			// is is known only once the runs are over: until then the goal
			// is out of reach.
			var (
				goal      atomic.Int64
				drained   = make(chan struct{})
				drainOnce sync.Once
			)
			goal.Store(math.MaxInt64)
			drain := func() { drainOnce.Do(func() { close(drained) }) }
			for range subs {
				seq, err := h.Subscribe(sctx, s.ID, s.LastSeq, "")
				if err != nil {
					b.Fatal(err)
				}
				wg.Go(func() {
					for e, err := range seq {
						if err != nil {
							if !errors.Is(err, context.Canceled) {
								lagged.Add(1)
								drain()
							}
							return
						}
						lat.add(time.Since(e.Time))
						if lat.n.Load() >= goal.Load() {
							drain()
						}
					}
				})
			}
			var events int64
			b.ReportAllocs()
			for b.Loop() {
				before, _ := h.GetSession(ctx, s.ID)
				r, err := h.StartRun(ctx, api.StartRunParams{SessionID: s.ID, Input: input("go")})
				if err != nil {
					b.Fatal(err)
				}
				w, err := h.WaitRun(ctx, api.WaitRunParams{RunID: r.ID, TimeoutMs: 60_000})
				if err != nil || w.Run.Status != store.RunCompleted {
					b.Fatalf("run %s: %+v %v", r.ID, w, err)
				}
				after, _ := h.GetSession(ctx, s.ID)
				events += after.LastSeq - before.LastSeq
			}
			elapsed := b.Elapsed()
			// Let the subscribers drain before the histogram is read.
			last, _ := h.GetSession(ctx, s.ID)
			goal.Store(int64(subs) * (last.LastSeq - s.LastSeq))
			if lat.n.Load() >= goal.Load() {
				drain()
			}
			select {
			case <-drained:
			case <-time.After(10 * time.Second):
			}
			stop()
			wg.Wait()
			b.ReportMetric(float64(events)/elapsed.Seconds(), "events/s")
			if subs > 0 {
				b.ReportMetric(lat.quantile(0.50), "p50-ms")
				b.ReportMetric(lat.quantile(0.99), "p99-ms")
				b.ReportMetric(float64(lagged.Load()), "lagged")
			}
		})
	}
}

// prefill writes a session of n events (session.created, one completed run
// whose message.delta events carry ~200 bytes each) directly to st.
func prefill(b *testing.B, st store.Store, id string, n int64) {
	b.Helper()
	ctx := context.Background()
	proj := store.NewProjection(store.Session{}, nil)
	now := time.Now().Add(-time.Hour)
	text := strings.Repeat("The quick brown fox jumps over the lazy dog. ", 4)[:175]
	mk := func(runID string, t event.Type, v any) event.Event {
		e, err := event.New(runID, t, v)
		if err != nil {
			b.Fatal(err)
		}
		return e
	}
	appendBatch := func(evs []event.Event) {
		for i := range evs {
			now = now.Add(time.Microsecond)
			evs[i].SessionID, evs[i].Seq, evs[i].Time = id, proj.Session.LastSeq+1, now.UTC()
			if err := proj.Apply(evs[i]); err != nil {
				b.Fatal(err)
			}
		}
		bt := store.Batch{SessionID: id, Events: evs}
		proj.Flush(&bt)
		if err := st.Append(ctx, bt); err != nil {
			b.Fatal(err)
		}
	}
	run := "run_prefill_" + id
	appendBatch([]event.Event{
		mk("", event.SessionCreated, event.SessionCreatedData{Title: "bench", Model: "scripted:stream"}),
		mk(run, event.RunQueued, event.RunQueuedData{Model: "scripted:stream", Input: event.TextParts("go")}),
		mk(run, event.RunStarted, event.RunStartedData{Model: "scripted:stream"}),
	})
	for proj.Session.LastSeq < n-1 {
		evs := make([]event.Event, min(500, n-1-proj.Session.LastSeq))
		for i := range evs {
			evs[i] = mk(run, event.MessageDelta, event.DeltaData{Step: 1, Text: text})
		}
		appendBatch(evs)
	}
	appendBatch([]event.Event{mk(run, event.RunCompleted, event.RunEndedData{Steps: 1})})
}

// BenchmarkResume subscribes (host.Subscribe) after cursor 50,000 in a
// 100,000-event SQLite session and reads to the end: the time to the first
// event and to catching up with the live end.
func BenchmarkResume(b *testing.B) {
	const total, cursor = 100_000, 50_000
	st := openBenchStore(b)
	prefill(b, st, "ses_resume", total)
	h, err := host.New(context.Background(), host.Config{Store: st, ResolveModel: func(string) (*host.Model, error) {
		return nil, errors.New("no models")
	}})
	if err != nil {
		b.Fatal(err)
	}
	defer h.Close()
	ctx := context.Background()
	var first, caught []time.Duration
	b.ReportAllocs()
	for b.Loop() {
		t0 := time.Now()
		seq, err := h.Subscribe(ctx, "ses_resume", cursor, "")
		if err != nil {
			b.Fatal(err)
		}
		n := 0
		for e, err := range seq {
			if err != nil {
				b.Fatal(err)
			}
			if n == 0 {
				first = append(first, time.Since(t0))
			}
			n++
			if e.Seq == total {
				break
			}
		}
		caught = append(caught, time.Since(t0))
		if n != total-cursor {
			b.Fatalf("%d events, want %d", n, total-cursor)
		}
	}
	b.ReportMetric(median(first), "first-ms")
	b.ReportMetric(median(caught), "catchup-ms")
}

// median returns the median of ds in milliseconds.
func median(ds []time.Duration) float64 { return quantile(ds, 0.5) }

func quantile(ds []time.Duration, q float64) float64 {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(int(float64(len(s))*q), len(s)-1)].Seconds() * 1e3
}

// BenchmarkSteer measures steering in a warm host while the scripted model
// streams 100 words at one per millisecond (one step takes ~100-150 ms).
// An iteration starts a run, steers it as soon as its first message.delta
// is committed, waits for steer.consumed, then cancels the run.
//
//   - ack-ms: SteerRun's latency (steer.accepted committed).
//   - beyond-boundary-ms: from the commit of the step's message.completed
//     (the step boundary the steer waits for) to the commit of
//     steer.consumed; what weft adds beyond the boundary. The target.
//   - raw-ms: from the SteerRun call to the commit of steer.consumed,
//     mostly the wait for the rest of the streaming step.
func BenchmarkSteer(b *testing.B) {
	h, _ := newBenchHost(b, host.Config{})
	ctx := context.Background()
	s, err := h.CreateSession(ctx, api.CreateSessionParams{Model: "scripted:stream"})
	if err != nil {
		b.Fatal(err)
	}
	var ack, beyond, raw []time.Duration
	b.ReportAllocs()
	for b.Loop() {
		cur, _ := h.GetSession(ctx, s.ID)
		r, err := h.StartRun(ctx, api.StartRunParams{SessionID: s.ID, Input: input("go")})
		if err != nil {
			b.Fatal(err)
		}
		seq, err := h.Subscribe(ctx, s.ID, cur.LastSeq, r.ID)
		if err != nil {
			b.Fatal(err)
		}
		var (
			steered   time.Time
			completed time.Time
		)
		for e, err := range seq {
			if err != nil {
				b.Fatal(err)
			}
			switch e.Type {
			case event.MessageDelta:
				if steered.IsZero() {
					steered = time.Now()
					if _, err := h.SteerRun(ctx, api.SteerParams{RunID: r.ID, Input: input("steer")}); err != nil {
						b.Fatal(err)
					}
					ack = append(ack, time.Since(steered))
				}
			case event.MessageCompleted:
				completed = e.Time
			case event.SteerConsumed:
				beyond = append(beyond, e.Time.Sub(completed))
				raw = append(raw, e.Time.Sub(steered))
			}
			if e.Type == event.SteerConsumed {
				break
			}
		}
		if _, err := h.CancelRun(ctx, api.CancelParams{RunID: r.ID}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(median(ack), "ack-ms")
	b.ReportMetric(median(beyond), "beyond-boundary-ms")
	b.ReportMetric(quantile(beyond, 0.99), "beyond-boundary-p99-ms")
	b.ReportMetric(median(raw), "raw-ms")
}

// BenchmarkCancel measures cancelling a run in a warm host while the
// scripted model streams: an iteration starts a run, waits for its first
// committed message.delta, and calls CancelRun.
//
//   - commit-ms: from the CancelRun call to the commit stamp of run.cancelled.
//   - return-ms: CancelRun's latency (it returns once run.cancelled is durable).
func BenchmarkCancel(b *testing.B) {
	h, _ := newBenchHost(b, host.Config{})
	ctx := context.Background()
	s, err := h.CreateSession(ctx, api.CreateSessionParams{Model: "scripted:stream"})
	if err != nil {
		b.Fatal(err)
	}
	var commit, ret []time.Duration
	b.ReportAllocs()
	for b.Loop() {
		cur, _ := h.GetSession(ctx, s.ID)
		r, err := h.StartRun(ctx, api.StartRunParams{SessionID: s.ID, Input: input("go")})
		if err != nil {
			b.Fatal(err)
		}
		seq, err := h.Subscribe(ctx, s.ID, cur.LastSeq, r.ID)
		if err != nil {
			b.Fatal(err)
		}
		var t0 time.Time
		for e, err := range seq {
			if err != nil {
				b.Fatal(err)
			}
			if e.Type == event.MessageDelta && t0.IsZero() {
				t0 = time.Now()
				if _, err := h.CancelRun(ctx, api.CancelParams{RunID: r.ID}); err != nil {
					b.Fatal(err)
				}
				ret = append(ret, time.Since(t0))
			}
			if e.Type == event.RunCancelled {
				commit = append(commit, e.Time.Sub(t0))
				break
			}
			if event.IsTerminalRun(e.Type) {
				b.Fatalf("run ended with %s", e.Type)
			}
		}
	}
	b.ReportMetric(median(commit), "commit-ms")
	b.ReportMetric(quantile(commit, 0.99), "commit-p99-ms")
	b.ReportMetric(median(ret), "return-ms")
}
