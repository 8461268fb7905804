package rpc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"

	"github.com/coder/websocket"

	"weft.dev/weft/api"
	"weft.dev/weft/internal/jsonrpc"
)

// ErrTooManyConns is returned by [Server.ServeStdio] when the server is at
// [Config.MaxConns] or closed.
var ErrTooManyConns = errors.New("rpc: too many connections")

// ServeStdio serves one connection of newline-delimited JSON: one frame per
// line read from r, one frame per line written to w (w carries frames
// only). Requests run concurrently; responses and notifications are written
// by one writer.
//
// It returns nil when r reaches EOF, after every in-flight request has been
// answered; ctx.Err() when ctx is done (handlers are cancelled); or an error
// wrapping a read failure. When ctx is done, ServeStdio closes r if it is
// an io.Closer to unblock the read; otherwise it returns only once the
// pending read returns. Likewise it waits for a write in progress to
// return, so the peer must keep reading w. It never closes w.
func (s *Server) ServeStdio(ctx context.Context, r io.Reader, w io.Writer) error {
	if !s.acquireConn() {
		return ErrTooManyConns
	}
	stream := jsonrpc.NewLineStream(r, writeOnly{w}, s.cfg.MaxFrameBytes)
	c := s.newConn(ctx, TransportStdio, stream)
	defer s.releaseConn(c)
	if !s.track(c) {
		return ErrTooManyConns
	}
	err := c.serve()
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

// writeOnly hides w's Close so the stream never closes it.
type writeOnly struct{ w io.Writer }

func (w writeOnly) Write(p []byte) (int, error) { return w.w.Write(p) }

// Handler returns the HTTP handler for the server's routes:
//
//	POST /rpc      one JSON-RPC message or batch per request body (no push);
//	               the client may name itself in the Weft-Client header
//	GET  /rpc/ws   WebSocket, one JSON-RPC message per text message, with notifications
//	GET  /healthz  200 {"ok":true}, without a token
//	POST /console/login, GET /console/session, POST /console/logout
//	               the web console's login (one-time code to cookie)
//	GET  /, GET /assets/  the web console's page, when [Config.Console] is set
//
// /rpc and /rpc/ws fail closed: they require [Config.Token] through
// [RequireToken], and with an empty Token answer 401 to every request
// unless [Config.NoAuth] is set. With [Config.Loopback], every route,
// /healthz included, first checks the Host header (403 otherwise).
// Browser requests (those with an Origin header) must come from the
// request's own host or from [Config.AllowedOrigins], else 403.
// The host may mount the handler inside its own mux; each call returns a
// new handler over the same server. Safe for concurrent use.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("POST /rpc", s.authenticate(http.HandlerFunc(s.servePOST)))
	mux.Handle("GET /rpc/ws", s.authenticate(http.HandlerFunc(s.serveWebSocket)))
	mux.Handle("POST /console/login", s.checkHost(http.HandlerFunc(s.serveLogin)))
	mux.Handle("GET /console/session", s.checkHost(http.HandlerFunc(s.serveSession)))
	mux.Handle("POST /console/logout", s.checkHost(http.HandlerFunc(s.serveLogout)))
	if s.cfg.Console != nil {
		mux.Handle("GET /{$}", s.checkHost(s.cfg.Console))
		mux.Handle("GET /assets/", s.checkHost(s.cfg.Console))
	}
	mux.Handle("GET /healthz", s.checkHost(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"ok":true}`+"\n")
	})))
	return mux
}

// writeHTTPError writes a JSON-RPC error response (id null) with the
// given HTTP status.
func writeHTTPError(w http.ResponseWriter, status int, e *api.Error) {
	w.Header().Set("Content-Type", "application/json")
	if e.Kind == api.KindOverloaded {
		w.Header().Set("Retry-After", "1")
	}
	w.WriteHeader(status)
	_, _ = w.Write(append(jsonrpc.AppendError(nil, nil, encodeError(e)), '\n'))
}

// ClientHeader is the request header in which a client of POST /rpc
// names itself, as a WebSocket or stdio client does in initialize: hosts
// record the name as who answered a request.
const ClientHeader = "Weft-Client"

func (s *Server) servePOST(w http.ResponseWriter, r *http.Request) {
	if err := s.checkOrigin(r); err != nil {
		writeHTTPError(w, http.StatusForbidden, api.NewError(api.KindUnauthorized, err.Error()))
		return
	}
	if !s.acquireConn() {
		writeHTTPError(w, http.StatusServiceUnavailable, api.Errorf(api.KindOverloaded, "too many connections (limit %d)", s.cfg.MaxConns))
		return
	}
	c := s.newConn(withForwarded(r.Context(), r), TransportHTTP, nil)
	defer s.releaseConn(c)
	if !s.track(c) {
		writeHTTPError(w, http.StatusServiceUnavailable, api.NewError(api.KindOverloaded, "server closing"))
		return
	}
	defer c.cancel()
	// A POST is a connection of its own that no initialize precedes: the
	// client names itself in the Weft-Client header instead.
	if name := r.Header.Get(ClientHeader); name != "" {
		if len(name) > api.MaxTitleBytes {
			writeHTTPError(w, http.StatusBadRequest, api.Errorf(api.KindInvalidParams, "the %s header is %d bytes, more than the %d allowed", ClientHeader, len(name), api.MaxTitleBytes).
				With("field", ClientHeader).With("limit", api.MaxTitleBytes))
			return
		}
		c.client.Store(&api.Client{Name: name, Transport: TransportHTTP})
	}
	stop := context.AfterFunc(c.ctx, c.markDone)
	defer stop()
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxFrameBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			writeHTTPError(w, http.StatusRequestEntityTooLarge,
				api.Errorf(api.KindTooLarge, "frame exceeds %d bytes", s.cfg.MaxFrameBytes).With("limit", s.cfg.MaxFrameBytes))
			return
		}
		s.log.Debug("rpc: read request body", "conn", c.id, "err", err)
		writeHTTPError(w, http.StatusBadRequest, api.NewError(api.KindInvalidRequest, "cannot read request body"))
		return
	}
	var out []byte
	c.handleFrame(body, func(b []byte) { out = b })
	c.handlers.Wait()
	c.markDone()
	c.finish()
	if out == nil {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(out)+1))
	_, _ = w.Write(append(out, '\n'))
}

func (s *Server) serveWebSocket(w http.ResponseWriter, r *http.Request) {
	if err := s.checkOrigin(r); err != nil {
		writeHTTPError(w, http.StatusForbidden, api.NewError(api.KindUnauthorized, err.Error()))
		return
	}
	if !s.acquireConn() {
		writeHTTPError(w, http.StatusServiceUnavailable, api.Errorf(api.KindOverloaded, "too many connections (limit %d)", s.cfg.MaxConns))
		return
	}
	var c *Conn
	defer func() { s.releaseConn(c) }()
	ws, err := jsonrpc.AcceptWebSocket(w, r, &websocket.AcceptOptions{OriginPatterns: s.cfg.AllowedOrigins}, s.cfg.MaxFrameBytes)
	if err != nil {
		s.log.Debug("rpc: websocket accept", "err", err)
		return // Accept has written the response
	}
	// The request's context must not be used after Accept; keep its values.
	c = s.newConn(context.WithoutCancel(r.Context()), TransportWebSocket, ws)
	if !s.track(c) {
		_ = ws.CloseStatus(websocket.StatusTryAgainLater, "server closing")
		return
	}
	if err := c.serve(); err != nil {
		s.log.Debug("rpc: websocket connection ended", "conn", c.id, "err", err)
	}
}

// checkOrigin applies the browser Origin rule: no Origin header (not a
// browser), the request's own host, or a pattern of AllowedOrigins. The
// rule matches coder/websocket's Accept so both transports agree.
func (s *Server) checkOrigin(r *http.Request) error {
	origin := r.Header.Get("Origin")
	if origin == "" {
		return nil
	}
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" {
		return fmt.Errorf("origin %q is not a valid URL with a host", origin)
	}
	if strings.EqualFold(r.Host, u.Host) {
		return nil
	}
	for _, pat := range s.cfg.AllowedOrigins {
		target := u.Host
		if strings.Contains(pat, "://") {
			target = u.Scheme + "://" + u.Host
		}
		if ok, _ := path.Match(strings.ToLower(pat), strings.ToLower(target)); ok {
			return nil
		}
	}
	return fmt.Errorf("origin %q is not allowed", u.Host)
}
