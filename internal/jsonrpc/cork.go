package jsonrpc

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/coder/websocket"
)

// AcceptWebSocket accepts a WebSocket handshake (websocket.Accept with
// opts) and returns a [WSStream] over it whose [WSStream.WriteBatch]
// sends several messages in one write to the connection.
// coder/websocket writes every message to the socket as soon as it is
// complete; a server sending many small notifications would otherwise
// pay a system call for each. On failure Accept has written the response.
func AcceptWebSocket(w http.ResponseWriter, r *http.Request, opts *websocket.AcceptOptions, maxFrame int64) (*WSStream, error) {
	hw := &corkHijacker{ResponseWriter: w}
	c, err := websocket.Accept(hw, r, opts)
	if err != nil {
		return nil, err
	}
	s := NewWSStream(c, maxFrame)
	s.cork = hw.conn
	return s, nil
}

// corkHijacker is the http.ResponseWriter websocket.Accept sees: its
// Hijack wraps the connection in a corkConn.
type corkHijacker struct {
	http.ResponseWriter
	conn *corkConn
}

// Hijack implements http.Hijacker. The library writes through the
// returned buffered writer, which net/http points at the raw
// connection; it is pointed at the corkConn instead.
func (h *corkHijacker) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	conn, brw, err := http.NewResponseController(h.ResponseWriter).Hijack()
	if err != nil {
		return nil, nil, err
	}
	if err := brw.Writer.Flush(); err != nil {
		conn.Close()
		return nil, nil, fmt.Errorf("jsonrpc: hijack: %w", err)
	}
	h.conn = &corkConn{Conn: conn}
	brw.Writer.Reset(h.conn)
	return h.conn, brw, nil
}

// Unwrap returns the wrapped ResponseWriter, for http.ResponseController.
func (h *corkHijacker) Unwrap() http.ResponseWriter { return h.ResponseWriter }

// corkKeep is the largest buffer a cork returns to corkBufs; a larger one
// (a batch of big messages) is left to the garbage collector.
const corkKeep = 512 << 10

// corkBufs holds the buffers of corks in use. A cork takes one for the
// length of a batch only, so an idle connection holds none, and the few
// batches being written at any moment share a few buffers.
var corkBufs = sync.Pool{New: func() any { return new([]byte) }}

// corkConn is a net.Conn whose writes can be held back: between cork and
// uncork they go to a buffer, and uncork sends the buffer in one write.
// It holds nothing between batches: every uncork either sends what was
// held back or fails and drops it, so no message waits for a later write.
// Writes are serialised by the WebSocket library; the mutex orders them
// with cork and uncork, which the stream's batch writer calls.
type corkConn struct {
	net.Conn

	mu  sync.Mutex
	buf *[]byte // non-nil while corked
	// timeout, once set by bound, bounds every write with a deadline
	// kept on the connection (see aheadLocked).
	timeout time.Duration

	// dmu orders the deadline's changes; it is never held during a
	// write, so that bound's ctx can end a batch's write in progress.
	dmu      sync.Mutex
	deadline time.Time // the write deadline set; zero once ended
	batching bool      // a batch's write is in progress
	stopped  error     // bound's ctx has ended: batches fail with this
}

// bound makes every later write to c fail if it does not complete
// within timeout, and every later batch fail at once after ctx ends
// (ending the one in progress), without a context or a timer per
// write: the connection keeps a write deadline that aheadLocked moves
// on at most once per half timeout, and one context.AfterFunc ends it.
// The library's own frames (a close handshake) are still written after
// ctx ends, within the timeout. It is called once, before the writer's
// first write.
func (c *corkConn) bound(ctx context.Context, timeout time.Duration) {
	c.mu.Lock()
	c.timeout = timeout
	c.mu.Unlock()
	context.AfterFunc(ctx, func() {
		c.dmu.Lock()
		defer c.dmu.Unlock()
		c.stopped = context.Cause(ctx)
		if c.batching {
			c.deadline = time.Time{}
			_ = c.Conn.SetWriteDeadline(time.Unix(1, 0))
		}
	})
}

// aheadLocked makes sure the connection's write deadline is at least a
// timeout away, moving it to one and a half timeouts away when it is
// not: a write is given between one and one and a half timeouts. c.dmu
// is held.
func (c *corkConn) aheadLocked() error {
	if now := time.Now(); c.deadline.Before(now.Add(c.timeout)) {
		c.deadline = now.Add(c.timeout + c.timeout/2)
		return c.Conn.SetWriteDeadline(c.deadline)
	}
	return nil
}

// ahead is aheadLocked for the library's own writes.
func (c *corkConn) ahead() error {
	c.dmu.Lock()
	defer c.dmu.Unlock()
	return c.aheadLocked()
}

// writeBatch writes a batch's bytes within the bound's deadline; it
// fails at once when bound's ctx has ended, and a write in progress
// when it ends fails too. c.mu is held.
func (c *corkConn) writeBatch(p []byte) error {
	c.dmu.Lock()
	err := c.stopped
	if err == nil {
		err = c.aheadLocked()
	}
	c.batching = err == nil
	c.dmu.Unlock()
	if err != nil {
		return err
	}
	_, err = c.Conn.Write(p)
	c.dmu.Lock()
	c.batching = false
	stopped := c.stopped
	c.dmu.Unlock()
	if err != nil && stopped != nil {
		err = fmt.Errorf("%w (%w)", err, stopped)
	}
	return err
}

// Write implements io.Writer: to the buffer while corked, else to the
// connection.
func (c *corkConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.buf != nil {
		*c.buf = append(*c.buf, p...)
		return len(p), nil
	}
	if c.timeout > 0 {
		// Keep the deadline ahead of the library's own writes too (a
		// pong after a long idle spell).
		if err := c.ahead(); err != nil {
			return 0, err
		}
	}
	return c.Conn.Write(p)
}

// cork holds back the writes that follow, until uncork.
func (c *corkConn) cork() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.buf == nil {
		c.buf = corkBufs.Get().(*[]byte)
	}
}

// appendText adds each of msgs to the held-back writes as one text
// message: a single unmasked frame (RFC 6455 §5.2; a server's frames
// are never masked). c must be corked. This is safe beside the library's
// own writes, which reach c only while corked, whole: every frame it
// writes ends with a flush of its buffered writer, and a control frame
// (a pong, a close) fits in that buffer, so it arrives in one Write,
// which c.mu orders with these messages. The library's data messages
// come from the stream's writer alone, like these.
func (c *corkConn) appendText(msgs [][]byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, m := range msgs {
		*c.buf = appendTextFrame(*c.buf, m)
	}
}

// appendTextFrame appends m to dst as a final, unmasked text frame.
func appendTextFrame(dst, m []byte) []byte {
	const finText = 0x81 // FIN, opcode 1 (text)
	switch n := len(m); {
	case n < 126:
		dst = append(dst, finText, byte(n))
	case n <= math.MaxUint16:
		dst = append(dst, finText, 126)
		dst = binary.BigEndian.AppendUint16(dst, uint16(n))
	default:
		dst = append(dst, finText, 127)
		dst = binary.BigEndian.AppendUint64(dst, uint64(n))
	}
	return append(dst, m...)
}

// uncork lets later writes through and sends what was held back in one
// write, which fails when ctx ends first. The buffer is released either
// way.
func (c *corkConn) uncork(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	buf := c.buf
	if buf == nil {
		return nil
	}
	c.buf = nil
	defer func() {
		if cap(*buf) <= corkKeep {
			*buf = (*buf)[:0]
			corkBufs.Put(buf)
		}
	}()
	if len(*buf) == 0 {
		return nil
	}
	return c.write(ctx, *buf)
}

// write writes p to the connection. Once bound, within the bound's
// deadline, and ctx is only looked at before the write; before, within
// ctx: the write deadline is ctx's, and ctx's end interrupts the write.
// Called with c.mu held, so that no other write sees the deadline.
func (c *corkConn) write(ctx context.Context, p []byte) error {
	if err := ctx.Err(); err != nil {
		return context.Cause(ctx)
	}
	if c.timeout > 0 {
		return c.writeBatch(p)
	}
	deadline, _ := ctx.Deadline() // zero: none
	if err := c.Conn.SetWriteDeadline(deadline); err != nil {
		return err
	}
	interrupted := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		defer close(interrupted)
		c.Conn.SetWriteDeadline(time.Unix(1, 0))
	})
	_, err := c.Conn.Write(p)
	if !stop() {
		// ctx ended: wait until its deadline is set, so that the reset
		// below is the last word.
		<-interrupted
		if err != nil {
			err = fmt.Errorf("%w (%w)", err, context.Cause(ctx))
		}
	}
	c.Conn.SetWriteDeadline(time.Time{})
	return err
}
