package rpc

import (
	"container/list"
	"context"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"
)

// Defaults for zero [ConnLimits] fields.
const (
	DefaultReadHeaderTimeout = 10 * time.Second
	DefaultIdleTimeout       = 60 * time.Second
	DefaultMaxIdleConns      = 1024
	// DefaultMaxOpenConns is MaxOpenConns where the process has no open
	// file limit to derive it from.
	DefaultMaxOpenConns = 4096
)

// ConnLimits bounds the connections of an http.Server made by
// [NewHTTPServer], so that a crowd of connections that send nothing,
// send a header slowly, or never authenticate cannot exhaust the host's
// memory or file descriptors, and a client with the token is always
// served. The zero value takes every default.
//
// A connection is idle when it is not in a request handler: accepted
// and not yet through its first request's header, or waiting between
// requests (keep-alive). Idle connections are what a crowd costs (about
// 20 KiB each: buffers and a goroutine) and what can be shed without
// failing a request. A connection is authenticated once a request on it
// passed the token check (or was let in by [Config.NoAuth]); /healthz
// and failed checks do not count, and a 401 or 403 closes the
// connection.
type ConnLimits struct {
	// ReadHeaderTimeout bounds the time to read a request's header
	// (slowloris). Zero means DefaultReadHeaderTimeout.
	ReadHeaderTimeout time.Duration

	// IdleTimeout bounds how long a keep-alive connection may wait for
	// its next request. Zero means DefaultIdleTimeout.
	IdleTimeout time.Duration

	// MaxIdleConns bounds the idle connections. A new connection beyond
	// it closes the oldest idle connection that never authenticated, or,
	// when every idle connection has, the oldest of those. Zero means
	// DefaultMaxIdleConns, or MaxOpenConns/2 if that is smaller.
	MaxIdleConns int

	// MaxOpenConns bounds every connection the http.Server holds, in a
	// handler or not, except those a handler took over (WebSocket, bound
	// by [Config.MaxConns]). A new connection beyond it closes the oldest
	// idle connection as above, or itself when none is idle. Zero means
	// three quarters of the process's open file limit (RLIMIT_NOFILE,
	// whose soft limit the Go runtime raises to the hard limit at start),
	// or DefaultMaxOpenConns where there is no such limit; the rest is
	// left to the store, processes and MCP servers.
	MaxOpenConns int

	// Logger receives a warning, at most once a minute, while
	// connections are shed or refused at these limits, with the counts
	// so far. Nil means silent.
	Logger *slog.Logger
}

func (l ConnLimits) withDefaults() ConnLimits {
	if l.ReadHeaderTimeout <= 0 {
		l.ReadHeaderTimeout = DefaultReadHeaderTimeout
	}
	if l.IdleTimeout <= 0 {
		l.IdleTimeout = DefaultIdleTimeout
	}
	if l.MaxOpenConns <= 0 {
		l.MaxOpenConns = DefaultMaxOpenConns
		if n := openFileLimit(); n > 0 {
			l.MaxOpenConns = max(int(n/4*3), 16)
		}
	}
	if l.MaxIdleConns <= 0 {
		l.MaxIdleConns = min(DefaultMaxIdleConns, max(l.MaxOpenConns/2, 1))
	}
	if l.Logger == nil {
		l.Logger = slog.New(slog.DiscardHandler)
	}
	return l
}

// NewHTTPServer returns an http.Server that serves handler (normally
// [HTTPHandler]'s or [Server.Handler]'s) within limits: header and idle
// timeouts, and caps on idle and open connections that shed the oldest
// idle connection, never authenticated ones first, to make room for a
// new one. Connections that authenticated, and requests in their
// handlers, are never shed for a crowd that did not.
//
// It sets Handler, ReadHeaderTimeout, IdleTimeout, ConnState and
// ConnContext; the caller may set the other fields (an ErrorLog, TLS)
// before serving, and must not replace those five. ReadTimeout and
// WriteTimeout stay zero: they would cut the long-lived SSE and
// WebSocket streams, which bound their writes themselves.
func NewHTTPServer(handler http.Handler, limits ConnLimits) *http.Server {
	hs, _ := newHTTPServer(handler, limits)
	return hs
}

func newHTTPServer(handler http.Handler, limits ConnLimits) (*http.Server, *connGuard) {
	limits = limits.withDefaults()
	g := &connGuard{
		limits: limits,
		conns:  map[net.Conn]*guardedConn{},
	}
	return &http.Server{
		Handler:           g.wrap(handler),
		ReadHeaderTimeout: limits.ReadHeaderTimeout,
		IdleTimeout:       limits.IdleTimeout,
		ConnState:         g.state,
		ConnContext:       g.connContext,
	}, g
}

// connGuard tracks the connections of one http.Server and sheds idle
// ones at its limits. Its hooks run in the server's accept loop
// (ConnContext, StateNew) and in each connection's goroutine (the other
// states, the handler); all state is under mu.
type connGuard struct {
	limits ConnLimits

	mu    sync.Mutex
	conns map[net.Conn]*guardedConn
	// open counts tracked connections that were not shed; idle lists
	// the idle ones, oldest first, by whether they authenticated.
	open         int
	idleAnon     list.List // of *guardedConn
	idleTrusted  list.List // of *guardedConn
	shedCount    int64
	refusedCount int64
	warned       time.Time // when the last warning was logged
}

// guardedConn is one connection of a connGuard; its fields are under
// the guard's mu.
type guardedConn struct {
	g       *connGuard
	conn    net.Conn
	trusted bool
	shed    bool          // closed by the guard; already out of open
	idle    *list.Element // in idleAnon or idleTrusted; nil in a handler
}

type guardKey struct{}

// connContext registers a freshly accepted connection; the StateNew
// hook that follows admits it.
func (g *connGuard) connContext(ctx context.Context, c net.Conn) context.Context {
	gc := &guardedConn{g: g, conn: c}
	g.mu.Lock()
	g.conns[c] = gc
	g.mu.Unlock()
	return context.WithValue(ctx, guardKey{}, gc)
}

// state follows a connection through the http.Server's states.
func (g *connGuard) state(c net.Conn, st http.ConnState) {
	var shed []net.Conn
	g.mu.Lock()
	gc := g.conns[c]
	if gc == nil {
		g.mu.Unlock()
		return
	}
	switch st {
	case http.StateNew:
		g.open++
		g.makeIdle(gc)
		shed = g.enforce(gc)
	case http.StateIdle:
		g.makeIdle(gc)
		shed = g.enforce(nil)
	case http.StateHijacked, http.StateClosed:
		g.forget(gc)
	}
	// StateActive (a request's first bytes read) changes nothing: the
	// connection stays idle, and sheddable, until its handler starts.
	var warn *guardStats
	if len(shed) > 0 && time.Since(g.warned) >= time.Minute {
		g.warned = time.Now()
		st := g.statsLocked()
		warn = &st
	}
	g.mu.Unlock()
	for _, c := range shed {
		_ = c.Close()
	}
	if warn != nil {
		g.limits.Logger.Warn("shedding connections at the connection limits: a crowd of idle or unauthenticated connections?",
			"shed", warn.Shed, "refused", warn.Refused, "open", warn.Open, "idle", warn.Idle,
			"maxIdle", g.limits.MaxIdleConns, "maxOpen", g.limits.MaxOpenConns)
	}
}

// makeIdle puts gc at the young end of its idle list; g.mu is held.
func (g *connGuard) makeIdle(gc *guardedConn) {
	if gc.shed {
		return
	}
	g.unidle(gc)
	if gc.trusted {
		gc.idle = g.idleTrusted.PushBack(gc)
	} else {
		gc.idle = g.idleAnon.PushBack(gc)
	}
}

// unidle takes gc off its idle list; g.mu is held.
func (g *connGuard) unidle(gc *guardedConn) {
	if gc.idle == nil {
		return
	}
	if gc.trusted {
		g.idleTrusted.Remove(gc.idle)
	} else {
		g.idleAnon.Remove(gc.idle)
	}
	gc.idle = nil
}

// forget stops tracking gc; g.mu is held.
func (g *connGuard) forget(gc *guardedConn) {
	g.unidle(gc)
	delete(g.conns, gc.conn)
	if !gc.shed {
		g.open--
	}
	gc.shed = true
}

// enforce sheds idle connections, oldest never-authenticated first,
// until the idle and open counts are within the limits, and returns the
// connections to close. If the open count is still over its limit with
// nothing idle left to shed, the newcomer (when not nil) is refused.
// g.mu is held.
func (g *connGuard) enforce(newcomer *guardedConn) (shed []net.Conn) {
	for g.idleAnon.Len()+g.idleTrusted.Len() > g.limits.MaxIdleConns || g.open > g.limits.MaxOpenConns {
		victim := g.oldestIdle(newcomer)
		if victim == nil {
			break
		}
		shed = append(shed, g.shed(victim))
		g.shedCount++
	}
	if newcomer != nil && !newcomer.shed && g.open > g.limits.MaxOpenConns {
		shed = append(shed, g.shed(newcomer))
		g.refusedCount++
	}
	return shed
}

// oldestIdle returns the idle connection to shed first, never the
// newcomer while another is idle: the oldest that never authenticated,
// else the oldest that did; nil when nothing but the newcomer is idle.
func (g *connGuard) oldestIdle(newcomer *guardedConn) *guardedConn {
	for _, l := range []*list.List{&g.idleAnon, &g.idleTrusted} {
		for e := l.Front(); e != nil; e = e.Next() {
			if gc := e.Value.(*guardedConn); gc != newcomer {
				return gc
			}
		}
	}
	return nil
}

// shed marks gc closed by the guard and returns its connection to
// close (outside g.mu); g.mu is held.
func (g *connGuard) shed(gc *guardedConn) net.Conn {
	g.unidle(gc)
	gc.shed = true
	g.open--
	return gc.conn
}

// wrap marks a connection busy while a handler serves a request on it,
// so that it is not shed mid-request.
func (g *connGuard) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if gc, ok := r.Context().Value(guardKey{}).(*guardedConn); ok && gc.g == g {
			g.mu.Lock()
			g.unidle(gc)
			g.mu.Unlock()
		}
		next.ServeHTTP(w, r)
	})
}

// markAuthenticated records that the connection r arrived on passed the
// token check: when it goes idle it is shed only after every idle
// connection that never authenticated.
func markAuthenticated(r *http.Request) {
	gc, ok := r.Context().Value(guardKey{}).(*guardedConn)
	if !ok {
		return
	}
	g := gc.g
	g.mu.Lock()
	defer g.mu.Unlock()
	if gc.trusted || gc.shed {
		return
	}
	wasIdle := gc.idle != nil
	g.unidle(gc)
	gc.trusted = true
	if wasIdle {
		g.makeIdle(gc)
	}
}

// guardStats is what a connGuard counts.
type guardStats struct {
	Open, Idle, IdleAuthenticated int
	Shed, Refused                 int64
}

func (g *connGuard) stats() guardStats {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.statsLocked()
}

func (g *connGuard) statsLocked() guardStats {
	return guardStats{
		Open: g.open, Idle: g.idleAnon.Len() + g.idleTrusted.Len(), IdleAuthenticated: g.idleTrusted.Len(),
		Shed: g.shedCount, Refused: g.refusedCount,
	}
}
