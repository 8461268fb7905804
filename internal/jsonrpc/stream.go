package jsonrpc

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/coder/websocket"
)

// ErrTooLarge is returned by a stream's Read for a frame longer than the
// stream's limit. The oversized frame has been discarded (never buffered
// whole) and the next Read returns the following frame.
var ErrTooLarge = errors.New("jsonrpc: frame too large")

// Stream is a framed, bidirectional message stream carrying one JSON-RPC
// message (or batch) per frame.
//
// Read may be called by one goroutine at a time; Write may be called
// concurrently with Read and with other Writes; Close may be called
// concurrently with both and more than once.
type Stream interface {
	// Read returns the next frame. The slice is owned by the caller. It
	// returns ErrTooLarge for an oversized frame (the stream stays usable)
	// and io.EOF when the peer has finished sending.
	Read(ctx context.Context) ([]byte, error)
	// Write sends one frame.
	Write(ctx context.Context, frame []byte) error
	// Close releases the stream, unblocking pending reads where the
	// underlying transport allows it.
	Close() error
}

// BatchWriter is implemented by streams that can send several frames in
// fewer writes to their transport than one each. WriteBatch sends the
// frames in order, as Write would, and may be called concurrently with
// Read and Write.
type BatchWriter interface {
	WriteBatch(ctx context.Context, frames [][]byte) error
}

// LineStream is a [Stream] over newline-delimited JSON: each frame is one
// line, without the newline. Blank lines are skipped and a trailing "\r" is
// ignored (it is JSON whitespace). Reads are bounded: a line longer than the
// limit is skipped up to its newline and reported as [ErrTooLarge].
//
// Read ignores its ctx because an io.Reader cannot be interrupted; to
// unblock a pending Read, Close the stream (which closes the reader if it
// is an io.Closer). LineStream is safe for the concurrency [Stream]
// allows.
type LineStream struct {
	max int64
	rmu sync.Mutex
	br  *bufio.Reader
	r   io.Reader

	wmu  sync.Mutex
	w    io.Writer
	wbuf []byte

	closeOnce sync.Once
	closeErr  error
}

// NewLineStream returns a LineStream reading frames of at most maxFrame
// bytes from r and writing frames to w. Close closes r and w if they
// implement io.Closer; wrap them to prevent that.
func NewLineStream(r io.Reader, w io.Writer, maxFrame int64) *LineStream {
	return &LineStream{max: maxFrame, br: bufio.NewReaderSize(r, 64<<10), r: r, w: w}
}

// Read implements [Stream].
func (s *LineStream) Read(_ context.Context) ([]byte, error) {
	s.rmu.Lock()
	defer s.rmu.Unlock()
	for {
		line, err := s.readLine()
		if err != nil && (len(line) == 0 || !errors.Is(err, io.EOF)) {
			return nil, err
		}
		if len(bytes.TrimSpace(line)) == 0 {
			if err != nil {
				return nil, err
			}
			continue
		}
		return line, nil
	}
}

// readLine reads through the next newline, keeping at most s.max bytes of
// content. On an oversized line it keeps reading (and discarding) until the
// newline so the stream resynchronises.
func (s *LineStream) readLine() ([]byte, error) {
	var buf []byte
	var n int64
	tooLarge := false
	for {
		chunk, err := s.br.ReadSlice('\n')
		content := chunk
		if err == nil {
			content = chunk[:len(chunk)-1]
		}
		n += int64(len(content))
		if !tooLarge {
			if n > s.max {
				tooLarge = true
				buf = nil
			} else {
				buf = append(buf, content...)
			}
		}
		switch {
		case err == nil:
			if tooLarge {
				return nil, ErrTooLarge
			}
			return bytes.TrimSuffix(buf, []byte{'\r'}), nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		default:
			if tooLarge {
				return nil, ErrTooLarge
			}
			if errors.Is(err, io.EOF) {
				return buf, io.EOF
			}
			return buf, fmt.Errorf("jsonrpc: read frame: %w", err)
		}
	}
}

// Write implements [Stream]: it writes frame followed by a newline in one
// Write call. frame must not contain a raw newline (encoded JSON never
// does).
func (s *LineStream) Write(_ context.Context, frame []byte) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	s.wbuf = append(append(s.wbuf[:0], frame...), '\n')
	if _, err := s.w.Write(s.wbuf); err != nil {
		return fmt.Errorf("jsonrpc: write frame: %w", err)
	}
	if cap(s.wbuf) > 1<<20 {
		s.wbuf = nil // do not pin one huge buffer
	}
	return nil
}

// WriteBatch implements [BatchWriter]: it writes the frames, each
// followed by a newline, in one Write call.
func (s *LineStream) WriteBatch(_ context.Context, frames [][]byte) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	s.wbuf = s.wbuf[:0]
	for _, f := range frames {
		s.wbuf = append(append(s.wbuf, f...), '\n')
	}
	if _, err := s.w.Write(s.wbuf); err != nil {
		return fmt.Errorf("jsonrpc: write frames: %w", err)
	}
	if cap(s.wbuf) > 1<<20 {
		s.wbuf = nil // do not pin one huge buffer
	}
	return nil
}

// Close implements [Stream]. It closes the reader and then the writer when
// they implement io.Closer, once; later calls return the first result.
func (s *LineStream) Close() error {
	s.closeOnce.Do(func() {
		var errs []error
		if c, ok := s.r.(io.Closer); ok {
			errs = append(errs, c.Close())
		}
		if c, ok := s.w.(io.Closer); ok {
			errs = append(errs, c.Close())
		}
		s.closeErr = errors.Join(errs...)
	})
	return s.closeErr
}

// WSStream is a [Stream] over a WebSocket connection: one JSON-RPC message
// per WebSocket message (text; binary is accepted too). Reads are bounded by
// the stream's own limit rather than the library's, so that an oversized
// message is discarded and reported as [ErrTooLarge] without closing the
// connection.
type WSStream struct {
	c   *websocket.Conn
	max int64
	// cork, set by AcceptWebSocket, holds a batch's messages back so
	// that they go to the connection in one write.
	cork *corkConn
	// wmu serialises batches.
	wmu sync.Mutex
}

// NewWSStream returns a WSStream over c reading messages of at most
// maxFrame bytes. It disables c's own read limit. Close closes c.
func NewWSStream(c *websocket.Conn, maxFrame int64) *WSStream {
	c.SetReadLimit(-1)
	return &WSStream{c: c, max: maxFrame}
}

// Read implements [Stream]; ctx cancels a pending read (and, as with any
// coder/websocket read, closes the connection).
func (s *WSStream) Read(ctx context.Context) ([]byte, error) {
	_, r, err := s.c.Reader(ctx)
	if err != nil {
		if websocket.CloseStatus(err) == websocket.StatusNormalClosure || websocket.CloseStatus(err) == websocket.StatusGoingAway {
			return nil, io.EOF
		}
		return nil, fmt.Errorf("jsonrpc: websocket read: %w", err)
	}
	buf, err := io.ReadAll(io.LimitReader(r, s.max+1))
	if err != nil {
		return nil, fmt.Errorf("jsonrpc: websocket read: %w", err)
	}
	if int64(len(buf)) > s.max {
		// Discard the rest of the message with bounded memory.
		if _, err := io.Copy(io.Discard, r); err != nil {
			return nil, fmt.Errorf("jsonrpc: websocket read: %w", err)
		}
		return nil, ErrTooLarge
	}
	return buf, nil
}

// Write implements [Stream]. A stream made by [AcceptWebSocket] sends
// the message as a batch of one ([WSStream.WriteBatch]).
func (s *WSStream) Write(ctx context.Context, frame []byte) error {
	if s.cork != nil {
		return s.WriteBatch(ctx, [][]byte{frame})
	}
	if err := s.c.Write(ctx, websocket.MessageText, frame); err != nil {
		return fmt.Errorf("jsonrpc: websocket write: %w", err)
	}
	return nil
}

// WriteBatch implements [BatchWriter]: one message per frame. A stream
// made by [AcceptWebSocket] sends them in one write to the connection,
// which ctx bounds; when that write fails the connection is closed, since
// the peer may have received part of a message. Other streams write the
// messages one by one.
func (s *WSStream) WriteBatch(ctx context.Context, frames [][]byte) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.cork == nil {
		for _, f := range frames {
			if err := s.c.Write(ctx, websocket.MessageText, f); err != nil {
				return fmt.Errorf("jsonrpc: websocket write: %w", err)
			}
		}
		return nil
	}
	// The messages are framed straight into the cork's buffer (see
	// corkConn.appendText): through the library each would cost its
	// locks, a flush and a copy, as much CPU as the write itself for a
	// small notification. The cork's one write is bounded by ctx.
	s.cork.cork()
	s.cork.appendText(frames)
	if err := s.cork.uncork(ctx); err != nil {
		s.c.CloseNow()
		return fmt.Errorf("jsonrpc: websocket write: %w", err)
	}
	return nil
}

// BoundWrites makes every later write to the connection fail unless it
// completes within timeout (to one and a half timeouts), the library's
// own frames included, and makes the stream's writes fail once ctx
// ends, the one in progress included; a write's own ctx is then only
// checked before it starts, and the library's frames (a close
// handshake) are still written after ctx ends. This costs a clock read
// per write, where a ctx with a deadline per write costs a timer, a
// context.AfterFunc and two deadline changes. It reports false, and
// does nothing, for a stream not made by [AcceptWebSocket] or a
// timeout that is not positive. Call it once, before the first write.
func (s *WSStream) BoundWrites(ctx context.Context, timeout time.Duration) bool {
	if s.cork == nil || timeout <= 0 {
		return false
	}
	s.cork.bound(ctx, timeout)
	return true
}

// CloseStatus closes the connection with a status code and reason.
func (s *WSStream) CloseStatus(code websocket.StatusCode, reason string) error {
	return s.c.Close(code, reason)
}

// Close implements [Stream]: a normal close handshake (bounded by the
// library's timeout), falling back to closing the socket.
func (s *WSStream) Close() error {
	if err := s.c.Close(websocket.StatusNormalClosure, ""); err != nil {
		_ = s.c.CloseNow()
	}
	return nil
}
