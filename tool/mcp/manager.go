package mcp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"weft.dev/weft/env"
	"weft.dev/weft/env/sandbox"
	"weft.dev/weft/event"
	"weft.dev/weft/tool"
)

// ErrClosed is returned by a [Manager] that was closed.
var ErrClosed = errors.New("mcp: the manager is closed")

// Defaults of [Config].
const (
	DefaultIdleTimeout   = 10 * time.Minute
	DefaultStartTimeout  = 60 * time.Second
	DefaultMaxFrameBytes = 8 << 20
	DefaultMaxToolsBytes = 1 << 20
)

// Config configures a [Manager]. The zero value has no servers of its own
// and takes the defaults noted on each field. Library code reads no
// environment: the command line fills in LookupEnv and BaseEnv.
type Config struct {
	// Servers are the host's servers (its configuration file), by name,
	// offered to every session; nil means none. Each must pass [Check]
	// with [FromConfig].
	Servers map[string]event.MCPServer
	// SessionEnv names the host variables a session's servers may use
	// as ${VAR}; nil means none.
	SessionEnv []string
	// LookupEnv reads the host's variables for ${VAR}; nil means none is
	// set.
	LookupEnv func(string) (string, bool)
	// BaseEnv is the host's environment (KEY=VALUE, e.g. os.Environ()),
	// from which a command gets PATH, LANG, LC_ALL, LC_CTYPE, TZ, USER,
	// LOGNAME and SHELL, and when trusted HOME and TMPDIR. Nil means
	// none; PATH then is /usr/local/bin:/usr/bin:/bin.
	BaseEnv []string
	// Sandbox confines commands as the shells are (see package sandbox):
	// a command runs through [sandbox.Command], and the program must call
	// [sandbox.Main] when [sandbox.IsHelper] reports true. Nil runs
	// commands directly, unconfined, with only their process group
	// stopped: an embedder's explicit opt-out.
	Sandbox *sandbox.Config
	// IdleTimeout stops a server nobody used for that long; zero means
	// [DefaultIdleTimeout].
	IdleTimeout time.Duration
	// StopGrace is how long a command has to exit after its stdin is
	// closed, and again after SIGTERM, before its process tree is
	// killed. Zero means 2 seconds.
	StopGrace time.Duration
	// StartTimeout bounds a server's start: the command or the HTTP
	// connection, the initialize handshake and the first tools/list.
	// Zero means [DefaultStartTimeout].
	StartTimeout time.Duration
	// MaxFrameBytes bounds one JSON-RPC message (a stdio line, an SSE
	// event, a JSON response) from a server; a larger one ends the
	// connection. Zero means [DefaultMaxFrameBytes].
	MaxFrameBytes int
	// MaxToolsBytes bounds a server's tools/list, all pages, encoded; a
	// larger list is refused. Zero means [DefaultMaxToolsBytes].
	MaxToolsBytes int
	// Logger receives the servers' stderr, starts, stops and failures;
	// nil means silent.
	Logger *slog.Logger
	// Protected is what a session's servers may not reach: each start
	// of a session's command server checks its command and readOnly
	// paths (their links followed again, since they may have changed
	// since the session was created) and hands the sandbox the real
	// paths. Nil protects the kernel's file systems only (see
	// [env.Protected]).
	Protected *env.Protected
}

// Manager starts, shares, restarts and stops MCP servers and offers their
// tools. Its methods are safe for concurrent use. Close it to stop every
// server.
type Manager struct {
	cfg Config
	log *slog.Logger
	// ctx ends with Close: it stops the janitor and every connection.
	ctx    context.Context
	cancel context.CancelFunc

	mu      sync.Mutex
	closed  bool
	servers map[string]*server // by launch key
	wg      sync.WaitGroup     // every goroutine of the manager; Add only under mu while open

	// progress routes servers' progress notifications to their calls.
	progress progressRoutes

	// dial, if set (tests), makes the transport of every server instead
	// of a command or an HTTP endpoint.
	dial func(name string) (sdk.Transport, error)
}

// New returns a manager configured by cfg (copied). It fails if one of
// cfg.Servers does not pass [Check]. It starts no server; it starts the
// janitor that stops idle ones.
func New(cfg Config) (*Manager, error) {
	cfg.Servers = maps.Clone(cfg.Servers)
	cfg.SessionEnv = slices.Clone(cfg.SessionEnv)
	cfg.BaseEnv = slices.Clone(cfg.BaseEnv)
	for _, name := range sortedKeys(cfg.Servers) {
		if err := Check(name, cfg.Servers[name], FromConfig, nil); err != nil {
			return nil, err
		}
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = DefaultIdleTimeout
	}
	if cfg.StopGrace <= 0 {
		cfg.StopGrace = 2 * time.Second
	}
	if cfg.StartTimeout <= 0 {
		cfg.StartTimeout = DefaultStartTimeout
	}
	if cfg.MaxFrameBytes <= 0 {
		cfg.MaxFrameBytes = DefaultMaxFrameBytes
	}
	if cfg.MaxToolsBytes <= 0 {
		cfg.MaxToolsBytes = DefaultMaxToolsBytes
	}
	if cfg.Sandbox != nil {
		sb := *cfg.Sandbox
		sb.ReadOnly = slices.Clone(sb.ReadOnly)
		cfg.Sandbox = &sb
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	m := &Manager{cfg: cfg, log: log, servers: make(map[string]*server)}
	m.ctx, m.cancel = context.WithCancel(context.Background())
	m.wg.Add(1)
	go m.janitor()
	return m, nil
}

// Secrets returns the values a server's configuration can reach through
// ${VAR}: see [SecretsOf]. Safe for concurrent use.
func (m *Manager) Secrets() []string { return SecretsOf(m.cfg) }

// SecretsOf returns the values the servers of cfg can reach through
// ${VAR}: those of the variables the host's servers name in env and
// headers, and of every variable cfg.SessionEnv lets sessions name, read
// with cfg.LookupEnv (unset ones have none). A host redacts them from
// everything it stores or sends to a model and from its own log: a server
// may print its token on stderr, and a failed call's result carries the
// tail of stderr.
func SecretsOf(cfg Config) []string {
	if cfg.LookupEnv == nil {
		return nil
	}
	var names []string
	for _, name := range sortedKeys(cfg.Servers) {
		s := cfg.Servers[name]
		for _, k := range sortedKeys(s.Env) {
			refs, _ := references(s.Env[k])
			names = append(names, refs...)
		}
		for _, k := range sortedKeys(s.Headers) {
			refs, _ := references(s.Headers[k])
			names = append(names, refs...)
		}
	}
	names = append(names, cfg.SessionEnv...)
	var out []string
	for _, n := range names {
		if v, ok := cfg.LookupEnv(n); ok && v != "" && !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out
}

// Servers returns the host's servers, by name (a copy).
func (m *Manager) Servers() map[string]event.MCPServer {
	out := make(map[string]event.MCPServer, len(m.cfg.Servers))
	for k, v := range m.cfg.Servers {
		out[k] = v
	}
	return out
}

// CheckSession validates a session's servers (session/create) for
// [FromSession]: at most [api.MaxMCPServers] (checked by the caller), each
// passing [Check]. The error is a [*FieldError].
func (m *Manager) CheckSession(servers map[string]event.MCPServer) error {
	for _, name := range sortedKeys(servers) {
		if err := Check(name, servers[name], FromSession, m.cfg.SessionEnv); err != nil {
			return err
		}
	}
	return nil
}

// Tools returns a registry of the tools of the host's servers and of
// session's own (a session's server replaces the host's of the same
// name), as the model sees them, for one step of a run in binding b (the
// session's mounts, which confine its sandboxed servers and resolve
// their working directories). It starts the servers that are not
// running, in parallel, and lists again the tools of those that said
// their list changed. A server that cannot start, or whose tools cannot
// be listed, is named in the error, a *[ServerError] for each (joined);
// its tools are left out, but for those its last connection listed,
// which answer each call with its last error (see [ServerError.Tools]).
// The registry holds the others' tools. Safe for concurrent use.
func (m *Manager) Tools(ctx context.Context, session map[string]event.MCPServer, b *env.Binding) (*tool.Registry, error) {
	type named struct {
		name   string
		spec   event.MCPServer
		origin Origin
	}
	var all []named
	for _, name := range sortedKeys(m.cfg.Servers) {
		if _, over := session[name]; !over {
			all = append(all, named{name, m.cfg.Servers[name], FromConfig})
		}
	}
	for _, name := range sortedKeys(session) {
		all = append(all, named{name, session[name], FromSession})
	}
	if len(all) == 0 {
		return tool.NewRegistry(), nil
	}
	regs := make([]*tool.Registry, len(all))
	errs := make([]error, len(all))
	var wg sync.WaitGroup
	for i, n := range all {
		wg.Go(func() {
			l, err := m.launchFor(n.name, n.spec, n.origin, b)
			if err != nil {
				errs[i] = &ServerError{Server: n.name, Err: err, Last: err}
				return
			}
			regs[i], errs[i] = m.server(l).registry(ctx)
		})
	}
	wg.Wait()
	for i, err := range errs {
		// A failed server's tools, listed or not, answer with its
		// failure rather than "unknown tool".
		var se *ServerError
		if !errors.As(err, &se) {
			continue
		}
		r, merr := tool.Merge(regs[i]) // a copy: regs[i] may be the server's own
		if merr != nil {
			continue
		}
		r.SetMissing(ToolName(se.Server, ""), se.Error())
		regs[i] = r
	}
	reg, err := tool.Merge(regs...)
	if err != nil {
		return tool.NewRegistry(), err
	}
	return reg, errors.Join(errs...)
}

// Skipped is a tool of a server that is not offered to the model, and why.
type Skipped struct {
	Tool   string `json:"tool"`
	Reason string `json:"reason"`
}

// Listing is what [Manager.Inspect] found.
type Listing struct {
	// Tools are the server's tools as the model sees them, by name.
	Tools []tool.Spec `json:"tools"`
	// Skipped are the tools left out (a schema that does not compile, a
	// name taken twice).
	Skipped []Skipped `json:"skipped,omitempty"`
}

// Inspect starts the host's server name if it is not running and returns
// its tools, in binding b (nil: no mounts). For `weft mcp tools`.
func (m *Manager) Inspect(ctx context.Context, name string, b *env.Binding) (Listing, error) {
	spec, ok := m.cfg.Servers[name]
	if !ok {
		return Listing{}, fmt.Errorf("mcp: no server %q in the configuration (servers: %s)", name, m.names())
	}
	l, err := m.launchFor(name, spec, FromConfig, b)
	if err != nil {
		return Listing{}, err
	}
	s := m.server(l)
	reg, err := s.registry(ctx)
	if err != nil {
		return Listing{}, err
	}
	return Listing{Tools: reg.Specs(), Skipped: s.skipped()}, nil
}

func (m *Manager) names() string {
	if len(m.cfg.Servers) == 0 {
		return "none"
	}
	return fmt.Sprint(sortedKeys(m.cfg.Servers))
}

// server returns the server of l, made if there is none.
func (m *Manager) server(l *launch) *server {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.servers[l.key]
	if s == nil {
		s = &server{m: m, l: l, sem: make(chan struct{}, 1)}
		if !m.closed {
			m.servers[l.key] = s
		}
	}
	return s
}

// goTracked runs f on a goroutine Close waits for, unless the manager is
// closed.
func (m *Manager) goTracked(f func()) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return false
	}
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		f()
	}()
	return true
}

// Close stops every server (closing a command's stdin, then after a
// grace period killing its process tree) and returns once all of them
// and the manager's goroutines have exited. Calls in flight fail. Close
// may be called more than once.
func (m *Manager) Close() error {
	m.mu.Lock()
	m.closed = true
	m.mu.Unlock()
	m.cancel() // every watcher stops its connection
	m.wg.Wait()
	return nil
}

// janitor stops servers nobody used for IdleTimeout, and forgets them.
func (m *Manager) janitor() {
	defer m.wg.Done()
	tick := time.NewTicker(max(m.cfg.IdleTimeout/4, 10*time.Millisecond))
	defer tick.Stop()
	for {
		select {
		case <-m.ctx.Done():
			return
		case <-tick.C:
		}
		m.mu.Lock()
		servers := slices.Collect(maps.Values(m.servers))
		m.mu.Unlock()
		for _, s := range servers {
			if c, forget := s.idle(m.cfg.IdleTimeout); c != nil {
				m.log.Info("mcp server idle: stopping it", "server", s.l.name)
				c.stop()
			} else if forget {
				m.mu.Lock()
				if m.servers[s.l.key] == s {
					delete(m.servers, s.l.key)
				}
				m.mu.Unlock()
			}
		}
	}
}

// running returns the number of servers with a live connection, for tests.
func (m *Manager) running() int {
	m.mu.Lock()
	servers := slices.Collect(maps.Values(m.servers))
	m.mu.Unlock()
	n := 0
	for _, s := range servers {
		if s.live() != nil {
			n++
		}
	}
	return n
}
