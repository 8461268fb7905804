package rpc_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"weft.dev/weft/api"
	"weft.dev/weft/client"
	"weft.dev/weft/event"
	"weft.dev/weft/host"
	jrpc "weft.dev/weft/internal/jsonrpc/client"
	"weft.dev/weft/llm/openai"
	"weft.dev/weft/llm/scripted"
	"weft.dev/weft/rpc"
	"weft.dev/weft/store"
	"weft.dev/weft/store/record"
	"weft.dev/weft/store/sqlite"
	"weft.dev/weft/tool"
)

// The benchmarks in this file measure the host's figures through its RPC
// surface: NewHostServer and HTTPHandler behind a real httptest server
// (or ServeStdio over pipes), the Go client, and a SQLite store.

// fanoutScript is 39 steps of a short text and 10 parallel no-op tool
// calls (about 24 events a step), then a final answer, looped.
var fanoutScript = func() string {
	calls := strings.TrimSuffix(strings.Repeat(`{"name":"noop","arguments":{"n":1}},`, 10), ",")
	step := `{"text":"Calling the tools now.","toolCalls":[` + calls + `]}`
	return `{"loop":true,"steps":[` + strings.Repeat(step+",", 39) + `{"text":"done"}]}`
}()

// benchHost is a host over a SQLite file with a no-op tool, served by
// rpc.HTTPHandler on an httptest server.
type benchHost struct {
	h   *host.Host
	st  *sqlite.Store
	srv *rpc.Server
	hs  *httptest.Server
}

// newBenchHost starts it; resolve resolves every model name. Everything
// is stopped by b.Cleanup.
func newBenchHost(b *testing.B, resolve func(string) (*host.Model, error), st *sqlite.Store) *benchHost {
	b.Helper()
	if st == nil {
		st = openBenchStore(b)
	}
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
	h, err := host.New(context.Background(), host.Config{Store: st, Tools: reg, ResolveModel: resolve})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { h.Close() })
	srv := rpc.NewHostServer(h, rpc.HostConfig{Config: rpc.Config{MaxConns: 4096, NoAuth: true}})
	b.Cleanup(func() { srv.Close() })
	hs := httptest.NewServer(rpc.HTTPHandler(srv, h, rpc.SSEOptions{}))
	b.Cleanup(hs.Close)
	return &benchHost{h: h, st: st, srv: srv, hs: hs}
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

func scriptedModels(name string) (*host.Model, error) {
	if name != "scripted:fanout" {
		return nil, fmt.Errorf("unknown model %q", name)
	}
	p, err := scripted.Parse("fanout.json", []byte(fanoutScript))
	if err != nil {
		return nil, err
	}
	return &host.Model{Name: name, Provider: p, Model: "fanout"}, nil
}

func (bh *benchHost) dial(b *testing.B) *client.Client {
	b.Helper()
	c, err := client.Dial(context.Background(), bh.hs.URL, client.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	return c
}

func quantile(ds []time.Duration, q float64) float64 {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(int(float64(len(s))*q), len(s)-1)].Seconds() * 1e3
}

// prefill writes a session of n events (session.created, one completed run
// whose message.delta events carry ~200 bytes each) directly to st.
func prefill(b *testing.B, st store.Store, id string, n int64) {
	b.Helper()
	ctx := context.Background()
	w := store.NewSequencer(id, time.Now().Add(-time.Hour))
	text := strings.Repeat("The quick brown fox jumps over the lazy dog. ", 4)[:175]
	mk := func(runID string, t event.Type, v any) event.Event {
		e, err := event.New(runID, t, v)
		if err != nil {
			b.Fatal(err)
		}
		return e
	}
	appendBatch := func(evs []event.Event) {
		bt, err := w.Batch(evs)
		if err == nil {
			err = st.Append(ctx, bt)
		}
		if err != nil {
			b.Fatal(err)
		}
	}
	run := "run_prefill_" + id
	appendBatch([]event.Event{
		mk("", event.SessionCreated, event.SessionCreatedData{Title: "bench", Model: "scripted:fanout"}),
		mk(run, event.RunQueued, event.RunQueuedData{Model: "scripted:fanout", Input: event.TextParts("go")}),
		mk(run, event.RunStarted, event.RunStartedData{Model: "scripted:fanout"}),
	})
	for w.LastSeq() < n-1 {
		evs := make([]event.Event, min(500, n-1-w.LastSeq()))
		for i := range evs {
			evs[i] = mk(run, event.MessageDelta, event.DeltaData{Step: 1, Text: text})
		}
		appendBatch(evs)
	}
	appendBatch([]event.Event{mk(run, event.RunCompleted, event.RunEndedData{Steps: 1})})
}

// BenchmarkHostResumeWebSocket is events/subscribe after cursor 50,000 in
// a 100,000-event SQLite session, over a warm WebSocket connection
// (client.Subscribe): the time to the first event and to catching up with
// the end of the log. The host replays faster than a consumer that decodes
// every event can read, so with the client's default buffer (4,096) the
// subscription lags; like client.Follow, the benchmark then resubscribes
// after its cursor, and reports the resubscriptions. buffer=131072 is
// large enough to hold the whole replay.
func BenchmarkHostResumeWebSocket(b *testing.B) {
	const total, cursor = 100_000, 50_000
	st := openBenchStore(b)
	prefill(b, st, "ses_resume", total)
	bh := newBenchHost(b, scriptedModels, st)
	for _, buffer := range []int{0, 1 << 17} {
		b.Run(fmt.Sprintf("buffer=%d", buffer), func(b *testing.B) {
			c, err := client.Dial(context.Background(), bh.hs.URL, client.Options{SubscriptionBuffer: buffer})
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			ctx := context.Background()
			var first, caught []time.Duration
			restarts := 0
			b.ReportAllocs()
			for b.Loop() {
				t0 := time.Now()
				after, n := int64(cursor), 0
				for after < total {
					seq, err := c.Subscribe(ctx, api.SubscribeParams{SessionID: "ses_resume", After: after})
					if err != nil {
						b.Fatal(err)
					}
					for e, err := range seq {
						if errors.Is(err, client.ErrLagged) {
							restarts++
							break
						} else if err != nil {
							b.Fatal(err)
						}
						if n == 0 {
							first = append(first, time.Since(t0))
						}
						n++
						after = e.Seq
						if e.Seq == total {
							break
						}
					}
				}
				caught = append(caught, time.Since(t0))
				if n != total-cursor {
					b.Fatalf("%d events, want %d", n, total-cursor)
				}
			}
			b.ReportMetric(quantile(first, 0.5), "first-ms")
			b.ReportMetric(quantile(caught, 0.5), "catchup-ms")
			b.ReportMetric(float64(restarts)/float64(b.N), "resubscribes/op")
		})
	}
}

// BenchmarkRunGet is the round trip of run/get for a completed run, one
// call at a time: over stdio (ServeStdio on io.Pipe, client.NewStdio), an
// HTTP POST per call (keep-alive), and a WebSocket.
func BenchmarkRunGet(b *testing.B) {
	for _, transport := range []string{"stdio", "http", "ws"} {
		b.Run("transport="+transport, func(b *testing.B) {
			bh := newBenchHost(b, scriptedModels, nil)
			ctx := context.Background()
			s, err := bh.h.CreateSession(ctx, api.CreateSessionParams{Model: "scripted:fanout"})
			if err != nil {
				b.Fatal(err)
			}
			r, err := bh.h.StartRun(ctx, api.StartRunParams{SessionID: s.ID, Input: api.Input(event.TextParts("go")), MaxSteps: 1})
			if err != nil {
				b.Fatal(err)
			}
			if _, err := bh.h.WaitRun(ctx, api.WaitRunParams{RunID: r.ID, TimeoutMs: 10_000}); err != nil {
				b.Fatal(err)
			}
			var call func(ctx context.Context, method string, params, result any) error
			switch transport {
			case "stdio":
				inR, inW := io.Pipe()
				outR, outW := io.Pipe()
				sctx, cancel := context.WithCancel(ctx)
				done := make(chan struct{})
				go func() {
					_ = bh.srv.ServeStdio(sctx, inR, outW)
					outW.Close()
					close(done)
				}()
				c := client.NewStdio(outR, inW, client.Options{})
				defer func() { c.Close(); cancel(); <-done }()
				call = c.Call
			case "http":
				c := jrpc.NewHTTP(bh.hs.URL+"/rpc", jrpc.Config{HTTPClient: bh.hs.Client()})
				defer c.Close()
				call = c.Call
			case "ws":
				call = bh.dial(b).Call
			}
			var res api.RunResult
			lat := make([]time.Duration, 0, 1<<16)
			b.ReportAllocs()
			for b.Loop() {
				t0 := time.Now()
				if err := call(ctx, "run/get", api.RunIDParams{RunID: r.ID}, &res); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(t0))
			}
			if res.ID != r.ID {
				b.Fatalf("got run %q", res.ID)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "req/s")
			b.ReportMetric(quantile(lat, 0.5)*1e3, "p50-µs")
			b.ReportMetric(quantile(lat, 0.99)*1e3, "p99-µs")
		})
	}
}

// chatSSE is the fixed streamed Chat Completions answer of the mock model:
// a role chunk, five text chunks, the finish, usage, [DONE].
var chatSSE = func() string {
	var sb strings.Builder
	chunk := func(delta, finish string) {
		fmt.Fprintf(&sb, `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"mock-model","choices":[{"index":0,"delta":%s,"finish_reason":%s}]}`+"\n\n", delta, finish)
	}
	chunk(`{"role":"assistant","content":""}`, "null")
	for _, w := range []string{"Hello", " from", " the", " mock", " model."} {
		chunk(`{"content":"`+w+`"}`, "null")
	}
	chunk(`{}`, `"stop"`)
	sb.WriteString(`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"mock-model","choices":[],"usage":{"prompt_tokens":20,"completion_tokens":5,"total_tokens":25}}` + "\n\n")
	sb.WriteString("data: [DONE]\n\n")
	return sb.String()
}()

// chatModels serves chatSSE from an httptest server and resolves every
// model name to the openai Chat provider pointed at it.
func chatModels(b *testing.B) func(string) (*host.Model, error) {
	b.Helper()
	mock := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, chatSSE)
	}))
	b.Cleanup(mock.Close)
	p, err := openai.NewChat(openai.Config{APIKey: "x", BaseURL: mock.URL + "/v1/", HTTPClient: mock.Client()})
	if err != nil {
		b.Fatal(err)
	}
	return func(name string) (*host.Model, error) {
		return &host.Model{Name: "openai-chat:mock-model", Provider: p, Model: "mock-model"}, nil
	}
}

// cpuTime is the process's user+system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// procStatusKB returns a "VmRSS"-style field of /proc/self/status in KiB.
func procStatusKB(field string) float64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return math.NaN()
	}
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			var kb float64
			fmt.Sscan(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), &kb)
			return kb
		}
	}
	return math.NaN()
}

// BenchmarkWarmTurn measures persisted text turns driven over RPC: a
// WebSocket client calls run/start and then run/wait until run.completed;
// the host runs the openai Chat provider against a local zero-latency
// mock (a fixed 5-chunk SSE answer) and persists to SQLite.
//
//   - sessions=1: one iteration is 30 sequential turns on a new session.
//   - sessions=10: one iteration is 10 sessions × 10 sequential turns,
//     the sessions concurrently, one WebSocket connection each.
//
// cpu-ms/turn is the whole process's user+system time (client, host and
// mock model together) divided by the turns, so it is an upper bound for
// the host. RSS is the benchmark process's (VmRSS at the end, VmHWM).
func BenchmarkWarmTurn(b *testing.B) {
	for _, shape := range []struct{ sessions, turns int }{{1, 30}, {10, 10}} {
		b.Run(fmt.Sprintf("sessions=%d", shape.sessions), func(b *testing.B) {
			bh := newBenchHost(b, chatModels(b), nil)
			ctx := context.Background()
			clients := make([]*client.Client, shape.sessions)
			for i := range clients {
				clients[i] = bh.dial(b)
			}
			var (
				mu  sync.Mutex
				lat []time.Duration
			)
			turn := func(c *client.Client, sessionID string) error {
				t0 := time.Now()
				// busy=queue: run/wait can report the previous run
				// completed a moment before its session is idle again, so
				// the default busy=reject would sometimes conflict.
				r, err := c.StartRun(ctx, api.StartRunParams{SessionID: sessionID, Input: api.Input(event.TextParts("Say hello.")), Busy: api.BusyQueue})
				if err != nil {
					return err
				}
				w, err := c.WaitRun(ctx, api.WaitRunParams{RunID: r.ID, TimeoutMs: 30_000})
				if err != nil {
					return err
				}
				if w.Run.Status != record.RunCompleted {
					return fmt.Errorf("run %s ended %s: %+v", r.ID, w.Run.Status, w.Run.Error)
				}
				d := time.Since(t0)
				mu.Lock()
				lat = append(lat, d)
				mu.Unlock()
				return nil
			}
			var cpu time.Duration
			b.ReportAllocs()
			for b.Loop() {
				b.StopTimer()
				ids := make([]string, shape.sessions)
				for i, c := range clients {
					s, err := c.CreateSession(ctx, api.CreateSessionParams{Title: "bench"})
					if err != nil {
						b.Fatal(err)
					}
					ids[i] = s.ID
				}
				b.StartTimer()
				c0 := cpuTime()
				var wg sync.WaitGroup
				errs := make([]error, shape.sessions)
				for i, c := range clients {
					wg.Go(func() {
						for range shape.turns {
							if err := turn(c, ids[i]); err != nil {
								errs[i] = err
								return
							}
						}
					})
				}
				wg.Wait()
				cpu += cpuTime() - c0
				if err := errors.Join(errs...); err != nil {
					b.Fatal(err)
				}
			}
			turns := float64(b.N * shape.sessions * shape.turns)
			b.ReportMetric(turns/b.Elapsed().Seconds(), "turns/s")
			b.ReportMetric(quantile(lat, 0.5), "p50-ms")
			b.ReportMetric(quantile(lat, 0.99), "p99-ms")
			b.ReportMetric(cpu.Seconds()*1e3/turns, "cpu-ms/turn")
			b.ReportMetric(procStatusKB("VmRSS")/1024, "rss-MiB")
			b.ReportMetric(procStatusKB("VmHWM")/1024, "hwm-MiB")
		})
	}
}
