package main

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"weft.dev/weft/console"
	"weft.dev/weft/mcpserver"
	"weft.dev/weft/rpc"
	"weft.dev/weft/store/postgres"
)

const defaultListen = "127.0.0.1:7878"

type serveCmd struct {
	Listen         string        `help:"Address to listen on." default:"127.0.0.1:7878" env:"WEFT_LISTEN"`
	InsecureNoAuth bool          `name:"insecure-no-auth" help:"Serve without a token, on a loopback address only: every user and program on this machine can then drive the host."`
	Advertise      string        `name:"advertise" help:"With a PostgreSQL store: the HOST:PORT (or https://HOST:PORT) at which the other hosts reach this one to forward the commands for the sessions it owns (default: the listen address, 127.0.0.1 for a wildcard one); with --tls-cert the others verify this host's certificate for HOST." env:"WEFT_ADVERTISE" placeholder:"HOST:PORT"`
	TLSCert        string        `name:"tls-cert" help:"Serve HTTPS and WSS with this PEM certificate chain (with --tls-key); the pair is read again when the files change." env:"WEFT_TLS_CERT" placeholder:"FILE"`
	TLSKey         string        `name:"tls-key" help:"The PEM private key of --tls-cert." env:"WEFT_TLS_KEY" placeholder:"FILE"`
	LeaseTTL       time.Duration `name:"lease-ttl" help:"With a PostgreSQL store: how long a session lease lives without renewal, so how long a dead host keeps its sessions from the others (default 10s)." env:"WEFT_LEASE_TTL" placeholder:"DURATION"`
	IdleTimeout    time.Duration `name:"idle-timeout" help:"How long a keep-alive connection may wait for its next request (default 60s)." placeholder:"DURATION"`
	MaxIdleConns   int           `name:"max-idle-conns" help:"Connections kept while not in a request (new, slow to send a header, or idle); beyond it the oldest is closed, those that never authenticated first (default 1024)." placeholder:"N"`
	MaxOpenConns   int           `name:"max-open-conns" help:"HTTP connections held at once; beyond it the oldest idle one is closed, or the new one (default: 3/4 of the open file limit)." placeholder:"N"`
	MetricsListen  string        `name:"metrics-listen" help:"Also serve /metrics (Prometheus text) on this address WITHOUT authentication, for a scraper on a private network; /metrics on --listen takes the token like every other route." env:"WEFT_METRICS_LISTEN" placeholder:"ADDR"`
	DrainTimeout   time.Duration `name:"drain-timeout" default:"30s" help:"On SIGTERM or Ctrl-C the host drains: it hands its runs over at their next step boundary, cutting a model call at once but letting a tool call finish for up to this long; a run still in a tool call then ends interrupted (so does every one at a second signal). 0 interrupts them at once." env:"WEFT_DRAIN_TIMEOUT" placeholder:"DURATION"`
	StreamMiB      int           `name:"stream-mib" help:"MiB that all SSE and WebSocket streams together may hold to write to their clients; a stream whose client stops reading is dropped (it resumes by cursor) when others wait (default 4)." placeholder:"MIB"`
}

type rpcCmd struct{}

// stateDir is where the token file and scratch mounts live.
func (a *app) stateDir() (string, error) {
	dir := a.getenv("XDG_STATE_HOME")
	if dir == "" {
		home := a.getenv("HOME")
		if home == "" {
			return "", errors.New("no state directory: set XDG_STATE_HOME or HOME")
		}
		dir = filepath.Join(home, ".local", "state")
	}
	return filepath.Join(dir, "weft"), nil
}

// token returns the bearer token: WEFT_TOKEN when set, else the token file
// under the state directory. create makes the file when it is missing
// (weft serve does; clients do not). It never returns an empty token: a
// blank WEFT_TOKEN, or a token file that is empty, unreadable, not a
// regular file, or open to other users, is an error that says what to do.
func (a *app) token(create bool) (string, error) {
	if t := a.getenv("WEFT_TOKEN"); t != "" {
		if t = strings.TrimSpace(t); t == "" {
			return "", errors.New("WEFT_TOKEN is blank: set it to the token, or unset it to use the token file")
		}
		return t, nil
	}
	dir, err := a.stateDir()
	if err != nil {
		return "", err
	}
	if create {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return "", fmt.Errorf("state directory %s: %w", dir, err)
		}
	}
	if err := checkStateDir(dir); err != nil {
		return "", err
	}
	path := filepath.Join(dir, "token")
	tok, err := readToken(path)
	if errors.Is(err, fs.ErrNotExist) && create {
		return writeToken(dir, path)
	}
	return tok, err
}

// checkStateDir refuses a state directory that other users can write to:
// they could replace the token file. A missing directory is not an error.
func checkStateDir(dir string) error {
	fi, err := os.Stat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	} else if err != nil {
		return fmt.Errorf("state directory %s: %w", dir, err)
	}
	if fi.Mode().Perm()&0o022 != 0 {
		return fmt.Errorf("state directory %s is writable by other users (mode %#o): chmod 700 it, or set XDG_STATE_HOME to a private directory", dir, fi.Mode().Perm())
	}
	return nil
}

// readToken reads the token file at path. A missing file is an error
// wrapping fs.ErrNotExist; every other problem is refused with the fix.
func readToken(path string) (string, error) {
	const redo = "remove it and start `weft serve` again to make a new one, or set WEFT_TOKEN"
	// O_NOFOLLOW: the file itself, not what a link points to; O_NONBLOCK:
	// a FIFO in its place must not block the open.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", fmt.Errorf("token file %s: %w", path, err)
	case errors.Is(err, syscall.ELOOP):
		return "", fmt.Errorf("token file %s is a symbolic link: %s", path, redo)
	case err != nil:
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return "", fmt.Errorf("cannot read token file %s (%v): make it yours with mode 0600, or %s", path, err, redo)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", fmt.Errorf("token file %s: %w", path, err)
	}
	if !fi.Mode().IsRegular() {
		return "", fmt.Errorf("token file %s is not a regular file (%s): %s", path, fi.Mode().Type(), redo)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return "", fmt.Errorf("token file %s is open to other users (mode %#o), who may have read the token: %s (or chmod 600 it if nobody else can have read it)", path, perm, redo)
	}
	b, err := io.ReadAll(io.LimitReader(f, 4096))
	if err != nil {
		return "", fmt.Errorf("cannot read token file %s (%v): %s", path, err, redo)
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return "", fmt.Errorf("token file %s is empty (a disk-full start?): %s", path, redo)
	}
	return tok, nil
}

// writeToken makes a new token and publishes it at path atomically: it is
// written and synced under a temporary name in dir (mode 0600), then
// linked to path, and dir is synced, so a crash or a full disk leaves
// either no token file or a complete one. Linking, unlike renaming, never
// replaces a file: when another weft made the token first, its token wins
// and is returned. Filesystems without hard links fall back to a rename.
func writeToken(dir, path string) (string, error) {
	var raw [32]byte
	rand.Read(raw[:])
	tok := hex.EncodeToString(raw[:])
	f, err := os.CreateTemp(dir, ".token-*")
	if err != nil {
		return "", fmt.Errorf("create token file in %s: %w", dir, err)
	}
	tmp := f.Name()
	defer os.Remove(tmp) // after the link, or after a failure; a no-op after a rename
	_, err = f.WriteString(tok + "\n")
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", fmt.Errorf("write token file %s: %w", tmp, err)
	}
	if err := os.Link(tmp, path); errors.Is(err, fs.ErrExist) {
		return readToken(path)
	} else if err != nil {
		if err := os.Rename(tmp, path); err != nil {
			return "", fmt.Errorf("token file %s: %w", path, err)
		}
	}
	if err := syncDir(dir); err != nil {
		return "", fmt.Errorf("token file %s: %w", path, err)
	}
	return tok, nil
}

// syncDir makes the entries just created in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

func isLoopback(addr string) bool {
	h, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if strings.EqualFold(h, "localhost") {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

func (c *serveCmd) Run(ctx context.Context, a *app) error {
	log := slog.New(slog.NewTextHandler(a.stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	loopback := isLoopback(c.Listen)
	if c.InsecureNoAuth && !loopback {
		return usageErr("--insecure-no-auth is allowed only on a loopback address (127.0.0.1, [::1], localhost), not %s", c.Listen)
	}
	if c.LeaseTTL < 0 {
		return usageErr("--lease-ttl must be positive, not %v", c.LeaseTTL)
	}
	if c.DrainTimeout < 0 {
		return usageErr("--drain-timeout must not be negative, not %v", c.DrainTimeout)
	}
	if c.IdleTimeout < 0 || c.MaxIdleConns < 0 || c.MaxOpenConns < 0 || c.StreamMiB < 0 {
		return usageErr("--idle-timeout, --max-idle-conns, --max-open-conns and --stream-mib must be positive")
	}
	if (c.TLSCert == "") != (c.TLSKey == "") {
		return usageErr("--tls-cert and --tls-key go together: give both, or neither to serve plain HTTP")
	}
	advertise, err := c.advertise()
	if err != nil {
		return err
	}
	// The key pair and the CA are read before anything binds: a bad one
	// fails the start, never the first handshake.
	var certs *certReloader
	if c.TLSCert != "" {
		if certs, err = newCertReloader(c.TLSCert, c.TLSKey, log); err != nil {
			return fmt.Errorf("--tls-cert, --tls-key: %w", err)
		}
	}
	tlsConf, err := a.tlsClientConfig()
	if err != nil {
		return err
	}
	// Bind first: a busy port fails before the store is opened or
	// anything recovered.
	ln, err := net.Listen("tcp", c.Listen)
	if err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			return fmt.Errorf("listen on %s: the address is in use (another `weft serve`? `weft ps` finds it): choose another with --listen HOST:PORT", c.Listen)
		}
		return fmt.Errorf("listen on %s: %w", c.Listen, err)
	}
	defer ln.Close()
	var mln net.Listener
	if c.MetricsListen != "" {
		if mln, err = net.Listen("tcp", c.MetricsListen); err != nil {
			return fmt.Errorf("--metrics-listen %s: %w", c.MetricsListen, err)
		}
		defer mln.Close()
	}
	if tcp, ok := ln.Addr().(*net.TCPAddr); c.InsecureNoAuth && (!ok || !tcp.IP.IsLoopback()) {
		return fmt.Errorf("--insecure-no-auth: %s resolved to %s, which is not a loopback address", c.Listen, ln.Addr())
	}
	rec := hostRecord{PID: os.Getpid(), Addr: clientAddr(ln.Addr()), TokenFrom: "none", Started: time.Now().UTC()}
	if certs != nil {
		rec.Scheme = "https"
	}
	rec.Cwd, _ = os.Getwd()
	var tok string
	if !c.InsecureNoAuth {
		if tok, err = a.token(true); err != nil {
			return err
		}
		rec.TokenFrom = "env"
		if a.getenv("WEFT_TOKEN") == "" {
			dir, err := a.stateDir()
			if err != nil {
				return err
			}
			rec.TokenFrom, rec.TokenFile = "file", filepath.Join(dir, "token")
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	h, err := a.newHost(ctx, log, hostOptions{kind: serving, holder: "weft serve", leaseTTL: c.LeaseTTL})
	if err != nil {
		return err
	}
	defer h.Close()
	log = h.log // redacts the host's secrets
	// On PostgreSQL the host takes the commands for any session: those of
	// a session another host owns are forwarded to the address it
	// registered, as this one registers its own.
	var fwd rpc.Forwarder
	if pst, ok := h.store.(*postgres.Store); ok && h.holder != "" {
		addr := cmp.Or(advertise, rec.dialAddr())
		if err := pst.RegisterNode(ctx, postgres.Node{Holder: h.holder, Addr: addr, Version: version}); err != nil {
			return err
		}
		defer func() {
			rctx, rcancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer rcancel()
			pst.RemoveNode(rctx, h.holder)
		}()
		fwd = newForwarder(pst, tok, tlsConf)
	}
	srv := rpc.NewHostServer(h.host, rpc.HostConfig{Config: rpc.Config{
		Forward: fwd,
		Logger:  log, Token: tok, NoAuth: c.InsecureNoAuth, Loopback: loopback,
		ServerInfo: serverInfo(), StreamBytes: int64(c.StreamMiB) << 20,
		ConsoleCodes: receiptLedger{h.store}, Console: console.Handler(),
	}})
	defer srv.Close()
	// Idle connections and those that never authenticated are bounded
	// and shed oldest first, so a crowd of them cannot starve a client
	// with the token of memory or file descriptors.
	// /mcp serves weft's MCP tools (package mcpserver) as streamable
	// HTTP, behind the same token as the rest.
	// Its waits end when the shutdown starts.
	mcpDone := make(chan struct{})
	mux := http.NewServeMux()
	mux.Handle("/", rpc.HTTPHandler(srv, h.host, rpc.SSEOptions{}))
	mux.Handle("/mcp", srv.Authenticate(mcpserver.Handler(h.host, &mcpserver.Options{
		Version: version, Transport: "mcp-http", Logger: log, Done: mcpDone,
	})))
	// /metrics is the operator's (docs/operations.md): behind the token
	// here, open on --metrics-listen.
	metrics := metricsHandler(h.host, h.tracing)
	mux.Handle("/metrics", srv.Authenticate(metrics))
	hs := rpc.NewHTTPServer(mux, rpc.ConnLimits{
		IdleTimeout: c.IdleTimeout, MaxIdleConns: c.MaxIdleConns, MaxOpenConns: c.MaxOpenConns, Logger: log,
	})
	// The host file is written before serving, so a client that finds
	// the host answering also finds the file.
	removeHostFile, err := a.writeHostFile(rec)
	if err != nil {
		// Clients on the default address, or told with --host, still
		// find the host.
		log.Warn("clients will not find this host by themselves", "err", err)
	} else {
		defer removeHostFile()
	}
	errc := make(chan error, 2)
	serving := ln
	if certs != nil {
		serving = tls.NewListener(ln, serverTLSConfig(certs))
	}
	go func() { errc <- hs.Serve(serving) }()
	if mln != nil {
		mmux := http.NewServeMux()
		mmux.Handle("/metrics", metrics)
		ms := &http.Server{Handler: mmux, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: time.Minute}
		go func() { errc <- ms.Serve(mln) }()
		defer ms.Close()
		log.Info("serving metrics without authentication", "addr", mln.Addr().String())
	}
	if c.InsecureNoAuth {
		log.Warn("serving WITHOUT authentication (--insecure-no-auth): every user and program on this machine can drive this host", "addr", ln.Addr().String())
	}
	scheme := cmp.Or(rec.Scheme, "http")
	switch rec.TokenFrom {
	case "file":
		log.Info("weft serving", "addr", ln.Addr().String(), "scheme", scheme, "token", rec.TokenFile, "version", version)
	case "env":
		log.Info("weft serving", "addr", ln.Addr().String(), "scheme", scheme, "token", "WEFT_TOKEN", "version", version)
	default:
		log.Info("weft serving", "addr", ln.Addr().String(), "scheme", scheme, "version", version)
	}
	select {
	case <-a.interrupts:
		log.Info("shutting down")
	case err := <-errc:
		return err
	}
	// The host drains (docs/operations.md) while the listener stops: it
	// takes no more runs and hands its executing runs over at their next
	// step boundary, within --drain-timeout. Stop the listener meanwhile;
	// the streams that Shutdown would otherwise wait for (SSE,
	// WebSocket) end when the RPC server closes, which Shutdown
	// triggers. The rest of the host closes last (deferred).
	// A second signal ends the grace at once.
	dctx, dcancel := context.WithTimeout(context.Background(), c.DrainTimeout)
	defer dcancel()
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		h.Drain(dctx)
	}()
	go func() {
		select {
		case <-a.interrupts:
			log.Info("a second signal: interrupting the runs still in a tool call")
			dcancel()
		case <-drained:
		}
	}()
	sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer scancel()
	hs.RegisterOnShutdown(func() { srv.Close(); close(mcpDone) })
	hs.Shutdown(sctx)
	<-drained
	return nil
}

// advertise returns --advertise with the scheme the other hosts use to
// forward to this one: https:// when this host serves TLS, else none
// (plain HTTP). A scheme that contradicts --tls-cert is a usage error: the
// host speaks one or the other on its listen address.
func (c *serveCmd) advertise() (string, error) {
	adv, tlsOn := c.Advertise, c.TLSCert != ""
	switch {
	case adv == "":
		return "", nil
	case strings.HasPrefix(adv, "https://"):
		if !tlsOn {
			return "", usageErr("--advertise %s names TLS, but this host serves plain HTTP: give --tls-cert and --tls-key, or advertise HOST:PORT", adv)
		}
	case strings.HasPrefix(adv, "http://"):
		if tlsOn {
			return "", usageErr("--advertise %s names plain HTTP, but this host serves TLS (--tls-cert): advertise https://HOST:PORT", adv)
		}
		adv = strings.TrimPrefix(adv, "http://")
	case strings.Contains(adv, "://"):
		return "", usageErr("--advertise %s: want HOST:PORT or https://HOST:PORT", adv)
	case tlsOn:
		adv = "https://" + adv
	}
	adv = strings.TrimSuffix(adv, "/")
	if h, p, err := net.SplitHostPort(strings.TrimPrefix(adv, "https://")); err != nil || h == "" || p == "" {
		return "", usageErr("--advertise %s: want HOST:PORT or https://HOST:PORT", c.Advertise)
	}
	return adv, nil
}

func (c *rpcCmd) Run(ctx context.Context, a *app) error {
	log := slog.New(slog.NewTextHandler(a.stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	h, err := a.newHost(ctx, log, hostOptions{kind: serving, holder: "weft rpc"})
	if err != nil {
		return err
	}
	defer h.Close()
	srv := rpc.NewHostServer(h.host, rpc.HostConfig{Config: rpc.Config{Logger: h.log, ServerInfo: serverInfo()}})
	defer srv.Close()
	ctx, cancel := a.interruptible(ctx)
	defer cancel()
	return srv.ServeStdio(ctx, a.stdin, a.stdout)
}

// serverInfo is what initialize tells clients about this host: its
// version and its working directory.
func serverInfo() rpc.Info {
	cwd, _ := os.Getwd()
	return rpc.Info{Name: "weft", Version: version, Cwd: cwd}
}
