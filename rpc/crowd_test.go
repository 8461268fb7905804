package rpc_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"weft.dev/weft/api"
	"weft.dev/weft/event"
	"weft.dev/weft/host"
	"weft.dev/weft/llm/scripted"
	"weft.dev/weft/rpc"
	"weft.dev/weft/store/memory"
)

// bigEventsEnv is a host whose one session holds n events of about 200
// KiB (the inputs of its runs), served through rpc.NewHTTPServer on a
// real socket with the default stream budget.
func bigEventsEnv(t testing.TB, n int) (addr, sid string, h *host.Host) {
	t.Helper()
	h, err := host.New(context.Background(), host.Config{
		Store: memory.New(), DefaultModel: "small",
		ResolveModel: func(name string) (*host.Model, error) {
			p, err := scripted.Parse(name, []byte(`{"loop":true,"steps":[{"text":"ok"}]}`))
			return &host.Model{Name: name, Provider: p, Model: name}, err
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	s := rpc.NewHostServer(h, rpc.HostConfig{Config: rpc.Config{Token: token}})
	hs := rpc.NewHTTPServer(rpc.HTTPHandler(s, h, rpc.SSEOptions{}), rpc.ConnLimits{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan struct{})
	go func() {
		defer close(served)
		hs.Serve(ln)
	}()
	t.Cleanup(func() {
		hs.Close()
		s.Close()
		<-served
		h.Close()
	})
	ctx := context.Background()
	ses, err := h.CreateSession(ctx, api.CreateSessionParams{})
	if err != nil {
		t.Fatal(err)
	}
	input := strings.Repeat("z", 200<<10)
	var last string
	for i := range n {
		r, err := h.StartRun(ctx, api.StartRunParams{SessionID: ses.ID, Busy: api.BusyQueue, Input: api.Input(event.TextParts(fmt.Sprint(i, input)))})
		if err != nil {
			t.Fatal(err)
		}
		last = r.ID
	}
	if w, err := h.WaitRun(ctx, api.WaitRunParams{RunID: last, TimeoutMs: 120_000}); err != nil || w.TimedOut {
		t.Fatalf("last run: %+v, %v", w, err)
	}
	return ln.Addr().String(), ses.ID, h
}

// stallSSE opens an SSE stream of sid that is never read.
func stallSSE(t testing.TB, addr, sid string) net.Conn {
	t.Helper()
	c, err := newStalledDialer().DialContext(context.Background(), "tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(c, "GET /v1/sessions/%s/events HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\n\r\n", sid, addr, token)
	return c
}

// stallWebSocket subscribes to sid over a WebSocket that is never read
// after the upgrade.
func stallWebSocket(t testing.TB, addr, sid string) *websocket.Conn {
	t.Helper()
	return stallWebSocketRequest(t, addr, fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"events/subscribe","params":{"sessionId":%q}}`, sid))
}

// stallWebSocketRequest sends req over a WebSocket that is never read
// after the upgrade.
func stallWebSocketRequest(t testing.TB, addr, req string) *websocket.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	hc := &http.Client{Transport: &http.Transport{DialContext: newStalledDialer().DialContext}}
	wc, _, err := websocket.Dial(ctx, "ws://"+addr+"/rpc/ws", &websocket.DialOptions{
		HTTPClient: hc, HTTPHeader: http.Header{"Authorization": {"Bearer " + token}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := wc.Write(ctx, websocket.MessageText, []byte(req)); err != nil {
		t.Fatal(err)
	}
	return wc
}

// heapInUse returns the bytes of the heap's spans in use: live objects
// and garbage not yet collected, what the heap costs in memory.
func heapInUse() uint64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse
}

// listLatencies calls session/list over HTTP every 10 ms, n times, and
// returns the latencies, sorted.
func listLatencies(t testing.TB, addr string, n int) []time.Duration {
	hc := &http.Client{Timeout: 30 * time.Second}
	defer hc.CloseIdleConnections()
	body := `{"jsonrpc":"2.0","id":1,"method":"session/list","params":{}}`
	var ds []time.Duration
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for range n {
		<-tick.C
		req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/rpc", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		t0 := time.Now()
		resp, err := hc.Do(req)
		if err != nil {
			t.Error(err)
			break
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		ds = append(ds, time.Since(t0))
	}
	slices.Sort(ds)
	return ds
}

func percentile(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	return ds[(len(ds)-1)*p/100]
}

// Crowds, case 2 of issue 17, in process over both transports: 300 SSE
// readers and 50 WebSocket subscribers that never read, on a session of
// 200 KiB events. Each used to hold a replay page and its encoding
// (SSE), or up to 4 MiB of queued notifications (WebSocket): hundreds
// of MiB. Now what they hold together is the server's stream budget
// (4 MiB) plus what each connection costs anyway: the heap grows by at
// most 64 MiB (it grew by 458 MiB before), and the host answers
// session/list meanwhile (its latency is logged).
func TestStalledReadersBoundedHostWide(t *testing.T) {
	addr, sid, _ := bigEventsEnv(t, 40)
	// The heap may grow to twice what is live before a collection; a
	// lower GOGC keeps what is measured close to what is held.
	defer debug.SetGCPercent(debug.SetGCPercent(25))
	runtime.GC()
	before := heapInUse()
	var wg sync.WaitGroup
	lat := make(chan []time.Duration, 1)
	wg.Go(func() { lat <- listLatencies(t, addr, 300) })
	var conns []io.Closer
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for i := range 350 {
		if i%7 == 6 {
			wc := stallWebSocket(t, addr, sid)
			conns = append(conns, closerFunc(func() error { return wc.CloseNow() }))
		} else {
			conns = append(conns, stallSSE(t, addr, sid))
		}
	}
	var peak uint64
	for range 150 {
		<-time.After(20 * time.Millisecond)
		peak = max(peak, heapInUse())
	}
	wg.Wait()
	ds := <-lat
	grew := int64(peak) - int64(before)
	t.Logf("heap in use %d KiB before, +%d KiB at peak with 300 stalled SSE readers and 50 stalled WebSocket subscribers; session/list p50 %v, p99 %v, max %v",
		before>>10, grew>>10, percentile(ds, 50), percentile(ds, 99), percentile(ds, 100))
	if grew > 64<<20 {
		t.Fatalf("350 stalled readers grew the heap by %d KiB; the bound is 64 MiB", grew>>10)
	}
}

type closerFunc func() error

func (f closerFunc) Close() error { return f() }

// Followers of a process's output that stop reading are bounded with the
// event streams' readers: each would otherwise hold a page of output (up
// to 256 KiB, and its encoding) for the whole write timeout.
func TestStalledProcessFollowersBoundedHostWide(t *testing.T) {
	h, srv := newProcEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ses, err := h.CreateSession(ctx, api.CreateSessionParams{Mounts: []event.Mount{{ID: "work", Path: t.TempDir(), Default: true}}})
	if err != nil {
		t.Fatal(err)
	}
	// 12 MB of output, in the log before anyone follows it.
	p, err := h.StartProcess(ctx, api.ProcessStartParams{SessionID: ses.ID, Command: "head -c 12000000 /dev/zero | tr '\\0' a"})
	if err != nil {
		t.Fatal(err)
	}
	if r, err := h.AwaitProcess(ctx, api.ProcessAwaitParams{ID: p.Process.ID, TimeoutMs: 50_000}); err != nil || r.TimedOut {
		t.Fatalf("await: %+v %v", r, err)
	}
	addr := strings.TrimPrefix(srv.URL, "http://")
	defer debug.SetGCPercent(debug.SetGCPercent(25))
	runtime.GC()
	before := heapInUse()
	var conns []io.Closer
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for i := range 350 {
		if i%7 == 6 {
			wc := stallWebSocketRequest(t, addr, fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"process/follow","params":{"id":%q}}`, p.Process.ID))
			conns = append(conns, closerFunc(func() error { return wc.CloseNow() }))
			continue
		}
		c, err := newStalledDialer().DialContext(ctx, "tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(c, "GET /v1/processes/%s/output HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\n\r\n", p.Process.ID, addr, token)
		conns = append(conns, c)
	}
	var peak uint64
	for range 150 {
		<-time.After(20 * time.Millisecond)
		peak = max(peak, heapInUse())
	}
	grew := int64(peak) - int64(before)
	t.Logf("heap in use %d KiB before, +%d KiB at peak with 300 stalled SSE and 50 stalled WebSocket followers of one process", before>>10, grew>>10)
	if grew > 64<<20 {
		t.Fatalf("350 stalled followers grew the heap by %d KiB; the bound is 64 MiB", grew>>10)
	}
}
