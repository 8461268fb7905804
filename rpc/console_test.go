package rpc_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"weft.dev/weft/rpc"
)

// consoleLogin posts code to /console/login and returns the response,
// its decoded body and the session cookie (nil when none was set).
func consoleLogin(t *testing.T, url, code string) (*http.Response, map[string]any, *http.Cookie) {
	t.Helper()
	req, _ := http.NewRequest("POST", url+"/console/login", strings.NewReader(`{"code":"`+code+`"}`))
	req.Header.Set("Origin", url)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body map[string]any
	json.NewDecoder(resp.Body).Decode(&body)
	for _, c := range resp.Cookies() {
		if strings.HasPrefix(c.Name, "weft_console") && c.Value != "" {
			return resp, body, c
		}
	}
	return resp, body, nil
}

// refusalReason returns error.data.reason of a JSON-RPC error body.
func refusalReason(body map[string]any) string {
	e, _ := body["error"].(map[string]any)
	d, _ := e["data"].(map[string]any)
	r, _ := d["reason"].(string)
	return r
}

// cookiePost sends an echo call to /rpc with the cookie, origin and csrf.
func cookiePost(t *testing.T, url string, ck *http.Cookie, origin, csrf string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest("POST", url+"/rpc", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"echo","params":{"text":"hi"}}`))
	req.AddCookie(ck)
	if origin != "" {
		req.Header.Set("Origin", origin)
	}
	if csrf != "" {
		req.Header.Set(rpc.ConsoleCSRFHeader, csrf)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body map[string]any
	json.NewDecoder(resp.Body).Decode(&body)
	return resp.StatusCode, body
}

func TestConsoleLoginCookie(t *testing.T) {
	const token = "tok-A"
	s := testServer(t, rpc.Config{Token: token}, nil)
	defer s.Close()
	hs := httptest.NewServer(s.Handler())
	defer hs.Close()

	code, err := rpc.NewConsoleCode(token, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	resp, body, ck := consoleLogin(t, hs.URL, code)
	if resp.StatusCode != 200 || ck == nil {
		t.Fatalf("login: %d %v, cookie %v", resp.StatusCode, body, ck)
	}
	if !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode || ck.Path != "/" || ck.Secure {
		t.Errorf("cookie attributes: HttpOnly=%v SameSite=%v Path=%q Secure=%v", ck.HttpOnly, ck.SameSite, ck.Path, ck.Secure)
	}
	if strings.Contains(ck.Value, token) {
		t.Error("the cookie carries the token")
	}
	csrf, _ := body["csrf"].(string)
	if csrf == "" {
		t.Fatalf("login answered no csrf token: %v", body)
	}

	// The cookie works on POST /rpc from the page's origin with the CSRF token.
	if st, b := cookiePost(t, hs.URL, ck, hs.URL, csrf); st != 200 || b["result"] == nil {
		t.Fatalf("cookie POST: %d %v", st, b)
	}
	// Without the CSRF token, without an Origin, or from another origin: refused.
	for name, c := range map[string][2]string{
		"no csrf":      {hs.URL, ""},
		"no origin":    {"", csrf},
		"cross origin": {"http://evil.example", csrf},
		"wrong csrf":   {hs.URL, "x" + csrf},
	} {
		st, b := cookiePost(t, hs.URL, ck, c[0], c[1])
		if st != http.StatusUnauthorized || refusalReason(b) != rpc.ConsoleReasonOrigin {
			t.Errorf("%s: %d %v, want 401 reason origin", name, st, b)
		}
	}

	// GET /console/session gives the page its CSRF token back after a reload.
	req, _ := http.NewRequest("GET", hs.URL+"/console/session", nil)
	req.AddCookie(ck)
	r2, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var sess map[string]any
	json.NewDecoder(r2.Body).Decode(&sess)
	r2.Body.Close()
	if r2.StatusCode != 200 || sess["csrf"] != csrf {
		t.Errorf("session: %d %v", r2.StatusCode, sess)
	}

	// The code is single-use.
	resp, body, _ = consoleLogin(t, hs.URL, code)
	if resp.StatusCode != http.StatusUnauthorized || refusalReason(body) != rpc.ConsoleReasonSpent {
		t.Errorf("second login with one code: %d %v, want 401 spent", resp.StatusCode, body)
	}

	// WebSocket: the cookie from the page's origin is let in; from another origin not.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	wsURL := "ws" + strings.TrimPrefix(hs.URL, "http") + "/rpc/ws"
	hdr := http.Header{"Origin": {hs.URL}, "Cookie": {ck.String()}}
	c, _, err := websocket.Dial(ctx, wsURL, &websocket.DialOptions{HTTPHeader: hdr})
	if err != nil {
		t.Fatalf("websocket with the cookie: %v", err)
	}
	c.Close(websocket.StatusNormalClosure, "")
	hdr.Set("Origin", "http://evil.example")
	_, r3, err := websocket.Dial(ctx, wsURL, &websocket.DialOptions{HTTPHeader: hdr})
	if err == nil || r3 == nil || r3.StatusCode != http.StatusUnauthorized {
		t.Errorf("websocket with the cookie from another origin: err %v resp %v", err, r3)
	}
}

func TestConsoleLoginRefusals(t *testing.T) {
	const token = "tok-A"
	s := testServer(t, rpc.Config{Token: token}, nil)
	defer s.Close()
	hs := httptest.NewServer(s.Handler())
	defer hs.Close()

	expired, _ := rpc.NewConsoleCode(token, time.Nanosecond)
	other, _ := rpc.NewConsoleCode("another token", time.Minute)
	for name, c := range map[string]struct{ code, reason string }{
		"expired code":      {expired, rpc.ConsoleReasonExpired},
		"other token":       {other, rpc.ConsoleReasonRevoked},
		"garbage":           {"not-a-code", rpc.ConsoleReasonMalformed},
		"tampered":          {strings.Replace(other, ".", "x.", 1), rpc.ConsoleReasonRevoked},
		"the token as code": {token, rpc.ConsoleReasonMalformed},
	} {
		resp, body, ck := consoleLogin(t, hs.URL, c.code)
		if resp.StatusCode != http.StatusUnauthorized || refusalReason(body) != c.reason || ck != nil {
			t.Errorf("%s: %d %v (cookie %v), want 401 reason %s", name, resp.StatusCode, body, ck, c.reason)
		}
	}
}

// A cookie ends when it expires, and when the token is rotated: every
// host with the new token refuses the old cookie, and says why.
func TestConsoleCookieExpiredAndRevoked(t *testing.T) {
	login := func(cfg rpc.Config) (string, *http.Cookie, string) {
		s := testServer(t, cfg, nil)
		t.Cleanup(func() { s.Close() })
		hs := httptest.NewServer(s.Handler())
		t.Cleanup(hs.Close)
		code, _ := rpc.NewConsoleCode(cfg.Token, time.Minute)
		resp, body, ck := consoleLogin(t, hs.URL, code)
		if resp.StatusCode != 200 || ck == nil {
			t.Fatalf("login: %d %v", resp.StatusCode, body)
		}
		csrf, _ := body["csrf"].(string)
		return hs.URL, ck, csrf
	}

	url, ck, csrf := login(rpc.Config{Token: "tok-A", ConsoleSessionTTL: time.Nanosecond})
	st, b := cookiePost(t, url, ck, url, csrf)
	if st != http.StatusUnauthorized || refusalReason(b) != rpc.ConsoleReasonExpired {
		t.Errorf("expired cookie: %d %v, want 401 reason expired", st, b)
	}

	_, ck, csrf = login(rpc.Config{Token: "tok-A"})
	// The same cookie at another host with the same token: accepted.
	same := testServer(t, rpc.Config{Token: "tok-A"}, nil)
	defer same.Close()
	hsSame := httptest.NewServer(same.Handler())
	defer hsSame.Close()
	// Cookies are named for the host's port (browsers do not scope them
	// by port); a load balancer's hosts share one.
	moved := func(url string) *http.Cookie {
		c := *ck
		c.Name = "weft_console_" + url[strings.LastIndex(url, ":")+1:]
		return &c
	}
	if st, b := cookiePost(t, hsSame.URL, moved(hsSame.URL), hsSame.URL, csrf); st != 200 {
		t.Errorf("cookie at a host sharing the token: %d %v", st, b)
	}
	// At a host whose token was rotated: refused as revoked.
	rotated := testServer(t, rpc.Config{Token: "tok-B"}, nil)
	defer rotated.Close()
	hsRot := httptest.NewServer(rotated.Handler())
	defer hsRot.Close()
	st, b = cookiePost(t, hsRot.URL, moved(hsRot.URL), hsRot.URL, csrf)
	if st != http.StatusUnauthorized || refusalReason(b) != rpc.ConsoleReasonRevoked {
		t.Errorf("cookie after the token was rotated: %d %v, want 401 reason revoked", st, b)
	}
}

// sharedLedger is a CodeLedger two servers share, as hosts sharing a
// store do.
type sharedLedger struct {
	mu    sync.Mutex
	spent map[string]bool
}

func (l *sharedLedger) SpendCode(_ context.Context, id string, _ time.Time) (bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.spent[id] {
		return false, nil
	}
	l.spent[id] = true
	return true, nil
}

func TestConsoleCodeSingleUseAcrossHosts(t *testing.T) {
	l := &sharedLedger{spent: map[string]bool{}}
	var urls []string
	for range 2 {
		s := testServer(t, rpc.Config{Token: "tok", ConsoleCodes: l}, nil)
		defer s.Close()
		hs := httptest.NewServer(s.Handler())
		defer hs.Close()
		urls = append(urls, hs.URL)
	}
	code, _ := rpc.NewConsoleCode("tok", time.Minute)
	if resp, body, _ := consoleLogin(t, urls[0], code); resp.StatusCode != 200 {
		t.Fatalf("login at the first host: %d %v", resp.StatusCode, body)
	}
	if resp, body, _ := consoleLogin(t, urls[1], code); resp.StatusCode != http.StatusUnauthorized || refusalReason(body) != rpc.ConsoleReasonSpent {
		t.Errorf("the same code at the second host: %d %v, want 401 spent", resp.StatusCode, body)
	}
}

func TestConsolePageServed(t *testing.T) {
	page := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "page "+r.URL.Path) })
	s := testServer(t, rpc.Config{Token: "tok", Console: page, Loopback: true}, nil)
	defer s.Close()
	hs := httptest.NewServer(s.Handler())
	defer hs.Close()
	for _, p := range []string{"/", "/assets/app.js"} {
		resp, err := http.Get(hs.URL + p)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || string(b) != "page "+p {
			t.Errorf("GET %s: %d %q", p, resp.StatusCode, b)
		}
	}
	// The Host rule covers the page too.
	req, _ := http.NewRequest("GET", hs.URL+"/", nil)
	req.Host = "rebound.example:80"
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("GET / with a foreign Host: %d, want 403", resp.StatusCode)
	}
}

// A host without a token: with NoAuth the page needs no login; without
// it (fail closed) no code, even one signed with the empty token, logs in.
func TestConsoleWithoutToken(t *testing.T) {
	open := testServer(t, rpc.Config{NoAuth: true}, nil)
	defer open.Close()
	hsOpen := httptest.NewServer(open.Handler())
	defer hsOpen.Close()
	resp, err := http.Get(hsOpen.URL + "/console/session")
	if err != nil {
		t.Fatal(err)
	}
	var body map[string]any
	json.NewDecoder(resp.Body).Decode(&body)
	resp.Body.Close()
	if resp.StatusCode != 200 || body["auth"] != "none" {
		t.Errorf("NoAuth session: %d %v, want 200 auth none", resp.StatusCode, body)
	}

	closed := testServer(t, rpc.Config{}, nil)
	defer closed.Close()
	hsClosed := httptest.NewServer(closed.Handler())
	defer hsClosed.Close()
	forged, _ := rpc.NewConsoleCode("x", time.Minute) // any code: none may work
	if r, b, ck := consoleLogin(t, hsClosed.URL, forged); r.StatusCode != http.StatusUnauthorized || ck != nil {
		t.Errorf("login at a host without a token: %d %v (cookie %v), want 401", r.StatusCode, b, ck)
	}
}
