package rpc_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"weft.dev/weft/api"
	"weft.dev/weft/client"
	"weft.dev/weft/event"
	"weft.dev/weft/host"
	"weft.dev/weft/internal/pace"
	"weft.dev/weft/store/record"
)

// The fan-out benchmarks over the wire: subscribers follow one session,
// over WebSocket (client.Subscribe, one connection each) or SSE (GET
// /v1/sessions/{id}/events, one stream each), while a run on it produces
// events as fast as it can.
//
// The subscribers run in the benchmark's process (clients=inproc), where
// they share the two CPUs and the Go scheduler with the host, or in a
// child process (clients=proc: the test binary run again as
// TestFanoutClients), so that the host's own CPU time is measured apart:
// host-cpu-µs/event is the benchmark process's CPU time per event
// committed (with clients=inproc it includes the clients),
// client-cpu-µs/event the child's.

// hist is a histogram of delivery latencies, owned by one subscriber so
// that recording costs no shared write: 10 µs buckets below 1 ms, then
// ninety per decade up to 10 s (10 % resolution).
type hist struct {
	Buckets [100 + 4*90 + 1]int64
	N       int64
}

func (h *hist) add(d time.Duration) {
	i := 0
	if d < time.Millisecond {
		i = max(int(d/(10*time.Microsecond)), 0)
	} else {
		i, unit := 100, 100*time.Microsecond
		for d >= 100*unit && unit < time.Second {
			i, unit = i+90, unit*10
		}
		i += min(int(d/unit)-10, 89)
		h.Buckets[min(i, len(h.Buckets)-1)]++
		h.N++
		return
	}
	h.Buckets[i]++
	h.N++
}

func (h *hist) merge(o *hist) {
	for i, c := range o.Buckets {
		h.Buckets[i] += c
	}
	h.N += o.N
}

// quantile returns the q-quantile in milliseconds (its bucket's upper edge).
func (h *hist) quantile(q float64) float64 {
	want := int64(math.Ceil(q * float64(h.N)))
	var seen int64
	for i, c := range h.Buckets {
		if seen += c; seen >= want && seen > 0 {
			if i < 100 {
				return float64(i+1) * 0.01
			}
			unit := 0.1
			for i -= 100; i >= 90; i -= 90 {
				unit *= 10
			}
			return float64(i+11) * unit
		}
	}
	return math.NaN()
}

// fanoutSpec says what the subscribers follow.
type fanoutSpec struct {
	URL       string // the httptest server
	Session   string
	After     int64
	Subs      int
	Transport string // "ws" or "sse"
}

// fanoutResult is what the subscribers report.
type fanoutResult struct {
	Lat    hist
	Lagged int   // subscriptions that ended with an error
	CPUNs  int64 // the child's CPU time (clients=proc)
}

// follower is one subscriber's record.
type follower struct {
	lat   hist
	last  atomic.Int64
	err   error       // read after wg.Wait
	ended atomic.Bool // err is set
	_     [64]byte    // its own cache line
}

// followers are spec.Subs subscribers, each in its own goroutine.
type followers struct {
	fs   []*follower
	wg   sync.WaitGroup
	stop context.CancelFunc
}

// follow subscribes them all; it returns once every subscription is
// registered with the host.
func follow(spec fanoutSpec) (*followers, error) {
	ctx, stop := context.WithCancel(context.Background())
	f := &followers{stop: stop}
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: spec.Subs}}
	for range spec.Subs {
		fl := &follower{}
		f.fs = append(f.fs, fl)
		switch spec.Transport {
		case "ws":
			c, err := client.Dial(ctx, spec.URL, client.Options{})
			if err != nil {
				f.close()
				return nil, err
			}
			seq, err := c.Subscribe(ctx, api.SubscribeParams{SessionID: spec.Session, After: spec.After})
			if err != nil {
				c.Close()
				f.close()
				return nil, err
			}
			f.wg.Go(func() {
				defer c.Close()
				for e, err := range seq {
					if err != nil {
						fl.err = err
						fl.ended.Store(true)
						return
					}
					fl.lat.add(time.Since(e.Time))
					fl.last.Store(e.Seq)
				}
			})
		case "sse":
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s/v1/sessions/%s/events?after=%d", spec.URL, spec.Session, spec.After), nil)
			if err != nil {
				f.close()
				return nil, err
			}
			resp, err := hc.Do(req) // returns once the handler has subscribed
			if err != nil {
				f.close()
				return nil, err
			}
			if resp.StatusCode != http.StatusOK {
				resp.Body.Close()
				f.close()
				return nil, fmt.Errorf("SSE: %s", resp.Status)
			}
			f.wg.Go(func() {
				defer resp.Body.Close()
				fl.err = readSSE(resp.Body, func(e event.Event) {
					fl.lat.add(time.Since(e.Time))
					fl.last.Store(e.Seq)
				})
				fl.ended.Store(true)
			})
		default:
			f.close()
			return nil, fmt.Errorf("unknown transport %q", spec.Transport)
		}
	}
	return f, nil
}

// readSSE reads an event stream, decoding each data line as an event.
func readSSE(r io.Reader, got func(event.Event)) error {
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		line, err := br.ReadSlice('\n')
		if err != nil {
			return err
		}
		if data, ok := bytes.CutPrefix(line, []byte("data: ")); ok {
			var e event.Event
			if err := json.Unmarshal(data, &e); err != nil {
				return err
			}
			got(e)
		}
	}
}

// wait waits until every subscriber has received seq last, or timeout.
func (f *followers) wait(last int64, timeout time.Duration) {
	deadline := time.Now().Add(timeout)
	for _, fl := range f.fs {
		for fl.last.Load() < last && !fl.ended.Load() && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
	}
}

// close ends every subscription and returns what they recorded.
func (f *followers) close() fanoutResult {
	f.stop()
	f.wg.Wait()
	var r fanoutResult
	for _, fl := range f.fs {
		r.Lat.merge(&fl.lat)
		if fl.err != nil && !errors.Is(fl.err, context.Canceled) {
			r.Lagged++
		}
	}
	return r
}

// TestFanoutClients is the child process of clients=proc: it follows the
// session that WEFT_FANOUT_CLIENTS describes, prints "ready", reads the
// last seq from stdin, waits until every subscriber has it, and prints
// its result as JSON. Without the variable it does nothing (and passes,
// so that no skip hides a real one).
func TestFanoutClients(t *testing.T) {
	specJSON := os.Getenv("WEFT_FANOUT_CLIENTS")
	if specJSON == "" {
		return
	}
	var spec fanoutSpec
	if err := json.Unmarshal([]byte(specJSON), &spec); err != nil {
		t.Fatal(err)
	}
	f, err := follow(spec)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Println("ready")
	var last int64
	if _, err := fmt.Scan(&last); err != nil {
		f.close()
		t.Fatal(err)
	}
	f.wait(last, 30*time.Second)
	r := f.close()
	r.CPUNs = int64(cpuTime())
	out, _ := json.Marshal(r)
	fmt.Printf("result %s\n", out)
}

// childFollowers runs the subscribers in a child process.
type childFollowers struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *bufio.Reader
}

func followInChild(spec fanoutSpec) (*childFollowers, error) {
	specJSON, _ := json.Marshal(spec)
	args := []string{"-test.run=^TestFanoutClients$", "-test.count=1"}
	if prof := os.Getenv("WEFT_FANOUT_CLIENT_PROFILE"); prof != "" {
		args = append(args, "-test.cpuprofile="+prof) // a CPU profile of the clients
	}
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "WEFT_FANOUT_CLIENTS="+string(specJSON))
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	c := &childFollowers{cmd: cmd, stdin: stdin, out: bufio.NewReader(stdout)}
	for {
		line, err := c.out.ReadString('\n')
		if err != nil {
			c.cmd.Process.Kill()
			c.cmd.Wait()
			return nil, fmt.Errorf("fan-out child: %w", err)
		}
		if strings.TrimSpace(line) == "ready" {
			return c, nil
		}
	}
}

// finish tells the child the last seq and returns its result.
func (c *childFollowers) finish(last int64) (fanoutResult, error) {
	defer c.cmd.Wait()
	fmt.Fprintln(c.stdin, strconv.FormatInt(last, 10))
	c.stdin.Close()
	for {
		line, err := c.out.ReadString('\n')
		if err != nil {
			return fanoutResult{}, fmt.Errorf("fan-out child: %w", err)
		}
		if rest, ok := strings.CutPrefix(line, "result "); ok {
			var r fanoutResult
			err := json.Unmarshal([]byte(rest), &r)
			io.Copy(io.Discard, c.out)
			return r, err
		}
	}
}

// fanoutRuns runs the fanout script n times on session id, held to pacer's
// rate if pacer is not nil, and returns the events committed and the time
// the runs took.
func fanoutRuns(b *testing.B, h *host.Host, id string, pacer *pace.Pacer, n int) (events int64, elapsed time.Duration) {
	b.Helper()
	ctx := context.Background()
	lastSeq := func() int64 {
		r, _ := h.GetSession(ctx, api.SessionGetParams{SessionID: id})
		return r.LastSeq
	}
	for range n {
		before := lastSeq()
		if pacer != nil {
			pacer.Reset(lastSeq)
		}
		t0 := time.Now()
		r, err := h.StartRun(ctx, api.StartRunParams{SessionID: id, Input: api.Input(event.TextParts("go"))})
		if err != nil {
			b.Fatal(err)
		}
		w, err := h.WaitRun(ctx, api.WaitRunParams{RunID: r.ID, TimeoutMs: 120_000})
		if err != nil || w.Run.Status != record.RunCompleted {
			b.Fatalf("run %s: %+v %v", r.ID, w, err)
		}
		elapsed += time.Since(t0)
		events += lastSeq() - before
	}
	return events, elapsed
}

// mallocs returns the number of heap objects allocated so far.
func mallocs() uint64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.Mallocs
}

// writeCalls returns the write system calls the process has made so far
// (syscw of /proc/self/io), or 0 where that cannot be read.
func writeCalls() int64 {
	b, err := os.ReadFile("/proc/self/io")
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "syscw: "); ok {
			n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return n
		}
	}
	return 0
}

// fanoutBaseRuns is how many runs measure the rate without subscribers
// (base-events/s), on a session of the same host before the subscribers
// come, so that it shares the machine's load of the moment.
const fanoutBaseRuns = 5

// BenchmarkHostFanoutWebSocket is host BenchmarkFanout over WebSocket:
// 100 clients, one connection and one events/subscribe each. One
// iteration is one 40-step run of the fanout script (about 950 events),
// as fast as it goes (rate=max) or held to 10,000 events/s. Latency is
// from the event's commit stamp (event.Time) to its decoding by the
// client; drop-% is how much of the run's rate without subscribers
// (base-events/s) they cost.
func BenchmarkHostFanoutWebSocket(b *testing.B) {
	benchWireFanouts(b, "ws")
}

// BenchmarkHostFanoutSSE is BenchmarkHostFanoutWebSocket over SSE: 100
// streams of GET /v1/sessions/{id}/events, each event decoded by the
// reader.
func BenchmarkHostFanoutSSE(b *testing.B) {
	benchWireFanouts(b, "sse")
}

func benchWireFanouts(b *testing.B, transport string) {
	for _, rate := range []int{0, 10_000} {
		for _, clients := range []string{"inproc", "proc"} {
			name := fmt.Sprintf("rate=%d/subs=100/clients=%s", rate, clients)
			if rate == 0 {
				name = "rate=max/subs=100/clients=" + clients
			}
			b.Run(name, func(b *testing.B) { benchWireFanout(b, transport, 100, clients, rate) })
		}
	}
}

func benchWireFanout(b *testing.B, transport string, subs int, clients string, rate int) {
	var pacer *pace.Pacer
	resolve := scriptedModels
	if rate > 0 {
		pacer = &pace.Pacer{Rate: float64(rate)}
		resolve = func(name string) (*host.Model, error) {
			m, err := scriptedModels(name)
			if err == nil {
				m.Provider = pace.Provider{Provider: m.Provider, Pacer: pacer}
			}
			return m, err
		}
	}
	bh := newBenchHost(b, resolve, nil)
	ctx := context.Background()
	base, err := bh.h.CreateSession(ctx, api.CreateSessionParams{Model: "scripted:fanout"})
	if err != nil {
		b.Fatal(err)
	}
	baseCPU, baseMallocs, baseWrites := cpuTime(), mallocs(), writeCalls()
	baseEvents, baseElapsed := fanoutRuns(b, bh.h, base.ID, pacer, fanoutBaseRuns)
	baseCPU, baseMallocs, baseWrites = cpuTime()-baseCPU, mallocs()-baseMallocs, writeCalls()-baseWrites
	s, err := bh.h.CreateSession(ctx, api.CreateSessionParams{Model: "scripted:fanout"})
	if err != nil {
		b.Fatal(err)
	}
	spec := fanoutSpec{URL: bh.hs.URL, Session: s.ID, After: s.LastSeq, Subs: subs, Transport: transport}
	var (
		inproc *followers
		child  *childFollowers
	)
	if clients == "proc" {
		child, err = followInChild(spec)
	} else {
		inproc, err = follow(spec)
	}
	if err != nil {
		b.Fatal(err)
	}
	var (
		events int64
		cpu    time.Duration
	)
	b.ReportAllocs()
	m0, w0 := mallocs(), writeCalls()
	for b.Loop() {
		c0 := cpuTime()
		n, _ := fanoutRuns(b, bh.h, s.ID, pacer, 1)
		cpu += cpuTime() - c0
		events += n
	}
	allocs, writes := mallocs()-m0, writeCalls()-w0
	elapsed := b.Elapsed()
	last, _ := bh.h.GetSession(ctx, api.SessionGetParams{SessionID: s.ID})
	var res fanoutResult
	if child != nil {
		if res, err = child.finish(last.LastSeq); err != nil {
			b.Fatal(err)
		}
	} else {
		inproc.wait(last.LastSeq, 30*time.Second)
		res = inproc.close()
	}
	got := float64(events) / elapsed.Seconds()
	baseRate := float64(baseEvents) / baseElapsed.Seconds()
	b.ReportMetric(got, "events/s")
	b.ReportMetric(baseRate, "base-events/s")
	b.ReportMetric(100*(1-got/baseRate), "drop-%")
	b.ReportMetric(res.Lat.quantile(0.50), "p50-ms")
	b.ReportMetric(res.Lat.quantile(0.99), "p99-ms")
	b.ReportMetric(float64(res.Lagged), "lagged")
	b.ReportMetric(float64(res.Lat.N)/float64(int64(subs)*(last.LastSeq-s.LastSeq)), "delivered")
	b.ReportMetric(cpu.Seconds()*1e6/float64(events), "host-cpu-µs/event")
	// Per event delivered to one subscriber, beyond what the same runs
	// cost with nobody following (the base runs): the fan-out's own
	// cost. With clients=inproc it includes the clients'.
	delivered := float64(events) * float64(subs)
	perEvent := float64(events) / float64(baseEvents)
	b.ReportMetric(float64(cpu-time.Duration(float64(baseCPU)*perEvent))/delivered, "fanout-ns/delivered")
	b.ReportMetric((float64(allocs)-float64(baseMallocs)*perEvent)/delivered, "fanout-allocs/delivered")
	// Write system calls beyond the base runs' (the store's): about one
	// per wake per subscriber, so this is the events a wake carries.
	if fanWrites := float64(writes) - float64(baseWrites)*perEvent; fanWrites > 0 {
		b.ReportMetric(delivered/fanWrites, "delivered/write")
	}
	if child != nil {
		b.ReportMetric(float64(res.CPUNs)/1e3/float64(events), "client-cpu-µs/event")
	}
}
