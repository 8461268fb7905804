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
	_, hs := newHTTPServer(t, rpc.Config{MaxFrameBytes: 1024, NoAuth: true}, nil)
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
	s := rpc.NewServer(rpc.Config{MaxConns: 1, NoAuth: true})
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

// TestFailClosed: a server with neither a token nor NoAuth answers 401 on
// every authenticated route; NoAuth does not lift a token that is set.
func TestFailClosed(t *testing.T) {
	call := `{"jsonrpc":"2.0","id":1,"method":"hello"}`
	_, hs := newHTTPServer(t, rpc.Config{}, nil)
	if status, body := post(t, hs.URL+"/rpc", "", call, nil); status != 401 || !strings.Contains(body, `"kind":"unauthorized"`) {
		t.Errorf("POST without token or NoAuth: %d %s", status, body)
	}
	if status, _ := post(t, hs.URL+"/rpc", "anything", call, nil); status != 401 {
		t.Errorf("POST with a token to a server without one: %d", status)
	}
	_, resp, err := websocket.Dial(context.Background(), "ws"+strings.TrimPrefix(hs.URL, "http")+"/rpc/ws", nil)
	if err == nil || resp == nil || resp.StatusCode != 401 {
		t.Errorf("WebSocket without token or NoAuth: %v %v", resp, err)
	}
	_, hs = newHTTPServer(t, rpc.Config{Token: testToken, NoAuth: true}, nil)
	if status, _ := post(t, hs.URL+"/rpc", "", call, nil); status != 401 {
		t.Errorf("NoAuth with a token set: %d", status)
	}
	_, hs = newHTTPServer(t, rpc.Config{NoAuth: true}, nil)
	if status, body := post(t, hs.URL+"/rpc", "", call, nil); status != 200 {
		t.Errorf("NoAuth: %d %s", status, body)
	}
}

// TestLoopbackHost: a Loopback server answers only requests whose Host is
// localhost or a loopback IP, so a rebound DNS name cannot reach it.
func TestLoopbackHost(t *testing.T) {
	_, hs := newHTTPServer(t, rpc.Config{Token: testToken, Loopback: true}, nil)
	_, port, _ := strings.Cut(strings.TrimPrefix(hs.URL, "http://"), ":")
	call := `{"jsonrpc":"2.0","id":1,"method":"hello"}`
	do := func(method, path, host string, hdr http.Header) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, hs.URL+path, nil)
		if method == http.MethodPost {
			req.Body = io.NopCloser(strings.NewReader(call))
		}
		for k, v := range hdr {
			req.Header[k] = v
		}
		req.Host = host
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	auth := http.Header{"Authorization": {"Bearer " + testToken}}
	for _, tt := range []struct {
		host string
		ok   bool
	}{
		{"127.0.0.1:" + port, true},
		{"localhost:" + port, true},
		{"LOCALHOST:" + port, true},
		{"[::1]:" + port, true},
		{"127.0.0.2:" + port, true},
		{"localhost", true},
		{"[::1]", true},
		{"evil.example:7878", false},
		{"evil.example", false},
		{"localhost.evil.example:" + port, false},
		{"127.0.0.1.nip.io:" + port, false},
		{"10.0.0.1:" + port, false},
	} {
		status, body := do(http.MethodPost, "/rpc", tt.host, auth)
		if tt.ok && status != 200 {
			t.Errorf("POST with Host %q: %d %s", tt.host, status, body)
		}
		if !tt.ok && (status != 403 || !strings.Contains(body, `"code":-32017`) || !strings.Contains(body, `"kind":"unauthorized"`)) {
			t.Errorf("POST with Host %q: %d %s, want 403 unauthorized", tt.host, status, body)
		}
		status, _ = do(http.MethodGet, "/healthz", tt.host, nil)
		if tt.ok != (status == 200) || !tt.ok && status != 403 {
			t.Errorf("healthz with Host %q: %d", tt.host, status)
		}
		c, resp, err := websocket.Dial(context.Background(), "ws"+strings.TrimPrefix(hs.URL, "http")+"/rpc/ws",
			&websocket.DialOptions{Host: tt.host, HTTPHeader: auth})
		if err == nil {
			c.CloseNow()
		}
		if tt.ok != (err == nil) || !tt.ok && (resp == nil || resp.StatusCode != 403) {
			t.Errorf("WebSocket with Host %q: %v %v", tt.host, resp, err)
		}
	}
	// The Host rule comes first: a rebinding page never learns whether a
	// token would be needed.
	if status, _ := do(http.MethodPost, "/rpc", "evil.example:7878", nil); status != 403 {
		t.Errorf("no token, foreign Host: %d, want 403", status)
	}
	if status, _ := do(http.MethodPost, "/rpc", "127.0.0.1:"+port, nil); status != 401 {
		t.Errorf("no token, loopback Host: %d, want 401", status)
	}
}

func TestOrigin(t *testing.T) {
	_, hs := newHTTPServer(t, rpc.Config{AllowedOrigins: []string{"app.example.com"}, NoAuth: true}, nil)
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

// A POST is a connection of its own, which no initialize precedes: the
// client names itself in the Weft-Client header, and the handler sees
// that name (as who answered a request) with the http transport. The
// name is bounded as initialize's is.
func TestPOSTClientHeader(t *testing.T) {
	s := rpc.NewServer(rpc.Config{Token: testToken})
	rpc.Register(s, "whoami", "Who the call came from.", func(ctx context.Context, _ *struct{}) (*api.Client, error) {
		c := api.ClientFrom(ctx)
		return &c, nil
	})
	u := newTestHTTP(t, s) + "/rpc"
	call := `{"jsonrpc":"2.0","id":1,"method":"whoami"}`
	tests := []struct {
		name   string
		header map[string]string
		status int
		want   string
	}{
		{"named", map[string]string{rpc.ClientHeader: "weft approve"}, 200,
			`{"jsonrpc":"2.0","id":1,"result":{"Name":"weft approve","Transport":"http"}}`},
		{"unnamed", nil, 200,
			`{"jsonrpc":"2.0","id":1,"result":{"Name":"","Transport":"http"}}`},
		{"too long", map[string]string{rpc.ClientHeader: strings.Repeat("n", api.MaxTitleBytes+1)}, 400,
			`{"jsonrpc":"2.0","id":null,"error":{"code":-32602,"message":"the Weft-Client header is 1025 bytes, more than the 1024 allowed","data":{"field":"Weft-Client","kind":"invalid_params","limit":1024,"retryable":false}}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, body := post(t, u, testToken, call, tt.header)
			if status != tt.status || body != tt.want {
				t.Errorf("got %d %s\nwant %d %s", status, body, tt.status, tt.want)
			}
		})
	}
	// The header is no way around the token.
	if status, _ := post(t, u, "", call, map[string]string{rpc.ClientHeader: "weft approve"}); status != http.StatusUnauthorized {
		t.Errorf("a named POST without the token: %d, want 401", status)
	}
}
