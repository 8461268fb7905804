package main

import (
	"context"
	"fmt"
	"os"
)

type chatCmd struct {
	Session  string   `short:"s" help:"Continue this session." placeholder:"ID"`
	Continue bool     `short:"c" name:"continue" help:"Continue the latest session."`
	Model    string   `short:"m" help:"Model as PROVIDER:MODEL or a name from the config file." env:"WEFT_MODEL" placeholder:"PROVIDER:MODEL"`
	Mount    []string `help:"Mount a directory in a new session: PATH, PATH:ro, ID=PATH[:ro]. Repeatable. The working directory is mounted read-write as 'work'." placeholder:"PATH[:ro]"`
	MaxSteps int      `help:"Most model calls in a run; 0 or absent: the config file's maxSteps, else 50." placeholder:"N"`
	Local    bool     `help:"Run in this process even when a host is reachable."`
	Network  string   `help:"A new session's shell network policy: allow or deny (default: the config's, deny)." enum:",allow,deny" default:""`
	Approve  string   `help:"Approval mode: read-only, ask-writes (default), ask-all or never-ask." enum:",read-only,ask-writes,ask-all,never-ask" default:"" placeholder:"MODE"`
}

// Run opens the terminal UI (tui.go) on a session: a new one with the
// first prompt, or the one -s or -c names.
func (c *chatCmd) Run(ctx context.Context, a *app) error {
	in, ok := a.stdin.(*os.File)
	if !ok || !isTerminal(in) || !isTerminal(a.stdout) {
		return usageErr("weft chat needs a terminal: in scripts use weft run -p PROMPT")
	}
	switch {
	case c.MaxSteps < 0:
		return usageErr("--max-steps %d: want a positive number, or 0 for the default", c.MaxSteps)
	case c.Continue && c.Session != "":
		return usageErr("-c continues the latest session; -s names one: give one of them")
	}
	cfg, _, err := a.loadConfig()
	if err != nil {
		return err
	}
	if _, err := parseMounts(c.Mount); err != nil {
		return usageErr("%v", err)
	}
	const name = "weft"
	ap := newApproval(c.Approve, true, cfg.Policy)
	mode := anyHost
	if c.Local {
		mode = localOnly
	}
	// While the UI runs, what the host in this process logs and the
	// follower's reconnect notices become lines of the UI.
	r := &relay{out: a.stderr}
	stderr := a.stderr
	a.stderr = r
	defer func() { a.stderr = stderr }()
	conn, err := a.connect(ctx, name, mode, ap.hostPolicy(), func(down bool) {
		if down {
			r.send(noticeMsg{text: fmt.Sprintf("weft: the host at %s is gone; reconnecting…", a.hostAddr()), warn: true})
		} else {
			r.send(noticeMsg{text: "weft: reconnected"})
		}
	})
	if err != nil {
		return err
	}
	defer conn.Close()
	if !conn.remote {
		ctx = clientCtx(ctx, name)
	}
	sessionID, model := c.Session, c.Model
	if c.Continue {
		if sessionID, err = latestSession(ctx, conn.h); err != nil {
			return err
		}
	}
	if conn.remote {
		model = absModel(model)
		if err := hostCheckModel(ctx, conn.h, model, sessionID); err != nil {
			return a.hostModelError(conn, err)
		}
	} else if err := a.checkModel(ctx, conn.h, model, sessionID); err != nil {
		return a.hostModelError(conn, err)
	}
	cc := *c
	cc.Model = model
	return a.runTUI(ctx, conn, ap, r, tuiOptions{name: name, chat: &cc, sessionID: sessionID, where: a.where(conn)})
}

// where says which host conn reaches, for the UI's first line.
func (a *app) where(conn *conn) string {
	if !conn.remote {
		return "a host in this process"
	}
	w := "the host at " + a.hostAddr()
	if s := a.server.Load(); s != nil && s.Cwd != "" {
		w += fmt.Sprintf(" (%s %s in %s)", s.Name, s.Version, s.Cwd)
	}
	return w
}
