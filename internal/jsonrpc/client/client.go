// Package client is a small JSON-RPC 2.0 client for weft's RPC server,
// used by weft's Go client package and the CLI. It speaks WebSocket
// ([DialWebSocket]), HTTP POST per call ([NewHTTP]) and a stdio pair such as
// a `weft rpc` subprocess ([NewStdio]).
//
// Error responses come back as *api.Error (weft.dev/weft/api), so callers
// branch on [api.Error.Kind]. Server-to-client notifications arrive through
// [Client.Notifications], bounded by [Config.NotifyBuffer].
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/coder/websocket"

	"weft.dev/weft/api"
	"weft.dev/weft/internal/jsonrpc"
)

// Errors reported by a Client.
var (
	// ErrClosed is returned by calls on a closed client, or after the
	// connection ended.
	ErrClosed = errors.New("client: connection closed")
	// ErrNotifyOverflow ends the connection when the consumer of
	// Notifications falls more than Config.NotifyBuffer behind; resubscribe
	// from the last cursor seen.
	ErrNotifyOverflow = errors.New("client: notification buffer overflow")
)

// Config configures a Client. Zero fields mean the defaults stated.
type Config struct {
	// Token is sent as "Authorization: Bearer <Token>" on HTTP and
	// WebSocket. Empty sends none.
	Token string
	// Header holds extra HTTP headers for HTTP and WebSocket requests.
	Header http.Header
	// HTTPClient is used for HTTP calls and the WebSocket handshake. Nil
	// means http.DefaultClient.
	HTTPClient *http.Client
	// MaxFrameBytes bounds inbound and outbound frames. Zero means
	// api.DefaultMaxFrameBytes. A call whose request exceeds it fails with
	// a too_large *api.Error without being sent.
	MaxFrameBytes int64
	// NotifyBuffer bounds the notifications received but not yet consumed.
	// Zero means 256.
	NotifyBuffer int
	// Logger receives protocol anomalies (such as responses with unknown
	// ids). Nil means silent.
	Logger *slog.Logger
}

// Notification is a server-to-client notification. Params is the raw
// params member; a notification in the form the server writes is taken
// apart without a decoding pass (jsonrpc.SplitNotification), so Params
// is validated only when the consumer decodes it.
type Notification struct {
	Method string
	Params json.RawMessage
}

// Client is a JSON-RPC client over one transport. Its methods are safe for
// concurrent use. A stream client (WebSocket, stdio) owns one reader
// goroutine, stopped by Close; an HTTP client owns none.
type Client struct {
	cfg Config
	log *slog.Logger

	// stream transports
	stream jsonrpc.Stream
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{} // closed when the reader has exited
	notifs chan Notification

	// HTTP transport
	url string

	nextID atomic.Int64

	mu      sync.Mutex
	pending map[string]chan jsonrpc.Message
	err     error // terminal error, set once

	closeOnce sync.Once
}

func (cfg *Config) defaults() {
	if cfg.MaxFrameBytes <= 0 {
		cfg.MaxFrameBytes = api.DefaultMaxFrameBytes
	}
	if cfg.NotifyBuffer <= 0 {
		cfg.NotifyBuffer = 256
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = http.DefaultClient
	}
}

func newClient(cfg Config) *Client {
	cfg.defaults()
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Client{cfg: cfg, log: log, pending: map[string]chan jsonrpc.Message{}}
}

// NewStdio returns a client speaking newline-delimited JSON, writing
// requests to w and reading responses and notifications from r (for a
// subprocess: its stdin and stdout pipes). Close closes both.
func NewStdio(r io.ReadCloser, w io.WriteCloser, cfg Config) *Client {
	c := newClient(cfg)
	c.startStream(jsonrpc.NewLineStream(r, w, c.cfg.MaxFrameBytes))
	return c
}

// DialWebSocket connects to a weft WebSocket endpoint such as
// "ws://127.0.0.1:8080/rpc/ws", sending the bearer token. A refused
// handshake returns an error wrapping the server's *api.Error when the
// response carried one (unauthorized, overloaded). ctx bounds the dial
// only.
func DialWebSocket(ctx context.Context, url string, cfg Config) (*Client, error) {
	c := newClient(cfg)
	h := c.headers()
	wc, resp, err := websocket.Dial(ctx, url, &websocket.DialOptions{HTTPClient: c.cfg.HTTPClient, HTTPHeader: h})
	if err != nil {
		if resp != nil && resp.Body != nil {
			if e := readErrorBody(resp.Body); e != nil {
				return nil, fmt.Errorf("client: dial %s: %s: %w", url, resp.Status, e)
			}
		}
		return nil, fmt.Errorf("client: dial %s: %w", url, err)
	}
	c.startStream(jsonrpc.NewWSStream(wc, c.cfg.MaxFrameBytes))
	return c, nil
}

// NewHTTP returns a client that POSTs each call to url (such as
// "http://127.0.0.1:8080/rpc"). It receives no notifications.
func NewHTTP(url string, cfg Config) *Client {
	c := newClient(cfg)
	c.url = url
	c.done = make(chan struct{})
	return c
}

func (c *Client) headers() http.Header {
	h := c.cfg.Header.Clone()
	if h == nil {
		h = http.Header{}
	}
	if c.cfg.Token != "" {
		h.Set("Authorization", "Bearer "+c.cfg.Token)
	}
	return h
}

func (c *Client) startStream(s jsonrpc.Stream) {
	c.stream = s
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.done = make(chan struct{})
	c.notifs = make(chan Notification, c.cfg.NotifyBuffer)
	go c.readLoop()
}

// readLoop routes responses to their callers and notifications to the
// buffer until the stream ends.
func (c *Client) readLoop() {
	defer close(c.done)
	for {
		frame, err := c.stream.Read(c.ctx)
		if errors.Is(err, jsonrpc.ErrTooLarge) {
			c.log.Warn("client: dropped oversized frame", "limit", c.cfg.MaxFrameBytes)
			continue
		}
		if err != nil {
			c.fail(fmt.Errorf("%w: %w", ErrClosed, err))
			return
		}
		if method, params, ok := jsonrpc.SplitNotification(frame); ok {
			// The consumer decodes params (and so validates them).
			select {
			case c.notifs <- Notification{Method: method, Params: params}:
			default:
				c.fail(ErrNotifyOverflow)
				return
			}
			continue
		}
		msgs, err := jsonrpc.DecodeMessages(frame)
		if err != nil {
			c.fail(fmt.Errorf("client: protocol violation: %w", err))
			return
		}
		for _, m := range msgs {
			if m.IsNotification() {
				select {
				case c.notifs <- Notification{Method: m.Method, Params: m.Params}:
				default:
					c.fail(ErrNotifyOverflow)
					return
				}
				continue
			}
			c.mu.Lock()
			ch := c.pending[string(m.ID)]
			delete(c.pending, string(m.ID))
			c.mu.Unlock()
			if ch == nil {
				c.log.Warn("client: response with unknown id", "id", string(m.ID), "error", string(m.Error))
				continue
			}
			ch <- m // buffered
		}
	}
}

// fail records the terminal error once and releases every pending call.
func (c *Client) fail(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err == nil {
		c.err = err
	}
	for id, ch := range c.pending {
		delete(c.pending, id)
		close(ch)
	}
}

// Err returns the error that ended the connection, or nil while it is
// open.
func (c *Client) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Done returns a channel closed when a stream connection has ended (or,
// for HTTP, when Close was called).
func (c *Client) Done() <-chan struct{} { return c.done }

// Call sends a request and waits for its response, decoding the result into
// result (a pointer, or nil to discard it). params is encoded as the params
// object; nil omits it.
//
// It returns a *api.Error for an error response, ctx.Err() if ctx ends
// first (the call is abandoned; the server may still run it), an error
// wrapping ErrClosed when the connection ends, or an error wrapping a
// transport or decoding failure.
func (c *Client) Call(ctx context.Context, method string, params, result any) error {
	id := strconv.AppendInt(nil, c.nextID.Add(1), 10)
	frame, err := c.encode(id, method, params)
	if err != nil {
		return err
	}
	var m jsonrpc.Message
	if c.stream == nil {
		m, err = c.postCall(ctx, frame)
	} else {
		m, err = c.streamCall(ctx, id, frame)
	}
	if err != nil {
		return err
	}
	if m.Error != nil {
		var e api.Error
		if err := json.Unmarshal(m.Error, &e); err != nil {
			return fmt.Errorf("client: %s: decode error response: %w", method, err)
		}
		return &e
	}
	if result != nil {
		if err := json.Unmarshal(m.Result, result); err != nil {
			return fmt.Errorf("client: %s: decode result: %w", method, err)
		}
	}
	return nil
}

// Notify sends a notification (a request without id); the server never
// answers it.
func (c *Client) Notify(ctx context.Context, method string, params any) error {
	frame, err := c.encode(nil, method, params)
	if err != nil {
		return err
	}
	if c.stream == nil {
		_, err := c.post(ctx, frame)
		return err
	}
	if err := c.Err(); err != nil {
		return err
	}
	if err := c.stream.Write(ctx, frame); err != nil {
		return fmt.Errorf("client: notify %s: %w", method, err)
	}
	return nil
}

func (c *Client) encode(id json.RawMessage, method string, params any) ([]byte, error) {
	var raw json.RawMessage
	if params != nil {
		b, err := json.Marshal(params)
		if err != nil {
			return nil, fmt.Errorf("client: %s: encode params: %w", method, err)
		}
		raw = b
	}
	frame := jsonrpc.AppendRequest(nil, id, method, raw)
	if int64(len(frame)) > c.cfg.MaxFrameBytes {
		return nil, api.Errorf(api.KindTooLarge, "request of %d bytes exceeds the client's limit of %d", len(frame), c.cfg.MaxFrameBytes)
	}
	return frame, nil
}

func (c *Client) streamCall(ctx context.Context, id, frame []byte) (jsonrpc.Message, error) {
	ch := make(chan jsonrpc.Message, 1)
	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		return jsonrpc.Message{}, err
	}
	c.pending[string(id)] = ch
	c.mu.Unlock()
	forget := func() {
		c.mu.Lock()
		delete(c.pending, string(id))
		c.mu.Unlock()
	}
	if err := c.stream.Write(ctx, frame); err != nil {
		forget()
		return jsonrpc.Message{}, fmt.Errorf("client: send: %w", err)
	}
	select {
	case m, ok := <-ch:
		if !ok {
			return jsonrpc.Message{}, c.Err()
		}
		return m, nil
	case <-ctx.Done():
		forget()
		return jsonrpc.Message{}, ctx.Err()
	}
}

func (c *Client) postCall(ctx context.Context, frame []byte) (jsonrpc.Message, error) {
	body, err := c.post(ctx, frame)
	if err != nil {
		return jsonrpc.Message{}, err
	}
	msgs, err := jsonrpc.DecodeMessages(body)
	if err != nil {
		return jsonrpc.Message{}, fmt.Errorf("client: %w", err)
	}
	if len(msgs) != 1 {
		return jsonrpc.Message{}, fmt.Errorf("client: %w: %d messages in response", jsonrpc.ErrMalformed, len(msgs))
	}
	return msgs[0], nil
}

// post sends one frame over HTTP and returns the response body (nil for
// 204). A non-2xx status with a JSON-RPC error body returns the *api.Error.
func (c *Client) post(ctx context.Context, frame []byte) ([]byte, error) {
	select {
	case <-c.done:
		return nil, ErrClosed
	default:
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(frame))
	if err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	req.Header = c.headers()
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.cfg.HTTPClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("client: post: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, c.cfg.MaxFrameBytes+1))
	if err != nil {
		return nil, fmt.Errorf("client: read response: %w", err)
	}
	if int64(len(body)) > c.cfg.MaxFrameBytes {
		return nil, api.Errorf(api.KindTooLarge, "response exceeds the client's limit of %d bytes", c.cfg.MaxFrameBytes)
	}
	if resp.StatusCode == http.StatusNoContent {
		return nil, nil
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		if e := readErrorBody(bytes.NewReader(body)); e != nil {
			return nil, e
		}
		if text := bodyLine(body); text != "" {
			return nil, fmt.Errorf("client: post: %s: %s", resp.Status, text)
		}
		return nil, fmt.Errorf("client: post: %s", resp.Status)
	}
	return body, nil
}

// bodyLine returns the first line of a response body that is no
// JSON-RPC error, cut to 200 bytes and to printable ASCII, for an error
// message: what a proxy or a TLS listener (Go's says "Client sent an HTTP
// request to an HTTPS server.") answered instead of weft.
func bodyLine(body []byte) string {
	line, _, _ := bytes.Cut(body, []byte("\n"))
	line = line[:min(len(line), 200)]
	out := make([]byte, 0, len(line))
	for _, b := range line {
		if b >= 0x20 && b < 0x7f {
			out = append(out, b)
		}
	}
	return strings.TrimSpace(string(out))
}

// readErrorBody decodes a JSON-RPC error response body, or returns nil.
func readErrorBody(r io.Reader) *api.Error {
	b, _ := io.ReadAll(io.LimitReader(r, 64<<10))
	msgs, err := jsonrpc.DecodeMessages(b)
	if err != nil || len(msgs) != 1 || msgs[0].Error == nil {
		return nil
	}
	var e api.Error
	if json.Unmarshal(msgs[0].Error, &e) != nil {
		return nil
	}
	return &e
}

// Notifications returns a single-use iterator over server notifications,
// in arrival order. It ends when ctx is done (yielding ctx.Err()), when
// the connection ends (yielding ErrNotifyOverflow if that is why, after
// the notifications already received), or when the consumer stops. Only
// one iteration may run at a time. For an HTTP client it ends at once.
func (c *Client) Notifications(ctx context.Context) iter.Seq2[Notification, error] {
	return func(yield func(Notification, error) bool) {
		if c.notifs == nil {
			return
		}
		for {
			select {
			case n := <-c.notifs:
				if !yield(n, nil) {
					return
				}
				continue
			default:
			}
			select {
			case n := <-c.notifs:
				if !yield(n, nil) {
					return
				}
			case <-ctx.Done():
				yield(Notification{}, ctx.Err())
				return
			case <-c.done:
				// Drain what arrived before the end.
				for {
					select {
					case n := <-c.notifs:
						if !yield(n, nil) {
							return
						}
					default:
						if err := c.Err(); errors.Is(err, ErrNotifyOverflow) {
							yield(Notification{}, err)
						}
						return
					}
				}
			}
		}
	}
}

// Close ends the connection and waits for the client's goroutine to exit.
// Pending calls fail with ErrClosed. It is safe to call more than once.
func (c *Client) Close() error {
	c.closeOnce.Do(func() {
		if c.stream == nil {
			c.fail(ErrClosed)
			close(c.done)
			return
		}
		c.fail(ErrClosed)
		c.cancel()
		_ = c.stream.Close()
		<-c.done
	})
	return nil
}
