package rpc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"weft.dev/weft/api"
	"weft.dev/weft/event"
	"weft.dev/weft/internal/jsonrpc"
)

// Errors returned by [Conn.Notify].
var (
	// ErrNoPush means the connection cannot carry server-to-client
	// notifications: plain HTTP POST. Use WebSocket or stdio.
	ErrNoPush = errors.New("rpc: notifications need a WebSocket or stdio connection, not HTTP POST")
	// ErrNotifyOverflow means the connection's outbound notification queue
	// is full; the notification was not queued. Subscriptions should end
	// with reason overflow and the client resume from its cursor.
	ErrNotifyOverflow = errors.New("rpc: outbound notification queue full")
	// ErrConnClosed means the connection has stopped writing.
	ErrConnClosed = errors.New("rpc: connection closed")
)

// Transport names of [Conn.Transport].
const (
	TransportStdio     = "stdio"
	TransportHTTP      = "http"
	TransportWebSocket = "websocket"
)

type connKey struct{}

// ConnFrom returns the connection a handler's request arrived on, or nil
// if ctx did not come from this package.
func ConnFrom(ctx context.Context) *Conn {
	c, _ := ctx.Value(connKey{}).(*Conn)
	return c
}

// outFrame is one item of a connection's outbound queue: a frame (b),
// or a run of one subscription's events/event notifications (events),
// each frame of which is prefix, one event's JSON (shared with every
// other subscriber of the event) and eventFrameSuffix. A run is queued
// with one channel send and written with the batch it joins; its frames
// exist as bytes only in the writer's buffer while they are written.
type outFrame struct {
	b      []byte
	prefix []byte
	events [][]byte
	// size is the bytes of the frames, as counted in the connection's
	// queue and the stream budget.
	size  int
	notif bool
}

// wholeFrame returns b as a queued frame.
func wholeFrame(b []byte, notif bool) outFrame { return outFrame{b: b, size: len(b), notif: notif} }

// frames returns how many frames f counts for in the connection's queue.
func (f outFrame) frames() int {
	if f.events != nil {
		return len(f.events)
	}
	return 1
}

// Conn is one client connection: a stdio pair, a WebSocket, or (with no
// push) a single HTTP POST. Handlers reach it with [ConnFrom].
//
// All methods are safe for concurrent use. The server owns the Conn; it
// ends when the peer disconnects (or, on stdio, when input ends and the
// in-flight requests have been answered), when the serving ctx is done, or
// on [Server.Close].
type Conn struct {
	s         *Server
	id        string
	transport string
	stream    jsonrpc.Stream // nil for HTTP

	ctx    context.Context
	cancel context.CancelFunc

	done     chan struct{}
	doneOnce sync.Once

	sem      chan struct{}
	handlers sync.WaitGroup

	out         chan outFrame
	queue       *queueBudget   // of notifications in out
	acct        *streamAccount // the notifications queued and being written, in the server's stream budget
	stopWriting chan struct{}
	writerDone  chan struct{}

	mu          sync.Mutex
	cleanups    []func()
	cleanupsRan bool

	// client is who the peer said it is in initialize.
	client atomic.Pointer[api.Client]
}

// clientContext returns ctx carrying the connection's client (api.WithClient):
// hosts record it as who answered a request.
func (c *Conn) clientContext(ctx context.Context) context.Context {
	cl := api.Client{Transport: c.transport}
	if p := c.client.Load(); p != nil {
		cl = *p
	}
	return api.WithClient(ctx, cl)
}

// ID returns a server-unique identifier for the connection, for logs.
func (c *Conn) ID() string { return c.id }

// Transport returns [TransportStdio], [TransportHTTP] or
// [TransportWebSocket].
func (c *Conn) Transport() string { return c.transport }

// Done returns a channel closed when the connection stops accepting
// requests (peer gone, input ended, or server closing). Subscriptions
// select on it to end.
func (c *Conn) Done() <-chan struct{} { return c.done }

// OnClose registers f to run once the connection has ended and every
// in-flight handler has returned. Cleanups run in reverse order of
// registration, in the server's goroutine; a panic in one is logged and
// does not stop the others. If the connection has already ended, f runs
// at once in the caller's goroutine.
func (c *Conn) OnClose(f func()) {
	c.mu.Lock()
	if !c.cleanupsRan {
		c.cleanups = append(c.cleanups, f)
		c.mu.Unlock()
		return
	}
	c.mu.Unlock()
	c.runCleanup(f)
}

// Notify queues a JSON-RPC notification {method, params} to the client
// and returns without waiting for it to be written. It never blocks: it
// returns [ErrNotifyOverflow] when the bounded queue is full,
// [ErrConnClosed] after the connection has stopped writing, [ErrNoPush] on
// HTTP POST, or an error wrapping the encoding failure of params. ctx is
// checked for cancellation only. Notifications and responses on one
// connection are written in the order they were queued.
func (c *Conn) Notify(ctx context.Context, method string, params any) error {
	if c.stream == nil {
		return ErrNoPush
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("rpc: notify %s: %w", method, err)
	}
	select {
	case <-c.writerDone:
		return ErrConnClosed
	default:
	}
	var raw json.RawMessage
	if params != nil {
		b, err := json.Marshal(params)
		if err != nil {
			return fmt.Errorf("rpc: notify %s: encode params: %w", method, err)
		}
		raw = b
	}
	frame := jsonrpc.AppendRequest(nil, nil, method, raw)
	if !c.queue.tryTake(len(frame)) {
		return fmt.Errorf("rpc: notify %s on conn %s: %w", method, c.id, ErrNotifyOverflow)
	}
	c.acct.charge(int64(len(frame)))
	select {
	case c.out <- wholeFrame(frame, true):
		return nil
	default:
		c.queue.give(len(frame))
		c.acct.release(int64(len(frame)))
		return fmt.Errorf("rpc: notify %s on conn %s: %w", method, c.id, ErrNotifyOverflow)
	}
}

func (s *Server) newConn(parent context.Context, transport string, stream jsonrpc.Stream) *Conn {
	ctx, cancel := context.WithCancel(parent)
	c := &Conn{
		s: s, transport: transport, stream: stream,
		cancel: cancel,
		done:   make(chan struct{}),
		sem:    make(chan struct{}, s.cfg.MaxConcurrentPerConn),
	}
	c.ctx = context.WithValue(ctx, connKey{}, c)
	if stream != nil {
		c.queue = newQueueBudget(s.cfg.NotifyQueue, s.cfg.NotifyBytes)
		c.acct = s.budget.open(cancel)
		c.out = make(chan outFrame, s.cfg.NotifyQueue+s.cfg.MaxConcurrentPerConn+16)
		c.stopWriting = make(chan struct{})
		c.writerDone = make(chan struct{})
	}
	return c
}

func (c *Conn) markDone() { c.doneOnce.Do(func() { close(c.done) }) }

// send queues a response frame, blocking (backpressure) until there is
// room or the writer has stopped.
func (c *Conn) send(b []byte) {
	select {
	case c.out <- wholeFrame(b, false):
	case <-c.writerDone:
	}
}

// Bounds of one batch of frames the writer sends together. A frame
// larger than maxBatchBytes goes alone. A run of notifications
// (Conn.notifyEvents) is kept within the same bounds.
const (
	maxBatchFrames = 256
	maxBatchBytes  = 256 << 10
)

// frameBufKeep is the largest buffer of assembled frames the writer
// returns to frameBufs; a larger one is left to the garbage collector.
const frameBufKeep = 512 << 10

// frameBufs holds the buffers the writers assemble runs of notifications
// in. A writer takes one for the length of a write only, so an idle
// connection holds none.
var frameBufs = sync.Pool{New: func() any { return new([]byte) }}

// writeBounder is a stream whose writes can be bounded once for the
// connection rather than by a ctx with a deadline per write
// (jsonrpc.WSStream made by jsonrpc.AcceptWebSocket): BoundWrites
// reports whether it did.
type writeBounder interface {
	BoundWrites(ctx context.Context, timeout time.Duration) bool
}

// writeLoop is the connection's only writer. When the stream can
// (jsonrpc.BatchWriter) it sends what is queued in batches, within
// maxBatchFrames and maxBatchBytes: a subscription's burst of
// notifications costs one write to the connection rather than one each.
// It never waits for more frames: a lone frame is written at once. Each
// write is bounded by WriteTimeout and ends with the connection's ctx:
// through the stream's own bound when it has one, else with a ctx per
// write. It exits after stopWriting is closed and the queue drained, or
// on a write error.
func (c *Conn) writeLoop() {
	defer close(c.writerDone)
	bw, _ := c.stream.(jsonrpc.BatchWriter)
	wb, _ := c.stream.(writeBounder)
	bounded := wb != nil && wb.BoundWrites(c.ctx, c.s.cfg.WriteTimeout)
	var (
		frames []outFrame
		size   int
		// next is a frame taken from the queue that did not fit in the
		// batch before it.
		next    outFrame
		hasNext bool
		batch   [][]byte
	)
	add := func(f outFrame) {
		frames = append(frames, f)
		size += f.size
	}
	// fill adds what else is queued, within the batch's bounds.
	fill := func() {
		for bw != nil && len(frames) < maxBatchFrames && !hasNext {
			select {
			case f := <-c.out:
				if size+f.size > maxBatchBytes {
					next, hasNext = f, true
				} else {
					add(f)
				}
			default:
				return
			}
		}
	}
	// write sends frames (and forgets them); false means stop. The
	// notifications leave the connection's queue as they are taken, and
	// the stream budget once written: until then they are held.
	write := func() bool {
		var notified int64
		var buf *[]byte // the runs' frames, assembled
		defer func() {
			clear(frames)
			frames, size = frames[:0], 0
			clear(batch)
			batch = batch[:0]
			c.acct.release(notified)
			if buf != nil && cap(*buf) <= frameBufKeep {
				*buf = (*buf)[:0]
				frameBufs.Put(buf)
			}
		}()
		runBytes := 0
		for _, f := range frames {
			if f.notif {
				c.queue.giveFrames(f.frames(), f.size)
				notified += int64(f.size)
			}
			if f.events != nil {
				runBytes += f.size
			}
		}
		if c.ctx.Err() != nil {
			return false // cancelled: nobody is waiting for more output
		}
		if runBytes > 0 {
			buf = frameBufs.Get().(*[]byte)
			*buf = slices.Grow((*buf)[:0], runBytes)
		}
		for _, f := range frames {
			if f.events == nil {
				batch = append(batch, f.b)
				continue
			}
			for _, e := range f.events {
				start := len(*buf)
				*buf = append(append(append(*buf, f.prefix...), e...), eventFrameSuffix...)
				batch = append(batch, (*buf)[start:len(*buf):len(*buf)])
			}
		}
		wctx := c.ctx
		if !bounded {
			var cancel context.CancelFunc
			wctx, cancel = context.WithTimeout(c.ctx, c.s.cfg.WriteTimeout)
			defer cancel()
		}
		c.acct.startWrite()
		defer c.acct.endWrite()
		var err error
		switch {
		case len(batch) == 1:
			err = c.stream.Write(wctx, batch[0])
		case bw != nil:
			// The batch is copied into one write while it is sent.
			c.acct.charge(int64(size))
			err = bw.WriteBatch(wctx, batch)
			c.acct.release(int64(size))
		default:
			for _, b := range batch {
				if err = c.stream.Write(wctx, b); err != nil {
					break
				}
			}
		}
		if err != nil {
			c.s.log.Debug("rpc: write failed; closing connection", "conn", c.id, "err", err)
			c.cancel()
			return false
		}
		return true
	}
	stopping := false
	for {
		if hasNext {
			add(next)
			next, hasNext = outFrame{}, false
		} else if stopping {
			select {
			case f := <-c.out:
				add(f)
			default:
				return // drained
			}
		} else {
			select {
			case f := <-c.out:
				add(f)
			case <-c.stopWriting:
				stopping = true
				continue
			}
		}
		fill()
		if !write() {
			if hasNext && next.notif {
				c.queue.giveFrames(next.frames(), next.size)
				c.acct.release(int64(next.size))
			}
			return
		}
	}
}

// serve reads and dispatches frames until the stream ends, then shuts the
// connection down in order: stop reading, wait for handlers, run cleanups,
// flush and stop the writer, close the stream. It returns nil when the
// peer finished cleanly.
func (c *Conn) serve() error {
	go c.writeLoop()
	closed := make(chan struct{})
	stop := context.AfterFunc(c.ctx, func() {
		defer close(closed)
		c.markDone()
		_ = c.stream.Close() // unblock a pending read
	})

	var readErr error
	for {
		frame, err := c.stream.Read(c.ctx)
		if errors.Is(err, jsonrpc.ErrTooLarge) {
			e := api.Errorf(api.KindTooLarge, "frame exceeds %d bytes", c.s.cfg.MaxFrameBytes).With("limit", c.s.cfg.MaxFrameBytes)
			c.send(jsonrpc.AppendError(nil, nil, encodeError(e)))
			continue
		}
		if err != nil {
			readErr = err
			break
		}
		c.handleFrame(frame, c.send)
	}
	// A half-closed stdio stream lets in-flight requests finish and be
	// answered; any other end of input means nobody is listening.
	halfClosed := errors.Is(readErr, io.EOF) && c.transport == TransportStdio
	if !halfClosed {
		c.cancel()
	}
	c.markDone()
	c.handlers.Wait()
	c.finish()
	close(c.stopWriting)
	<-c.writerDone
	c.acct.close() // what is left in the queue is dropped with the connection
	if !stop() {
		<-closed // the AfterFunc ran or is running: wait for it
	}
	c.cancel()
	_ = c.stream.Close()
	if errors.Is(readErr, io.EOF) {
		return nil
	}
	return fmt.Errorf("rpc: conn %s: %w", c.id, readErr)
}

// finish runs the cleanups once.
func (c *Conn) finish() {
	c.mu.Lock()
	fs := c.cleanups
	c.cleanups = nil
	c.cleanupsRan = true
	c.mu.Unlock()
	for i := len(fs) - 1; i >= 0; i-- {
		c.runCleanup(fs[i])
	}
}

func (c *Conn) runCleanup(f func()) {
	defer func() {
		if p := recover(); p != nil {
			c.s.log.Error("rpc: panic in OnClose cleanup", "conn", c.id, "panic", fmt.Sprint(p))
		}
	}()
	f()
}

// handleFrame decodes one frame and starts its requests. emit is called at
// most once, possibly from another goroutine, with the frame's response
// (a single response or a batch array); never for notifications only.
func (c *Conn) handleFrame(frame []byte, emit func([]byte)) {
	items, batch, derr := jsonrpc.DecodeFrame(frame)
	if derr != nil {
		kind := api.KindInvalidRequest
		if derr.Code == jsonrpc.CodeParseError {
			kind = api.KindParse
		}
		emit(jsonrpc.AppendError(nil, nil, encodeError(api.NewError(kind, derr.Message))))
		return
	}
	if !batch {
		it := items[0]
		if it.Err != nil {
			emit(jsonrpc.AppendError(nil, it.ID, encodeError(api.NewError(api.KindInvalidRequest, it.Err.Message))))
			return
		}
		c.start(it.Request, func(b []byte) {
			if b != nil {
				emit(b)
			}
		})
		return
	}
	results := make([][]byte, len(items))
	var wg sync.WaitGroup
	for i, it := range items {
		if it.Err != nil {
			results[i] = jsonrpc.AppendError(nil, it.ID, encodeError(api.NewError(api.KindInvalidRequest, it.Err.Message)))
			continue
		}
		wg.Add(1)
		c.start(it.Request, func(b []byte) {
			results[i] = b
			wg.Done()
		})
	}
	c.handlers.Add(1)
	go func() {
		defer c.handlers.Done()
		wg.Wait()
		var out [][]byte
		for _, r := range results {
			if r != nil {
				out = append(out, r)
			}
		}
		if len(out) > 0 {
			emit(jsonrpc.AppendBatch(nil, out))
		}
	}()
}

// start runs req in its own goroutine, bounded by the connection's
// concurrency limit, and calls deliver exactly once with the encoded
// response (nil for a notification).
func (c *Conn) start(req *jsonrpc.Request, deliver func([]byte)) {
	if req.IsNotification() {
		// Notifications get no overloaded answer; they wait for a slot.
		select {
		case c.sem <- struct{}{}:
		case <-c.ctx.Done():
			deliver(nil)
			return
		}
	} else {
		select {
		case c.sem <- struct{}{}:
		default:
			e := api.Errorf(api.KindOverloaded, "too many concurrent requests on this connection (limit %d)", cap(c.sem)).
				With("limit", cap(c.sem))
			deliver(jsonrpc.AppendError(nil, req.ID, encodeError(e)))
			return
		}
	}
	c.handlers.Add(1)
	go func() {
		defer c.handlers.Done()
		defer func() { <-c.sem }()
		hooks := &replyHooks{}
		result, e := c.s.dispatch(c.clientContext(context.WithValue(c.ctx, replyKey{}, hooks)), req)
		if req.IsNotification() {
			if e != nil {
				c.s.log.Debug("rpc: notification failed", "method", req.Method, "conn", c.id, "err", e)
			}
			deliver(nil)
			return
		}
		if e != nil {
			deliver(jsonrpc.AppendError(nil, req.ID, encodeError(e)))
			return
		}
		deliver(jsonrpc.AppendResult(nil, req.ID, result))
		for _, f := range hooks.fns {
			f()
		}
	}()
}

type replyKey struct{}

// replyHooks collects the functions a handler asked to run after its
// successful response was queued.
type replyHooks struct{ fns []func() }

// AfterReply arranges for f to run once the handler's successful response
// has been queued on its connection, so that notifications f sends follow
// the response (a subscription's first events follow its subscriptionId).
// f does not run when the handler fails or the request is a notification.
// Inside a batch, the batch's response may still be written after f's
// notifications. It reports false when ctx is not a handler's context.
func AfterReply(ctx context.Context, f func()) bool {
	h, ok := ctx.Value(replyKey{}).(*replyHooks)
	if !ok {
		return false
	}
	h.fns = append(h.fns, f)
	return true
}

// NotifyWait is Notify that waits for room in the connection's queue
// instead of failing with [ErrNotifyOverflow]: a subscription uses it to
// apply backpressure and decides itself when a client is too slow. It
// returns ctx's error, [ErrConnClosed] or [ErrNoPush].
func (c *Conn) NotifyWait(ctx context.Context, method string, params any) error {
	if c.stream == nil {
		return ErrNoPush
	}
	var raw json.RawMessage
	if params != nil {
		b, err := json.Marshal(params)
		if err != nil {
			return fmt.Errorf("rpc: notify %s: encode params: %w", method, err)
		}
		raw = b
	}
	return c.notifyFrame(ctx, method, jsonrpc.AppendRequest(nil, nil, method, raw))
}

// notifyFrame is NotifyWait for a notification already encoded as a
// frame (a subscription's events, whose encoding is shared); method is
// for errors. It waits for room in the connection's queue, then in the
// server's stream budget.
func (c *Conn) notifyFrame(ctx context.Context, method string, frame []byte) error {
	return c.enqueue(ctx, method, frame, func() error {
		if err := c.acct.acquire(ctx, int64(len(frame)), c.done); err != nil {
			if errors.Is(err, errEvicted) || errors.Is(err, errStopped) {
				return ErrConnClosed
			}
			return fmt.Errorf("rpc: notify %s: %w", method, err)
		}
		return nil
	})
}

// notifyEvents queues the events/event notifications of evs, live
// events with their shared encoding (JSON not nil), each frame prefix,
// the event's JSON and eventFrameSuffix: byte for byte what
// eventFrame gives. They go to the writer in runs, one channel send
// each, as many frames at a time as the connection's queue has room for
// (within the writer's batch bounds), so that a subscriber's wake costs
// the writer one wake and one write, not one per event, and no frame is
// allocated per subscriber. It waits for room as notifyFrame does (for
// the first frame of each run; the others are taken while they fit) and
// returns how many of evs were queued, with the error that stopped it.
func (c *Conn) notifyEvents(ctx context.Context, prefix []byte, evs []event.Encoded) (int, error) {
	if c.stream == nil {
		return 0, ErrNoPush
	}
	queued := 0
	for queued < len(evs) {
		var run [][]byte
		size := 0
		for i := queued; i < len(evs) && len(run) < maxBatchFrames; i++ {
			n := len(prefix) + len(evs[i].JSON) + len(eventFrameSuffix)
			if run == nil {
				if err := c.queue.take(ctx, n, c.writerDone, ErrConnClosed); err != nil {
					if errors.Is(err, ErrConnClosed) {
						return queued, err
					}
					return queued, fmt.Errorf("rpc: notify %s: %w", api.NotifyEvent, err)
				}
				run = make([][]byte, 0, min(len(evs)-queued, maxBatchFrames))
			} else if size+n > maxBatchBytes || !c.queue.tryTake(n) {
				break
			}
			run = append(run, evs[i].JSON)
			size += n
		}
		if err := c.acct.acquire(ctx, int64(size), c.done); err != nil {
			c.queue.giveFrames(len(run), size)
			if errors.Is(err, errEvicted) || errors.Is(err, errStopped) {
				return queued, ErrConnClosed
			}
			return queued, fmt.Errorf("rpc: notify %s: %w", api.NotifyEvent, err)
		}
		var err error
		select {
		case c.out <- outFrame{prefix: prefix, events: run, size: size, notif: true}:
		case <-c.writerDone:
			err = ErrConnClosed
		case <-ctx.Done():
			err = fmt.Errorf("rpc: notify %s: %w", api.NotifyEvent, ctx.Err())
		}
		if err != nil {
			c.queue.giveFrames(len(run), size)
			c.acct.release(int64(size))
			return queued, err
		}
		queued += len(run)
	}
	return queued, nil
}

// notifyAdmitted is notifyFrame for a frame made of a replay page that
// the stream budget admitted already: the frame is counted without
// waiting, and the caller then gives the page's room back (the frame
// holds the bytes now), so that a page is never held while waiting for
// room.
func (c *Conn) notifyAdmitted(ctx context.Context, method string, frame []byte) error {
	return c.enqueue(ctx, method, frame, func() error {
		c.acct.charge(int64(len(frame)))
		return nil
	})
}

// enqueue queues frame once it has room in the connection's queue and
// admit (which counts it in the stream budget) succeeded.
func (c *Conn) enqueue(ctx context.Context, method string, frame []byte, admit func() error) error {
	if c.stream == nil {
		return ErrNoPush
	}
	if err := c.queue.take(ctx, len(frame), c.writerDone, ErrConnClosed); err != nil {
		if errors.Is(err, ErrConnClosed) {
			return err
		}
		return fmt.Errorf("rpc: notify %s: %w", method, err)
	}
	if err := admit(); err != nil {
		c.queue.give(len(frame))
		return err
	}
	select {
	case c.out <- wholeFrame(frame, true):
		return nil
	case <-c.writerDone:
		c.queue.give(len(frame))
		c.acct.release(int64(len(frame)))
		return ErrConnClosed
	case <-ctx.Done():
		c.queue.give(len(frame))
		c.acct.release(int64(len(frame)))
		return fmt.Errorf("rpc: notify %s: %w", method, ctx.Err())
	}
}

// acquireConn reserves a connection slot; it fails when the server is at
// MaxConns or closed.
func (s *Server) acquireConn() bool {
	s.connMu.Lock()
	defer s.connMu.Unlock()
	if s.closed || s.nconns >= s.cfg.MaxConns {
		return false
	}
	s.nconns++
	s.connWG.Add(1)
	return true
}

// track registers c so that Close can cancel it and assigns its id.
func (s *Server) track(c *Conn) bool {
	s.connMu.Lock()
	defer s.connMu.Unlock()
	s.nextConn++
	c.id = strconv.FormatUint(s.nextConn, 10)
	if s.closed {
		return false
	}
	s.conns[c] = struct{}{}
	return true
}

func (s *Server) releaseConn(c *Conn) {
	s.connMu.Lock()
	if c != nil {
		delete(s.conns, c)
	}
	s.nconns--
	s.connMu.Unlock()
	s.connWG.Done()
}

// Close ends every connection: it cancels their contexts (and so their
// handlers), ends the SSE streams of [HTTPHandler], refuses new
// connections and waits until every connection the server is serving has
// finished. It returns nil; calling it again is harmless. Close does not
// stop an http.Server: register it with http.Server.RegisterOnShutdown,
// so that Shutdown first stops the listeners and then ends the streams
// that would otherwise hold it for its whole timeout.
func (s *Server) Close() error {
	s.connMu.Lock()
	if !s.closed {
		s.closed = true
		close(s.done)
	}
	for c := range s.conns {
		c.cancel()
	}
	s.connMu.Unlock()
	s.connWG.Wait()
	return nil
}

// Done returns a channel closed when Close begins: long-lived streams
// outside the JSON-RPC connections (SSE) end on it.
func (s *Server) Done() <-chan struct{} { return s.done }
