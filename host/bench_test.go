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
	"syscall"
	"testing"
	"time"

	"weft.dev/weft/api"
	"weft.dev/weft/event"
	"weft.dev/weft/host"
	"weft.dev/weft/internal/pace"
	"weft.dev/weft/llm"
	"weft.dev/weft/llm/scripted"
	"weft.dev/weft/store"
	"weft.dev/weft/store/record"
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
	return newWrappedBenchHost(b, cfg, nil)
}

// newWrappedBenchHost is newBenchHost whose providers are wrapped by wrap,
// if it is not nil.
func newWrappedBenchHost(b *testing.B, cfg host.Config, wrap func(llm.Provider) llm.Provider) (*host.Host, *sqlite.Store) {
	b.Helper()
	st := openBenchStore(b)
	bc := benchHostConfig(b, st)
	cfg.Store, cfg.Tools, cfg.ResolveModel = bc.Store, bc.Tools, bc.ResolveModel
	if wrap != nil {
		cfg.ResolveModel = func(name string) (*host.Model, error) {
			m, err := bc.ResolveModel(name)
			if err == nil {
				m.Provider = wrap(m.Provider)
			}
			return m, err
		}
	}
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

// hist is a histogram of delivery latencies, owned by one subscriber so
// that recording costs no shared write: 10 µs buckets below 1 ms, then
// ten buckets per decade up to 10 s (a 10 % resolution); merged at the end.
type hist struct {
	buckets [100 + 4*90 + 1]int64
	n       int64
}

// bucket returns d's bucket and the bucket's upper edge.
func bucket(d time.Duration) (int, time.Duration) {
	if d < time.Millisecond {
		i := max(int(d/(10*time.Microsecond)), 0)
		return i, time.Duration(i+1) * 10 * time.Microsecond
	}
	i, unit := 100, 100*time.Microsecond
	for d >= 10*unit*10 && unit < time.Second {
		i, unit = i+90, unit*10
	}
	k := min(int(d/unit)-10, 89)
	return i + k, time.Duration(k+11) * unit
}

func (h *hist) add(d time.Duration) {
	i, _ := bucket(d)
	h.buckets[min(i, len(h.buckets)-1)]++
	h.n++
}

func (h *hist) merge(o *hist) {
	for i, c := range o.buckets {
		h.buckets[i] += c
	}
	h.n += o.n
}

// quantile returns the q-quantile in milliseconds (its bucket's upper edge).
func (h *hist) quantile(q float64) float64 {
	want := int64(math.Ceil(q * float64(h.n)))
	var seen int64
	for i, c := range h.buckets {
		if seen += c; seen >= want && seen > 0 {
			return edge(i).Seconds() * 1e3
		}
	}
	return math.NaN()
}

// edge is the upper edge of bucket i.
func edge(i int) time.Duration {
	if i < 100 {
		return time.Duration(i+1) * 10 * time.Microsecond
	}
	unit := 100 * time.Microsecond
	for i -= 100; i >= 90; i -= 90 {
		unit *= 10
	}
	return time.Duration(i+11) * unit
}

// cpuTime is the process's user+system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkFanout measures delivery to in-process subscribers (host.Subscribe)
// of one session while a run on it produces events: one iteration is one
// 40-step run of the "fanout" script (about 950 events) on SQLite.
//
//   - rate=max: the run goes as fast as it can.
//   - rate=10000: each model call waits until the run's events so far are
//     due at 10,000 events/s, so the run produces about that many when it
//     can, and less when the subscribers slow it down.
//
// Latency is from the event's commit stamp (event.Time, taken just before
// the store transaction) to its receipt by the subscriber, over every event
// and subscriber; each subscriber records into its own histogram. events/s
// is the run's own throughput (events committed / timed run time), the
// figure the target compares with and without subscribers: with
// subscribers, base-events/s is the same host's rate without them
// (baseRate, measured before they subscribe) and drop-% how much of it the
// subscribers cost. cpu-µs/event is the process's CPU time (host and
// subscribers together) per event committed.
func BenchmarkFanout(b *testing.B) {
	for _, rate := range []int{0, 10_000} {
		for _, subs := range []int{0, 1000} {
			name := fmt.Sprintf("rate=%d/subs=%d", rate, subs)
			if rate == 0 {
				name = fmt.Sprintf("rate=max/subs=%d", subs)
			}
			b.Run(name, func(b *testing.B) { benchFanout(b, rate, subs) })
		}
	}
}

func benchFanout(b *testing.B, rate, subs int) {
	var (
		pacer *pace.Pacer
		wrap  func(llm.Provider) llm.Provider
	)
	if rate > 0 {
		pacer = &pace.Pacer{Rate: float64(rate)}
		wrap = func(p llm.Provider) llm.Provider { return pace.Provider{Provider: p, Pacer: pacer} }
	}
	h, _ := newWrappedBenchHost(b, host.Config{}, wrap)
	ctx := context.Background()
	s, err := h.CreateSession(ctx, api.CreateSessionParams{Model: "scripted:fanout"})
	if err != nil {
		b.Fatal(err)
	}
	lastSeq := func() int64 {
		r, _ := h.GetSession(ctx, api.SessionGetParams{SessionID: s.ID})
		return r.LastSeq
	}
	var base float64
	if subs > 0 {
		base = baseRate(b, h, pacer, fanoutBaseRuns)
	}
	sctx, stop := context.WithCancel(ctx)
	// Each subscriber has its own histogram and publishes the last seq
	// it received; the benchmark reads them once the runs are over.
	type follower struct {
		lat  hist
		last atomic.Int64
		err  error
		_    [64]byte
	}
	fs := make([]*follower, subs)
	var wg sync.WaitGroup
	for i := range fs {
		f := &follower{}
		fs[i] = f
		seq, err := h.Subscribe(sctx, api.SubscribeParams{SessionID: s.ID, After: s.LastSeq})
		if err != nil {
			b.Fatal(err)
		}
		wg.Go(func() {
			for e, err := range seq {
				if err != nil {
					f.err = err
					return
				}
				f.lat.add(time.Since(e.Time))
				f.last.Store(e.Seq)
			}
		})
	}
	var (
		events int64
		cpu    time.Duration
	)
	b.ReportAllocs()
	for b.Loop() {
		before, _ := h.GetSession(ctx, api.SessionGetParams{SessionID: s.ID})
		if pacer != nil {
			pacer.Reset(lastSeq)
		}
		c0 := cpuTime()
		r, err := h.StartRun(ctx, api.StartRunParams{SessionID: s.ID, Input: input("go")})
		if err != nil {
			b.Fatal(err)
		}
		w, err := h.WaitRun(ctx, api.WaitRunParams{RunID: r.ID, TimeoutMs: 60_000})
		if err != nil || w.Run.Status != record.RunCompleted {
			b.Fatalf("run %s: %+v %v", r.ID, w, err)
		}
		cpu += cpuTime() - c0
		after, _ := h.GetSession(ctx, api.SessionGetParams{SessionID: s.ID})
		events += after.LastSeq - before.LastSeq
	}
	elapsed := b.Elapsed()
	// Let the subscribers drain before the histograms are read.
	last, _ := h.GetSession(ctx, api.SessionGetParams{SessionID: s.ID})
	deadline := time.Now().Add(10 * time.Second)
	for _, f := range fs {
		for f.last.Load() < last.LastSeq && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
	}
	stop()
	wg.Wait()
	var (
		lat    hist
		lagged int
	)
	for _, f := range fs {
		lat.merge(&f.lat)
		if f.err != nil && !errors.Is(f.err, context.Canceled) {
			lagged++
		}
	}
	got := float64(events) / elapsed.Seconds()
	b.ReportMetric(got, "events/s")
	b.ReportMetric(cpu.Seconds()*1e6/float64(events), "cpu-µs/event")
	if subs > 0 {
		b.ReportMetric(base, "base-events/s")
		b.ReportMetric(100*(1-got/base), "drop-%")
		b.ReportMetric(lat.quantile(0.50), "p50-ms")
		b.ReportMetric(lat.quantile(0.99), "p99-ms")
		b.ReportMetric(float64(lagged), "lagged")
		b.ReportMetric(float64(lat.n)/float64(int64(subs)*(last.LastSeq-s.LastSeq)), "delivered")
	}
}

// fanoutBaseRuns is how many runs measure the rate without subscribers.
const fanoutBaseRuns = 5

// baseRate is the run's own rate without subscribers: the events/s of n
// runs of the fanout script on a new session of h, held to pacer's rate
// if pacer is not nil. The fan-out benchmarks compare the rate with
// subscribers to it (drop-%); measured in the same benchmark, on the
// same host, it shares the machine's load of the moment.
func baseRate(b *testing.B, h *host.Host, pacer *pace.Pacer, n int) float64 {
	b.Helper()
	ctx := context.Background()
	s, err := h.CreateSession(ctx, api.CreateSessionParams{Model: "scripted:fanout"})
	if err != nil {
		b.Fatal(err)
	}
	lastSeq := func() int64 {
		r, _ := h.GetSession(ctx, api.SessionGetParams{SessionID: s.ID})
		return r.LastSeq
	}
	var (
		events  int64
		elapsed time.Duration
	)
	for range n {
		before := lastSeq()
		if pacer != nil {
			pacer.Reset(lastSeq)
		}
		t0 := time.Now()
		r, err := h.StartRun(ctx, api.StartRunParams{SessionID: s.ID, Input: input("go")})
		if err != nil {
			b.Fatal(err)
		}
		w, err := h.WaitRun(ctx, api.WaitRunParams{RunID: r.ID, TimeoutMs: 60_000})
		if err != nil || w.Run.Status != record.RunCompleted {
			b.Fatalf("run %s: %+v %v", r.ID, w, err)
		}
		elapsed += time.Since(t0)
		events += lastSeq() - before
	}
	return float64(events) / elapsed.Seconds()
}

// logWriter appends a session's events directly to a store (see
// store.Sequencer) and fails the benchmark on errors.
type logWriter struct {
	b  *testing.B
	st store.Store
	*store.Sequencer
}

func newLogWriter(b *testing.B, st store.Store, id string) *logWriter {
	return &logWriter{b: b, st: st, Sequencer: store.NewSequencer(id, time.Now().Add(-time.Hour))}
}

// prefillText is the text of a prefilled delta or answer, ~175 bytes.
var prefillText = strings.Repeat("The quick brown fox jumps over the lazy dog. ", 4)[:175]

// event makes an event of run runID.
func (w *logWriter) event(runID string, t event.Type, v any) event.Event {
	e, err := event.New(runID, t, v)
	if err != nil {
		w.b.Fatal(err)
	}
	return e
}

// append appends evs in one batch.
func (w *logWriter) append(evs []event.Event) {
	bt, err := w.Batch(evs)
	if err == nil {
		err = w.st.Append(context.Background(), bt)
	}
	if err != nil {
		w.b.Fatal(err)
	}
}

// last returns the seq of the last event appended.
func (w *logWriter) last() int64 { return w.LastSeq() }

// prefill writes a session of n events (session.created, one completed run
// whose message.delta events carry ~200 bytes each) directly to st.
func prefill(b *testing.B, st store.Store, id string, n int64) {
	b.Helper()
	w := newLogWriter(b, st, id)
	run := "run_prefill_" + id
	w.append([]event.Event{
		w.event("", event.SessionCreated, event.SessionCreatedData{Title: "bench", Model: "scripted:stream"}),
		w.event(run, event.RunQueued, event.RunQueuedData{Model: "scripted:stream", Input: event.TextParts("go")}),
		w.event(run, event.RunStarted, event.RunStartedData{Model: "scripted:stream"}),
	})
	for w.last() < n-1 {
		evs := make([]event.Event, min(500, n-1-w.last()))
		for i := range evs {
			evs[i] = w.event(run, event.MessageDelta, event.DeltaData{Step: 1, Text: prefillText})
		}
		w.append(evs)
	}
	w.append([]event.Event{w.event(run, event.RunCompleted, event.RunEndedData{Steps: 1})})
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
		seq, err := h.Subscribe(ctx, api.SubscribeParams{SessionID: "ses_resume", After: cursor})
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
		cur, _ := h.GetSession(ctx, api.SessionGetParams{SessionID: s.ID})
		r, err := h.StartRun(ctx, api.StartRunParams{SessionID: s.ID, Input: input("go")})
		if err != nil {
			b.Fatal(err)
		}
		seq, err := h.Subscribe(ctx, api.SubscribeParams{SessionID: s.ID, After: cur.LastSeq, RunID: r.ID})
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
		cur, _ := h.GetSession(ctx, api.SessionGetParams{SessionID: s.ID})
		r, err := h.StartRun(ctx, api.StartRunParams{SessionID: s.ID, Input: input("go")})
		if err != nil {
			b.Fatal(err)
		}
		seq, err := h.Subscribe(ctx, api.SubscribeParams{SessionID: s.ID, After: cur.LastSeq, RunID: r.ID})
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
