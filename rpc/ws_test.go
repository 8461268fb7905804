package rpc_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"weft.dev/weft/internal/jsonrpc/client"
	"weft.dev/weft/rpc"
)

func TestWebSocket(t *testing.T) {
	_, hs := newHTTPServer(t, rpc.Config{MaxFrameBytes: 1024, NoAuth: true}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(hs.URL, "http")+"/rpc/ws", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	roundTrip := func(send string) string {
		t.Helper()
		if err := c.Write(ctx, websocket.MessageText, []byte(send)); err != nil {
			t.Fatal(err)
		}
		_, b, err := c.Read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	if got := roundTrip(`{"jsonrpc":"2.0","id":"a","method":"echo","params":{"text":"hi"}}`); got != `{"jsonrpc":"2.0","id":"a","result":{"text":"hi"}}` {
		t.Errorf("call: %s", got)
	}
	// Oversized message: too_large, and the connection keeps serving.
	big := `{"jsonrpc":"2.0","id":1,"method":"echo","params":{"text":"` + strings.Repeat("x", 5000) + `"}}`
	if got := roundTrip(big); !strings.Contains(got, `"kind":"too_large"`) || !strings.Contains(got, `"id":null`) {
		t.Errorf("oversized: %s", got)
	}
	if got := roundTrip(`{"jsonrpc":"2.0","id":2,"method":"add","params":{"a":2,"b":2}}`); got != `{"jsonrpc":"2.0","id":2,"result":{"sum":4}}` {
		t.Errorf("after oversized: %s", got)
	}
	// Capabilities report push on WebSocket.
	if got := roundTrip(`{"jsonrpc":"2.0","id":3,"method":"initialize","params":{"clientInfo":{"name":"t"},"protocolVersion":"x"}}`); !strings.Contains(got, `"notifications":true`) {
		t.Errorf("initialize: %s", got)
	}
	c.Close(websocket.StatusNormalClosure, "")
}

func TestWebSocketNotifications(t *testing.T) {
	_, hs := newHTTPServer(t, rpc.Config{NoAuth: true}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := client.DialWebSocket(ctx, "ws"+strings.TrimPrefix(hs.URL, "http")+"/rpc/ws", client.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var res subscribeResult
	if err := c.Call(ctx, "subscribe", subscribeParams{Count: 5}, &res); err != nil || res.Sent != 5 {
		t.Fatalf("subscribe: %v %+v", err, res)
	}
	n := 0
	for note, err := range c.Notifications(ctx) {
		if err != nil {
			t.Fatal(err)
		}
		var d eventData
		if note.Method != "events/event" || json.Unmarshal(note.Params, &d) != nil || d.Seq != n+1 {
			t.Fatalf("notification %d: %+v", n, note)
		}
		n++
		if n == 5 {
			break
		}
	}
}

func TestWebSocketDisconnectEndsConn(t *testing.T) {
	s := rpc.NewServer(rpc.Config{NoAuth: true})
	var mu sync.Mutex
	var conn *rpc.Conn
	rpc.Register(s, "hold", "Remember the connection.", func(ctx context.Context, _ *empty) (*empty, error) {
		mu.Lock()
		conn = rpc.ConnFrom(ctx)
		mu.Unlock()
		return nil, nil
	})
	hs := newTestHTTP(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := client.DialWebSocket(ctx, "ws"+strings.TrimPrefix(hs, "http")+"/rpc/ws", client.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Call(ctx, "hold", nil, nil); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	sc := conn
	mu.Unlock()
	if sc.Transport() != rpc.TransportWebSocket {
		t.Errorf("transport %q", sc.Transport())
	}
	c.Close()
	select {
	case <-sc.Done():
	case <-ctx.Done():
		t.Fatal("Done not closed after disconnect")
	}
}
