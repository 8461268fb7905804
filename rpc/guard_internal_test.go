package rpc

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// pipeListener hands the server one end of in-memory pipes, so that an
// http.Server runs inside a synctest bubble with its timeouts on the
// fake clock.
type pipeListener struct {
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func newPipeListener() *pipeListener {
	return &pipeListener{conns: make(chan net.Conn), done: make(chan struct{})}
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *pipeListener) Addr() net.Addr { return pipeAddr{} }

type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "pipe" }

// clientConn is the client end of a pipe, with its reader.
type clientConn struct {
	net.Conn
	r *bufio.Reader
}

// dial connects a client and waits until the server has taken the
// connection in (its hooks have run).
func (l *pipeListener) dial(t *testing.T) *clientConn {
	t.Helper()
	c, s := net.Pipe()
	l.conns <- s
	synctest.Wait()
	return &clientConn{Conn: c, r: bufio.NewReader(c)}
}

// do sends one request and reads its answer.
func (c *clientConn) do(t *testing.T, method, path, token, body string) *http.Response {
	t.Helper()
	req := fmt.Sprintf("%s %s HTTP/1.1\r\nHost: localhost\r\n", method, path)
	if token != "" {
		req += "Authorization: Bearer " + token + "\r\n"
	}
	if body != "" {
		req += fmt.Sprintf("Content-Type: application/json\r\nContent-Length: %d\r\n", len(body))
	}
	if _, err := io.WriteString(c, req+"\r\n"+body); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(c.r, nil)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	synctest.Wait() // the connection is idle again
	return resp
}

// closed reports whether the server has closed c.
func (c *clientConn) closed() bool {
	c.SetReadDeadline(time.Now().Add(time.Millisecond))
	defer c.SetReadDeadline(time.Time{})
	_, err := c.r.ReadByte()
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrClosedPipe)
}

const guardToken = "secret"

// guardEnv serves a Server's handler, with a token and a "block" method
// that waits for release, through newHTTPServer on a pipe listener.
// It must run inside a synctest bubble.
func guardEnv(t *testing.T, limits ConnLimits) (l *pipeListener, g *connGuard, release chan struct{}) {
	t.Helper()
	s := NewServer(Config{Token: guardToken})
	release = make(chan struct{})
	Register(s, "block", "Block until released.", func(ctx context.Context, _ *struct{}) (*struct{}, error) {
		select {
		case <-release:
		case <-ctx.Done():
		}
		return nil, nil
	})
	hs, g := newHTTPServer(s.Handler(), limits)
	l = newPipeListener()
	served := make(chan struct{})
	go func() {
		defer close(served)
		hs.Serve(l)
	}()
	t.Cleanup(func() {
		hs.Close()
		s.Close()
		<-served
	})
	return l, g, release
}

const discover = `{"jsonrpc":"2.0","id":1,"method":"rpc.discover"}`

// At the idle limit a new connection closes the oldest idle one that
// never authenticated (after /healthz, or halfway through a header);
// an authenticated idle connection outlives every one of them.
func TestGuardShedsOldestUnauthenticatedFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var logged bytes.Buffer
		l, g, _ := guardEnv(t, ConnLimits{MaxIdleConns: 3, MaxOpenConns: 100, Logger: slog.New(slog.NewTextHandler(&logged, nil))})
		c1 := l.dial(t)
		c1.do(t, "GET", "/healthz", "", "")
		c2 := l.dial(t)
		if r := c2.do(t, "POST", "/rpc", guardToken, discover); r.StatusCode != 200 {
			t.Fatalf("authenticated POST: %s", r.Status)
		}
		c3 := l.dial(t)
		c3.do(t, "GET", "/healthz", "", "")
		if c1.closed() || c2.closed() || c3.closed() {
			t.Fatal("a connection was shed below the limit")
		}
		c4 := l.dial(t) // the fourth idle connection: c1 goes
		io.WriteString(c4, "GET /healthz HTTP/1.1\r\nHost: local")
		synctest.Wait()
		if !c1.closed() {
			t.Fatal("the oldest unauthenticated idle connection was not shed")
		}
		for range 5 { // a crowd: never the authenticated connection
			l.dial(t)
		}
		if !c3.closed() || !c4.closed() {
			t.Fatal("older unauthenticated connections were kept")
		}
		if c2.closed() {
			t.Fatal("the authenticated connection was shed for a crowd that never authenticated")
		}
		if r := c2.do(t, "POST", "/rpc", guardToken, discover); r.StatusCode != 200 {
			t.Fatalf("authenticated POST after the crowd: %s", r.Status)
		}
		st := g.stats()
		if st.Idle != 3 || st.IdleAuthenticated != 1 || st.Open != 3 || st.Shed != 6 {
			t.Fatalf("stats %+v; want 3 idle (1 authenticated), 3 open, 6 shed", st)
		}
		if n := strings.Count(logged.String(), "shedding connections"); n != 1 {
			t.Fatalf("%d warnings for one crowd in a minute; want 1:\n%s", n, &logged)
		}
	})
}

// Authenticated idle connections are shed too, oldest first, when they
// alone fill the idle limit.
func TestGuardShedsOldestAuthenticatedAtLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, _, _ := guardEnv(t, ConnLimits{MaxIdleConns: 2, MaxOpenConns: 100})
		var cs []*clientConn
		for range 3 {
			c := l.dial(t)
			c.do(t, "POST", "/rpc", guardToken, discover)
			cs = append(cs, c)
		}
		if !cs[0].closed() || cs[1].closed() || cs[2].closed() {
			t.Fatal("want only the oldest authenticated connection shed")
		}
	})
}

// Requests in their handlers are never shed; at the open limit, with
// nothing idle, a new connection is closed at once, and served again
// once a handler returns.
func TestGuardRefusesNewConnWhenAllBusy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, g, release := guardEnv(t, ConnLimits{MaxIdleConns: 2, MaxOpenConns: 2})
		block := `{"jsonrpc":"2.0","id":1,"method":"block"}`
		var busy []*clientConn
		for range 2 {
			c := l.dial(t)
			fmt.Fprintf(c, "POST /rpc HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer %s\r\nContent-Length: %d\r\n\r\n%s", guardToken, len(block), block)
			busy = append(busy, c)
		}
		synctest.Wait()
		c := l.dial(t)
		if !c.closed() {
			t.Fatal("a connection beyond the open limit was kept with nothing idle to shed")
		}
		if st := g.stats(); st.Refused != 1 || st.Open != 2 {
			t.Fatalf("stats %+v; want 1 refused, 2 open", st)
		}
		close(release)
		for _, b := range busy {
			resp, err := http.ReadResponse(b.r, nil)
			if err != nil || resp.StatusCode != 200 {
				t.Fatalf("the busy request was cut: %v %v", resp, err)
			}
			resp.Body.Close()
		}
		synctest.Wait()
		c = l.dial(t) // sheds the oldest idle one
		if r := c.do(t, "GET", "/healthz", "", ""); r.StatusCode != 200 {
			t.Fatalf("healthz: %s", r.Status)
		}
	})
}

// A header sent slowly is cut at ReadHeaderTimeout, and a keep-alive
// connection at IdleTimeout, on the fake clock.
func TestGuardTimeouts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, _, _ := guardEnv(t, ConnLimits{})
		slow := l.dial(t)
		io.WriteString(slow, "GET /healthz HTTP/1.1\r\n")
		idle := l.dial(t)
		idle.do(t, "GET", "/healthz", "", "")
		start := time.Now()
		time.Sleep(DefaultReadHeaderTimeout - time.Second)
		if slow.closed() {
			t.Fatal("a slow header was cut before ReadHeaderTimeout")
		}
		time.Sleep(2 * time.Second)
		if !slow.closed() {
			t.Fatalf("a slow header was still read %v later", time.Since(start))
		}
		time.Sleep(DefaultIdleTimeout - time.Since(start) - time.Second)
		if idle.closed() {
			t.Fatal("an idle connection was closed before IdleTimeout")
		}
		time.Sleep(2 * time.Second)
		if !idle.closed() {
			t.Fatalf("an idle connection was still open %v later", time.Since(start))
		}
	})
}

// A request refused for its token or Host closes its connection: a
// client without the token cannot keep one open.
func TestRefusedRequestClosesConn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, _, _ := guardEnv(t, ConnLimits{})
		c := l.dial(t)
		r := c.do(t, "POST", "/rpc", "wrong", discover)
		if r.StatusCode != http.StatusUnauthorized || !r.Close {
			t.Fatalf("%s, close %v; want 401 and Connection: close", r.Status, r.Close)
		}
		if !c.closed() {
			t.Fatal("the connection of a refused request stayed open")
		}
	})
}

// A crowd of thousands of real connections that never authenticate
// (keep-alive after /healthz, and half-sent headers) is held to the
// idle limit, the oldest shed, while a client with the token is
// answered at once.
func TestGuardCrowdOverRealSockets(t *testing.T) {
	s := NewServer(Config{Token: guardToken})
	hs, g := newHTTPServer(s.Handler(), ConnLimits{MaxIdleConns: 256, MaxOpenConns: 512})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan struct{})
	go func() {
		defer close(served)
		hs.Serve(ln)
	}()
	defer func() {
		hs.Close()
		s.Close()
		<-served
	}()
	addr := ln.Addr().String()
	var (
		mu    sync.Mutex
		conns []net.Conn
		wg    sync.WaitGroup
	)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	next := make(chan int)
	for range 32 {
		wg.Go(func() {
			buf := make([]byte, 256)
			for i := range next {
				c, err := net.DialTimeout("tcp", addr, time.Second)
				if err != nil {
					continue
				}
				mu.Lock()
				conns = append(conns, c)
				mu.Unlock()
				if i%4 == 3 {
					fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: %s\r\nUser-Agent: slo", addr)
					continue
				}
				fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: %s\r\n\r\n", addr)
				c.SetReadDeadline(time.Now().Add(time.Second))
				c.Read(buf)
			}
		})
	}
	for i := range 3000 {
		next <- i
	}
	close(next)
	wg.Wait()
	st := g.stats()
	if st.Idle > 256 || st.Open > 512 {
		t.Fatalf("%+v: over the limits of 256 idle and 512 open", st)
	}
	start := time.Now()
	req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/rpc", strings.NewReader(discover))
	req.Header.Set("Authorization", "Bearer "+guardToken)
	hc := &http.Client{Timeout: 5 * time.Second}
	defer hc.CloseIdleConnections()
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("with %d connections in the crowd (%+v), an authenticated request failed: %v", len(conns), st, err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if d := time.Since(start); resp.StatusCode != 200 || d > time.Second {
		t.Fatalf("authenticated request: %s after %v", resp.Status, d)
	}
	t.Logf("crowd of %d: %+v; authenticated request answered in %v", len(conns), st, time.Since(start))
}
