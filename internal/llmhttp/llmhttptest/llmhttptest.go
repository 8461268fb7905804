// Package llmhttptest serves HTTP over in-memory connections, so that a
// provider's timeouts can be tested inside a testing/synctest bubble: a
// goroutine blocked on a real socket is not durably blocked, so fake time
// would not advance past a server that never answers; one blocked on
// [net.Pipe] is.
package llmhttptest

import (
	"context"
	"errors"
	"net"
	"net/http"
	"sync"
)

// Server is an http.Server whose connections are in memory. Create it
// (and use it) inside the bubble of the test; Close it before the bubble
// ends.
type Server struct {
	srv  *http.Server
	ln   *listener
	done chan struct{}
	tr   *http.Transport
}

// NewServer serves h on in-memory connections until Close.
func NewServer(h http.Handler) *Server {
	s := &Server{
		srv:  &http.Server{Handler: h},
		ln:   &listener{conns: make(chan net.Conn), closed: make(chan struct{})},
		done: make(chan struct{}),
	}
	s.tr = &http.Transport{DialContext: s.ln.dial}
	go func() {
		defer close(s.done)
		s.srv.Serve(s.ln)
	}()
	return s
}

// URL is the base URL of the server; any host name reaches it through
// [Server.Client].
const URL = "http://model.test"

// Client returns a client whose connections reach the server in memory.
func (s *Server) Client() *http.Client { return &http.Client{Transport: s.tr} }

// Close closes the server and every connection, and waits for it to stop
// serving.
func (s *Server) Close() {
	s.srv.Close()
	<-s.done
	s.tr.CloseIdleConnections()
}

// Unreachable returns a client whose dials never complete: they wait
// until the request's context ends, as a dial to a host that drops every
// packet does.
func Unreachable() *http.Client {
	return &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			<-ctx.Done()
			return nil, ctx.Err()
		},
	}}
}

// listener hands the server the server ends of in-memory connections.
type listener struct {
	conns  chan net.Conn
	once   sync.Once
	closed chan struct{}
}

func (l *listener) dial(ctx context.Context, _, _ string) (net.Conn, error) {
	c, sc := net.Pipe()
	select {
	case l.conns <- sc:
		return c, nil
	case <-l.closed:
		return nil, errors.New("llmhttptest: server closed")
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (l *listener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

func (l *listener) Close() error {
	l.once.Do(func() { close(l.closed) })
	return nil
}

func (l *listener) Addr() net.Addr { return addr{} }

type addr struct{}

func (addr) Network() string { return "pipe" }
func (addr) String() string  { return "model.test:80" }
