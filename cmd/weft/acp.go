package main

import (
	"context"
	"log/slog"
	"sync"

	"weft.dev/weft/api"
	"weft.dev/weft/internal/acpagent"
)

// acpCmd is `weft acp`: the Agent Client Protocol on stdin and stdout,
// as an editor (Zed, a JetBrains IDE, Neovim) spawns an agent. Through
// a `weft serve` (--host, WEFT_HOST or a running host's file) it is a
// thin client, so runs outlive the editor and this process; otherwise
// it runs a host in this process over the default store.
type acpCmd struct {
	Model   string `short:"m" help:"Model of the sessions it creates, as PROVIDER:MODEL or a name from the config file (default: the config's)." env:"WEFT_MODEL" placeholder:"PROVIDER:MODEL"`
	Local   bool   `help:"Run a host in this process even when a host is reachable."`
	Approve string `help:"The mode new sessions start in: ask-writes, ask-all, read-only or never-ask (default: the config's preset, else ask-writes); the editor switches it per session." enum:",read-only,ask-writes,ask-all,never-ask" default:"" placeholder:"MODE"`
	Busy    string `help:"What a prompt does while the session has an active run, for new sessions: queue (after it) or steer (into it); the editor switches it per session." enum:"queue,steer" default:"queue"`
}

func (c *acpCmd) Run(ctx context.Context, a *app) error {
	cfg, _, err := a.loadConfig()
	if err != nil {
		return err
	}
	ap := newApproval(c.Approve, true, cfg.Policy)
	mode := anyHost
	if c.Local {
		mode = localOnly
	}
	const name = "weft acp"
	ctx, cancel := a.interruptible(ctx)
	defer cancel()
	// The host is found (or opened) when the editor first needs it, not
	// before initialize is answered; a failure is that method's error,
	// which the editor shows, and the next method tries again.
	var (
		mu   sync.Mutex
		open *conn
	)
	defer func() {
		mu.Lock()
		defer mu.Unlock()
		if open != nil {
			open.Close()
		}
	}()
	dial := func(context.Context) (api.Host, acpagent.FollowFunc, error) {
		mu.Lock()
		defer mu.Unlock()
		// A host in this process takes the config's rules without a
		// preset: each run's mode (the session's, which the editor
		// switches) is its defaultPreset.
		cn, err := a.connect(ctx, name, mode, api.Policy{Rules: ap.cfg.Rules}, nil)
		if err != nil {
			return nil, nil, err
		}
		open = cn
		return cn.h, acpagent.FollowFunc(cn.follow), nil
	}
	// A host in this process records who answered from ctx's client
	// (over the wire, initialize names it).
	ctx = clientCtx(ctx, name)
	log := slog.New(slog.NewTextHandler(a.stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	return acpagent.Serve(ctx, acpagent.Config{
		Dial: dial, Model: absModel(c.Model), Mode: ap.preset(), Busy: c.Busy,
		Version: version, Logger: log,
	}, a.stdin, a.stdout)
}
