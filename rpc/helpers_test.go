package rpc_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"testing"

	"weft.dev/weft/api"
	"weft.dev/weft/rpc"
)

type echoParams struct {
	Text string `json:"text" jsonschema:"text to echo"`
}
type echoResult struct {
	Text string `json:"text"`
}
type addParams struct {
	A int `json:"a"`
	B int `json:"b"`
}
type addResult struct {
	Sum int `json:"sum"`
}
type helloParams struct {
	Name string `json:"name,omitempty"`
}
type helloResult struct {
	Hello string `json:"hello"`
}
type empty struct{}
type blockParams struct {
	Key string `json:"key,omitempty"`
}
type subscribeParams struct {
	Count int `json:"count"`
}
type subscribeResult struct {
	Sent int `json:"sent"`
}
type eventData struct {
	Seq int `json:"seq"`
}

var errRunBusy = errors.New("test: run busy")

// testServer returns a server with the test methods. release, when not
// nil, unblocks "block" calls.
func testServer(t testing.TB, cfg rpc.Config, release <-chan struct{}) *rpc.Server {
	t.Helper()
	cfg.MapError = func(err error) *api.Error {
		if errors.Is(err, errRunBusy) {
			return api.NewError(api.KindRunConflict, "session busy").With("reason", "busy")
		}
		return nil
	}
	s := rpc.NewServer(cfg)
	rpc.Register(s, "echo", "Echo text back.", func(_ context.Context, p *echoParams) (*echoResult, error) {
		return &echoResult{Text: p.Text}, nil
	})
	rpc.Register(s, "add", "Add two integers.", func(_ context.Context, p *addParams) (*addResult, error) {
		return &addResult{Sum: p.A + p.B}, nil
	})
	rpc.Register(s, "hello", "Greet, with optional name.", func(_ context.Context, p *helloParams) (*helloResult, error) {
		if p.Name == "" {
			p.Name = "world"
		}
		return &helloResult{Hello: p.Name}, nil
	})
	rpc.Register(s, "notfound", "Always not_found.", func(context.Context, *empty) (*empty, error) {
		return nil, api.NewError(api.KindNotFound, "session s1 not found").With("sessionId", "s1")
	})
	rpc.Register(s, "busy", "Always a mapped host sentinel.", func(context.Context, *empty) (*empty, error) {
		return nil, errRunBusy
	})
	rpc.Register(s, "boom", "Always an unmapped error.", func(context.Context, *empty) (*empty, error) {
		return nil, errors.New("secret internal detail")
	})
	rpc.Register(s, "panic", "Always panics.", func(context.Context, *empty) (*empty, error) {
		panic("handler bug")
	})
	rpc.Register(s, "block", "Block until released or the connection ends.", func(ctx context.Context, _ *blockParams) (*empty, error) {
		select {
		case <-release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return &empty{}, nil
	})
	rpc.Register(s, "subscribe", "Send count events/event notifications, then answer.", func(ctx context.Context, p *subscribeParams) (*subscribeResult, error) {
		c := rpc.ConnFrom(ctx)
		for i := range p.Count {
			if err := c.Notify(ctx, "events/event", eventData{Seq: i + 1}); err != nil {
				return nil, err
			}
		}
		return &subscribeResult{Sent: p.Count}, nil
	})
	rpc.RegisterEventType[eventData](s, "test.event", "A test event.")
	return s
}

// stdioPeer is the client side of a ServeStdio connection over pipes.
type stdioPeer struct {
	in     *io.PipeWriter // client -> server
	out    *bufio.Scanner // server -> client
	outR   *io.PipeReader
	errc   chan error
	cancel context.CancelFunc
	closed bool
}

func startStdio(t testing.TB, s *rpc.Server) *stdioPeer {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	p := &stdioPeer{in: inW, outR: outR, errc: make(chan error, 1), cancel: cancel}
	p.out = bufio.NewScanner(outR)
	p.out.Buffer(make([]byte, 0, 64<<10), 64<<20)
	go func() {
		err := s.ServeStdio(ctx, inR, outW)
		outW.Close()
		p.errc <- err
	}()
	t.Cleanup(func() { p.close(t) })
	return p
}

func (p *stdioPeer) send(t testing.TB, line string) {
	t.Helper()
	if _, err := io.WriteString(p.in, line+"\n"); err != nil {
		t.Fatalf("send: %v", err)
	}
}

func (p *stdioPeer) recv(t testing.TB) string {
	t.Helper()
	if !p.out.Scan() {
		t.Fatalf("recv: stream ended: %v", p.out.Err())
	}
	return p.out.Text()
}

// finish closes the input and returns every remaining output line.
func (p *stdioPeer) finish(t testing.TB) []string {
	t.Helper()
	p.in.Close()
	var lines []string
	for p.out.Scan() {
		lines = append(lines, p.out.Text())
	}
	if err := <-p.errc; err != nil {
		t.Errorf("ServeStdio: %v", err)
	}
	p.closed = true
	return lines
}

func (p *stdioPeer) close(t testing.TB) {
	if p.closed {
		return
	}
	p.closed = true
	p.cancel()
	p.in.Close()
	p.outR.Close()
	<-p.errc
}
