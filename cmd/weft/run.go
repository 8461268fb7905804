package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"weft.dev/weft/api"
	"weft.dev/weft/event"
	"weft.dev/weft/host"
	"weft.dev/weft/internal/config"
	"weft.dev/weft/internal/lease"
)

type runCmd struct {
	Prompt   string   `short:"p" help:"The prompt; read from stdin when absent." placeholder:"TEXT"`
	Session  string   `short:"s" help:"Continue this session with its whole transcript." placeholder:"ID"`
	Model    string   `short:"m" help:"Model as PROVIDER:MODEL or a name from the config file." env:"WEFT_MODEL" placeholder:"PROVIDER:MODEL"`
	Mount    []string `help:"Mount a directory: PATH, PATH:ro, ID=PATH[:ro]. Repeatable. The working directory is mounted read-write as 'work'." placeholder:"PATH[:ro]"`
	MaxSteps int      `help:"Most model calls in the run (default 50 or the config file's maxSteps)." placeholder:"N"`
	JSON     bool     `name:"json" help:"Print every event as one JSON line, exactly as stored."`
	Detach   bool     `help:"Start the run on the host and print the session and run IDs."`
	Local    bool     `help:"Run in this process even when a host is reachable."`
	Busy     string   `help:"Through a host, what to do when the session has an active run: reject, queue, interrupt, steer." enum:"reject,queue,interrupt,steer" default:"reject"`
	Network  string   `help:"A new session's shell network policy: allow or deny (default: the config's, deny)." enum:",allow,deny" default:""`
}

func (c *runCmd) Run(ctx context.Context, a *app) error {
	prompt := c.Prompt
	if prompt == "" {
		if f, ok := a.stdin.(*os.File); !ok || !isTerminal(f) {
			b, err := io.ReadAll(io.LimitReader(a.stdin, 16<<20))
			if err != nil {
				return fmt.Errorf("read prompt from stdin: %w", err)
			}
			prompt = string(b)
		}
	}
	if strings.TrimSpace(prompt) == "" {
		return usageErr("empty prompt: pass -p PROMPT or write the prompt on stdin")
	}
	if !c.Local {
		cl, err := a.dialHost(ctx)
		if err == nil {
			return c.runViaHost(ctx, a, cl, prompt)
		}
		if c.Detach {
			return err
		}
	}
	return c.runLocal(ctx, a, prompt)
}

// runLocal runs c through a host in this process: the same admission,
// busy policy and background processes as through `weft serve`, over the
// store this process opens.
func (c *runCmd) runLocal(ctx context.Context, a *app, prompt string) error {
	log := slog.New(slog.NewTextHandler(a.stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	lh, err := a.newHost(ctx, log, oneShot, "weft run")
	if errors.Is(err, lease.ErrHostHeld) {
		return fmt.Errorf("%w; run without --local to run through that host", err)
	}
	if err != nil {
		return err
	}
	defer lh.Close()
	h := lh.host
	// Say what is wrong with the model before anything is written.
	name := c.Model
	if c.Session != "" {
		s, err := h.GetSession(ctx, c.Session)
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
	if _, err := config.Resolve(name, cfgFile, cfgPath, a.getenv); err != nil {
		return err
	}
	follow := func(ctx context.Context, sessionID string, after int64) iter.Seq2[event.Event, error] {
		return followLocal(ctx, h, sessionID, after)
	}
	return c.runOn(ctx, a, h, follow, prompt)
}

// followLocal follows a session of an in-process host from after: the
// replay, then live, subscribing again from the last event it yielded
// when the subscription ends lagged.
func followLocal(ctx context.Context, h *host.Host, sessionID string, after int64) iter.Seq2[event.Event, error] {
	return func(yield func(event.Event, error) bool) {
		for {
			seq, err := h.Subscribe(ctx, sessionID, after, "")
			if err != nil {
				yield(event.Event{}, err)
				return
			}
			for e, err := range seq {
				if errors.Is(err, api.ErrLagged) {
					break
				}
				if !yield(e, err) || err != nil {
					return
				}
				after = e.Seq
			}
		}
	}
}

var slugRe = regexp.MustCompile(`[^a-z0-9_-]+`)

// parseMounts builds the mount table of a new session: the working
// directory read-write as "work" (the default, and the shells' default),
// then each --mount.
func parseMounts(specs []string) ([]event.Mount, error) {
	wd, err := os.Getwd()
	if err != nil {
		return nil, err
	}
	mounts := []event.Mount{{ID: "work", Kind: event.KindLocal, Path: wd, Mode: event.ModeReadWrite, Default: true, DefaultForShell: true}}
	seen := map[string]bool{"work": true}
	for _, spec := range specs {
		id, path, hasID := strings.Cut(spec, "=")
		if !hasID {
			path, id = spec, ""
		}
		mode := event.ModeReadWrite
		if p, ok := strings.CutSuffix(path, ":ro"); ok {
			path, mode = p, event.ModeReadOnly
		} else if p, ok := strings.CutSuffix(path, ":rw"); ok {
			path = p
		}
		abs, err := filepath.Abs(path)
		if err != nil {
			return nil, fmt.Errorf("--mount %s: %w", spec, err)
		}
		if fi, err := os.Stat(abs); err != nil || !fi.IsDir() {
			return nil, fmt.Errorf("--mount %s: %s is not a directory", spec, abs)
		}
		if id == "" {
			id = strings.Trim(slugRe.ReplaceAllString(strings.ToLower(filepath.Base(abs)), "-"), "-")
			if id == "" {
				id = "mount"
			}
			for base, n := id, 2; seen[id]; n++ {
				id = fmt.Sprintf("%s-%d", base, n)
			}
		}
		if seen[id] {
			return nil, fmt.Errorf("--mount %s: mount id %q is taken", spec, id)
		}
		seen[id] = true
		mounts = append(mounts, event.Mount{ID: id, Kind: event.KindLocal, Path: abs, Mode: mode})
	}
	return mounts, nil
}
