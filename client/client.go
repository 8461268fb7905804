// Package client is the Go client of a weft host: typed calls for every
// host method over WebSocket, HTTP or stdio, subscriptions as iterators,
// and a follower that reconnects by itself and resumes from its cursor.
package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"strings"
	"sync"
	"time"

	"weft.dev/weft/event"
	"weft.dev/weft/host"
	jrpc "weft.dev/weft/internal/jsonrpc/client"
	"weft.dev/weft/process"
	"weft.dev/weft/rpc"
)

// Options configure a connection. Zero fields take the defaults.
type Options struct {
	// Token is the host's bearer token.
	Token string
	// Logger receives diagnostics; nil means silent.
	Logger *slog.Logger
	// SubscriptionBuffer is how many events one subscription may hold
	// unread before it ends with ErrLagged; zero means 4096.
	SubscriptionBuffer int
}

// ErrLagged ends a subscription whose consumer fell behind; resume after
// the last cursor.
var ErrLagged = errors.New("client: subscription fell behind; resume from the cursor")

// Client is a connection to a host. Its methods are safe for concurrent
// use. Close it to release the connection and its goroutine.
type Client struct {
	c    *jrpc.Client
	opts Options
	wg   sync.WaitGroup

	mu    sync.Mutex
	subs  map[string]*sub
	early map[string][]jrpc.Notification
}

type sub struct {
	ch     chan jrpc.Notification
	lagged bool
}

// Dial connects to the host at addr over WebSocket. addr is host:port,
// or a ws://, wss://, http:// or https:// URL (the /rpc/ws path is added
// when missing).
func Dial(ctx context.Context, addr string, opts Options) (*Client, error) {
	u := addr
	switch {
	case strings.HasPrefix(u, "http://"):
		u = "ws://" + strings.TrimPrefix(u, "http://")
	case strings.HasPrefix(u, "https://"):
		u = "wss://" + strings.TrimPrefix(u, "https://")
	case !strings.HasPrefix(u, "ws://") && !strings.HasPrefix(u, "wss://"):
		u = "ws://" + u
	}
	if !strings.HasSuffix(u, "/rpc/ws") {
		u = strings.TrimSuffix(u, "/") + "/rpc/ws"
	}
	c, err := jrpc.DialWebSocket(ctx, u, jrpc.Config{Token: opts.Token, Logger: opts.Logger, NotifyBuffer: 8192})
	if err != nil {
		return nil, fmt.Errorf("connect to weft host %s: %w", addr, err)
	}
	return newClient(c, opts), nil
}

// NewStdio speaks to a host over a pair of pipes, e.g. the stdin and
// stdout of a `weft rpc` subprocess. Close closes both.
func NewStdio(r io.ReadCloser, w io.WriteCloser, opts Options) *Client {
	return newClient(jrpc.NewStdio(r, w, jrpc.Config{Logger: opts.Logger, NotifyBuffer: 8192}), opts)
}

func newClient(c *jrpc.Client, opts Options) *Client {
	if opts.SubscriptionBuffer <= 0 {
		opts.SubscriptionBuffer = 4096
	}
	cl := &Client{c: c, opts: opts, subs: map[string]*sub{}, early: map[string][]jrpc.Notification{}}
	cl.wg.Go(cl.dispatch)
	return cl
}

// dispatch routes notifications to their subscriptions.
func (c *Client) dispatch() {
	for n, err := range c.c.Notifications(context.Background()) {
		if err != nil {
			break
		}
		var head struct {
			SubscriptionID string `json:"subscriptionId"`
		}
		if json.Unmarshal(n.Params, &head) != nil || head.SubscriptionID == "" {
			continue
		}
		c.mu.Lock()
		if s, ok := c.subs[head.SubscriptionID]; ok {
			c.deliver(head.SubscriptionID, s, n)
		} else if len(c.early[head.SubscriptionID]) < c.opts.SubscriptionBuffer {
			// The response naming the subscription may not be read yet.
			c.early[head.SubscriptionID] = append(c.early[head.SubscriptionID], n)
		}
		c.mu.Unlock()
	}
	c.mu.Lock()
	for id, s := range c.subs {
		close(s.ch)
		delete(c.subs, id)
	}
	c.mu.Unlock()
}

// deliver hands n to s without blocking; called with c.mu held.
func (c *Client) deliver(id string, s *sub, n jrpc.Notification) {
	select {
	case s.ch <- n:
	default:
		s.lagged = true
		close(s.ch)
		delete(c.subs, id)
	}
}

// Close ends the connection and waits for the client's goroutine.
func (c *Client) Close() error {
	err := c.c.Close()
	c.wg.Wait()
	return err
}

// Done is closed when the connection ends.
func (c *Client) Done() <-chan struct{} { return c.c.Done() }

// Call calls any method; result may be nil. Error responses are *rpc.Error.
func (c *Client) Call(ctx context.Context, method string, params, result any) error {
	return c.c.Call(ctx, method, params, result)
}

func call[R any](ctx context.Context, c *Client, method string, params any) (*R, error) {
	var r R
	if err := c.c.Call(ctx, method, params, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// CreateSession calls session/create.
func (c *Client) CreateSession(ctx context.Context, p host.CreateSessionParams) (*host.SessionResult, error) {
	return call[host.SessionResult](ctx, c, "session/create", p)
}

// GetSession calls session/get.
func (c *Client) GetSession(ctx context.Context, id string) (*host.SessionResult, error) {
	return call[host.SessionResult](ctx, c, "session/get", rpc.SessionGetParams{SessionID: id})
}

// ListSessions calls session/list.
func (c *Client) ListSessions(ctx context.Context, p host.ListSessionsParams) (*host.ListSessionsResult, error) {
	return call[host.ListSessionsResult](ctx, c, "session/list", p)
}

// DeleteSession calls session/delete.
func (c *Client) DeleteSession(ctx context.Context, p host.SessionIDParams) (*host.DeleteResult, error) {
	return call[host.DeleteResult](ctx, c, "session/delete", p)
}

// StartRun calls run/start.
func (c *Client) StartRun(ctx context.Context, p host.StartRunParams) (*host.RunResult, error) {
	return call[host.RunResult](ctx, c, "run/start", p)
}

// GetRun calls run/get.
func (c *Client) GetRun(ctx context.Context, runID string) (*host.RunResult, error) {
	return call[host.RunResult](ctx, c, "run/get", host.RunIDParams{RunID: runID})
}

// ListRuns calls run/list.
func (c *Client) ListRuns(ctx context.Context, p host.ListRunsParams) (*host.ListRunsResult, error) {
	return call[host.ListRunsResult](ctx, c, "run/list", p)
}

// WaitRun calls run/wait.
func (c *Client) WaitRun(ctx context.Context, p host.WaitRunParams) (*host.WaitRunResult, error) {
	return call[host.WaitRunResult](ctx, c, "run/wait", p)
}

// SteerRun calls run/steer.
func (c *Client) SteerRun(ctx context.Context, p host.SteerParams) (*host.SteerReceipt, error) {
	return call[host.SteerReceipt](ctx, c, "run/steer", p)
}

// CancelRun calls run/cancel.
func (c *Client) CancelRun(ctx context.Context, p host.CancelParams) (*host.RunResult, error) {
	return call[host.RunResult](ctx, c, "run/cancel", p)
}

// Mounts calls env/list.
func (c *Client) Mounts(ctx context.Context, sessionID string) (*host.ListEnvResult, error) {
	return call[host.ListEnvResult](ctx, c, host.MethodEnvList, host.ListEnvParams{SessionID: sessionID})
}

// Mount calls env/mount.
func (c *Client) Mount(ctx context.Context, p host.MountParams) (*host.MountResult, error) {
	return call[host.MountResult](ctx, c, host.MethodEnvMount, p)
}

// Unmount calls env/unmount.
func (c *Client) Unmount(ctx context.Context, p host.UnmountParams) (*host.MountResult, error) {
	return call[host.MountResult](ctx, c, host.MethodEnvUnmount, p)
}

// ReadEvents calls events/read.
func (c *Client) ReadEvents(ctx context.Context, p host.ReadEventsParams) (*host.ReadEventsResult, error) {
	return call[host.ReadEventsResult](ctx, c, "events/read", p)
}

// Subscribe calls events/subscribe and returns the events as a
// single-use iterator: the replay after p.After, then the live tail. It
// ends with ErrLagged when the consumer falls behind, an error carrying
// the host's reason when the host ends the subscription, or ctx's error;
// breaking out of the loop unsubscribes.
func (c *Client) Subscribe(ctx context.Context, p rpc.SubscribeParams) (iter.Seq2[event.Event, error], error) {
	var res rpc.SubscribeResult
	if err := c.c.Call(ctx, "events/subscribe", p, &res); err != nil {
		return nil, err
	}
	return stream(ctx, c, res.SubscriptionID, rpc.MethodEvent, rpc.MethodClosed,
		func(params json.RawMessage) (event.Event, error) {
			var en rpc.EventNotification
			err := json.Unmarshal(params, &en)
			return en.Event, err
		},
		func(params json.RawMessage) error {
			var cn rpc.ClosedNotification
			json.Unmarshal(params, &cn)
			if cn.Reason == rpc.ReasonOverflow {
				return ErrLagged
			}
			return &ClosedError{Reason: cn.Reason, Cursor: cn.Cursor, Message: cn.Message}
		}), nil
}

// stream turns subscription id's notifications into a single-use
// iterator: item notifications are decoded and yielded; the end
// notification's error (nil for a clean end) ends it; so do a dropped
// connection, a lagging consumer and ctx. Breaking out unsubscribes.
func stream[T any](ctx context.Context, c *Client, id, item, end string,
	decode func(json.RawMessage) (T, error), ended func(json.RawMessage) error) iter.Seq2[T, error] {
	s := c.register(id)
	return func(yield func(T, error) bool) {
		var zero T
		defer c.unsubscribe(ctx, id)
		for {
			select {
			case n, ok := <-s.ch:
				if !ok {
					yield(zero, c.endErr(s))
					return
				}
				switch n.Method {
				case item:
					v, err := decode(n.Params)
					if err != nil {
						yield(zero, fmt.Errorf("client: bad %s: %w", n.Method, err))
						return
					}
					if !yield(v, nil) {
						return
					}
				case end:
					c.forget(id)
					if err := ended(n.Params); err != nil {
						yield(zero, err)
					}
					return
				}
			case <-ctx.Done():
				yield(zero, ctx.Err())
				return
			}
		}
	}
}

// ClosedError reports a subscription the host ended.
type ClosedError struct {
	Reason  string
	Cursor  int64
	Message string
}

func (e *ClosedError) Error() string {
	return fmt.Sprintf("subscription closed by the host (%s) at cursor %d: %s", e.Reason, e.Cursor, e.Message)
}

// StartProcess calls process/start.
func (c *Client) StartProcess(ctx context.Context, p host.ProcessStartParams) (*host.ProcessResult, error) {
	return call[host.ProcessResult](ctx, c, "process/start", p)
}

// GetProcess calls process/get.
func (c *Client) GetProcess(ctx context.Context, p host.ProcessIDParams) (*host.ProcessResult, error) {
	return call[host.ProcessResult](ctx, c, "process/get", p)
}

// ListProcesses calls process/list.
func (c *Client) ListProcesses(ctx context.Context, p host.ProcessListParams) (*host.ProcessListResult, error) {
	return call[host.ProcessListResult](ctx, c, "process/list", p)
}

// AwaitProcess calls process/await.
func (c *Client) AwaitProcess(ctx context.Context, p host.ProcessAwaitParams) (*process.AwaitResult, error) {
	return call[process.AwaitResult](ctx, c, "process/await", p)
}

// ProcessOutput calls process/output.
func (c *Client) ProcessOutput(ctx context.Context, p host.ProcessOutputParams) (*process.Output, error) {
	return call[process.Output](ctx, c, "process/output", p)
}

// SignalProcess calls process/signal.
func (c *Client) SignalProcess(ctx context.Context, p host.ProcessSignalParams) (*host.ProcessSignalResult, error) {
	return call[host.ProcessSignalResult](ctx, c, "process/signal", p)
}

// CancelProcess calls process/cancel.
func (c *Client) CancelProcess(ctx context.Context, p host.ProcessCancelParams) (*host.ProcessResult, error) {
	return call[host.ProcessResult](ctx, c, "process/cancel", p)
}

// FollowProcess calls process/follow and returns the output chunks from
// p.Offset as a single-use iterator that ends (nil error) after the last
// chunk of an ended process.
func (c *Client) FollowProcess(ctx context.Context, p rpc.ProcessFollowParams) (iter.Seq2[process.Chunk, error], error) {
	var res rpc.SubscribeResult
	if err := c.c.Call(ctx, "process/follow", p, &res); err != nil {
		return nil, err
	}
	return stream(ctx, c, res.SubscriptionID, rpc.MethodProcessOutput, rpc.MethodProcessClosed,
		func(params json.RawMessage) (process.Chunk, error) {
			var on rpc.ProcessOutputNotification
			err := json.Unmarshal(params, &on)
			return on.Chunk, err
		},
		func(params json.RawMessage) error {
			var cn rpc.ProcessClosedNotification
			json.Unmarshal(params, &cn)
			if cn.Reason == "ended" {
				return nil
			}
			return &ClosedError{Reason: cn.Reason, Cursor: cn.Offset, Message: cn.Message}
		}), nil
}

// register routes a subscription's notifications, including those that
// arrived before the response that named it.
func (c *Client) register(id string) *sub {
	s := &sub{ch: make(chan jrpc.Notification, c.opts.SubscriptionBuffer)}
	c.mu.Lock()
	early := c.early[id]
	delete(c.early, id)
	c.subs[id] = s
	for _, n := range early {
		c.deliver(id, s, n)
	}
	c.mu.Unlock()
	return s
}

// forget stops routing a subscription that the host ended.
func (c *Client) forget(id string) {
	c.mu.Lock()
	delete(c.subs, id)
	c.mu.Unlock()
}

// unsubscribe ends a subscription the consumer left, if it is still live.
func (c *Client) unsubscribe(ctx context.Context, id string) {
	c.mu.Lock()
	_, live := c.subs[id]
	delete(c.subs, id)
	c.mu.Unlock()
	if live {
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		c.c.Call(uctx, "events/unsubscribe", rpc.UnsubscribeParams{SubscriptionID: id}, nil)
		cancel()
	}
}

// endErr says why a subscription's channel closed.
func (c *Client) endErr(s *sub) error {
	c.mu.Lock()
	lagged := s.lagged
	c.mu.Unlock()
	if lagged {
		return ErrLagged
	}
	return fmt.Errorf("client: connection closed: %w", jrpc.ErrClosed)
}
