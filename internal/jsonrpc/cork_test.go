package jsonrpc

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/coder/websocket"
)

// countingConn records each write to the connection.
type countingConn struct {
	net.Conn
	writes []string
}

func (c *countingConn) Write(p []byte) (int, error) {
	c.writes = append(c.writes, string(p))
	return len(p), nil
}

func (c *countingConn) SetWriteDeadline(time.Time) error { return nil }

func TestCorkHoldsWritesBack(t *testing.T) {
	cc := &countingConn{}
	c := &corkConn{Conn: cc}
	c.Write([]byte("a"))
	c.cork()
	c.Write([]byte("b"))
	c.Write([]byte("c"))
	if len(cc.writes) != 1 {
		t.Fatalf("writes while corked reached the connection: %q", cc.writes)
	}
	if err := c.uncork(context.Background()); err != nil {
		t.Fatal(err)
	}
	c.Write([]byte("d"))
	if got := fmt.Sprint(cc.writes); got != "[a bc d]" {
		t.Fatalf("connection saw %s, want [a bc d]", got)
	}
	if c.buf != nil {
		t.Fatal("the cork kept its buffer after uncork")
	}
}

// A batch written to a stream made by AcceptWebSocket arrives as one
// message per frame, in order, with single writes around it in place.
func TestWebSocketWriteBatch(t *testing.T) {
	streams := make(chan *WSStream, 1)
	done := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s, err := AcceptWebSocket(w, r, nil, 1<<20)
		if err != nil {
			t.Error(err)
			return
		}
		streams <- s
		<-done
	}))
	defer srv.Close()
	defer close(done)
	ctx := context.Background()
	wc, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(srv.URL, "http"), nil)
	if err != nil {
		t.Fatal(err)
	}
	wc.SetReadLimit(-1)
	defer wc.CloseNow()
	s := <-streams
	defer func() {
		wc.CloseNow() // first, so that the stream's close needs no handshake
		s.Close()
	}()
	var want []string
	if err := s.Write(ctx, []byte(`"first"`)); err != nil {
		t.Fatal(err)
	}
	want = append(want, `"first"`)
	var batch [][]byte
	for i := range 300 {
		pad := strings.Repeat("x", i*37%5000)
		if i == 150 {
			pad = strings.Repeat("y", 70_000) // a 64-bit length
		}
		f := fmt.Sprintf(`{"i":%d,"pad":%q}`, i, pad)
		batch = append(batch, []byte(f))
		want = append(want, f)
	}
	if err := s.WriteBatch(ctx, batch); err != nil {
		t.Fatal(err)
	}
	if err := s.Write(ctx, []byte(`"last"`)); err != nil {
		t.Fatal(err)
	}
	want = append(want, `"last"`)
	for i, w := range want {
		_, b, err := wc.Read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != w {
			t.Fatalf("message %d is %.40q, want %.40q", i, b, w)
		}
	}
}

// pipeResponseWriter is the server side of an HTTP exchange over one end
// of a net.Pipe: its Hijack writes the response head, as net/http's does.
type pipeResponseWriter struct {
	conn   net.Conn
	br     *bufio.Reader
	header http.Header
	code   int
}

func (w *pipeResponseWriter) Header() http.Header         { return w.header }
func (w *pipeResponseWriter) Write(p []byte) (int, error) { return len(p), nil }
func (w *pipeResponseWriter) WriteHeader(code int)        { w.code = code }

func (w *pipeResponseWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	bw := bufio.NewWriter(w.conn)
	fmt.Fprintf(bw, "HTTP/1.1 %d %s\r\n", w.code, http.StatusText(w.code))
	w.header.Write(bw)
	bw.WriteString("\r\n")
	return w.conn, bufio.NewReadWriter(w.br, bw), nil
}

// wsPeer is the client end of a WebSocket over a net.Pipe, reading the
// server's frames itself: a pipe buffers nothing, so a peer that does
// not read stalls the server's writes at once.
type wsPeer struct {
	conn net.Conn
	br   *bufio.Reader
}

// read returns the next message, which must be a single text frame.
func (p *wsPeer) read() (string, error) {
	var h [2]byte
	if _, err := io.ReadFull(p.br, h[:]); err != nil {
		return "", err
	}
	if h[0] != 0x81 { // FIN, text
		return "", fmt.Errorf("frame header %#x", h[0])
	}
	n := uint64(h[1] & 0x7f)
	switch n {
	case 126:
		var b [2]byte
		if _, err := io.ReadFull(p.br, b[:]); err != nil {
			return "", err
		}
		n = uint64(binary.BigEndian.Uint16(b[:]))
	case 127:
		var b [8]byte
		if _, err := io.ReadFull(p.br, b[:]); err != nil {
			return "", err
		}
		n = binary.BigEndian.Uint64(b[:])
	}
	b := make([]byte, n)
	_, err := io.ReadFull(p.br, b)
	return string(b), err
}

// wsPipe returns a stream made by AcceptWebSocket and its peer, over a
// net.Pipe, so that it can run in a synctest bubble.
func wsPipe(t *testing.T) (*WSStream, *wsPeer) {
	t.Helper()
	server, client := net.Pipe()
	type accepted struct {
		s   *WSStream
		err error
	}
	ch := make(chan accepted, 1)
	go func() {
		br := bufio.NewReader(server)
		r, err := http.ReadRequest(br)
		if err != nil {
			ch <- accepted{nil, err}
			return
		}
		s, err := AcceptWebSocket(&pipeResponseWriter{conn: server, br: br, header: http.Header{}}, r, nil, 1<<20)
		ch <- accepted{s, err}
	}()
	fmt.Fprint(client, "GET / HTTP/1.1\r\nHost: weft\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"+
		"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n")
	p := &wsPeer{conn: client, br: bufio.NewReader(client)}
	resp, err := http.ReadResponse(p.br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("handshake: %s", resp.Status)
	}
	a := <-ch
	if a.err != nil {
		t.Fatal(a.err)
	}
	t.Cleanup(func() {
		client.Close()
		a.s.c.CloseNow()
	})
	return a.s, p
}

func frames(fs ...string) [][]byte {
	var b [][]byte
	for _, f := range fs {
		b = append(b, []byte(f))
	}
	return b
}

// A batch and a lone message each reach the peer at once, and the cork
// holds nothing once the batch is written.
func TestWebSocketBatchGoesOutAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, p := wsPipe(t)
		start := time.Now()
		got := make(chan string, 10)
		go func() {
			for {
				m, err := p.read()
				if err != nil {
					close(got)
					return
				}
				got <- m
			}
		}()
		ctx := t.Context()
		if err := s.WriteBatch(ctx, frames(`"a"`, `"b"`, `"c"`)); err != nil {
			t.Fatal(err)
		}
		if s.cork.buf != nil {
			t.Error("the cork holds a buffer after the batch")
		}
		if err := s.Write(ctx, []byte(`"lone"`)); err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{`"a"`, `"b"`, `"c"`, `"lone"`} {
			if m := <-got; m != want {
				t.Fatalf("got %s, want %s", m, want)
			}
		}
		if d := time.Since(start); d != 0 {
			t.Errorf("delivery took %v of the bubble's clock, want none", d)
		}
	})
}

// A peer that never reads makes a batch fail when its ctx ends, not
// before and not later; the connection is then closed and the cork's
// buffer released.
func TestWebSocketBatchPeerNeverReads(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, p := wsPipe(t)
		const timeout = 30 * time.Second
		ctx, cancel := context.WithTimeout(t.Context(), timeout)
		defer cancel()
		start := time.Now()
		err := s.WriteBatch(ctx, frames(`"a"`, `"b"`))
		if !errors.Is(err, os.ErrDeadlineExceeded) && !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("WriteBatch: %v, want a timeout", err)
		}
		if d := time.Since(start); d != timeout {
			t.Errorf("WriteBatch failed after %v, want %v", d, timeout)
		}
		if s.cork.buf != nil {
			t.Error("the cork kept its buffer")
		}
		if _, err := p.read(); err == nil {
			t.Error("the peer read a message after the failed batch; want the connection closed")
		}
		if err := s.Write(t.Context(), []byte(`"after"`)); err == nil {
			t.Error("Write after the failed batch succeeded")
		}
	})
}

// A batch whose ctx is cancelled while its write is blocked fails at
// once; so does one whose peer goes away in the middle of it.
func TestWebSocketBatchInterrupted(t *testing.T) {
	big := strings.Repeat("x", 100_000)
	t.Run("cancel", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			s, _ := wsPipe(t)
			ctx, cancel := context.WithCancel(t.Context())
			time.AfterFunc(time.Second, cancel)
			start := time.Now()
			err := s.WriteBatch(ctx, frames(`"a"`, `"b"`))
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("WriteBatch: %v, want context.Canceled", err)
			}
			if d := time.Since(start); d != time.Second {
				t.Errorf("WriteBatch failed after %v, want 1s", d)
			}
			if s.cork.buf != nil {
				t.Error("the cork kept its buffer")
			}
		})
	})
	t.Run("peer closes", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			s, p := wsPipe(t)
			go func() {
				// Take part of the batch, then go away.
				io.ReadFull(p.br, make([]byte, 1000))
				p.conn.Close()
			}()
			start := time.Now()
			if err := s.WriteBatch(t.Context(), frames(`"a"`, big, `"c"`)); err == nil {
				t.Fatal("WriteBatch succeeded on a closed connection")
			}
			if d := time.Since(start); d != 0 {
				t.Errorf("WriteBatch failed after %v, want at once", d)
			}
			if s.cork.buf != nil {
				t.Error("the cork kept its buffer")
			}
		})
	})
}

// A batch with a message larger than the buffers corks keep is sent
// whole, and the big buffer is not kept.
func TestWebSocketBatchOversized(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, p := wsPipe(t)
		big := `"` + strings.Repeat("x", corkKeep+1) + `"`
		want := []string{`"a"`, big, `"c"`}
		done := make(chan error, 1)
		go func() { done <- s.WriteBatch(t.Context(), frames(want...)) }()
		for _, w := range want {
			m, err := p.read()
			if err != nil {
				t.Fatal(err)
			}
			if m != w {
				t.Fatalf("got %.20s… (%d bytes), want %.20s… (%d bytes)", m, len(m), w, len(w))
			}
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if s.cork.buf != nil {
			t.Error("the cork kept its buffer")
		}
		b := corkBufs.Get().(*[]byte)
		if cap(*b) > corkKeep {
			t.Errorf("a %d-byte buffer went back to the pool", cap(*b))
		}
	})
}

// The library's own frames (here the pongs that answer the peer's
// pings, written by the stream's reader) interleave with batches whole:
// the peer reads every message in order while its pings are answered.
func TestWebSocketBatchBesidePongs(t *testing.T) {
	streams := make(chan *WSStream, 1)
	done := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s, err := AcceptWebSocket(w, r, nil, 1<<20)
		if err != nil {
			t.Error(err)
			return
		}
		streams <- s
		<-done
	}))
	defer srv.Close()
	defer close(done)
	ctx := t.Context()
	wc, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(srv.URL, "http"), nil)
	if err != nil {
		t.Fatal(err)
	}
	wc.SetReadLimit(-1)
	defer wc.CloseNow()
	s := <-streams
	var wg sync.WaitGroup
	defer func() {
		wc.CloseNow()
		s.Close()
		wg.Wait()
	}()
	wg.Go(func() { // the server's reader answers pings
		for {
			if _, err := s.Read(ctx); err != nil {
				return
			}
		}
	})
	const batches, per = 200, 20
	wg.Go(func() {
		for i := range batches {
			var batch [][]byte
			for j := range per {
				batch = append(batch, fmt.Appendf(nil, `{"i":%d,"pad":%q}`, i*per+j, strings.Repeat("p", (i*per+j)*13%300)))
			}
			if err := s.WriteBatch(ctx, batch); err != nil {
				t.Error(err)
				return
			}
		}
	})
	pinged := make(chan error, 1)
	go func() {
		for range 50 {
			if err := wc.Ping(ctx); err != nil {
				pinged <- err
				return
			}
		}
		pinged <- nil
	}()
	for k := range batches * per {
		_, b, err := wc.Read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if want := fmt.Sprintf(`{"i":%d,"pad":%q}`, k, strings.Repeat("p", k*13%300)); string(b) != want {
			t.Fatalf("message %d is %.40q, want %.40q", k, b, want)
		}
	}
	go func() { // keep reading, for the last pongs
		for {
			if _, _, err := wc.Read(ctx); err != nil {
				return
			}
		}
	}()
	if err := <-pinged; err != nil {
		t.Fatalf("ping: %v", err)
	}
}

// BoundWrites bounds every write by the connection's timeout without a
// deadline per write: a write after an idle spell longer than the
// timeout still goes through, a peer that stops reading fails the
// write after one to one and a half timeouts, and the ctx's end fails
// the write in progress and every later one at once.
func TestWebSocketBoundWrites(t *testing.T) {
	t.Run("idle", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			s, p := wsPipe(t)
			if !s.BoundWrites(t.Context(), time.Second) {
				t.Fatal("BoundWrites: false for an accepted stream")
			}
			got := make(chan string, 3)
			go func() {
				for {
					m, err := p.read()
					if err != nil {
						return
					}
					got <- m
				}
			}()
			if err := s.WriteBatch(t.Context(), frames(`"a"`, `"b"`)); err != nil {
				t.Fatal(err)
			}
			time.Sleep(10 * time.Second)
			// A lone message goes through the cork too, framed alike.
			if err := s.Write(t.Context(), []byte(`"c"`)); err != nil {
				t.Fatalf("Write after an idle spell: %v", err)
			}
			for _, want := range []string{`"a"`, `"b"`, `"c"`} {
				if m := <-got; m != want {
					t.Fatalf("peer read %q, want %q", m, want)
				}
			}
		})
	})
	t.Run("stalled peer", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			s, _ := wsPipe(t)
			s.BoundWrites(t.Context(), time.Second)
			start := time.Now()
			err := s.WriteBatch(t.Context(), frames(`"a"`))
			if !errors.Is(err, os.ErrDeadlineExceeded) {
				t.Fatalf("WriteBatch: %v, want a deadline exceeded", err)
			}
			if d := time.Since(start); d < time.Second || d > 3*time.Second/2 {
				t.Errorf("WriteBatch failed after %v, want 1s to 1.5s", d)
			}
		})
	})
	t.Run("ctx ends", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			s, _ := wsPipe(t)
			ctx, cancel := context.WithCancel(t.Context())
			s.BoundWrites(ctx, time.Minute)
			time.AfterFunc(time.Second, cancel)
			start := time.Now()
			err := s.WriteBatch(t.Context(), frames(`"a"`))
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("WriteBatch: %v, want context.Canceled", err)
			}
			if d := time.Since(start); d != time.Second {
				t.Errorf("WriteBatch failed after %v, want 1s", d)
			}
			if err := s.WriteBatch(t.Context(), frames(`"b"`)); err == nil {
				t.Error("WriteBatch after the ctx ended succeeded")
			}
		})
	})
}
