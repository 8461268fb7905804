package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"iter"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"weft.dev/weft/api"
	"weft.dev/weft/client"
	"weft.dev/weft/event"
	"weft.dev/weft/rpc"
)

// hostAddr is the address of the host client commands talk to: --host,
// WEFT_HOST, the one live host recorded in the state directory, or the
// default (see chooseHost).
func (a *app) hostAddr() string {
	return a.chooseHost().addr
}

// dialHost connects to the host over WebSocket, as the program name says
// (for the records of who answered a request), for a command that
// subscribes or makes many calls; a command of one call or two uses
// postHost. Without a token (WEFT_TOKEN or the token file `weft serve`
// writes) there is no host to talk to: an error wrapping errNoHost, as
// when nothing answers; a host that refuses the token says so.
func (a *app) dialHost(ctx context.Context, name string) (*client.Client, error) {
	tok, err := a.hostToken()
	if err != nil {
		return nil, err
	}
	tlsConf, err := a.tlsClientConfig()
	if err != nil {
		return nil, err
	}
	dctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	c, err := client.Dial(dctx, a.hostAddr(), client.Options{Token: tok, TLSConfig: tlsConf})
	if terr := tlsDialError(a.hostAddr(), err); terr != nil {
		return nil, terr
	}
	if errors.Is(err, api.ErrUnauthorized) {
		return nil, a.hostError(err)
	}
	if err != nil {
		return nil, a.noHostError(hintLocal, err)
	}
	info, err := hello(dctx, c, name)
	if err != nil {
		c.Close()
		return nil, err
	}
	a.server.Store(&info)
	return c, nil
}

// hostToken is the token for the chosen host: WEFT_TOKEN, the token file,
// or none for a host recorded as taking none. No token is an error
// wrapping errNoHost, or one that says which token a host needs.
func (a *app) hostToken() (string, error) {
	ch := a.chooseHost()
	if ch.err != nil {
		return "", ch.err
	}
	tok, err := a.token(false)
	if errors.Is(err, fs.ErrNotExist) || err == nil && tok == "" {
		switch {
		case ch.rec != nil && ch.rec.TokenFrom == "none":
			// An --insecure-no-auth host takes no token.
			return "", nil
		case ch.rec != nil && ch.rec.TokenFrom == "env":
			return "", fmt.Errorf("the host at %s (recorded in %s) takes the token it was started with in WEFT_TOKEN: set WEFT_TOKEN to it here too", ch.addr, ch.from)
		default:
			return "", a.noHostError(hintLocal, nil)
		}
	}
	return tok, err
}

// hostError says what a failed connection to the host (or request to it)
// means: a refused token, or no host (an error wrapping errNoHost).
// Other errors, such as the answer of a method, are returned as they are.
func (a *app) hostError(err error) error {
	var ue *url.Error
	if terr := tlsDialError(a.hostAddr(), err); terr != nil {
		return terr
	}
	switch {
	case errors.Is(err, api.ErrUnauthorized):
		return fmt.Errorf("the host at %s refused this token: WEFT_TOKEN or the token file is not the host's (%v)", a.hostAddr(), innermost(err))
	case errors.As(err, &ue):
		return a.noHostError(hintLocal, err)
	}
	return err
}

// postHost returns a client of the host whose calls are each one HTTP
// POST, named name in the records of who answered a request. It is for
// the commands of one call or two (weft ps, status, approve, …): a POST
// costs one request where a WebSocket session costs the handshake and
// initialize before the call. It connects on the call, not here: wrap a
// call's error with hostError. It cannot subscribe.
func (a *app) postHost(name string) (*client.Client, error) {
	tok, err := a.hostToken()
	if err != nil {
		return nil, err
	}
	tlsConf, err := a.tlsClientConfig()
	if err != nil {
		return nil, err
	}
	hc := &http.Client{Transport: &http.Transport{
		Proxy:               http.ProxyFromEnvironment,
		DialContext:         (&net.Dialer{Timeout: 2 * time.Second}).DialContext,
		TLSClientConfig:     tlsConf,
		TLSHandshakeTimeout: 2 * time.Second,
		ForceAttemptHTTP2:   true,
	}}
	return client.NewHTTP(a.hostAddr(), client.Options{Token: tok, Name: name, HTTPClient: hc}), nil
}

// hostCall calls method m of the host with p in one HTTP POST (postHost),
// as the command name; a failure to reach the host is said as hostError
// says it.
func hostCall[P api.Params, R any](ctx context.Context, a *app, name string, m api.Method[P, R], p P) (*R, error) {
	cl, err := a.postHost(name)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	r, err := m.Call(ctx, cl, p)
	if err != nil {
		return nil, a.hostError(err)
	}
	return r, nil
}

// hello introduces the client to the host as name and returns what the
// host says of itself.
func hello(ctx context.Context, c *client.Client, name string) (rpc.Info, error) {
	p := map[string]any{"clientInfo": map[string]string{"name": name, "version": version}, "protocolVersion": rpc.DefaultProtocolVersion}
	var res rpc.InitializeResult
	err := c.Call(ctx, "initialize", p, &res)
	return res.ServerInfo, err
}

// dialer makes connections for client.Follow, introduced as name.
func (a *app) dialer(tok, name string) client.Dialer {
	return func(ctx context.Context) (*client.Client, error) {
		tlsConf, err := a.tlsClientConfig()
		if err != nil {
			return nil, err
		}
		dctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		c, err := client.Dial(dctx, a.hostAddr(), client.Options{Token: tok, TLSConfig: tlsConf})
		if err != nil {
			if terr := tlsDialError(a.hostAddr(), err); terr != nil {
				return nil, terr
			}
			return nil, err
		}
		if _, err := hello(dctx, c, name); err != nil {
			c.Close()
			return nil, err
		}
		return c, nil
	}
}

type attachCmd struct {
	Target string `arg:"" help:"A session ID, or a run ID to follow one run until it ends."`
	After  int64  `help:"Start after this seq (default: replay from the start)." placeholder:"N"`
	JSON   bool   `name:"json" help:"Print every event as one JSON line."`
}

func (c *attachCmd) Run(ctx context.Context, a *app) error {
	const name = "weft attach"
	if !c.JSON && isTerminal(a.stdin) && isTerminal(a.stdout) {
		return c.runTUI(ctx, a, name)
	}
	pr := &printer{stdout: a.stdout, stderr: a.stderr, json: c.JSON, tty: isTerminal(a.stderr), showUser: true}
	w := &watcher{a: a, pr: pr, interrupt: detachOnly, requests: noteOnly}
	reconnect := func(down bool) {
		// Called from the follow's goroutine: only write a line.
		if down {
			fmt.Fprintf(a.stderr, "weft: the host at %s is gone; reconnecting…\n", a.hostAddr())
		} else {
			fmt.Fprintln(a.stderr, "weft: reconnected")
		}
	}
	conn, err := a.connect(ctx, name, remoteOnly, api.Policy{}, nil)
	if err != nil {
		return attachNoHost(a, err)
	}
	defer conn.Close()
	w.c = conn
	sessionID, runID, err := attachTarget(ctx, conn, c.Target)
	if err != nil {
		return err
	}
	w.sessionID, w.runID = sessionID, runID
	// Requests open now are asked even when they come in the replay;
	// others in the replay were answered long ago.
	s, err := conn.h.GetSession(ctx, api.SessionGetParams{SessionID: sessionID})
	if err != nil {
		return err
	}
	w.replayTo = s.LastSeq
	open, err := conn.h.ListRequests(ctx, api.ListRequestsParams{SessionID: sessionID})
	if err != nil {
		return err
	}
	w.open = map[string]bool{}
	for _, q := range open.Requests {
		w.open[q.ID] = true
	}
	e, err := w.watch(ctx, func(ctx context.Context) iter.Seq2[event.Event, error] {
		return client.Follow(ctx, a.followDialer(name, reconnect), sessionID, c.After, runID)
	})
	if errors.Is(err, errDetached) {
		pr.clearStatus()
		pr.endLine()
		fmt.Fprintln(a.stderr, "weft: detached; the run continues")
		return nil
	}
	if err != nil {
		return err
	}
	return runExit(e.Type)
}

// runTUI attaches the terminal UI: it replays the session and follows
// it, asks the requests that are open, and takes prompts (which steer
// the run that goes, or queue); attached to a run, it ends with it.
func (c *attachCmd) runTUI(ctx context.Context, a *app, name string) error {
	r := &relay{out: a.stderr}
	conn, err := a.connect(ctx, name, remoteOnly, api.Policy{}, func(down bool) {
		if down {
			r.send(noticeMsg{text: fmt.Sprintf("weft: the host at %s is gone; reconnecting…", a.hostAddr()), warn: true})
		} else {
			r.send(noticeMsg{text: "weft: reconnected"})
		}
	})
	if err != nil {
		return attachNoHost(a, err)
	}
	defer conn.Close()
	sessionID, runID, err := attachTarget(ctx, conn, c.Target)
	if err != nil {
		return err
	}
	cfg, _, err := a.loadConfig()
	if err != nil {
		return err
	}
	ap := newApproval("", true, cfg.Policy)
	return a.runTUI(ctx, conn, ap, r, tuiOptions{name: name, sessionID: sessionID, runID: runID, after: c.After, where: a.where(conn)})
}

// attachNoHost says that attach needs a host.
func attachNoHost(a *app, err error) error {
	if errors.Is(err, errNoHost) {
		return a.noHostError("start `weft serve` (weft attach follows runs through it; `weft events --follow` reads the store)", nil)
	}
	return err
}

// attachTarget is the session and run (if a run is named) of target.
func attachTarget(ctx context.Context, conn *conn, target string) (sessionID, runID string, err error) {
	if !strings.HasPrefix(target, "run_") {
		return target, "", nil
	}
	r, err := conn.cl.GetRun(ctx, api.RunIDParams{RunID: target})
	if err != nil {
		return "", "", err
	}
	return r.SessionID, r.ID, nil
}

// followDialer makes connections for client.Follow, telling reconnect
// when the host is lost and found again.
func (a *app) followDialer(name string, reconnect func(down bool)) client.Dialer {
	tok, _ := a.token(false)
	return noticeDialer(a.dialer(tok, name), reconnect)
}

type steerCmd struct {
	RunID string `arg:"" name:"run" help:"The active run."`
	Text  string `arg:"" help:"The input to inject."`
}

func (c *steerCmd) Run(ctx context.Context, a *app) error {
	r, err := hostCall(ctx, a, "weft", api.RunSteer, api.SteerParams{RunID: c.RunID, Input: api.Input(event.TextParts(c.Text))})
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
	r, err := hostCall(ctx, a, "weft", api.RunCancel, api.CancelParams{RunID: c.RunID, Reason: c.Reason})
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
	r, err := hostCall(ctx, a, "weft", api.RunGet, api.RunIDParams{RunID: c.RunID})
	if err != nil {
		return err
	}
	if c.JSON {
		return printJSON(a, r.Run)
	}
	fmt.Fprintf(a.stdout, "%s %s session=%s steps=%d tokens=%d/%d", r.ID, r.Status, r.SessionID, r.Steps, r.Usage.InputTokens, r.Usage.OutputTokens)
	if r.Usage.CostUSD > 0 {
		fmt.Fprintf(a.stdout, " cost=%s", usd(r.Usage.CostUSD))
	}
	if r.TraceID != "" {
		fmt.Fprintf(a.stdout, " trace=%s", r.TraceID)
	}
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
