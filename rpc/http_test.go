package rpc_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/coder/websocket"

	"weft.dev/weft/api"
	"weft.dev/weft/internal/jsonrpc/client"
	"weft.dev/weft/rpc"
)

const testToken = "s3cret-token"

func newHTTPServer(t testing.TB, cfg rpc.Config, release <-chan struct{}) (*rpc.Server, *httptest.Server) {
	t.Helper()
	s := testServer(t, cfg, release)
	hs := httptest.NewServer(s.Handler())
	t.Cleanup(func() {
		hs.Close()
		s.Close()
	})
	return s, hs
}

func newTestHTTP(t testing.TB, s *rpc.Server) string {
	t.Helper()
	hs := httptest.NewServer(s.Handler())
	t.Cleanup(func() {
		hs.Close()
		s.Close()
	})
	return hs.URL
}

func post(t testing.TB, url, token, body string, hdr map[string]string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(b))
}

func TestHTTP(t *testing.T) {
	_, hs := newHTTPServer(t, rpc.Config{MaxFrameBytes: 1024}, nil)
	u := hs.URL + "/rpc"
	tests := []struct {
		name, body string
		status     int
		want       string
	}{
		{"call", `{"jsonrpc":"2.0","id":9007199254740993,"method":"add","params":{"a":1,"b":2}}`, 200,
			`{"jsonrpc":"2.0","id":9007199254740993,"result":{"sum":3}}`},
		{"notification", `{"jsonrpc":"2.0","method":"add","params":{"a":1,"b":2}}`, 204, ``},
		{"notification batch", `[{"jsonrpc":"2.0","method":"boom"},{"jsonrpc":"2.0","method":"nope"}]`, 204, ``},
		{"invalid JSON", `{`, 200,
			`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse error: invalid JSON","data":{"kind":"parse","retryable":false}}}`},
		{"empty batch", `[]`, 200,
			`{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"invalid request: empty batch","data":{"kind":"invalid_request","retryable":false}}}`},
		{"too large", `{"jsonrpc":"2.0","id":1,"method":"echo","params":{"text":"` + strings.Repeat("x", 2000) + `"}}`, 413,
			`{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"frame exceeds 1024 bytes","data":{"kind":"too_large","limit":1024,"retryable":false}}}`},
		{"no push over POST", `{"jsonrpc":"2.0","id":"s","method":"subscribe","params":{"count":1}}`, 200,
			`{"jsonrpc":"2.0","id":"s","error":{"code":-32603,"message":"internal error","data":{"kind":"internal","retryable":false}}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, body := post(t, u, "", tt.body, map[string]string{"Content-Type": "text/plain"})
			if status != tt.status || body != tt.want {
				t.Errorf("got %d %s\nwant %d %s", status, body, tt.status, tt.want)
			}
		})
	}
	resp, err := http.Get(hs.URL + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || strings.TrimSpace(string(b)) != `{"ok":true}` {
		t.Errorf("healthz: %d %s", resp.StatusCode, b)
	}
}

func TestHTTPMaxConns(t *testing.T) {
	release, started := make(chan struct{}), make(chan struct{})
	s := rpc.NewServer(rpc.Config{MaxConns: 1})
	rpc.Register(s, "hold", "Hold the only connection slot.", func(context.Context, *empty) (*empty, error) {
		close(started)
		<-release
		return nil, nil
	})
	u := newTestHTTP(t, s)
	done := make(chan struct{})
	go func() {
		defer close(done)
		post(t, u+"/rpc", "", `{"jsonrpc":"2.0","id":1,"method":"hold"}`, nil)
	}()
	<-started
	status, body := post(t, u+"/rpc", "", `{"jsonrpc":"2.0","id":2,"method":"hold"}`, nil)
	if status != http.StatusServiceUnavailable || !strings.Contains(body, `"code":-32001`) || !strings.Contains(body, `"retryable":true`) {
		t.Errorf("beyond MaxConns: %d %s", status, body)
	}
	c, resp, err := websocket.Dial(context.Background(), "ws"+strings.TrimPrefix(u, "http")+"/rpc/ws", nil)
	if err == nil {
		c.CloseNow()
		t.Fatal("WebSocket accepted beyond MaxConns")
	}
	if resp == nil || resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("WebSocket beyond MaxConns: %v %v", resp, err)
	}
	close(release)
	<-done
}

func TestAuth(t *testing.T) {
	_, hs := newHTTPServer(t, rpc.Config{Token: testToken}, nil)
	call := `{"jsonrpc":"2.0","id":1,"method":"hello"}`
	unauthorized := `{"jsonrpc":"2.0","id":null,"error":{"code":-32017,"message":"missing or invalid bearer token","data":{"kind":"unauthorized","retryable":false}}}`
	for _, tt := range []struct {
		name, token string
		status      int
	}{
		{"missing", "", 401},
		{"wrong", "s3cret-tokeN", 401},
		{"prefix", "s3cret", 401},
		{"right", testToken, 200},
	} {
		t.Run(tt.name, func(t *testing.T) {
			status, body := post(t, hs.URL+"/rpc", tt.token, call, nil)
			if status != tt.status {
				t.Fatalf("status %d, want %d (%s)", status, tt.status, body)
			}
			if status == 401 && body != unauthorized {
				t.Errorf("401 body %s", body)
			}
		})
	}
	// The query token is not accepted on POST.
	status, _ := post(t, hs.URL+"/rpc?access_token="+testToken, "", call, nil)
	if status != 401 {
		t.Errorf("POST with ?access_token: %d, want 401", status)
	}
	// /healthz stays open.
	resp, err := http.Get(hs.URL + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("healthz with auth: %d", resp.StatusCode)
	}

	ws := "ws" + strings.TrimPrefix(hs.URL, "http") + "/rpc/ws"
	ctx := context.Background()
	if _, err := client.DialWebSocket(ctx, ws, client.Config{Token: "wrong"}); !errors.Is(err, api.NewError(api.KindUnauthorized, "")) {
		t.Errorf("WS wrong token: %v", err)
	}
	c, err := client.DialWebSocket(ctx, ws, client.Config{Token: testToken})
	if err != nil {
		t.Fatalf("WS right token: %v", err)
	}
	c.Close()
	// Browsers cannot set headers on WebSocket: the query form works for GET upgrades.
	c, err = client.DialWebSocket(ctx, ws+"?access_token="+testToken, client.Config{})
	if err != nil {
		t.Fatalf("WS query token: %v", err)
	}
	c.Close()
}

func TestOrigin(t *testing.T) {
	_, hs := newHTTPServer(t, rpc.Config{AllowedOrigins: []string{"app.example.com"}}, nil)
	ws := "ws" + strings.TrimPrefix(hs.URL, "http") + "/rpc/ws"
	ctx := context.Background()
	for _, tt := range []struct {
		origin string
		ok     bool
	}{
		{"", true},
		{hs.URL, true},
		{"https://app.example.com", true},
		{"https://evil.example.com", false},
	} {
		hdr := http.Header{}
		if tt.origin != "" {
			hdr.Set("Origin", tt.origin)
		}
		c, err := client.DialWebSocket(ctx, ws, client.Config{Header: hdr})
		if tt.ok != (err == nil) {
			t.Errorf("WS origin %q: err %v, want ok=%v", tt.origin, err, tt.ok)
		}
		if err == nil {
			c.Close()
		}
		status, _ := post(t, hs.URL+"/rpc", "", `{"jsonrpc":"2.0","id":1,"method":"hello"}`, map[string]string{"Origin": tt.origin})
		if tt.ok != (status == 200) {
			t.Errorf("POST origin %q: status %d, want ok=%v", tt.origin, status, tt.ok)
		}
	}
	_, resp, err := websocket.Dial(ctx, ws, &websocket.DialOptions{HTTPHeader: http.Header{"Origin": {"https://evil.example.com"}}})
	if err == nil || resp == nil || resp.StatusCode != http.StatusForbidden {
		t.Errorf("foreign origin: %v %v, want 403", resp, err)
	}
}
