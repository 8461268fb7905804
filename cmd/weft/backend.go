package main

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"weft.dev/weft/api"
	"weft.dev/weft/client"
	"weft.dev/weft/event"
	"weft.dev/weft/internal/config"
	"weft.dev/weft/internal/lease"
)

// followFunc yields a session's events after a cursor, live, until ctx
// ends.
type followFunc func(ctx context.Context, sessionID string, after int64) iter.Seq2[event.Event, error]

// conn is the host a command works through: a `weft serve` over the
// wire (a *client.Client), or a host in this process (a *host.Host);
// both are an api.Host, so a command is written once for either.
type conn struct {
	h      api.Host
	follow followFunc
	// remote is set for a `weft serve`.
	remote bool
	local  *localHost // the host in this process; nil when remote
	cl     *client.Client
}

// Close closes the connection, or the host in this process.
func (c *conn) Close() {
	if c.cl != nil {
		c.cl.Close()
	}
	if c.local != nil {
		c.local.Close()
	}
}

// connectMode says whether a command may, must or must not use a host in
// its own process.
type connectMode int

const (
	// anyHost: a `weft serve` when one answers, else a host in this process.
	anyHost connectMode = iota
	// localOnly: a host in this process (--local).
	localOnly
	// remoteOnly: a `weft serve` (--detach, --wait-for-answers).
	remoteOnly
)

// connect finds the host for a command named name (as the records of who
// answered show it). hostPolicy is the policy of a host made in this
// process. reconnect, if set, is told when a follow loses the host
// (true) and finds it again (false).
func (a *app) connect(ctx context.Context, name string, mode connectMode, hostPolicy api.Policy, reconnect func(down bool)) (*conn, error) {
	if mode != localOnly {
		cl, err := a.dialHost(ctx, name)
		if err == nil {
			tok, _ := a.token(false)
			dial := a.dialer(tok, name)
			if reconnect != nil {
				dial = noticeDialer(dial, reconnect)
			}
			return &conn{h: cl, cl: cl, remote: true, follow: func(ctx context.Context, sessionID string, after int64) iter.Seq2[event.Event, error] {
				return client.Follow(ctx, dial, sessionID, after, "")
			}}, nil
		}
		if mode == remoteOnly || a.chooseHost().err != nil {
			return nil, err
		}
	}
	log := slog.New(slog.NewTextHandler(a.stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	lh, err := a.newHost(ctx, log, hostOptions{kind: oneShot, holder: name, policy: &hostPolicy})
	if errors.Is(err, lease.ErrHostHeld) {
		if mode == localOnly {
			return nil, fmt.Errorf("%w; run without --local to run through that host", err)
		}
		return nil, fmt.Errorf("%w, but no host answers at %s: pass its address with --host ADDR or WEFT_HOST", err, a.hostAddr())
	}
	if err != nil {
		return nil, err
	}
	h := lh.host
	return &conn{h: h, local: lh, follow: func(ctx context.Context, sessionID string, after int64) iter.Seq2[event.Event, error] {
		return followLocal(ctx, h, sessionID, after)
	}}, nil
}

// noticeDialer wraps dial to tell notice when the host is lost (a dial
// fails) and found again.
func noticeDialer(dial client.Dialer, notice func(down bool)) client.Dialer {
	var mu sync.Mutex
	down := false
	return func(ctx context.Context) (*client.Client, error) {
		c, err := dial(ctx)
		mu.Lock()
		defer mu.Unlock()
		if (err != nil) != down && ctx.Err() == nil {
			down = err != nil
			notice(down)
		}
		return c, err
	}
}

// connectAny is connect for a command of one call or a few that any host
// serves (a `weft serve`, or one in this process) with no policy of its
// own; the context it returns names the command as the client of a host
// in this process.
func (a *app) connectAny(ctx context.Context, name string) (*conn, context.Context, error) {
	c, err := a.connect(ctx, name, anyHost, api.Policy{}, nil)
	if err != nil {
		return nil, ctx, err
	}
	if !c.remote {
		ctx = clientCtx(ctx, name)
	}
	return c, ctx, nil
}

// interruptible returns ctx cancelled at the first interrupt (Ctrl-C,
// SIGTERM) as well; the goroutine that waits for it ends with cancel.
func (a *app) interruptible(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	go func() {
		select {
		case <-a.interrupts:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

// clientCtx is ctx naming the command as the client, for the records of
// who answered a request through a host in this process (over the wire,
// initialize names it).
func clientCtx(ctx context.Context, name string) context.Context {
	return api.WithClient(ctx, api.Client{Name: name, Transport: "in-process"})
}

// discardSession deletes session id, which a command made for a run the
// host refused, so that no empty session is left behind; a failure only
// leaves it.
func discardSession(ctx context.Context, h api.Host, id string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	h.DeleteSession(ctx, api.SessionIDParams{SessionID: id})
}

// absModel makes the path of a scripted model absolute, so that a host
// in another directory finds the script this command means.
func absModel(model string) string {
	p, ok := strings.CutPrefix(model, "scripted:")
	if !ok || p == "" || filepath.IsAbs(p) {
		return model
	}
	abs, err := filepath.Abs(p)
	if err != nil {
		return model
	}
	return "scripted:" + abs
}

// checkModel says what is wrong with the model a run on a host in this
// process would use, before anything is written.
func (a *app) checkModel(ctx context.Context, h api.Host, model, sessionID string) error {
	name := model
	if sessionID != "" {
		s, err := h.GetSession(ctx, api.SessionGetParams{SessionID: sessionID})
		if err != nil {
			return err
		}
		if name == "" {
			name = s.Model
		}
	}
	cfgFile, cfgPath, err := a.loadConfig()
	if err != nil {
		return err
	}
	if name == "" {
		name = a.defaultModel(cfgFile)
	}
	_, err = config.Resolve(name, cfgFile, cfgPath, a.getenv)
	return err
}

// hostCheckModel asks the host behind h which model a run would use and
// whether it can use it (model/check), so that a missing model or API
// key is said when the command starts, not at its first prompt. A host
// too old to know model/check is not asked.
func hostCheckModel(ctx context.Context, h api.Host, model, sessionID string) error {
	_, err := h.CheckModel(ctx, api.ModelCheckParams{Model: model, SessionID: sessionID})
	if errors.Is(err, &api.Error{Kind: api.KindMethodNotFound}) {
		return nil
	}
	return err
}

// approval is how a command's runs are approved: its mode (--approve, or
// the default for a terminal or a script) and the config file's policy
// (docs/config.md).
type approval struct {
	// mode is --approve; empty when not given.
	mode string
	// fallback is the default mode: ask-writes for people, never-ask for
	// scripts.
	fallback string
	cfg      api.Policy
}

// newApproval returns the approval of a command with --approve mode
// ("" when not given); interactive says whether a person answers.
func newApproval(mode string, interactive bool, cfg api.Policy) *approval {
	fb := api.PresetNeverAsk
	if interactive {
		fb = api.PresetAskWrites
	}
	return &approval{mode: mode, fallback: fb, cfg: cfg}
}

// preset is the preset that decides what no rule does: --approve, else
// the config file's, else the fallback.
func (ap *approval) preset() string {
	switch {
	case ap.mode != "":
		return ap.mode
	case ap.cfg.Preset != "":
		return ap.cfg.Preset
	}
	return ap.fallback
}

// hostPolicy is the layer of a host in this process: the config file's
// rules with the preset.
func (ap *approval) hostPolicy() api.Policy {
	return api.Policy{Rules: ap.cfg.Rules, Preset: ap.preset()}
}

// defaultPreset is the run/start defaultPreset of the command's runs: the
// preset, which the host puts in its own layer when no layer names one.
// In this process the host's layer names it already; through a `weft
// serve` it takes the place of a preset the serve's config file leaves
// out, below the session's rules and the rules "always for this session"
// answers add, and the run keeps it across a restart of the host.
func (ap *approval) defaultPreset() string { return ap.preset() }
