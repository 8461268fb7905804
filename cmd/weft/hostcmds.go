package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"os"
	"strings"
	"time"

	"weft.dev/weft/api"
	"weft.dev/weft/client"
	"weft.dev/weft/event"
)

// errNoHost reports that no host answered.
var errNoHost = errors.New("no weft host reachable")

// hostAddr is --host, WEFT_HOST or the default.
func (a *app) hostAddr() string {
	if a.host != "" {
		return a.host
	}
	return defaultListen
}

// dialHost connects to the host. Without a token (WEFT_TOKEN or the token
// file `weft serve` writes) there is no host to talk to: errNoHost.
func (a *app) dialHost(ctx context.Context) (*client.Client, error) {
	tok, err := a.token(false)
	if err != nil || tok == "" {
		return nil, fmt.Errorf("%w: no token (start `weft serve`, or set WEFT_TOKEN)", errNoHost)
	}
	dctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	c, err := client.Dial(dctx, a.hostAddr(), client.Options{Token: tok})
	if err != nil {
		return nil, fmt.Errorf("%w at %s: %v", errNoHost, a.hostAddr(), err)
	}
	return c, nil
}

func (a *app) dialer(tok string) client.Dialer {
	return func(ctx context.Context) (*client.Client, error) {
		dctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		return client.Dial(dctx, a.hostAddr(), client.Options{Token: tok})
	}
}

type attachCmd struct {
	Target string `arg:"" help:"A session ID, or a run ID to follow one run until it ends."`
	After  int64  `help:"Start after this seq (default: replay from the start)." placeholder:"N"`
	JSON   bool   `name:"json" help:"Print every event as one JSON line."`
}

func (c *attachCmd) Run(ctx context.Context, a *app) error {
	cl, err := a.dialHost(ctx)
	if err != nil {
		return err
	}
	sessionID, runID := c.Target, ""
	if strings.HasPrefix(c.Target, "run_") {
		r, err := cl.GetRun(ctx, c.Target)
		if err != nil {
			cl.Close()
			return err
		}
		sessionID, runID = r.SessionID, r.ID
	}
	cl.Close()
	tok, _ := a.token(false)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-a.interrupts:
			cancel()
		case <-ctx.Done():
		}
	}()
	pr := &printer{stdout: a.stdout, stderr: a.stderr, json: c.JSON, tty: isTerminal(a.stderr)}
	for e, err := range client.Follow(ctx, a.dialer(tok), sessionID, c.After, runID) {
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		pr.print(e)
		if runID != "" && e.RunID == runID && event.IsTerminalRun(e.Type) {
			return nil
		}
	}
	return nil
}

type steerCmd struct {
	RunID string `arg:"" name:"run" help:"The active run."`
	Text  string `arg:"" help:"The input to inject."`
}

func (c *steerCmd) Run(ctx context.Context, a *app) error {
	cl, err := a.dialHost(ctx)
	if err != nil {
		return err
	}
	defer cl.Close()
	r, err := cl.SteerRun(ctx, api.SteerParams{RunID: c.RunID, Input: api.Input(event.TextParts(c.Text))})
	if err != nil {
		return err
	}
	return printJSON(a, r)
}

type cancelCmd struct {
	RunID  string `arg:"" name:"run" help:"The run to cancel."`
	Reason string `help:"Why, recorded in run.cancelled."`
}

func (c *cancelCmd) Run(ctx context.Context, a *app) error {
	cl, err := a.dialHost(ctx)
	if err != nil {
		return err
	}
	defer cl.Close()
	r, err := cl.CancelRun(ctx, api.CancelParams{RunID: c.RunID, Reason: c.Reason})
	if err != nil {
		return err
	}
	fmt.Fprintf(a.stdout, "%s %s\n", r.ID, r.Status)
	return nil
}

type statusCmd struct {
	RunID string `arg:"" name:"run" help:"The run."`
	JSON  bool   `name:"json" help:"Print the run record as JSON."`
}

func (c *statusCmd) Run(ctx context.Context, a *app) error {
	cl, err := a.dialHost(ctx)
	if err != nil {
		return err
	}
	defer cl.Close()
	r, err := cl.GetRun(ctx, c.RunID)
	if err != nil {
		return err
	}
	if c.JSON {
		return printJSON(a, r.Run)
	}
	fmt.Fprintf(a.stdout, "%s %s session=%s steps=%d tokens=%d/%d", r.ID, r.Status, r.SessionID, r.Steps, r.Usage.InputTokens, r.Usage.OutputTokens)
	if r.Error != nil {
		fmt.Fprintf(a.stdout, " error=%s: %s", r.Error.Kind, r.Error.Message)
	}
	fmt.Fprintln(a.stdout)
	return nil
}

func printJSON(a *app, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	fmt.Fprintf(a.stdout, "%s\n", b)
	return nil
}

// runViaHost runs c through the host at the other end of cl.
func (c *runCmd) runViaHost(ctx context.Context, a *app, cl *client.Client, prompt string) error {
	defer cl.Close()
	tok, _ := a.token(false)
	follow := func(ctx context.Context, sessionID string, after int64) iter.Seq2[event.Event, error] {
		return client.Follow(ctx, a.dialer(tok), sessionID, after, "")
	}
	return c.runOn(ctx, a, cl, follow, prompt)
}

// runner is what `weft run` needs of a host: *client.Client over the
// wire, *host.Host in process.
type runner interface {
	CreateSession(ctx context.Context, p api.CreateSessionParams) (*api.SessionResult, error)
	GetSession(ctx context.Context, id string) (*api.SessionResult, error)
	StartRun(ctx context.Context, p api.StartRunParams) (*api.RunResult, error)
	CancelRun(ctx context.Context, p api.CancelParams) (*api.RunResult, error)
}

// runOn runs c on h: creates or continues the session, starts the run,
// and (unless detached) prints its events, as follow delivers them, until
// it ends, cancelling it on the first interrupt.
func (c *runCmd) runOn(ctx context.Context, a *app, h runner, follow func(ctx context.Context, sessionID string, after int64) iter.Seq2[event.Event, error], prompt string) error {
	sessionID := c.Session
	var cursor int64
	if sessionID == "" {
		mounts, err := parseMounts(c.Mount)
		if err != nil {
			return usageErr("%v", err)
		}
		s, err := h.CreateSession(ctx, api.CreateSessionParams{Title: clip(prompt, 60), Model: c.Model, Mounts: mounts, Network: c.Network})
		if err != nil {
			return err
		}
		sessionID = s.ID
	} else {
		s, err := h.GetSession(ctx, sessionID)
		if err != nil {
			return err
		}
		cursor = s.LastSeq
	}
	r, err := h.StartRun(ctx, api.StartRunParams{SessionID: sessionID, Input: api.Input(event.TextParts(prompt)), Model: c.Model, MaxSteps: c.MaxSteps, Busy: c.Busy})
	if err != nil {
		return err
	}
	if c.Detach {
		fmt.Fprintf(a.stdout, "%s %s\n", sessionID, r.ID)
		return nil
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-a.interrupts:
		case <-ctx.Done():
			return
		}
		h.CancelRun(context.WithoutCancel(ctx), api.CancelParams{RunID: r.ID, Reason: "interrupted by the user"})
		select {
		case <-a.interrupts:
			fmt.Fprintln(a.stderr, "\nweft: second interrupt: exiting now")
			os.Exit(exitCancelled)
		case <-ctx.Done():
		}
	}()
	pr := &printer{stdout: a.stdout, stderr: a.stderr, json: c.JSON, tty: isTerminal(a.stderr)}
	for e, err := range follow(ctx, sessionID, cursor) {
		if err != nil {
			return err
		}
		pr.print(e)
		if e.RunID == r.ID && event.IsTerminalRun(e.Type) {
			var d event.RunEndedData
			if !c.JSON && e.Decode(&d) == nil {
				fmt.Fprintf(a.stderr, "weft: session %s · run %s · %d step(s) · %d in / %d out tokens\n",
					sessionID, r.ID, d.Steps, d.Usage.InputTokens, d.Usage.OutputTokens)
			}
			switch e.Type {
			case event.RunCompleted:
				return nil
			case event.RunCancelled:
				return &exitError{code: exitCancelled}
			default:
				return &exitError{code: exitFailed}
			}
		}
	}
	return nil
}
