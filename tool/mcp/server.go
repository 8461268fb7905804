package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"weft.dev/weft/env"
	"weft.dev/weft/env/sandbox"
	"weft.dev/weft/event"
	"weft.dev/weft/tool"
)

// Restart backoff: the first restart after a failure is immediate; each
// failure after it doubles the wait from backoffBase up to backoffMax. A
// connection that lived resetAfter clears the count.
const (
	backoffBase = time.Second
	backoffMax  = time.Minute
	resetAfter  = time.Minute
	// endWait is how long a failed call waits to learn why the
	// connection ended (the command's exit status and stderr).
	endWait = 2 * time.Second
	// maxDescription cuts a tool's description.
	maxDescription = 4 << 10
	// maxPages bounds the pages of one tools/list.
	maxPages = 100
)

func backoff(failures int) time.Duration {
	if failures <= 1 {
		return 0
	}
	d := backoffBase << min(failures-2, 10)
	return min(d, backoffMax)
}

// errRemoved: the janitor forgot the server; look it up again.
var errRemoved = errors.New("mcp: server forgotten")

// launch is how to start one server: its name and configuration, and
// what the session's binding made of them. Immutable.
type launch struct {
	name   string
	spec   event.MCPServer
	origin Origin
	// dir is a command's working directory on the host; "" is weft's.
	dir string
	// policy confines a command; nil runs it directly (no Config.Sandbox).
	policy *sandbox.Policy
	// mountVars are WEFT_MOUNT_<ID>=path of a sandboxed command's mounts.
	mountVars []string
	// key identifies the server among the manager's.
	key string
}

func (l *launch) stdio() bool { return l.spec.Command != "" }

// what names the server in errors: its name and command or URL.
func (l *launch) what() string {
	if l.stdio() {
		return fmt.Sprintf("mcp server %q (%s)", l.name, strings.Join(append([]string{l.spec.Command}, l.spec.Args...), " "))
	}
	return fmt.Sprintf("mcp server %q (%s)", l.name, l.spec.URL)
}

// launchFor resolves a server's configuration in binding b.
func (m *Manager) launchFor(name string, spec event.MCPServer, origin Origin, b *env.Binding) (*launch, error) {
	if err := Check(name, spec, origin, m.cfg.SessionEnv); err != nil {
		return nil, err
	}
	l := &launch{name: name, spec: spec, origin: origin}
	id := struct {
		Name   string
		Spec   event.MCPServer
		Dir    string
		Policy *sandbox.Policy
	}{Name: name, Spec: spec}
	if l.stdio() {
		readOnly := spec.ReadOnly
		if origin == FromSession {
			var err error
			if readOnly, err = m.protect(spec); err != nil {
				return nil, fmt.Errorf("%s: %w", l.what(), err)
			}
		}
		dir, err := workDir(spec, b)
		if err != nil {
			return nil, fmt.Errorf("%s: cwd: %w", l.what(), err)
		}
		l.dir = dir
		if m.cfg.Sandbox != nil {
			var p sandbox.Policy
			if spec.Trusted {
				p = sandbox.Policy{Config: *m.cfg.Sandbox}
				p.Unsandboxed = true
			} else {
				p = sandbox.ForBinding(*m.cfg.Sandbox, b)
				p.ReadOnly = append(p.ReadOnly, readOnly...)
				l.mountVars = b.ShellVars()
			}
			l.policy = &p
		}
		id.Dir, id.Policy = l.dir, l.policy
	}
	l.key = fingerprint(id)
	return l, nil
}

// protect checks a session's command server against Config.Protected
// and returns its readOnly paths with their links resolved.
func (m *Manager) protect(spec event.MCPServer) ([]string, error) {
	if filepath.IsAbs(spec.Command) {
		if _, err := m.cfg.Protected.Check(spec.Command); err != nil {
			return nil, fmt.Errorf("command: %w", err)
		}
	}
	out := make([]string, len(spec.ReadOnly))
	for i, p := range spec.ReadOnly {
		real, err := m.cfg.Protected.Check(p)
		if err != nil {
			return nil, fmt.Errorf("readOnly[%d]: %w", i, err)
		}
		out[i] = real
	}
	return out, nil
}

// workDir is a command's working directory: cwd in the session's mounts;
// without one, the shells' default mount for a sandboxed command, and
// weft's own for a trusted one (so that every session shares it).
func workDir(spec event.MCPServer, b *env.Binding) (string, error) {
	if spec.Cwd != "" {
		if b == nil {
			return "", errors.New("a working directory in the mounts needs a session's mounts")
		}
		p, err := b.Resolve(spec.Cwd, env.Read)
		if err != nil {
			return "", err
		}
		return p.HostDir()
	}
	if spec.Trusted {
		return "", nil
	}
	if _, ok := b.ShellMount(); ok {
		p, err := b.ShellDir()
		if err != nil {
			return "", err
		}
		return p.HostDir()
	}
	if _, ok := b.DefaultMount(); ok {
		p, err := b.Resolve(".", env.Read)
		if err != nil {
			return "", err
		}
		return p.HostDir()
	}
	return "", nil
}

// server is one running (or startable) server, shared by the sessions
// whose configuration has its key.
type server struct {
	m   *Manager
	l   *launch
	sem chan struct{} // held by the one goroutine that starts the server

	mu       sync.Mutex
	conn     *conn // the live connection, or the last one, or nil
	removed  bool  // forgotten by the janitor
	failures int   // one after another
	lastErr  error
	retryAt  time.Time
	lastUsed time.Time
	busy     int // calls in flight
}

// conn is one connection to a server: a process and an MCP session, or
// an HTTP session.
type conn struct {
	s       *server
	cs      *sdk.ClientSession
	raw     *rawTransport   // the transport, whose connection a stop closes at once
	proc    *proc           // a command's process; nil for HTTP
	http    *http.Transport // an HTTP server's connections; nil for a command
	started time.Time
	stopc   chan struct{} // closed to stop the connection
	once    sync.Once
	done    chan struct{} // closed once it has ended and its process is gone

	// Guarded by s.mu.
	ended   bool
	reason  error // why it ended
	gen     int   // bumped by each tools/list_changed
	listed  int   // the gen of tools
	tools   *tool.Registry
	skipped []Skipped
}

// stop asks the connection's watcher to end it and waits until it has.
func (c *conn) stop() {
	c.once.Do(func() { close(c.stopc) })
	<-c.done
}

// live returns the live connection, if any.
func (s *server) live() *conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conn != nil && !s.conn.ended {
		return s.conn
	}
	return nil
}

// idle reports a live connection unused for d (to stop), or that the
// server has none and was unused for d (to forget; then it is marked
// removed).
func (s *server) idle(d time.Duration) (*conn, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.busy > 0 || time.Since(s.lastUsed) < d {
		return nil, false
	}
	if s.conn != nil && !s.conn.ended {
		return s.conn, false
	}
	select {
	case s.sem <- struct{}{}: // nobody is starting it
		s.removed = true
		<-s.sem
		return nil, true
	default:
		return nil, false
	}
}

func (s *server) skipped() []Skipped {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conn == nil {
		return nil
	}
	return s.conn.skipped
}

// ensure returns the live connection, starting the server if it has
// none. While a server waits out its backoff it fails at once with its
// last error.
func (s *server) ensure(ctx context.Context) (*conn, error) {
	for {
		s.mu.Lock()
		s.lastUsed = time.Now()
		if s.removed {
			s.mu.Unlock()
			return nil, errRemoved
		}
		if c := s.conn; c != nil && !c.ended {
			s.mu.Unlock()
			return c, nil
		}
		if wait := time.Until(s.retryAt); wait > 0 {
			err := fmt.Errorf("%s failed %d times in a row; weft starts it again in %v. The last failure: %w", s.l.what(), s.failures, wait.Round(100*time.Millisecond), s.lastErr)
			s.mu.Unlock()
			return nil, err
		}
		s.mu.Unlock()

		select {
		case s.sem <- struct{}{}:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		s.mu.Lock()
		again := s.removed || (s.conn != nil && !s.conn.ended) || time.Now().Before(s.retryAt)
		s.mu.Unlock()
		if again {
			<-s.sem
			continue
		}
		c, err := s.start(ctx)
		s.mu.Lock()
		ntools := 0
		if err == nil {
			s.conn = c
			ntools = c.tools.Len()
		} else if ctx.Err() == nil && !errors.Is(err, ErrClosed) {
			s.failures++
			s.lastErr = err
			s.retryAt = time.Now().Add(backoff(s.failures))
		}
		s.mu.Unlock()
		<-s.sem
		if err != nil {
			if ctx.Err() == nil {
				s.m.log.Warn("mcp server did not start", "server", s.l.name, "err", err)
			}
			return nil, err
		}
		s.m.log.Info("mcp server started", "server", s.l.name, "tools", ntools)
		return c, nil
	}
}

// start starts the server and lists its tools; the connection is
// watched from then on.
func (s *server) start(ctx context.Context) (*conn, error) {
	m := s.m
	if m.ctx.Err() != nil {
		return nil, ErrClosed
	}
	ctx, cancel := context.WithTimeout(ctx, m.cfg.StartTimeout)
	defer cancel()
	stop := context.AfterFunc(m.ctx, cancel) // Close cancels a start
	defer stop()

	c := &conn{s: s, started: time.Now(), stopc: make(chan struct{}), done: make(chan struct{})}
	var t sdk.Transport
	var err error
	switch {
	case m.dial != nil:
		t, err = m.dial(s.l.name)
	case s.l.stdio():
		c.proc, err = m.startProc(s.l)
		if err == nil {
			t = &sdk.IOTransport{Reader: c.proc.stdout, Writer: c.proc.stdin, MaxLineLength: m.cfg.MaxFrameBytes}
		}
	default:
		t, c.http, err = m.httpTransport(s.l)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.l.what(), err)
	}
	c.raw = &rawTransport{Transport: t}
	client := sdk.NewClient(&sdk.Implementation{Name: "weft", Version: "1"}, &sdk.ClientOptions{
		Logger: m.log.With("server", s.l.name),
		// No roots: a server's files are what its configuration says.
		Capabilities: &sdk.ClientCapabilities{},
		ProgressNotificationHandler: func(ctx context.Context, req *sdk.ProgressNotificationClientRequest) {
			m.progress.report(ctx, req.Params)
		},
		ToolListChangedHandler: func(context.Context, *sdk.ToolListChangedRequest) {
			s.mu.Lock()
			c.gen++
			s.mu.Unlock()
		},
	})
	fail := func(err error) (*conn, error) {
		if c.cs != nil {
			c.cs.Close()
		}
		why := c.shutdown()
		if m.ctx.Err() != nil {
			return nil, ErrClosed
		}
		if why != "" {
			err = fmt.Errorf("%w (%s)", err, why)
		}
		return nil, fmt.Errorf("%s did not start: %w", s.l.what(), err)
	}
	if c.cs, err = client.Connect(ctx, c.raw, nil); err != nil {
		if c.proc != nil {
			c.proc.awaitExit(ctx) // its status says more than "connection closed"
		}
		return fail(err)
	}
	s.mu.Lock()
	gen := c.gen
	s.mu.Unlock()
	reg, skipped, err := s.list(ctx, c.cs)
	if err != nil {
		return fail(err)
	}
	s.mu.Lock()
	c.tools, c.skipped, c.listed = reg, skipped, gen
	s.mu.Unlock()
	if !m.goTracked(c.watch) {
		return fail(ErrClosed)
	}
	return c, nil
}

// shutdown ends the connection's process (or HTTP connections) and
// returns what the process said: its exit status and stderr's tail.
func (c *conn) shutdown() string {
	if c.http != nil {
		c.http.CloseIdleConnections()
	}
	if c.proc == nil {
		return ""
	}
	c.proc.stop()
	return c.proc.describe()
}

// watch waits for the connection to end (the server exited or broke the
// protocol), or to be stopped (idle, Close), then ends it for good.
func (c *conn) watch() {
	errc := make(chan error, 1)
	go func() { errc <- c.cs.Wait() }() // returns once the session is closed below at the latest
	var err error
	stopping := false
	select {
	case err = <-errc:
	case <-c.stopc:
		stopping = true
	case <-c.s.m.ctx.Done():
		stopping = true
	}
	if c.proc != nil {
		c.proc.stop()
	}
	// The session's Close waits for the calls in flight; closing its
	// connection first fails them.
	c.raw.close()
	c.cs.Close()
	if stopping {
		<-errc
	}
	why := c.shutdown()
	s := c.s
	s.mu.Lock()
	c.ended = true
	switch {
	case stopping:
		c.reason = errors.New("stopped")
	default:
		msg := "closed the connection"
		if err != nil {
			msg += ": " + err.Error()
		}
		if why != "" {
			msg += " (" + why + ")"
		}
		c.reason = errors.New(msg)
		if time.Since(c.started) >= resetAfter {
			s.failures = 0
		}
		s.failures++
		s.lastErr = c.reason
		s.retryAt = time.Now().Add(backoff(s.failures))
	}
	reason := c.reason
	s.mu.Unlock()
	if !stopping {
		s.m.log.Warn("mcp server ended", "server", s.l.name, "err", reason)
	}
	close(c.done)
}

// list lists the server's tools, bounded in bytes, and makes the
// registry the model sees.
func (s *server) list(ctx context.Context, cs *sdk.ClientSession) (*tool.Registry, []Skipped, error) {
	var all []*sdk.Tool
	size, cursor := 0, ""
	for page := 0; ; page++ {
		if page == maxPages {
			return nil, nil, fmt.Errorf("tools/list: more than %d pages", maxPages)
		}
		res, err := cs.ListTools(ctx, &sdk.ListToolsParams{Cursor: cursor})
		if err != nil {
			return nil, nil, fmt.Errorf("tools/list: %w", err)
		}
		for _, t := range res.Tools {
			b, err := json.Marshal(t)
			if err != nil {
				return nil, nil, fmt.Errorf("tools/list: tool %q: %w", t.Name, err)
			}
			if size += len(b); size > s.m.cfg.MaxToolsBytes {
				return nil, nil, fmt.Errorf("tools/list: refused: the tools take more than %d bytes", s.m.cfg.MaxToolsBytes)
			}
		}
		all = append(all, res.Tools...)
		if res.NextCursor == "" || res.NextCursor == cursor {
			break
		}
		cursor = res.NextCursor
	}
	reg := tool.NewRegistry()
	var skipped []Skipped
	for _, t := range all {
		name := ToolName(s.l.name, t.Name)
		if _, taken := reg.Lookup(name); taken {
			skipped = append(skipped, Skipped{Tool: t.Name, Reason: fmt.Sprintf("its name %s is taken by another tool of the server", name)})
			continue
		}
		schema, err := json.Marshal(t.InputSchema)
		if err != nil {
			skipped = append(skipped, Skipped{Tool: t.Name, Reason: fmt.Sprintf("input schema: %v", err)})
			continue
		}
		desc := t.Description
		if desc == "" {
			desc = t.Title
		}
		if len(desc) > maxDescription {
			desc = strings.ToValidUTF8(desc[:maxDescription], "") + "…"
		}
		mt := &mcpTool{m: s.m, l: s.l, orig: t.Name, spec: tool.Spec{Name: name, Description: desc, InputSchema: schema}}
		if err := reg.Add(mt); err != nil {
			skipped = append(skipped, Skipped{Tool: t.Name, Reason: err.Error()})
		}
	}
	for _, sk := range skipped {
		s.m.log.Warn("mcp tool left out", "server", s.l.name, "tool", sk.Tool, "reason", sk.Reason)
	}
	return reg, skipped, nil
}

// registry returns the server's tools, started if needed and listed
// again if the server said they changed.
func (s *server) registry(ctx context.Context) (*tool.Registry, error) {
	for {
		c, err := s.ensure(ctx)
		if errors.Is(err, errRemoved) {
			s = s.m.server(s.l)
			continue
		}
		if err != nil {
			return s.failed(ctx, err)
		}
		s.mu.Lock()
		gen, reg := c.gen, c.tools
		stale := c.listed != gen
		s.mu.Unlock()
		if !stale {
			return reg, nil
		}
		reg, skipped, err := s.list(ctx, c.cs)
		if err != nil {
			err = fmt.Errorf("%s: %w", s.l.what(), err)
			if ctx.Err() == nil {
				// A server that lists too much, or garbage, is broken.
				s.m.log.Warn("mcp server: listing its tools again failed; stopping it", "server", s.l.name, "err", err)
				c.stop()
				s.mu.Lock()
				s.failures++
				s.lastErr = err
				s.retryAt = time.Now().Add(backoff(s.failures))
				s.mu.Unlock()
			}
			return s.failed(ctx, err)
		}
		s.mu.Lock()
		if c.listed < gen {
			c.tools, c.skipped, c.listed = reg, skipped, gen
		}
		s.mu.Unlock()
		return reg, nil
	}
}

// failed returns, for a server that could not give its tools with err,
// the *ServerError that says so and the tools its last connection listed,
// if it had one: offered still, they answer each call with the server's
// last error (while it waits out its backoff) or start it again, rather
// than vanish from the step and leave the model an "unknown tool".
func (s *server) failed(ctx context.Context, err error) (*tool.Registry, error) {
	if ctx.Err() != nil || errors.Is(err, ErrClosed) {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	se := &ServerError{Server: s.l.name, Err: err, Last: s.lastErr, Failures: s.failures}
	if se.Last == nil {
		se.Last = err
	}
	if s.conn == nil || s.conn.tools == nil {
		return nil, se
	}
	for _, spec := range s.conn.tools.Specs() {
		se.Tools = append(se.Tools, spec.Name)
	}
	return s.conn.tools, se
}

// ServerError is the failure of one MCP server to give its tools for a
// step: it did not start, it crashed and waits out its backoff, or its
// tools could not be listed. [Manager.Tools] joins one per failed server.
type ServerError struct {
	// Server is the server's name.
	Server string
	// Err is what the step met: the failure, or the wait for the next
	// start with the last failure in it.
	Err error
	// Last is the server's last failure (the same one for every step
	// while it waits out its backoff): what a caller that records each
	// failure once compares.
	Last error
	// Failures counts the server's failures one after another.
	Failures int
	// Tools are the tools its last connection listed, offered still:
	// each call answers with the server's last error or starts it
	// again. Empty if it never listed any.
	Tools []string
}

func (e *ServerError) Error() string { return e.Err.Error() }

func (e *ServerError) Unwrap() error { return e.Err }

// conn returns a live connection for a call, marking the server busy
// until done is called.
func (m *Manager) conn(ctx context.Context, l *launch) (c *conn, done func(), err error) {
	for {
		s := m.server(l)
		c, err := s.ensure(ctx)
		if errors.Is(err, errRemoved) {
			continue
		}
		if err != nil {
			return nil, nil, err
		}
		s.mu.Lock()
		s.busy++
		s.mu.Unlock()
		return c, func() {
			s.mu.Lock()
			s.busy--
			s.lastUsed = time.Now()
			s.mu.Unlock()
		}, nil
	}
}

// why waits a little for the connection to end and returns why, or nil
// if it is still up.
func (c *conn) why(ctx context.Context) error {
	t := time.NewTimer(endWait)
	defer t.Stop()
	select {
	case <-c.done:
	case <-t.C:
		return nil
	case <-ctx.Done():
		return nil
	}
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	return c.reason
}

// rawTransport remembers the connection its transport made, so that a
// stop can close it under the SDK's session.
type rawTransport struct {
	sdk.Transport
	mu   sync.Mutex
	conn sdk.Connection
}

func (t *rawTransport) Connect(ctx context.Context) (sdk.Connection, error) {
	c, err := t.Transport.Connect(ctx)
	t.mu.Lock()
	t.conn = c
	t.mu.Unlock()
	return c, err
}

func (t *rawTransport) close() {
	t.mu.Lock()
	c := t.conn
	t.mu.Unlock()
	if c != nil {
		c.Close()
	}
}

// mcpTool is one tool of a server, as the model sees it.
type mcpTool struct {
	m    *Manager
	l    *launch
	orig string // the server's name for it
	spec tool.Spec
}

func (t *mcpTool) Spec() tool.Spec { return t.spec }

// Call calls the tool on its server, starting the server if it is not
// running. An error of the server or the connection is the call's error
// (the model sees it as an error result); the result maps text,
// structured content, images and isError (see [result]).
func (t *mcpTool) Call(ctx context.Context, call *tool.Call) (tool.Result, error) {
	c, done, err := t.m.conn(ctx, t.l)
	if err != nil {
		return tool.Result{}, err
	}
	defer done()
	params := &sdk.CallToolParams{Name: t.orig, Arguments: json.RawMessage(call.Arguments)}
	token, unroute := t.m.progress.add(call.Progress)
	defer unroute()
	if token != "" {
		params.SetProgressToken(token)
	}
	res, err := c.cs.CallTool(ctx, params)
	if err != nil {
		if ctx.Err() != nil {
			return tool.Result{}, ctx.Err()
		}
		if why := c.why(ctx); why != nil {
			return tool.Result{}, fmt.Errorf("%s ended during the call of %s: %v; it is started again on next use", t.l.what(), t.orig, why)
		}
		return tool.Result{}, fmt.Errorf("%s: calling %s: %w", t.l.what(), t.orig, err)
	}
	return result(res), nil
}
