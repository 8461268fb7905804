package rpc

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"strings"

	"weft.dev/weft/api"
)

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
func RequireToken(token string, next http.Handler) http.Handler {
	want := sha256.Sum256([]byte(token))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, ok := presentedToken(r)
		if !ok || token == "" || !tokenMatches(want, got) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="weft"`)
			writeHTTPError(w, http.StatusUnauthorized, api.NewError(api.KindUnauthorized, "missing or invalid bearer token"))
			return
		}
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
