package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"weft.dev/weft/rpc"
)

const defaultListen = "127.0.0.1:7878"

type serveCmd struct {
	Listen string `help:"Address to listen on." default:"127.0.0.1:7878" env:"WEFT_LISTEN"`
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

// token returns WEFT_TOKEN or the token file's content; create makes the
// file (0600) when it is missing.
func (a *app) token(create bool) (string, error) {
	if t := a.getenv("WEFT_TOKEN"); t != "" {
		return t, nil
	}
	dir, err := a.stateDir()
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, "token")
	b, err := os.ReadFile(path)
	if err == nil {
		return strings.TrimSpace(string(b)), nil
	}
	if !errors.Is(err, os.ErrNotExist) || !create {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	var raw [32]byte
	rand.Read(raw[:])
	tok := hex.EncodeToString(raw[:])
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", fmt.Errorf("token file %s: %w", path, err)
	}
	defer f.Close()
	if _, err := f.WriteString(tok + "\n"); err != nil {
		return "", fmt.Errorf("token file %s: %w", path, err)
	}
	return tok, nil
}

func isLoopback(addr string) bool {
	h, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if h == "localhost" {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

func (c *serveCmd) Run(ctx context.Context, a *app) error {
	log := slog.New(slog.NewTextHandler(a.stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	tok, err := a.token(true)
	if err != nil {
		return err
	}
	if !isLoopback(c.Listen) && tok == "" {
		return usageErr("refusing to listen on %s without a token: set WEFT_TOKEN", c.Listen)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	h, st, reg, err := a.newHost(ctx, log, serving)
	if err != nil {
		return err
	}
	defer st.Close()
	defer h.Close()
	srv := rpc.NewHostServer(h, rpc.HostConfig{Tools: reg, Config: rpc.Config{
		Logger: log, Token: tok, ServerInfo: rpc.Info{Name: "weft", Version: version},
	}})
	defer srv.Close()
	ln, err := net.Listen("tcp", c.Listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", c.Listen, err)
	}
	hs := &http.Server{Handler: rpc.HTTPHandler(srv, h, rpc.SSEOptions{}), ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	log.Info("weft serving", "addr", ln.Addr().String(), "version", version)
	select {
	case <-a.interrupts:
		log.Info("shutting down")
	case err := <-errc:
		return err
	}
	sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer scancel()
	srv.Close()
	hs.Shutdown(sctx)
	return nil
}

func (c *rpcCmd) Run(ctx context.Context, a *app) error {
	log := slog.New(slog.NewTextHandler(a.stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	h, st, reg, err := a.newHost(ctx, log, serving)
	if err != nil {
		return err
	}
	defer st.Close()
	defer h.Close()
	srv := rpc.NewHostServer(h, rpc.HostConfig{Tools: reg, Config: rpc.Config{Logger: log, ServerInfo: rpc.Info{Name: "weft", Version: version}}})
	defer srv.Close()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-a.interrupts:
			cancel()
		case <-ctx.Done():
		}
	}()
	return srv.ServeStdio(ctx, a.stdin, a.stdout)
}
