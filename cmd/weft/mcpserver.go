package main

import (
	"context"
	"errors"
	"io"
	"iter"
	"log/slog"
	"os"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"weft.dev/weft/api"
	"weft.dev/weft/client"
	"weft.dev/weft/event"
	"weft.dev/weft/mcpserver"
)

type mcpServerCmd struct {
	Local   bool   `help:"Run a host in this process even when a weft serve answers (its runs then end with this process)."`
	Approve string `help:"Approval mode of the runs it starts that name none: read-only, ask-writes, ask-all or never-ask (default: the config file's, else never-ask). With ask-writes or ask-all, await_run answers when a run asks, and the calling agent answers with answer_approval." enum:",read-only,ask-writes,ask-all,never-ask" default:"" placeholder:"MODE"`
}

// Run serves weft's MCP tools on stdin and stdout, through a `weft
// serve` when one answers (the runs then outlive this process and the
// agent that started it), else through a host in this process.
func (c *mcpServerCmd) Run(ctx context.Context, a *app) error {
	const name = "weft mcp-server"
	log := slog.New(slog.NewTextHandler(a.stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	cfg, _, err := a.loadConfig()
	if err != nil {
		return err
	}
	ap := newApproval(c.Approve, false, cfg.Policy)
	mode := anyHost
	if c.Local {
		mode = localOnly
	}
	conn, err := a.connect(ctx, name, mode, ap.hostPolicy(), nil)
	if err != nil {
		return err
	}
	defer conn.Close()
	var h mcpserver.Host = conn.h
	if conn.remote {
		// A host that restarts is dialed again at the next call.
		tok, _ := a.token(false)
		rh := &redialHost{dial: a.dialer(tok, name), c: conn.cl, addr: a.hostAddr()}
		conn.cl = nil // rh closes it
		defer rh.Close()
		h = rh
	}
	dir, _ := os.Getwd()
	srv := mcpserver.New(h, &mcpserver.Options{
		Version: version, Dir: dir, DefaultPreset: ap.defaultPreset(), Transport: "mcp-stdio", Logger: log,
	})
	ctx, cancel := a.interruptible(ctx)
	defer cancel()
	in, ok := a.stdin.(io.ReadCloser)
	if !ok {
		in = io.NopCloser(a.stdin)
	}
	err = srv.Run(ctx, &mcp.IOTransport{Reader: in, Writer: nopWriteCloser{a.stdout}})
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, io.EOF) || errors.Is(err, mcp.ErrConnectionClosed) {
		return nil
	}
	return err
}

// nopWriteCloser is a writer the transport may close without closing it.
type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

// redialHost is the host of `weft mcp-server` through a `weft serve`: a
// connection dialed again when the host went away (a restart), so that
// the calling agent's next call finds the host back with its runs. It is
// safe for concurrent use.
type redialHost struct {
	dial client.Dialer
	addr string

	mu sync.Mutex
	c  *client.Client // nil after a failed dial
}

// get returns a live connection, dialing one if the last is gone.
func (r *redialHost) get(ctx context.Context) (*client.Client, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.c != nil {
		select {
		case <-r.c.Done():
			r.c.Close()
			r.c = nil
		default:
			return r.c, nil
		}
	}
	c, err := r.dial(ctx)
	if err != nil {
		return nil, api.Wrap(api.KindOverloaded, err, "the weft host at %s does not answer (is `weft serve` running?): try again", r.addr)
	}
	r.c = c
	return c, nil
}

// Close closes the connection.
func (r *redialHost) Close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.c != nil {
		r.c.Close()
		r.c = nil
	}
}

// do calls f on a live connection; an error that is not the host's (the
// connection broke) is a retryable overloaded.
func do[R any](ctx context.Context, r *redialHost, f func(*client.Client) (R, error)) (R, error) {
	c, err := r.get(ctx)
	if err != nil {
		var zero R
		return zero, err
	}
	v, err := f(c)
	var ae *api.Error
	if err != nil && !errors.As(err, &ae) && ctx.Err() == nil {
		err = api.Wrap(api.KindOverloaded, err, "lost the connection to the weft host at %s: try again", r.addr)
	}
	return v, err
}

// CreateSession and StartRun send a scripted model's path absolute, as
// the other commands do, so that the host finds the script the agent
// means.
func (r *redialHost) CreateSession(ctx context.Context, p api.CreateSessionParams) (*api.SessionResult, error) {
	p.Model = absModel(p.Model)
	return do(ctx, r, func(c *client.Client) (*api.SessionResult, error) { return c.CreateSession(ctx, p) })
}

func (r *redialHost) DeleteSession(ctx context.Context, p api.SessionIDParams) (*api.DeleteResult, error) {
	return do(ctx, r, func(c *client.Client) (*api.DeleteResult, error) { return c.DeleteSession(ctx, p) })
}

func (r *redialHost) ListSessions(ctx context.Context, p api.ListSessionsParams) (*api.ListSessionsResult, error) {
	return do(ctx, r, func(c *client.Client) (*api.ListSessionsResult, error) { return c.ListSessions(ctx, p) })
}

func (r *redialHost) StartRun(ctx context.Context, p api.StartRunParams) (*api.RunResult, error) {
	p.Model = absModel(p.Model)
	return do(ctx, r, func(c *client.Client) (*api.RunResult, error) { return c.StartRun(ctx, p) })
}

func (r *redialHost) GetRun(ctx context.Context, p api.RunIDParams) (*api.RunResult, error) {
	return do(ctx, r, func(c *client.Client) (*api.RunResult, error) { return c.GetRun(ctx, p) })
}

func (r *redialHost) SteerRun(ctx context.Context, p api.SteerParams) (*api.SteerReceipt, error) {
	return do(ctx, r, func(c *client.Client) (*api.SteerReceipt, error) { return c.SteerRun(ctx, p) })
}

func (r *redialHost) CancelRun(ctx context.Context, p api.CancelParams) (*api.RunResult, error) {
	return do(ctx, r, func(c *client.Client) (*api.RunResult, error) { return c.CancelRun(ctx, p) })
}

func (r *redialHost) ReadEvents(ctx context.Context, p api.ReadEventsParams) (*api.ReadEventsResult, error) {
	return do(ctx, r, func(c *client.Client) (*api.ReadEventsResult, error) { return c.ReadEvents(ctx, p) })
}

// Subscribe's stream ends, if the connection breaks, with a retryable
// overloaded.
func (r *redialHost) Subscribe(ctx context.Context, p api.SubscribeParams) (iter.Seq2[event.Event, error], error) {
	events, err := do(ctx, r, func(c *client.Client) (iter.Seq2[event.Event, error], error) { return c.Subscribe(ctx, p) })
	if err != nil {
		return nil, err
	}
	return func(yield func(event.Event, error) bool) {
		for e, err := range events {
			var ae *api.Error
			if err != nil && !errors.As(err, &ae) && !errors.Is(err, api.ErrLagged) && ctx.Err() == nil {
				err = api.Wrap(api.KindOverloaded, err, "lost the connection to the weft host at %s: try again", r.addr)
			}
			if !yield(e, err) {
				return
			}
		}
	}, nil
}

func (r *redialHost) ListRequests(ctx context.Context, p api.ListRequestsParams) (*api.ListRequestsResult, error) {
	return do(ctx, r, func(c *client.Client) (*api.ListRequestsResult, error) { return c.ListRequests(ctx, p) })
}

func (r *redialHost) DecideApproval(ctx context.Context, p api.DecideParams) (*api.RequestResult, error) {
	return do(ctx, r, func(c *client.Client) (*api.RequestResult, error) { return c.DecideApproval(ctx, p) })
}

func (r *redialHost) AnswerInput(ctx context.Context, p api.AnswerParams) (*api.RequestResult, error) {
	return do(ctx, r, func(c *client.Client) (*api.RequestResult, error) { return c.AnswerInput(ctx, p) })
}
