package main

import (
	"context"
	"log/slog"

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
	Busy    string `help:"What a prompt does while the session has an active run: queue (after it) or steer (into it)." enum:"queue,steer" default:"queue"`
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
	// A host in this process takes the config's rules without a preset:
	// each run's mode (the session's, which the editor switches) is its
	// defaultPreset.
	conn, err := a.connect(ctx, name, mode, api.Policy{Rules: ap.cfg.Rules}, nil)
	if err != nil {
		return err
	}
	defer conn.Close()
	model := c.Model
	if conn.remote {
		model = absModel(model)
	} else {
		ctx = clientCtx(ctx, name)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-a.interrupts:
			cancel()
		case <-ctx.Done():
		}
	}()
	log := slog.New(slog.NewTextHandler(a.stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	return acpagent.Serve(ctx, acpagent.Config{
		Host: conn.h, Follow: acpagent.FollowFunc(conn.follow), Model: model, Mode: ap.preset(), Busy: c.Busy,
		Version: version, Logger: log,
	}, a.stdin, a.stdout)
}
