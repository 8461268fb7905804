package rpc_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"

	"weft.dev/weft/api"
	"weft.dev/weft/rpc"
)

// TestIDsEchoedExactly checks the raw bytes of echoed ids, which the
// canonicalized transcripts cannot.
func TestIDsEchoedExactly(t *testing.T) {
	s := testServer(t, rpc.Config{}, nil)
	p := startStdio(t, s)
	for _, id := range []string{`9007199254740993`, `-0`, `1.0`, `1e400`, `"abc\u00e9\"<>"`, `""`, `"9007199254740993"`, `123456789012345678901234567890`} {
		p.send(t, `{"jsonrpc":"2.0","id":`+id+`,"method":"hello"}`)
		got := p.recv(t)
		want := `{"jsonrpc":"2.0","id":` + id + `,"result":{"hello":"world"}}`
		if got != want {
			t.Errorf("id %s:\n got %s\nwant %s", id, got, want)
		}
	}
}

func TestOverload(t *testing.T) {
	release := make(chan struct{})
	s := testServer(t, rpc.Config{MaxConcurrentPerConn: 2}, release)
	p := startStdio(t, s)
	p.send(t, `{"jsonrpc":"2.0","id":1,"method":"block"}`)
	p.send(t, `{"jsonrpc":"2.0","id":2,"method":"block"}`)
	p.send(t, `{"jsonrpc":"2.0","id":3,"method":"block"}`)
	var e struct {
		ID    int        `json:"id"`
		Error *api.Error `json:"error"`
	}
	if err := json.Unmarshal([]byte(p.recv(t)), &e); err != nil {
		t.Fatal(err)
	}
	if e.ID != 3 || e.Error == nil || e.Error.Code != api.CodeOverloaded || e.Error.Kind != api.KindOverloaded || !e.Error.Retryable {
		t.Fatalf("third call: got %+v (%+v), want -32001 overloaded retryable", e, e.Error)
	}
	close(release)
	got := map[string]bool{p.recv(t): true, p.recv(t): true}
	for _, id := range []string{"1", "2"} {
		if !got[`{"jsonrpc":"2.0","id":`+id+`,"result":{}}`] {
			t.Errorf("missing result for id %s in %v", id, got)
		}
	}
	// The slots are free again.
	p.send(t, `{"jsonrpc":"2.0","id":4,"method":"hello"}`)
	if got := p.recv(t); !strings.Contains(got, `"id":4,"result"`) {
		t.Errorf("after overload: %s", got)
	}
}

func TestStdioNotificationsBeforeResponse(t *testing.T) {
	s := testServer(t, rpc.Config{}, nil)
	p := startStdio(t, s)
	p.send(t, `{"jsonrpc":"2.0","id":1,"method":"subscribe","params":{"count":3}}`)
	for i := 1; i <= 3; i++ {
		want := `{"jsonrpc":"2.0","method":"events/event","params":{"seq":` + string(rune('0'+i)) + `}}`
		if got := p.recv(t); got != want {
			t.Fatalf("notification %d: got %s want %s", i, got, want)
		}
	}
	if got := p.recv(t); got != `{"jsonrpc":"2.0","id":1,"result":{"sent":3}}` {
		t.Fatalf("response: %s", got)
	}
}

func TestNotifyOverflow(t *testing.T) {
	s := rpc.NewServer(rpc.Config{NotifyQueue: 4})
	notifyErr := make(chan error, 1)
	rpc.Register(s, "flood", "Notify until it fails.", func(ctx context.Context, _ *empty) (*subscribeResult, error) {
		c := rpc.ConnFrom(ctx)
		for i := range 1000 {
			if err := c.Notify(ctx, "events/event", eventData{Seq: i + 1}); err != nil {
				notifyErr <- err
				return &subscribeResult{Sent: i}, nil
			}
		}
		notifyErr <- nil
		return &subscribeResult{Sent: 1000}, nil
	})
	p := startStdio(t, s)
	p.send(t, `{"jsonrpc":"2.0","id":1,"method":"flood"}`)
	// Nobody reads the output until the handler is done, so the queue
	// fills: the writer holds the batch it took (the frames queued when
	// it woke, at most four: they leave the queue as it takes them), four
	// more are queued, and the next Notify fails without blocking.
	if err := <-notifyErr; !errors.Is(err, rpc.ErrNotifyOverflow) {
		t.Fatalf("Notify: %v, want ErrNotifyOverflow", err)
	}
	var lines []string
	for {
		l := p.recv(t)
		lines = append(lines, l)
		if strings.Contains(l, `"id":1`) {
			break
		}
	}
	if n := len(lines) - 1; n < 4 || n > 8 {
		t.Fatalf("got %d notifications before the response, want 4 to 8", n)
	}
	want := fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"result":{"sent":%d}}`, len(lines)-1)
	if lines[len(lines)-1] != want {
		t.Fatalf("response %s, want %s", lines[len(lines)-1], want)
	}
}

func TestStdioEOFFinishesInFlight(t *testing.T) {
	release := make(chan struct{})
	s := testServer(t, rpc.Config{}, release)
	p := startStdio(t, s)
	p.send(t, `{"jsonrpc":"2.0","id":1,"method":"block"}`)
	p.in.Close() // EOF while the call may still be running
	close(release)
	lines := p.finish(t)
	if len(lines) != 1 || lines[0] != `{"jsonrpc":"2.0","id":1,"result":{}}` {
		t.Fatalf("after EOF: %q", lines)
	}
}

func TestConnDoneAndCleanupOnDisconnect(t *testing.T) {
	s := rpc.NewServer(rpc.Config{})
	var mu sync.Mutex
	var conn *rpc.Conn
	cleaned := make(chan struct{})
	rpc.Register(s, "watch", "Register a cleanup.", func(ctx context.Context, _ *empty) (*empty, error) {
		c := rpc.ConnFrom(ctx)
		mu.Lock()
		conn = c
		mu.Unlock()
		c.OnClose(func() { close(cleaned) })
		return nil, nil
	})
	p := startStdio(t, s)
	p.send(t, `{"jsonrpc":"2.0","id":1,"method":"watch"}`)
	p.recv(t)
	mu.Lock()
	c := conn
	mu.Unlock()
	select {
	case <-c.Done():
		t.Fatal("Done closed while connected")
	default:
	}
	if c.Transport() != rpc.TransportStdio {
		t.Errorf("transport %q", c.Transport())
	}
	p.finish(t)
	<-c.Done()
	<-cleaned
	if err := c.Notify(context.Background(), "x", nil); err == nil {
		t.Error("Notify after close succeeded")
	}
	ran := false
	c.OnClose(func() { ran = true })
	if !ran {
		t.Error("OnClose after close did not run at once")
	}
}

func TestServeStdioCancel(t *testing.T) {
	s := testServer(t, rpc.Config{}, nil)
	p := startStdio(t, s)
	p.send(t, `{"jsonrpc":"2.0","id":1,"method":"block"}`) // blocks until ctx ends
	go func() {
		for p.out.Scan() {
		}
	}()
	p.cancel()
	if err := <-p.errc; err != context.Canceled {
		t.Fatalf("ServeStdio after cancel: %v", err)
	}
	p.closed = true
	p.in.Close()
	p.outR.Close()
}

// Close ends a connection with a call in flight, and the server takes no
// connection after it.
func TestServerClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := testServer(t, rpc.Config{}, nil)
		p := startStdio(t, s)
		p.send(t, `{"jsonrpc":"2.0","id":1,"method":"block"}`)
		go func() {
			for p.out.Scan() {
			}
		}()
		synctest.Wait() // the call is in its handler, blocked
		select {
		case err := <-p.errc:
			t.Fatalf("ServeStdio ended before Close: %v", err)
		default:
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		<-p.errc
		p.closed = true
		p.in.Close()
		p.outR.Close()
		if err := s.ServeStdio(context.Background(), strings.NewReader(""), &strings.Builder{}); err != rpc.ErrTooManyConns {
			t.Fatalf("ServeStdio after Close: %v", err)
		}
	})
}
