package rpc_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
	"golang.org/x/sys/unix"

	"weft.dev/weft/api"
	"weft.dev/weft/client"
	"weft.dev/weft/event"
	"weft.dev/weft/host"
	"weft.dev/weft/llm/scripted"
	"weft.dev/weft/rpc"
	"weft.dev/weft/store/memory"
)

// stalledDialer dials sockets that buffer 4 KiB, so that a reader that
// does not read stalls the host's writes at once, and remembers the last
// connection it made, whose receive queue stall watches.
type stalledDialer struct {
	net.Dialer
	mu   sync.Mutex
	conn *net.TCPConn
}

func newStalledDialer() *stalledDialer {
	d := &stalledDialer{}
	d.Control = func(_, _ string, c syscall.RawConn) error {
		var serr error
		c.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
		return serr
	}
	return d
}

func (d *stalledDialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	c, err := d.Dialer.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	d.conn = c.(*net.TCPConn)
	d.mu.Unlock()
	return c, nil
}

// inq returns the bytes waiting in the last connection's receive queue.
func (d *stalledDialer) inq(t *testing.T) int {
	d.mu.Lock()
	c := d.conn
	d.mu.Unlock()
	if c == nil {
		return 0
	}
	rc, err := c.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var n int
	var ierr error
	rc.Control(func(fd uintptr) { n, ierr = unix.IoctlGetInt(int(fd), unix.SIOCINQ) })
	if ierr != nil {
		t.Fatal(ierr)
	}
	return n
}

// stall waits until the host's writes to the last connection block (its
// receive queue is not empty and stopped growing), then, in real time,
// longer than the host's write deadline. The host's writes to a reader
// that does not read block on the network, so this cannot run on a
// synctest clock; watching the queue rather than waiting a fixed time
// keeps it right on a loaded machine, where the host may take seconds to
// fill the socket.
func (d *stalledDialer) stall(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	last, same := -1, 0
	for same < 4 {
		if time.Now().After(deadline) {
			t.Fatalf("the host never filled the socket (%d bytes queued)", last)
		}
		<-time.After(50 * time.Millisecond)
		n := d.inq(t)
		if n > 0 && n == last {
			same++
		} else {
			same = 0
		}
		last = n
	}
	<-time.After(time.Second)
}

// stallEnv is a host whose one session has a log of about 16 MB, served
// with write deadlines of 200 ms.
func stallEnv(t *testing.T) (srv *httptest.Server, sid string, logBytes int) {
	t.Helper()
	word := strings.Repeat("y", 4000) + " "
	src := `{"loop":true,"steps":[{"text":"` + strings.Repeat(word, 1000) + `"}]}`
	h, err := host.New(context.Background(), host.Config{
		Store: memory.New(), DefaultModel: "big",
		ResolveModel: func(name string) (*host.Model, error) {
			p, err := scripted.Parse(name, []byte(src))
			return &host.Model{Name: name, Provider: p, Model: name}, err
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	s := rpc.NewHostServer(h, rpc.HostConfig{Config: rpc.Config{Token: token, WriteTimeout: 200 * time.Millisecond}})
	srv = httptest.NewServer(rpc.HTTPHandler(s, h, rpc.SSEOptions{WriteTimeout: 200 * time.Millisecond}))
	t.Cleanup(func() {
		srv.CloseClientConnections()
		s.Close()
		srv.Close()
		h.Close()
	})
	ctx := context.Background()
	ses, err := h.CreateSession(ctx, api.CreateSessionParams{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		r, err := h.StartRun(ctx, api.StartRunParams{SessionID: ses.ID, Input: api.Input(event.TextParts(fmt.Sprint(i)))})
		if err != nil {
			t.Fatal(err)
		}
		if w, err := h.WaitRun(ctx, api.WaitRunParams{RunID: r.ID, TimeoutMs: 60_000}); err != nil || w.TimedOut {
			t.Fatalf("run %d: %+v, %v", i, w, err)
		}
	}
	return srv, ses.ID, 4 * len(word) * 1000
}

// A reader that stops reading an SSE stream is dropped once a write has
// blocked past the write deadline: when it reads again it finds the
// stream ended long before the end of the log (it resumes by cursor).
func TestStalledSSEReaderIsDropped(t *testing.T) {
	srv, sid, logBytes := stallEnv(t)
	d := newStalledDialer()
	conn, err := d.DialContext(context.Background(), "tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "GET /v1/sessions/%s/events HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\n\r\n", sid, srv.Listener.Addr(), token)
	d.stall(t)
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	n, err := io.Copy(io.Discard, conn)
	if err != nil {
		t.Fatalf("after %d bytes: %v; want the host to have closed the stalled stream", n, err)
	}
	if int(n) >= logBytes {
		t.Fatalf("read %d bytes of a %d-byte log: the stalled reader was not dropped", n, logBytes)
	}
}

// A WebSocket client that stops reading is disconnected once a write
// has blocked past the write deadline, with its subscriptions.
func TestStalledWebSocketReaderIsDropped(t *testing.T) {
	srv, sid, logBytes := stallEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	d := newStalledDialer()
	hc := &http.Client{Transport: &http.Transport{DialContext: d.DialContext}}
	wc, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(srv.URL, "http")+"/rpc/ws", &websocket.DialOptions{
		HTTPClient: hc, HTTPHeader: http.Header{"Authorization": {"Bearer " + token}},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer wc.CloseNow()
	wc.SetReadLimit(-1)
	req := fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"events/subscribe","params":{"sessionId":%q}}`, sid)
	if err := wc.Write(ctx, websocket.MessageText, []byte(req)); err != nil {
		t.Fatal(err)
	}
	d.stall(t)
	n := 0
	for {
		_, b, err := wc.Read(ctx)
		if err != nil {
			if errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("after %d bytes the connection was still open: the stalled reader was not dropped", n)
			}
			break
		}
		n += len(b)
	}
	if n >= logBytes {
		t.Fatalf("read %d bytes of a %d-byte log: the stalled reader was not dropped", n, logBytes)
	}
}

// Readers that stop reading hold up neither the run they follow nor the
// other subscribers: while a stalled WebSocket client's and a stalled SSE
// reader's writes block (their write deadline, a minute, is far off), the
// run commits a log far larger than the sockets can buffer and a reading
// subscriber receives all of it.
func TestStalledReadersStallNobody(t *testing.T) {
	word := strings.Repeat("y", 4000) + " "
	src := `{"steps":[{"text":"` + strings.Repeat(word, 2000) + `"}]}` // 8 MB
	h, err := host.New(context.Background(), host.Config{
		Store: memory.New(), DefaultModel: "big",
		ResolveModel: func(name string) (*host.Model, error) {
			p, err := scripted.Parse(name, []byte(src))
			return &host.Model{Name: name, Provider: p, Model: name}, err
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	s := rpc.NewHostServer(h, rpc.HostConfig{Config: rpc.Config{Token: token, WriteTimeout: time.Minute, NotifyQueue: 16}})
	srv := httptest.NewServer(rpc.HTTPHandler(s, h, rpc.SSEOptions{WriteTimeout: time.Minute}))
	defer func() {
		srv.CloseClientConnections()
		s.Close()
		srv.Close()
		h.Close()
	}()
	// Generous: 8 MB through the race detector on a loaded 2-core
	// machine; what is tested is that the run ends, not how fast.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ses, err := h.CreateSession(ctx, api.CreateSessionParams{})
	if err != nil {
		t.Fatal(err)
	}

	// A WebSocket client that reads its subscription's reply, then stops.
	hc := &http.Client{Transport: &http.Transport{DialContext: newStalledDialer().DialContext}}
	wc, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(srv.URL, "http")+"/rpc/ws", &websocket.DialOptions{
		HTTPClient: hc, HTTPHeader: http.Header{"Authorization": {"Bearer " + token}},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer wc.CloseNow()
	req := fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"events/subscribe","params":{"sessionId":%q}}`, ses.ID)
	if err := wc.Write(ctx, websocket.MessageText, []byte(req)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := wc.Read(ctx); err != nil {
		t.Fatal(err)
	}
	// An SSE reader that reads the response's status line, then stops.
	conn, err := newStalledDialer().DialContext(ctx, "tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "GET /v1/sessions/%s/events HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\n\r\n", ses.ID, srv.Listener.Addr(), token)
	if _, err := conn.Read(make([]byte, 12)); err != nil {
		t.Fatal(err)
	}

	// A subscriber that reads, resuming by cursor if it falls behind the
	// run (which it may: the run is not paced).
	type result struct {
		text int
		err  error
	}
	got := make(chan result, 1)
	dial := func(ctx context.Context) (*client.Client, error) {
		return client.Dial(ctx, srv.URL, client.Options{Token: token})
	}
	go func() {
		var r result
		for e, err := range client.Follow(ctx, dial, ses.ID, 0, "") {
			if r.err = err; err != nil {
				break
			}
			if e.Type == event.MessageDelta {
				r.text += len(e.Data)
			}
			if e.Type == event.RunCompleted {
				break
			}
		}
		got <- r
	}()
	r, err := h.StartRun(ctx, api.StartRunParams{SessionID: ses.ID, Input: api.Input(event.TextParts("go"))})
	if err != nil {
		t.Fatal(err)
	}
	w, err := h.WaitRun(ctx, api.WaitRunParams{RunID: r.ID, TimeoutMs: 170_000})
	if err != nil || w.TimedOut {
		t.Fatalf("the run did not end: %+v, %v", w, err)
	}
	res := <-got
	if res.err != nil {
		t.Fatalf("the reading subscriber, after %d bytes of text: %v", res.text, res.err)
	}
	if want := 2000 * len(word); res.text < want {
		t.Fatalf("the reading subscriber got %d bytes of text, want %d", res.text, want)
	}
}
