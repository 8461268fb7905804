package rpc

import (
	"crypto/sha256"
	"crypto/subtle"
	"net"
	"net/http"
	"strings"

	"weft.dev/weft/api"
)

// authenticate wraps next with the server's access rules, in order: the
// Host rule of [Config.Loopback] (403), then the token: [RequireToken]
// with [Config.Token], or nothing when [Config.NoAuth] is set and Token is
// empty. With neither Token nor NoAuth every request is answered 401.
// Every authenticated route the server's handlers expose goes through it.
//
// A request without an Authorization header that carries the web
// console's session cookie is let in by the cookie instead (see
// [Config.ConsoleSessionTTL]): signed with the token, unexpired, and for
// a WebSocket upgrade or a POST from the host's own origin with the
// session's CSRF token. A refused cookie is a 401 whose error.data.reason
// says why (ConsoleReasonExpired, ConsoleReasonRevoked, …).
func (s *Server) authenticate(next http.Handler) http.Handler {
	if s.cfg.Token != "" || !s.cfg.NoAuth {
		byToken := RequireToken(s.cfg.Token, next)
		inner := next
		next = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			v, ok := sessionCookie(r)
			if !ok || r.Header.Get("Authorization") != "" || s.cfg.Token == "" {
				byToken.ServeHTTP(w, r)
				return
			}
			if _, e := s.console.verify(r, v); e != nil {
				// The cookie stays: the page asks /console/session why.
				w.Header().Set("Connection", "close")
				writeHTTPError(w, http.StatusUnauthorized, e)
				return
			}
			markAuthenticated(r)
			inner.ServeHTTP(w, r)
		})
	} else {
		inner := next
		next = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			markAuthenticated(r)
			inner.ServeHTTP(w, r)
		})
	}
	return s.checkHost(next)
}

// Authenticate wraps next, a route of the embedder's beside the server's
// own (such as `weft serve`'s /mcp), with the same access rules as
// [Server.Handler]'s authenticated routes: the Host rule of
// [Config.Loopback], then the bearer token (or [Config.NoAuth]). A
// refused request never reaches next. Safe for concurrent use.
func (s *Server) Authenticate(next http.Handler) http.Handler { return s.authenticate(next) }

// checkHost wraps next with the Host rule of [Config.Loopback]; without
// it, next is returned as is.
func (s *Server) checkHost(next http.Handler) http.Handler {
	if !s.cfg.Loopback {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !isLoopbackHost(r.Host) {
			w.Header().Set("Connection", "close")
			writeHTTPError(w, http.StatusForbidden,
				api.Errorf(api.KindUnauthorized, "host %q is not a loopback name: use localhost or a loopback IP address", r.Host))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// isLoopbackHost reports whether a Host header value, with or without a
// port, is "localhost" or a loopback IP address. A name that merely
// resolves to a loopback address is not: that is how DNS rebinding works.
func isLoopbackHost(hostport string) bool {
	h := hostport
	if hh, _, err := net.SplitHostPort(hostport); err == nil {
		h = hh
	} else if strings.HasPrefix(h, "[") && strings.HasSuffix(h, "]") {
		h = h[1 : len(h)-1] // "[::1]" without a port
	}
	if strings.EqualFold(h, "localhost") {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// RequireToken wraps next so that every request must present token, else
// it is answered with HTTP 401, a "WWW-Authenticate: Bearer" header and a
// JSON-RPC error body (id null, code -32017, kind unauthorized).
//
// The token is read from "Authorization: Bearer <token>". Because browsers
// cannot set headers on WebSocket or EventSource requests, a GET that is a
// WebSocket upgrade or asks for text/event-stream may instead carry
// "?access_token=<token>"; other requests may not (tokens in URLs end up in
// logs, so the query form is limited to where it is the only option).
//
// Comparison is constant-time over SHA-256 digests, so neither the token's
// content nor its length leaks through timing. An empty token rejects
// every request (fail closed). The returned handler is safe for concurrent
// use.
//
// A refused request's connection is closed after the answer, so that a
// client without the token cannot keep it; an accepted one marks its
// connection authenticated for the limits of [NewHTTPServer].
func RequireToken(token string, next http.Handler) http.Handler {
	want := sha256.Sum256([]byte(token))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, ok := presentedToken(r)
		if !ok || token == "" || !tokenMatches(want, got) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="weft"`)
			w.Header().Set("Connection", "close")
			writeHTTPError(w, http.StatusUnauthorized, api.NewError(api.KindUnauthorized, "missing or invalid bearer token"))
			return
		}
		markAuthenticated(r)
		next.ServeHTTP(w, r)
	})
}

// tokenMatches compares the presented token with the wanted digest in
// constant time.
func tokenMatches(want [sha256.Size]byte, presented string) bool {
	got := sha256.Sum256([]byte(presented))
	return subtle.ConstantTimeCompare(want[:], got[:]) == 1
}

// presentedToken extracts the bearer token from the request.
func presentedToken(r *http.Request) (string, bool) {
	if h := r.Header.Get("Authorization"); h != "" {
		scheme, tok, ok := strings.Cut(h, " ")
		if !ok || !strings.EqualFold(scheme, "Bearer") {
			return "", false
		}
		tok = strings.TrimSpace(tok)
		return tok, tok != ""
	}
	if r.Method == http.MethodGet && (isWebSocketUpgrade(r) || strings.Contains(r.Header.Get("Accept"), "text/event-stream")) {
		if tok := r.URL.Query().Get("access_token"); tok != "" {
			return tok, true
		}
	}
	return "", false
}

func isWebSocketUpgrade(r *http.Request) bool {
	return strings.EqualFold(r.Header.Get("Upgrade"), "websocket")
}
