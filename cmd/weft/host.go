package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"time"

	"weft.dev/weft/api"
	"weft.dev/weft/env"
	"weft.dev/weft/env/sandbox"
	"weft.dev/weft/host"
	"weft.dev/weft/internal/config"
	"weft.dev/weft/internal/llmhttp"
	"weft.dev/weft/internal/telemetry"
	"weft.dev/weft/llm/scripted"
	"weft.dev/weft/process"
	"weft.dev/weft/redact"
	"weft.dev/weft/store"
	"weft.dev/weft/store/postgres"
	"weft.dev/weft/tool"
	"weft.dev/weft/tool/builtin"
	"weft.dev/weft/tool/mcp"
)

// hostKind says how a host uses the store.
type hostKind int

const (
	// serving: `weft serve` and `weft rpc`, the store's one host, which
	// holds the store's host lease exclusively and recovers what a crash
	// left.
	serving hostKind = iota
	// oneShot: a `weft run` in this process, which holds the host lease
	// shared with other one-shot runs and opens only its own session.
	oneShot
)

// localHost is a host over the store with what it runs on. Its host
// holds the store's leases (see store.LeaseProvider) from before
// recovery until Close.
type localHost struct {
	host  *host.Host
	store store.Store
	tools *tool.Registry
	mcp   *mcp.Manager
	// sessions is what each session's commands share (a network
	// namespace, cgroups), closed once they have all ended.
	sessions *sandbox.Sessions
	// dispatch works the wake-up jobs of queued runs on a serving host of
	// a PostgreSQL store, as holder (its leases' holder); nil otherwise.
	dispatch *postgres.Dispatcher
	holder   string
	// notices tells a host of a PostgreSQL store of the other hosts'
	// commits; nil otherwise.
	notices *postgres.Notifier
	// modelHTTP is the connection pool the host's models share; its idle
	// connections close with the host.
	modelHTTP *http.Client
	// log is the logger the host was given, redacting the host's
	// secrets: the one to give the RPC server too.
	log *slog.Logger
	// tracing exports the runs' spans; nil when the OTEL_* variables
	// ask for no tracing.
	tracing *telemetry.Tracing
	// closeOnce makes Close safe to call again (after Drain).
	closeOnce sync.Once
}

// Drain stops working dispatch jobs, so that this host takes no session
// for a job any more, and drains the host (host.Host.Drain: its executing
// runs are handed over within ctx, and its sessions closed). Close must
// follow: it hands the runs over to the other hosts at once and closes
// the rest.
func (l *localHost) Drain(ctx context.Context) {
	if l.dispatch != nil {
		l.dispatch.Close()
	}
	if err := l.host.Drain(ctx); err != nil {
		l.log.Warn("drain: the grace ended with runs in a tool call; they ended interrupted", "err", err)
	}
}

// Close stops working dispatch jobs, shuts the host (which releases its
// session leases and its hold on the store), hands the queued runs of its
// sessions over, flushes its trace spans, then its MCP servers and what
// the sessions' commands shared, then closes the store. It is safe to call
// more than once.
func (l *localHost) Close() { l.closeOnce.Do(l.close) }

func (l *localHost) close() {
	if l.dispatch != nil {
		l.dispatch.Close()
	}
	l.host.Close()
	if l.modelHTTP != nil {
		l.modelHTTP.CloseIdleConnections()
	}
	if l.dispatch != nil {
		// The sessions released their leases: the other hosts take
		// their queues at once, not a recheck later.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if n, err := l.dispatch.Handover(ctx, l.holder); err != nil {
			l.log.Warn("hand the queued runs over; the other hosts take them within half a lease TTL", "err", err)
		} else if n > 0 {
			l.log.Info("queued runs handed over", "jobs", n)
		}
		cancel()
	}
	if l.notices != nil {
		l.notices.Close()
	}
	if l.tracing != nil {
		// The spans of the runs the host just ended go out, or are
		// counted dropped, within a bounded time.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		l.tracing.Shutdown(ctx)
		cancel()
	}
	l.mcp.Close()
	l.sessions.Close()
	l.store.Close()
}

// hostOptions say what host newHost makes.
type hostOptions struct {
	kind hostKind
	// holder names the process ("weft serve") in the lease file of an
	// exclusive holder; shared holders are not named.
	holder string
	// policy, if set, is the host's policy layer instead of the config
	// file's: a one-shot host's carries the command's approval mode.
	policy *api.Policy
	// leaseTTL is the TTL of the session leases in a PostgreSQL store;
	// zero means WEFT_LEASE_TTL, else 10s.
	leaseTTL time.Duration
}

// newHost builds a host over the store (SQLite or PostgreSQL), with the built-in tools,
// background processes, the configured models, the config file's approval
// policy (or o.policy) and its input timeout. The host takes the store's
// leases in the name of o.holder (see store.LeaseProvider): a SQLite
// store's host lock exclusively for a serving host, shared for a one-shot
// run, so that while another host serves the file it fails at once,
// before it recovers anything; a PostgreSQL store's lease rows, beside
// any number of other hosts.
func (a *app) newHost(ctx context.Context, log *slog.Logger, o hostOptions) (_ *localHost, err error) {
	kind, holder := o.kind, o.holder
	cfgFile, cfgPath, err := a.loadConfig()
	if err != nil {
		return nil, err
	}
	loc, err := a.storeLocation(cfgFile)
	if err != nil {
		return nil, err
	}
	ttl := o.leaseTTL
	if ttl == 0 {
		if ttl, err = a.envLeaseTTL(); err != nil {
			return nil, err
		}
	}
	loc.leaseTTL = ttl
	// A one-shot host reads little, one read at a time: its reads share
	// the write connection rather than open a second one.
	loc.readOnWriter = kind == oneShot
	st, err := openStoreAt(ctx, loc)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			st.Close()
		}
	}()
	state, err := a.stateDir()
	if err != nil {
		return nil, err
	}
	// What a client's sessions may not reach: the host's state (token,
	// scratch mounts, locks), its store and its configuration.
	protected := []string{state, cfgPath}
	if loc.path != "" {
		for _, suffix := range []string{"", "-wal", "-shm", "-journal", ".locks"} {
			protected = append(protected, loc.path+suffix)
		}
	}
	prot := env.NewProtected(protected...)
	// Every secret the host knows of is masked in its log, in the
	// sessions' logs and in the processes' (see package redact).
	// One sandbox for every command the host runs: the shells, the
	// background processes and the MCP servers of a session share its
	// network namespace and its cgroup.
	sbx := cfgFile.Sandbox()
	if sbx.Sessions, err = cfgFile.Sessions(); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			sbx.Sessions.Close()
		}
	}()
	mcfg := a.mcpConfig(cfgFile, 0)
	mcfg.Protected, mcfg.Sandbox = prot, sbx
	red := a.redactor(cfgFile, loc, mcfg)
	log = slog.New(red.Handler(log.Handler()))
	mcfg.Logger = log
	// Traces go where the standard OTEL_* variables say, and nowhere
	// when they say nothing (docs/operations.md).
	tracing, err := telemetry.FromEnv(ctx, telemetry.Config{Getenv: a.getenv, ServiceVersion: version, Logger: log})
	if err != nil {
		return nil, fmt.Errorf("tracing: %w", err)
	}
	defer func() {
		if err != nil && tracing != nil {
			tracing.Shutdown(context.Background())
		}
	}()
	procs, err := process.New(process.Config{Store: st, Logger: log, BaseEnv: os.Environ(), Sandbox: sbx, Redactor: red})
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			procs.Close()
		}
	}()
	reg := tool.NewRegistry()
	if err := builtin.Register(reg, builtin.Options{Sandbox: sbx, Background: process.BackgroundShell{}}); err != nil {
		return nil, err
	}
	if err := process.RegisterTools(reg, procs); err != nil {
		return nil, err
	}
	servers, err := mcp.New(mcfg)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			servers.Close()
		}
	}()
	ret, err := cfgFile.Retention.Settings()
	if err != nil {
		return nil, err
	}
	var notices *postgres.Notifier
	var hostNotices host.Notices
	if pst, ok := st.(*postgres.Store); ok {
		notices = postgres.NewNotifier(pst, postgres.NotifierConfig{Logger: log})
		defer func() {
			if err != nil {
				notices.Close()
			}
		}()
		hostNotices = notices
	}
	pol := cfgFile.Policy
	if o.policy != nil {
		pol = *o.policy
	}
	// The host's models share one connection pool, sized for many
	// sessions' calls at once.
	modelHTTP := llmhttp.NewPooledClient()
	h, err := host.New(ctx, host.Config{
		Policy: pol, InputTimeout: cfgFile.InputTimeout(),
		Budgets: host.Budgets{Run: cfgFile.Budgets.Run, Session: cfgFile.Budgets.Session, Host: cfgFile.Budgets.Host},
		Store:   st, Tools: reg, MCP: servers, DefaultModel: a.defaultModel(cfgFile), MaxSteps: cfgFile.MaxSteps, Redactor: red, Protected: prot,
		MaxCommandLimits: cfgFile.MaxCommandLimits(),
		Name:             holder, Notices: hostNotices, ScratchDir: filepath.Join(state, "scratch"), Logger: log, Processes: procs,
		CheckpointDir: checkpointDir(cfgFile, state), CheckpointMaxFileBytes: cfgFile.Checkpoints.MaxFileBytes,
		CheckpointMaxBytes: cfgFile.Checkpoints.MaxBytes,
		Retention: host.Retention{Policy: ret.Policy, Interval: ret.Interval, PassTime: ret.PassTime, Batch: ret.Batch,
			SweepInterval: ret.SweepInterval, BlobGrace: ret.BlobGrace},
		Shared:         kind == oneShot,
		TracerProvider: tracing.TracerProvider(), TraceContent: tracing.Content(),
		ResolveModel: newModelCache(func(name string) (*config.Resolved, error) {
			return config.ResolveHTTP(name, cfgFile, cfgPath, a.getenv, modelHTTP)
		}).resolve,
	})
	if err != nil {
		return nil, err
	}
	lh := &localHost{host: h, store: st, modelHTTP: modelHTTP, tools: reg, mcp: servers, sessions: sbx.Sessions, notices: notices, log: log, tracing: tracing}
	if pst, ok := st.(*postgres.Store); ok && kind == serving {
		// A serving host works the wake-up jobs of queued runs: it takes
		// over a session whose owner died once the lease expires, and
		// looks again every half TTL.
		leases, ok := h.HostLeases().(*postgres.Leases)
		if !ok {
			h.Close()
			return nil, errors.New("a host of a PostgreSQL store without its lease rows")
		}
		ttl := leases.TTL()
		d, err := postgres.NewDispatcher(pst, postgres.DispatchConfig{
			Waker: h, ID: leases.Holder(), Recheck: ttl / 2, PollInterval: min(time.Second, ttl/4), Logger: log,
		})
		if err == nil {
			err = d.Start(ctx)
			if err != nil {
				d.Close()
			}
		}
		if err != nil {
			h.Close()
			return nil, err
		}
		lh.dispatch, lh.holder = d, leases.Holder()
	}
	return lh, nil
}

// newMCP makes the MCP client of the config file's servers: commands in
// the shells' sandbox, ${VAR} read from weft's environment; stopGrace is
// mcp.Config.StopGrace.
func (a *app) newMCP(f config.File, log *slog.Logger, stopGrace time.Duration) (*mcp.Manager, error) {
	cfg := a.mcpConfig(f, stopGrace)
	cfg.Logger = log
	return mcp.New(cfg)
}

// mcpConfig is the configuration of the MCP client of the config file's
// servers, without a logger.
func (a *app) mcpConfig(f config.File, stopGrace time.Duration) mcp.Config {
	return mcp.Config{
		Servers: f.MCPServers, SessionEnv: f.MCPSessionEnv,
		LookupEnv: func(k string) (string, bool) {
			v := a.getenv(k)
			return v, v != ""
		},
		BaseEnv: os.Environ(), Sandbox: f.Sandbox(), StopGrace: stopGrace,
	}
}

// redactor returns the Redactor of every secret the host holds: the
// providers' API keys (config.KeyEnv), the token (WEFT_TOKEN, or the
// token file if there is one), the password of a PostgreSQL store's URL,
// what the MCP servers' ${VAR} reach and the OTLP exporter's headers.
func (a *app) redactor(f config.File, loc storeLoc, mcfg mcp.Config) *redact.Redactor {
	var secrets []string
	for _, k := range config.KeyEnv(f) {
		secrets = append(secrets, a.getenv(k))
	}
	if tok, err := a.token(false); err == nil {
		secrets = append(secrets, tok)
	} else if a.getenv("WEFT_TOKEN") != "" {
		secrets = append(secrets, a.getenv("WEFT_TOKEN"))
	}
	if loc.url != "" {
		if u, err := url.Parse(loc.url); err == nil && u.User != nil {
			if pw, ok := u.User.Password(); ok {
				secrets = append(secrets, pw)
			}
		}
	}
	secrets = append(secrets, mcp.SecretsOf(mcfg)...)
	// A collector's credentials ride in the OTLP headers.
	secrets = append(secrets, telemetry.HeaderValues(a.getenv)...)
	return redact.New(secrets...)
}

// envLeaseTTL is WEFT_LEASE_TTL (a Go duration), or 0 for the default.
func (a *app) envLeaseTTL() (time.Duration, error) {
	v := a.getenv("WEFT_LEASE_TTL")
	if v == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("WEFT_LEASE_TTL=%q: want a positive duration such as 10s", v)
	}
	return d, nil
}

// defaultModel is WEFT_MODEL or the config file's default model.
func (a *app) defaultModel(f config.File) string {
	if m := a.getenv("WEFT_MODEL"); m != "" {
		return m
	}
	return f.DefaultModel
}

// checkpointDir is where the host keeps file checkpoints: under the state
// directory, or nowhere when the config file turns them off.
func checkpointDir(f config.File, state string) string {
	if f.Checkpoints.Off {
		return ""
	}
	return filepath.Join(state, "checkpoints")
}

// modelCache resolves a host's model names and keeps each provider it
// makes for the host's life. The configuration and the environment a
// name resolves against do not change while the host runs, and a
// provider is safe for concurrent use and keeps what it can reuse from
// one request to the next (the OpenAI Chat provider keeps the encoding of
// the tools, its HTTP client its connections); resolved anew for every
// run and every admission check, a provider lost that and the tools'
// schemas were decoded and encoded again at every step. A failure is not
// kept, nor a scripted provider: a script counts the attempts of its
// steps, which belong to the run it answers. Clients name models, so it
// keeps at most maxKeptModels of them; names beyond are resolved anew
// each time, as before.
type modelCache struct {
	resolveName func(name string) (*config.Resolved, error)

	mu     sync.Mutex
	models map[string]*config.Resolved
}

// maxKeptModels bounds a modelCache: a host uses a few models, while a
// client may name any number of them.
const maxKeptModels = 32

func newModelCache(resolve func(name string) (*config.Resolved, error)) *modelCache {
	return &modelCache{resolveName: resolve, models: map[string]*config.Resolved{}}
}

// resolve returns the model name names: a Model of its own each call,
// which the caller may change, around the kept provider.
func (c *modelCache) resolve(name string) (*host.Model, error) {
	c.mu.Lock()
	m, ok := c.models[name]
	c.mu.Unlock()
	if !ok {
		var err error
		if m, err = c.resolveName(name); err != nil {
			return nil, err
		}
		if _, script := m.Provider.(*scripted.Provider); !script {
			c.mu.Lock()
			if kept, ok := c.models[name]; ok {
				m = kept // resolved meanwhile by another run: share one provider
			} else if len(c.models) < maxKeptModels {
				c.models[name] = m
			}
			c.mu.Unlock()
		}
	}
	out := &host.Model{Name: m.Name, Provider: m.Provider, Model: m.Model, MaxTokens: m.MaxTokens,
		ContextWindow: m.ContextWindow, CompactAt: m.CompactAt, CompactModel: m.CompactModel}
	if m.Price != nil {
		p := *m.Price
		out.Price = &p
	}
	return out, nil
}
