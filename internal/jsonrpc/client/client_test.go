package client_test

import (
	"context"
	"errors"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"weft.dev/weft/api"
	"weft.dev/weft/internal/jsonrpc/client"
	"weft.dev/weft/rpc"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type addParams struct {
	A int `json:"a"`
	B int `json:"b"`
}
type addResult struct {
	Sum int `json:"sum"`
}
type countParams struct {
	Count int `json:"count"`
}
type none struct{}

// server returns the test server. Its "wait" method sends on waiting, if
// not nil, once the call is being handled, and then waits for the
// connection to end.
func server(waiting chan<- struct{}) *rpc.Server {
	s := rpc.NewServer(rpc.Config{NoAuth: true})
	rpc.Register(s, "add", "Add.", func(_ context.Context, p *addParams) (*addResult, error) {
		return &addResult{Sum: p.A + p.B}, nil
	})
	rpc.Register(s, "missing", "Not found.", func(context.Context, *none) (*none, error) {
		return nil, api.NewError(api.KindNotFound, "no such thing").With("id", "x")
	})
	rpc.Register(s, "notify", "Push count notifications.", func(ctx context.Context, p *countParams) (*none, error) {
		for i := range p.Count {
			if err := rpc.ConnFrom(ctx).Notify(ctx, "tick", countParams{Count: i}); err != nil {
				return nil, err
			}
		}
		return nil, nil
	})
	rpc.Register(s, "wait", "Wait for the connection to end.", func(ctx context.Context, _ *none) (*none, error) {
		if waiting != nil {
			waiting <- struct{}{}
		}
		<-ctx.Done()
		return nil, ctx.Err()
	})
	return s
}

// transports returns a connected client per transport, closed by cleanup,
// to a server(waiting).
func transports(t *testing.T, waiting chan<- struct{}) map[string]*client.Client {
	s := server(waiting)
	hs := httptest.NewServer(s.Handler())
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan struct{})
	go func() {
		_ = s.ServeStdio(ctx, inR, outW)
		outW.Close()
		close(served)
	}()
	ws, err := client.DialWebSocket(ctx, "ws"+strings.TrimPrefix(hs.URL, "http")+"/rpc/ws", client.Config{})
	if err != nil {
		t.Fatal(err)
	}
	cs := map[string]*client.Client{
		"stdio":     client.NewStdio(outR, inW, client.Config{NotifyBuffer: 4}),
		"http":      client.NewHTTP(hs.URL+"/rpc", client.Config{}),
		"websocket": ws,
	}
	t.Cleanup(func() {
		for _, c := range cs {
			c.Close()
		}
		cancel()
		<-served
		hs.Close()
		s.Close()
	})
	return cs
}

func TestCall(t *testing.T) {
	for name, c := range transports(t, nil) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			var r addResult
			if err := c.Call(ctx, "add", addParams{A: 2, B: 3}, &r); err != nil || r.Sum != 5 {
				t.Fatalf("add: %v %+v", err, r)
			}
			err := c.Call(ctx, "missing", nil, nil)
			var e *api.Error
			if !errors.As(err, &e) || e.Code != api.CodeNotFound || e.Kind != api.KindNotFound || e.Data["id"] != "x" {
				t.Fatalf("missing: %#v", err)
			}
			if !errors.Is(err, api.NewError(api.KindNotFound, "")) {
				t.Error("errors.Is by kind failed")
			}
			if err := c.Notify(ctx, "add", addParams{A: 1, B: 1}); err != nil {
				t.Fatalf("notify: %v", err)
			}
			tctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
			defer cancel()
			if err := c.Call(tctx, "wait", nil, nil); !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("wait: %v", err)
			}
		})
	}
}

func TestNotificationsAndOverflow(t *testing.T) {
	cs := transports(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c := cs["stdio"] // NotifyBuffer 4
	if err := c.Call(ctx, "notify", countParams{Count: 3}, nil); err != nil {
		t.Fatal(err)
	}
	i := 0
	for n, err := range c.Notifications(ctx) {
		if err != nil || n.Method != "tick" {
			t.Fatalf("%v %+v", err, n)
		}
		if i++; i == 3 {
			break
		}
	}
	// More than the buffer without consuming: the client ends with a typed error.
	if err := c.Call(ctx, "notify", countParams{Count: 10}, nil); err == nil {
		t.Log("call finished before overflow was detected")
	}
	<-c.Done()
	if !errors.Is(c.Err(), client.ErrNotifyOverflow) {
		t.Fatalf("Err: %v", c.Err())
	}
	var last error
	n := 0
	for _, err := range c.Notifications(ctx) {
		if err != nil {
			last = err
			break
		}
		n++
	}
	if n != 4 || !errors.Is(last, client.ErrNotifyOverflow) {
		t.Fatalf("drained %d then %v", n, last)
	}
	if err := c.Call(ctx, "add", addParams{}, nil); !errors.Is(err, client.ErrNotifyOverflow) {
		t.Fatalf("call after overflow: %v", err)
	}
	// HTTP has no notifications: the iterator ends at once.
	for range cs["http"].Notifications(ctx) {
		t.Fatal("HTTP yielded a notification")
	}
}

func TestCloseFailsPending(t *testing.T) {
	waiting := make(chan struct{}, 1)
	cs := transports(t, waiting)
	c := cs["websocket"]
	errc := make(chan error, 1)
	go func() { errc <- c.Call(context.Background(), "wait", nil, nil) }()
	<-waiting // the server is handling the call, so it is pending in the client
	c.Close()
	if err := <-errc; !errors.Is(err, client.ErrClosed) {
		t.Fatalf("pending call after Close: %v", err)
	}
	if err := c.Call(context.Background(), "add", addParams{}, nil); !errors.Is(err, client.ErrClosed) {
		t.Fatalf("call after Close: %v", err)
	}
}

func TestTooLargeRequest(t *testing.T) {
	c := client.NewHTTP("http://127.0.0.1:1/rpc", client.Config{MaxFrameBytes: 64})
	defer c.Close()
	err := c.Call(context.Background(), "add", map[string]string{"x": strings.Repeat("y", 100)}, nil)
	var e *api.Error
	if !errors.As(err, &e) || e.Kind != api.KindTooLarge {
		t.Fatalf("%v", err)
	}
}
