package rpc_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"weft.dev/weft/api"
	"weft.dev/weft/rpc"
)

// TestConsoleCookieSSE: the console's cookie opens a session's SSE stream
// (GET /v1/sessions/{id}/events, what an EventSource sends: the cookie,
// and an Origin only when cross-origin), from the host's own origin, and
// is refused from another origin or without the cookie.
func TestConsoleCookieSSE(t *testing.T) {
	e := newHostEnv(t)
	s, err := e.h.CreateSession(context.Background(), api.CreateSessionParams{})
	if err != nil {
		t.Fatal(err)
	}
	code, err := rpc.NewConsoleCode(token, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	resp, body, ck := consoleLogin(t, e.srv.URL, code)
	if resp.StatusCode != 200 || ck == nil {
		t.Fatalf("login: %d %v", resp.StatusCode, body)
	}
	url := e.srv.URL + "/v1/sessions/" + s.ID + "/events"
	get := func(ck *http.Cookie, origin string) (*http.Response, context.CancelFunc) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
		req.Header.Set("Accept", "text/event-stream")
		if ck != nil {
			req.AddCookie(ck)
		}
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		return resp, cancel
	}

	// Same origin, with and without the Origin header: the stream opens
	// and carries the session's first event.
	for _, origin := range []string{"", e.srv.URL} {
		resp, cancel := get(ck, origin)
		if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
			t.Errorf("origin %q: %d %s, want 200 text/event-stream", origin, resp.StatusCode, resp.Header.Get("Content-Type"))
		} else {
			sc := bufio.NewScanner(resp.Body)
			got := ""
			for sc.Scan() {
				if d, ok := strings.CutPrefix(sc.Text(), "data:"); ok {
					got = d
					break
				}
			}
			if !strings.Contains(got, `"session.created"`) {
				t.Errorf("origin %q: first data line %q, want the session.created event", origin, got)
			}
		}
		cancel()
		resp.Body.Close()
	}

	// Another origin with the cookie, or no cookie at all: refused.
	for name, c := range map[string]struct {
		ck     *http.Cookie
		origin string
		reason string
	}{
		"cross origin": {ck, "http://evil.example", rpc.ConsoleReasonOrigin},
		"no cookie":    {nil, e.srv.URL, ""},
	} {
		resp, cancel := get(c.ck, c.origin)
		var b map[string]any
		json.NewDecoder(resp.Body).Decode(&b)
		resp.Body.Close()
		cancel()
		if resp.StatusCode != http.StatusUnauthorized || (c.reason != "" && refusalReason(b) != c.reason) {
			t.Errorf("%s: %d %v, want 401 %s", name, resp.StatusCode, b, c.reason)
		}
	}
}
