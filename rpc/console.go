package rpc

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"weft.dev/weft/api"
)

// Defaults for the web console's login.
const (
	// DefaultConsoleCodeTTL is how long a one-time login code made by
	// [NewConsoleCode] with a zero ttl may be redeemed.
	DefaultConsoleCodeTTL = 2 * time.Minute
	// DefaultConsoleSessionTTL is how long a console session cookie lives
	// when [Config.ConsoleSessionTTL] is zero.
	DefaultConsoleSessionTTL = 12 * time.Hour
	// maxSpentCodes bounds the in-memory ledger of spent codes.
	maxSpentCodes = 4096
)

// ConsoleCSRFHeader is the header a console request authenticated by its
// cookie must carry on POST: the session's CSRF token, as GET
// /console/session reports it.
const ConsoleCSRFHeader = "X-Weft-CSRF"

// Reasons a console login or cookie is refused, in error.data.reason of
// the 401 (kind unauthorized) answer, so a page can tell the user what
// to do.
const (
	ConsoleReasonExpired   = "expired"   // the code or the cookie is past its expiry
	ConsoleReasonRevoked   = "revoked"   // not signed by the host's current token (rotated) or forged
	ConsoleReasonSpent     = "spent"     // the one-time code was already redeemed
	ConsoleReasonMalformed = "malformed" // not a code or cookie at all
	ConsoleReasonOrigin    = "origin"    // a cookie request from another origin, or without its CSRF token
)

// CodeLedger remembers which one-time console codes were redeemed, so
// that each is redeemed once. Codes are signed with the host token and
// carry their own expiry, so any host that shares the token can check
// one; the ledger makes it single-use. Hosts that share a store should
// share the ledger (cmd/weft keeps it in the store's idempotency
// receipts), so a code redeemed at one host is refused at every other.
// Its method is called concurrently.
type CodeLedger interface {
	// SpendCode records the code id as redeemed. It reports false when id
	// was redeemed before. The ledger may forget id after expires.
	SpendCode(ctx context.Context, id string, expires time.Time) (bool, error)
}

// memLedger is the in-memory CodeLedger a server uses when
// [Config.ConsoleCodes] is nil: single-use within this process.
type memLedger struct {
	mu    sync.Mutex
	spent map[string]time.Time
}

func (l *memLedger) SpendCode(_ context.Context, id string, expires time.Time) (bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	if len(l.spent) >= maxSpentCodes {
		for k, exp := range l.spent {
			if now.After(exp) {
				delete(l.spent, k)
			}
		}
		if len(l.spent) >= maxSpentCodes {
			return false, api.NewError(api.KindOverloaded, "too many console logins at once")
		}
	}
	if _, ok := l.spent[id]; ok {
		return false, nil
	}
	l.spent[id] = expires
	return true, nil
}

// consoleKey derives the key of one purpose ("code", "session", "csrf")
// from the host token, so that the token itself signs nothing and a
// code cannot pass as a cookie.
func consoleKey(token, purpose string) []byte {
	m := hmac.New(sha256.New, []byte(token))
	io.WriteString(m, "weft console "+purpose+" v1")
	return m.Sum(nil)
}

// signed is the payload of a code or a session cookie.
type signed struct {
	ID      string `json:"i"`
	Expires int64  `json:"e"` // Unix seconds
}

// seal encodes p and signs it with key: base64url(json) "." base64url(mac).
func seal(key []byte, p signed) string {
	b, _ := json.Marshal(p)
	body := base64.RawURLEncoding.EncodeToString(b)
	m := hmac.New(sha256.New, key)
	io.WriteString(m, body)
	return body + "." + base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// open checks what seal made: the signature with key, then the expiry
// at now. Its error is an *api.Error (kind unauthorized) with a reason.
func open(key []byte, s string, now time.Time, what string) (signed, *api.Error) {
	body, mac, ok := strings.Cut(s, ".")
	got, err := base64.RawURLEncoding.DecodeString(mac)
	if !ok || err != nil || len(s) > 1024 {
		return signed{}, consoleRefusal(ConsoleReasonMalformed, "the console %s is malformed: log in again with `weft console`", what)
	}
	m := hmac.New(sha256.New, key)
	io.WriteString(m, body)
	if !hmac.Equal(got, m.Sum(nil)) {
		return signed{}, consoleRefusal(ConsoleReasonRevoked, "the console %s is not signed by this host's token (it was rotated, or the %s is forged): log in again with `weft console`", what, what)
	}
	var p signed
	raw, err := base64.RawURLEncoding.DecodeString(body)
	if err != nil || json.Unmarshal(raw, &p) != nil || p.ID == "" {
		return signed{}, consoleRefusal(ConsoleReasonMalformed, "the console %s is malformed: log in again with `weft console`", what)
	}
	if exp := time.Unix(p.Expires, 0); !now.Before(exp) {
		return signed{}, consoleRefusal(ConsoleReasonExpired, "the console %s expired at %s: log in again with `weft console`", what, exp.UTC().Format(time.RFC3339)).
			With("expired", exp.UTC().Format(time.RFC3339))
	}
	return p, nil
}

func consoleRefusal(reason, format string, args ...any) *api.Error {
	return api.Errorf(api.KindUnauthorized, format, args...).With("reason", reason)
}

func randomID() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// NewConsoleCode returns a one-time login code for the web console of
// the hosts whose token is token, valid for ttl from now (zero means
// [DefaultConsoleCodeTTL]). Anyone holding the token can make one (`weft
// console` does, without asking the host); a host that has the same
// token checks it without any state of its own, and its [CodeLedger]
// makes it single-use. The code goes in the console URL's fragment
// (/#code=…), which browsers never send to a server, and the page
// exchanges it with POST /console/login for a session cookie.
func NewConsoleCode(token string, ttl time.Duration) (string, error) {
	if token == "" {
		return "", errors.New("console code: the host has no token: it serves without a login")
	}
	if ttl <= 0 {
		ttl = DefaultConsoleCodeTTL
	}
	return seal(consoleKey(token, "code"), signed{ID: randomID(), Expires: time.Now().Add(ttl).Unix()}), nil
}

// consoleAuth is a server's console login: the keys derived from its
// token, the ledger of spent codes and the session lifetime.
type consoleAuth struct {
	codeKey, sessionKey, csrfKey []byte
	ledger                       CodeLedger
	ttl                          time.Duration
	open                         bool // NoAuth: no login needed
	noToken                      bool // no token and not NoAuth: every login refused (fail closed)
}

func newConsoleAuth(cfg Config) *consoleAuth {
	c := &consoleAuth{
		codeKey:    consoleKey(cfg.Token, "code"),
		sessionKey: consoleKey(cfg.Token, "session"),
		csrfKey:    consoleKey(cfg.Token, "csrf"),
		ledger:     cfg.ConsoleCodes,
		ttl:        cfg.ConsoleSessionTTL,
		open:       cfg.Token == "" && cfg.NoAuth,
		noToken:    cfg.Token == "" && !cfg.NoAuth,
	}
	if c.ledger == nil {
		c.ledger = &memLedger{spent: map[string]time.Time{}}
	}
	if c.ttl <= 0 {
		c.ttl = DefaultConsoleSessionTTL
	}
	return c
}

// cookieName is the session cookie's name for the host r reached.
// Cookies are not scoped by port, so two hosts on one machine would
// otherwise overwrite each other's.
func cookieName(r *http.Request) string {
	if _, port, err := net.SplitHostPort(r.Host); err == nil && port != "" {
		return "weft_console_" + port
	}
	return "weft_console"
}

func (c *consoleAuth) csrf(sessionID string) string {
	m := hmac.New(sha256.New, c.csrfKey)
	io.WriteString(m, sessionID)
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// sessionCookie returns r's console cookie value, if any.
func sessionCookie(r *http.Request) (string, bool) {
	ck, err := r.Cookie(cookieName(r))
	if err != nil || ck.Value == "" {
		return "", false
	}
	return ck.Value, true
}

// verify checks r's cookie: signature, expiry, and for a browser's
// request the origin rules: a WebSocket upgrade and every POST must
// carry an Origin of the host itself, and a POST the session's CSRF
// token in [ConsoleCSRFHeader].
func (c *consoleAuth) verify(r *http.Request, value string) (signed, *api.Error) {
	p, e := open(c.sessionKey, value, time.Now(), "session")
	if e != nil {
		return p, e
	}
	origin := r.Header.Get("Origin")
	mustHaveOrigin := r.Method != http.MethodGet || isWebSocketUpgrade(r)
	if origin == "" && mustHaveOrigin {
		return p, consoleRefusal(ConsoleReasonOrigin, "a console request without an Origin header is refused")
	}
	if origin != "" && !sameHostOrigin(r, origin) {
		return p, consoleRefusal(ConsoleReasonOrigin, "a console request from origin %q is refused: only the host's own page may use its cookie", origin)
	}
	if r.Method != http.MethodGet && !hmac.Equal([]byte(r.Header.Get(ConsoleCSRFHeader)), []byte(c.csrf(p.ID))) {
		return p, consoleRefusal(ConsoleReasonOrigin, "a console request without its CSRF token (%s) is refused", ConsoleCSRFHeader)
	}
	return p, nil
}

// sameHostOrigin reports whether the Origin header names the host the
// request reached (scheme aside).
func sameHostOrigin(r *http.Request, origin string) bool {
	_, host, ok := strings.Cut(origin, "://")
	return ok && strings.EqualFold(host, r.Host)
}

// consoleSessionResult is what GET /console/session and POST
// /console/login answer.
type consoleSessionResult struct {
	// Auth is "cookie" (logged in) or "none" (the host needs no login).
	Auth string `json:"auth"`
	// CSRF is the token to send in X-Weft-CSRF on POST /rpc.
	CSRF string `json:"csrf,omitempty"`
	// Expires is when the cookie ends.
	Expires *time.Time `json:"expires,omitempty"`
}

// serveLogin is POST /console/login {"code": …}: it checks the code's
// signature and expiry, spends it in the ledger, and answers with a
// session cookie (HttpOnly, SameSite=Strict, Secure over TLS).
func (s *Server) serveLogin(w http.ResponseWriter, r *http.Request) {
	c := s.console
	if origin := r.Header.Get("Origin"); origin != "" && !sameHostOrigin(r, origin) {
		writeHTTPError(w, http.StatusForbidden, consoleRefusal(ConsoleReasonOrigin, "a console login from origin %q is refused", origin))
		return
	}
	if c.open {
		writeJSON(w, consoleSessionResult{Auth: "none"})
		return
	}
	if c.noToken {
		writeHTTPError(w, http.StatusUnauthorized, consoleRefusal(ConsoleReasonRevoked, "this host has no token, so it accepts no console login"))
		return
	}
	var req struct {
		Code string `json:"code"`
	}
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 4096)).Decode(&req); err != nil || req.Code == "" {
		writeHTTPError(w, http.StatusBadRequest, api.NewError(api.KindInvalidParams, `the body must be {"code": "<code from weft console>"}`))
		return
	}
	p, e := open(c.codeKey, req.Code, time.Now(), "login code")
	if e != nil {
		writeHTTPError(w, http.StatusUnauthorized, e)
		return
	}
	first, err := c.ledger.SpendCode(r.Context(), p.ID, time.Unix(p.Expires, 0))
	if err != nil {
		var ae *api.Error
		if !errors.As(err, &ae) {
			s.log.Error("console: spend login code", "err", err)
			ae = api.NewError(api.KindStorageUnavailable, "cannot record the login code as used: try again")
		}
		writeHTTPError(w, http.StatusServiceUnavailable, ae)
		return
	}
	if !first {
		writeHTTPError(w, http.StatusUnauthorized, consoleRefusal(ConsoleReasonSpent, "this login code was already used: run `weft console` for a new one"))
		return
	}
	exp := time.Now().Add(c.ttl).Truncate(time.Second)
	sess := signed{ID: randomID(), Expires: exp.Unix()}
	http.SetCookie(w, &http.Cookie{
		Name: cookieName(r), Value: seal(c.sessionKey, sess), Path: "/",
		Expires: exp, HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil,
	})
	markAuthenticated(r)
	writeJSON(w, consoleSessionResult{Auth: "cookie", CSRF: c.csrf(sess.ID), Expires: &exp})
}

// serveSession is GET /console/session: whether the page is logged in,
// and its CSRF token. A missing or refused cookie is a 401 with the
// reason.
func (s *Server) serveSession(w http.ResponseWriter, r *http.Request) {
	c := s.console
	w.Header().Set("Cache-Control", "no-store")
	if c.open {
		writeJSON(w, consoleSessionResult{Auth: "none"})
		return
	}
	v, ok := sessionCookie(r)
	if !ok {
		writeHTTPError(w, http.StatusUnauthorized, consoleRefusal("missing", "not logged in: open the URL that `weft console` prints"))
		return
	}
	p, e := c.verify(r, v)
	if e != nil {
		clearCookie(w, r)
		writeHTTPError(w, http.StatusUnauthorized, e)
		return
	}
	exp := time.Unix(p.Expires, 0)
	writeJSON(w, consoleSessionResult{Auth: "cookie", CSRF: c.csrf(p.ID), Expires: &exp})
}

// serveLogout is POST /console/logout: it clears the cookie. (The cookie
// stays valid until it expires or the token is rotated; clearing it is
// what a browser can be told.)
func (s *Server) serveLogout(w http.ResponseWriter, r *http.Request) {
	if origin := r.Header.Get("Origin"); origin == "" || !sameHostOrigin(r, origin) {
		writeHTTPError(w, http.StatusForbidden, consoleRefusal(ConsoleReasonOrigin, "a console logout must come from the host's own page"))
		return
	}
	clearCookie(w, r)
	w.WriteHeader(http.StatusNoContent)
}

func clearCookie(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, &http.Cookie{Name: cookieName(r), Value: "", Path: "/", MaxAge: -1,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("rpc: encode %T: %v", v, err)) // our own types
	}
	w.Write(append(b, '\n'))
}
