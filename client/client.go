// Package client is the Go client of a weft host: a [Client] is an
// [api.Host] whose calls go to a host over WebSocket, stdio or one HTTP
// POST per call ([NewHTTP]), one typed
// method per method of the table (api.Methods), with the table's params
// and results; subscriptions come as iterators, and [Follow] reconnects
// by itself and resumes from its cursor. It links the protocol's types
// (package api) and no part of the engine.
package client

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"weft.dev/weft/api"
	"weft.dev/weft/event"
	jrpc "weft.dev/weft/internal/jsonrpc/client"
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
	// TLSConfig verifies the host of a wss:// or https:// address: set
	// its RootCAs to trust a private CA. Nil means the system's roots.
	// Dial never skips verification for it; a config that does is the
	// caller's choice. It is not used when HTTPClient is set.
	TLSConfig *tls.Config
	// Name is this client's name for the records of who answered a
	// request, on [NewHTTP]'s connections: each POST is a connection of
	// its own that no initialize precedes, so it is sent as the
	// Weft-Client header. Over WebSocket and stdio, [Client.Initialize]
	// says it.
	Name string
	// HTTPClient makes [NewHTTP]'s requests and [Dial]'s handshake; nil
	// means http.DefaultClient, or one with TLSConfig when that is set.
	HTTPClient *http.Client
}

// httpClient is the client of the options' requests: HTTPClient, else
// one that verifies hosts with TLSConfig, else nil (the default).
func (o Options) httpClient() *http.Client {
	if o.HTTPClient != nil || o.TLSConfig == nil {
		return o.HTTPClient
	}
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.TLSClientConfig = o.TLSConfig.Clone()
	return &http.Client{Transport: t}
}

// ErrLagged ends a subscription whose consumer fell behind; resume after
// the last cursor. It is [api.ErrLagged].
var ErrLagged = api.ErrLagged

// ErrClosed is wrapped by the error of a call made on a closed client or
// cut by the end of its connection (the host went away, the network
// dropped), and by a subscription's error when the connection ended. Such
// a call may or may not have reached the host: retry a mutation with the
// same idempotency key on a new client.
var ErrClosed = jrpc.ErrClosed

// Client is a connection to a host. Its methods are safe for concurrent
// use. Close it to release the connection and its goroutine.
type Client struct {
	c    *jrpc.Client
	opts Options
	wg   sync.WaitGroup

	mu    sync.Mutex
	subs  map[string]*sub
	early map[string][]notice
}

type sub struct {
	ch     chan notice
	lagged bool
}

// notice is a subscription's notification, decoded once by the
// dispatcher: value is an event.Event, an api.Chunk, an
// api.ClosedNotification or an api.ProcessClosedNotification, as method
// says; err is set instead when the params did not decode.
type notice struct {
	method string
	value  any
	err    error
}

// Dial connects to the host at addr over WebSocket. addr is host:port,
// or a ws://, wss://, http:// or https:// URL (the /rpc/ws path is added
// when missing); wss:// and https:// speak TLS and verify the host's
// certificate against opts.TLSConfig's roots.
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
	c, err := jrpc.DialWebSocket(ctx, u, jrpc.Config{Token: opts.Token, HTTPClient: opts.httpClient(), Logger: opts.Logger, NotifyBuffer: 8192})
	if err != nil {
		return nil, fmt.Errorf("connect to weft host %s: %w", addr, err)
	}
	return newClient(c, opts), nil
}

// NewHTTP returns a client that sends each call as one HTTP POST to
// addr's /rpc: host:port, or an http:// or https:// URL (the /rpc path
// is added when missing). It connects on each call, not here, so a host
// that is not there is an error of the first call (wrapping the
// *url.Error of the request). A POST carries no notifications: the
// subscriptions ([Client.Subscribe], [Client.FollowProcess], [Follow])
// need [Dial]; the host answers them on HTTP with a typed error. For a
// command of one call or two it saves the WebSocket's handshake and
// initialize.
func NewHTTP(addr string, opts Options) *Client {
	u := addr
	if !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://") {
		u = "http://" + u
	}
	if !strings.HasSuffix(u, "/rpc") {
		u = strings.TrimSuffix(u, "/") + "/rpc"
	}
	var h http.Header
	if opts.Name != "" {
		h = http.Header{"Weft-Client": {opts.Name}}
	}
	return newClient(jrpc.NewHTTP(u, jrpc.Config{Token: opts.Token, Header: h, HTTPClient: opts.httpClient(), Logger: opts.Logger}), opts)
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
	cl := &Client{c: c, opts: opts, subs: map[string]*sub{}, early: map[string][]notice{}}
	cl.wg.Go(cl.dispatch)
	return cl
}

// dispatch routes notifications to their subscriptions, decoding each
// once.
func (c *Client) dispatch() {
	for n, err := range c.c.Notifications(context.Background()) {
		if err != nil {
			break
		}
		id, v, ok := decodeNotice(n)
		if !ok {
			continue
		}
		c.mu.Lock()
		if s, ok := c.subs[id]; ok {
			c.deliver(id, s, v)
		} else if len(c.early[id]) < c.opts.SubscriptionBuffer {
			// The response naming the subscription may not be read yet.
			c.early[id] = append(c.early[id], v)
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

// decodeNotice decodes a subscription's notification and returns the
// subscription it belongs to; ok is false for a notification that names
// none.
func decodeNotice(n jrpc.Notification) (id string, v notice, ok bool) {
	v.method = n.Method
	var err error
	switch n.Method {
	case api.NotifyEvent:
		var p api.EventNotification
		err = json.Unmarshal(n.Params, &p)
		id, v.value = p.SubscriptionID, p.Event
	case api.NotifyClosed:
		var p api.ClosedNotification
		err = json.Unmarshal(n.Params, &p)
		id, v.value = p.SubscriptionID, p
	case api.NotifyProcessOutput:
		var p api.ProcessOutputNotification
		err = json.Unmarshal(n.Params, &p)
		id, v.value = p.SubscriptionID, p.Chunk
	case api.NotifyProcessClosed:
		var p api.ProcessClosedNotification
		err = json.Unmarshal(n.Params, &p)
		id, v.value = p.SubscriptionID, p
	default:
		return "", notice{}, false
	}
	if err != nil {
		// Tell the subscription, if the params name one.
		var head struct {
			SubscriptionID string `json:"subscriptionId"`
		}
		json.Unmarshal(n.Params, &head)
		id, v.value, v.err = head.SubscriptionID, nil, fmt.Errorf("client: bad %s: %w", n.Method, err)
	}
	return id, v, id != ""
}

// deliver hands n to s without blocking; called with c.mu held.
func (c *Client) deliver(id string, s *sub, n notice) {
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

// Call calls any method; result may be nil. Error responses are *api.Error.
func (c *Client) Call(ctx context.Context, method string, params, result any) error {
	return c.c.Call(ctx, method, params, result)
}

// call calls method m with p: the wire name and the types come from its
// descriptor.
func call[P api.Params, R any](ctx context.Context, c *Client, m api.Method[P, R], p P) (*R, error) {
	var r R
	if err := c.c.Call(ctx, m.Name, p, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

var _ api.Host = (*Client)(nil)

// Initialize calls initialize: it names this client to the host (the
// records of who answered a request show p.ClientInfo.Name) and returns
// what the host says of itself and of the connection.
func (c *Client) Initialize(ctx context.Context, p api.InitializeParams) (*api.InitializeResult, error) {
	return call(ctx, c, api.Initialize, p)
}

// Discover calls rpc.discover: the host's OpenRPC document.
func (c *Client) Discover(ctx context.Context) (api.DiscoverResult, error) {
	r, err := call(ctx, c, api.Discover, api.DiscoverParams{})
	if err != nil {
		return nil, err
	}
	return *r, nil
}

// CreateSession calls session/create.
func (c *Client) CreateSession(ctx context.Context, p api.CreateSessionParams) (*api.SessionResult, error) {
	return call(ctx, c, api.SessionCreate, p)
}

// GetSession calls session/get.
func (c *Client) GetSession(ctx context.Context, p api.SessionGetParams) (*api.SessionResult, error) {
	return call(ctx, c, api.SessionGet, p)
}

// ListSessions calls session/list.
func (c *Client) ListSessions(ctx context.Context, p api.ListSessionsParams) (*api.ListSessionsResult, error) {
	return call(ctx, c, api.SessionList, p)
}

// ForkSession calls session/fork.
func (c *Client) ForkSession(ctx context.Context, p api.ForkSessionParams) (*api.ForkResult, error) {
	return call(ctx, c, api.SessionFork, p)
}

// RewindSession calls session/rewind.
func (c *Client) RewindSession(ctx context.Context, p api.RewindParams) (*api.RewindResult, error) {
	return call(ctx, c, api.SessionRewind, p)
}

// UpdateSession calls session/update.
func (c *Client) UpdateSession(ctx context.Context, p api.UpdateSessionParams) (*api.SessionResult, error) {
	return call(ctx, c, api.SessionUpdate, p)
}

// DeleteSession calls session/delete.
func (c *Client) DeleteSession(ctx context.Context, p api.SessionIDParams) (*api.DeleteResult, error) {
	return call(ctx, c, api.SessionDelete, p)
}

// CompactSession calls session/compact.
func (c *Client) CompactSession(ctx context.Context, p api.CompactParams) (*api.CompactResult, error) {
	return call(ctx, c, api.SessionCompact, p)
}

// PruneSessions calls session/prune.
func (c *Client) PruneSessions(ctx context.Context, p api.PruneParams) (*api.PruneResult, error) {
	return call(ctx, c, api.SessionPrune, p)
}

// StartRun calls run/start.
func (c *Client) StartRun(ctx context.Context, p api.StartRunParams) (*api.RunResult, error) {
	return call(ctx, c, api.RunStart, p)
}

// GetRun calls run/get.
func (c *Client) GetRun(ctx context.Context, p api.RunIDParams) (*api.RunResult, error) {
	return call(ctx, c, api.RunGet, p)
}

// ListRuns calls run/list.
func (c *Client) ListRuns(ctx context.Context, p api.ListRunsParams) (*api.ListRunsResult, error) {
	return call(ctx, c, api.RunList, p)
}

// WaitRun calls run/wait.
func (c *Client) WaitRun(ctx context.Context, p api.WaitRunParams) (*api.WaitRunResult, error) {
	return call(ctx, c, api.RunWait, p)
}

// SteerRun calls run/steer.
func (c *Client) SteerRun(ctx context.Context, p api.SteerParams) (*api.SteerReceipt, error) {
	return call(ctx, c, api.RunSteer, p)
}

// CancelRun calls run/cancel.
func (c *Client) CancelRun(ctx context.Context, p api.CancelParams) (*api.RunResult, error) {
	return call(ctx, c, api.RunCancel, p)
}

// CheckModel calls model/check.
func (c *Client) CheckModel(ctx context.Context, p api.ModelCheckParams) (*api.ModelCheckResult, error) {
	return call(ctx, c, api.ModelCheck, p)
}

// ListTools calls tools/list.
func (c *Client) ListTools(ctx context.Context, p api.ToolsListParams) (*api.ToolsListResult, error) {
	return call(ctx, c, api.ToolsList, p)
}

// MCPResources calls mcp/resources.
func (c *Client) MCPResources(ctx context.Context, p api.MCPListParams) (*api.MCPResourcesResult, error) {
	return call(ctx, c, api.MCPResources, p)
}

// MCPReadResource calls mcp/read_resource.
func (c *Client) MCPReadResource(ctx context.Context, p api.MCPReadResourceParams) (*api.MCPReadResourceResult, error) {
	return call(ctx, c, api.MCPReadResource, p)
}

// MCPPrompts calls mcp/prompts.
func (c *Client) MCPPrompts(ctx context.Context, p api.MCPListParams) (*api.MCPPromptsResult, error) {
	return call(ctx, c, api.MCPPrompts, p)
}

// MCPGetPrompt calls mcp/get_prompt.
func (c *Client) MCPGetPrompt(ctx context.Context, p api.MCPGetPromptParams) (*api.MCPGetPromptResult, error) {
	return call(ctx, c, api.MCPGetPrompt, p)
}

// ListEnv calls env/list.
func (c *Client) ListEnv(ctx context.Context, p api.ListEnvParams) (*api.ListEnvResult, error) {
	return call(ctx, c, api.EnvList, p)
}

// Mount calls env/mount.
func (c *Client) Mount(ctx context.Context, p api.MountParams) (*api.MountResult, error) {
	return call(ctx, c, api.EnvMount, p)
}

// Unmount calls env/unmount.
func (c *Client) Unmount(ctx context.Context, p api.UnmountParams) (*api.MountResult, error) {
	return call(ctx, c, api.EnvUnmount, p)
}

// ReadEvents calls events/read.
func (c *Client) ReadEvents(ctx context.Context, p api.ReadEventsParams) (*api.ReadEventsResult, error) {
	return call(ctx, c, api.EventsRead, p)
}

// Subscribe calls events/subscribe and returns the events as a
// single-use iterator: the replay after p.After, then the live tail. It
// ends with ErrLagged when the consumer falls behind, an error carrying
// the host's reason when the host ends the subscription, or ctx's error;
// breaking out of the loop unsubscribes.
func (c *Client) Subscribe(ctx context.Context, p api.SubscribeParams) (iter.Seq2[event.Event, error], error) {
	var res api.SubscribeResult
	if err := c.c.Call(ctx, api.EventsSubscribe.Name, p, &res); err != nil {
		return nil, err
	}
	return stream[event.Event](ctx, c, res.SubscriptionID, api.EventsSubscribe.Item, api.EventsSubscribe.End,
		func(v any) error {
			cn := v.(api.ClosedNotification)
			if cn.Reason == api.ReasonOverflow {
				return ErrLagged
			}
			return &ClosedError{Reason: cn.Reason, Cursor: cn.Cursor, Message: cn.Message}
		}), nil
}

// stream turns subscription id's notifications into a single-use
// iterator: item notifications (whose value is a T) are yielded; the end
// notification's error (nil for a clean end) ends it; so do a dropped
// connection, a lagging consumer and ctx. Breaking out unsubscribes.
func stream[T any](ctx context.Context, c *Client, id, item, end string, ended func(any) error) iter.Seq2[T, error] {
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
				// A notice of another method is not this subscription's.
				switch n.method {
				case item:
					if n.err != nil {
						yield(zero, n.err)
						return
					}
					if !yield(n.value.(T), nil) {
						return
					}
				case end:
					c.forget(id)
					err := n.err
					if err == nil {
						err = ended(n.value)
					}
					if err != nil {
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

// ClosedError reports a subscription the host ended. One it ended
// because it shuts down (Reason [api.ReasonClosed]) is also an error of
// kind overloaded (errors.Is(err, api.ErrOverloaded)), as the [api.Host]
// contract says of a stream that ends so.
type ClosedError struct {
	Reason  string
	Cursor  int64
	Message string
}

func (e *ClosedError) Error() string {
	return fmt.Sprintf("subscription closed by the host (%s) at cursor %d: %s", e.Reason, e.Cursor, e.Message)
}

// Unwrap returns, for a subscription the host ended because it shuts
// down, an *api.Error of kind overloaded (retryable: resume after
// Cursor once the host is back); nil for other reasons.
func (e *ClosedError) Unwrap() error {
	if e.Reason != api.ReasonClosed {
		return nil
	}
	msg := e.Message
	if msg == "" {
		msg = "the host is shutting down"
	}
	return api.NewError(api.KindOverloaded, msg)
}

// StartProcess calls process/start.
func (c *Client) StartProcess(ctx context.Context, p api.ProcessStartParams) (*api.ProcessResult, error) {
	return call(ctx, c, api.ProcessStart, p)
}

// GetProcess calls process/get.
func (c *Client) GetProcess(ctx context.Context, p api.ProcessIDParams) (*api.ProcessResult, error) {
	return call(ctx, c, api.ProcessGet, p)
}

// ListProcesses calls process/list.
func (c *Client) ListProcesses(ctx context.Context, p api.ProcessListParams) (*api.ProcessListResult, error) {
	return call(ctx, c, api.ProcessList, p)
}

// AwaitProcess calls process/await.
func (c *Client) AwaitProcess(ctx context.Context, p api.ProcessAwaitParams) (*api.AwaitResult, error) {
	return call(ctx, c, api.ProcessAwait, p)
}

// ProcessOutput calls process/output.
func (c *Client) ProcessOutput(ctx context.Context, p api.ProcessOutputParams) (*api.Output, error) {
	return call(ctx, c, api.ProcessOutput, p)
}

// WriteProcess calls process/write.
func (c *Client) WriteProcess(ctx context.Context, p api.ProcessWriteParams) (*api.ProcessResult, error) {
	return call(ctx, c, api.ProcessWrite, p)
}

// SignalProcess calls process/signal.
func (c *Client) SignalProcess(ctx context.Context, p api.ProcessSignalParams) (*api.ProcessSignalResult, error) {
	return call(ctx, c, api.ProcessSignal, p)
}

// CancelProcess calls process/cancel.
func (c *Client) CancelProcess(ctx context.Context, p api.ProcessCancelParams) (*api.ProcessResult, error) {
	return call(ctx, c, api.ProcessCancel, p)
}

// GrantProcess calls process/grant.
func (c *Client) GrantProcess(ctx context.Context, p api.ProcessGrantParams) (*api.ProcessResult, error) {
	return call(ctx, c, api.ProcessGrant, p)
}

// RevokeProcess calls process/revoke.
func (c *Client) RevokeProcess(ctx context.Context, p api.ProcessGrantParams) (*api.ProcessResult, error) {
	return call(ctx, c, api.ProcessRevoke, p)
}

// FollowProcess calls process/follow and returns the output chunks from
// p.Offset as a single-use iterator that ends (nil error) after the last
// chunk of an ended process; as [Client.Subscribe]'s, it ends with
// ErrLagged when the consumer falls behind and a [*ClosedError] (of kind
// overloaded when the host shuts down) when the host ends it otherwise.
func (c *Client) FollowProcess(ctx context.Context, p api.ProcessFollowParams) (iter.Seq2[api.Chunk, error], error) {
	var res api.SubscribeResult
	if err := c.c.Call(ctx, api.ProcessFollow.Name, p, &res); err != nil {
		return nil, err
	}
	return stream[api.Chunk](ctx, c, res.SubscriptionID, api.ProcessFollow.Item, api.ProcessFollow.End,
		func(v any) error {
			cn := v.(api.ProcessClosedNotification)
			switch cn.Reason {
			case api.ReasonEnded:
				return nil
			case api.ReasonOverflow:
				return ErrLagged
			}
			return &ClosedError{Reason: cn.Reason, Cursor: cn.Offset, Message: cn.Message}
		}), nil
}

// register routes a subscription's notifications, including those that
// arrived before the response that named it.
func (c *Client) register(id string) *sub {
	s := &sub{ch: make(chan notice, c.opts.SubscriptionBuffer)}
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
		c.c.Call(uctx, api.EventsUnsubscribe.Name, api.UnsubscribeParams{SubscriptionID: id}, nil)
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
	return ErrClosed
}

// DecideApproval calls approval/decide.
func (c *Client) DecideApproval(ctx context.Context, p api.DecideParams) (*api.RequestResult, error) {
	return call(ctx, c, api.ApprovalDecide, p)
}

// AnswerInput calls input/answer.
func (c *Client) AnswerInput(ctx context.Context, p api.AnswerParams) (*api.RequestResult, error) {
	return call(ctx, c, api.InputAnswer, p)
}

// ToolResult calls tool/result.
func (c *Client) ToolResult(ctx context.Context, p api.ToolResultParams) (*api.RequestResult, error) {
	return call(ctx, c, api.ToolResult, p)
}

// ListRequests calls request/list.
func (c *Client) ListRequests(ctx context.Context, p api.ListRequestsParams) (*api.ListRequestsResult, error) {
	return call(ctx, c, api.RequestList, p)
}

// ListApprovals calls approval/list.
func (c *Client) ListApprovals(ctx context.Context, p api.ListRequestsParams) (*api.ListRequestsResult, error) {
	return call(ctx, c, api.ApprovalList, p)
}

// GetRequest calls request/get.
func (c *Client) GetRequest(ctx context.Context, p api.RequestIDParams) (*api.RequestResult, error) {
	return call(ctx, c, api.RequestGet, p)
}
