package rpc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"weft.dev/weft/api"
	"weft.dev/weft/event"
)

// SSEOptions tunes the SSE endpoint. Zero fields take the defaults.
type SSEOptions struct {
	// Heartbeat is the interval of comment lines that keep proxies from
	// closing an idle stream; zero means 15 s.
	Heartbeat time.Duration
	// RetryMs is the reconnection delay hinted to EventSource; zero means 1000.
	RetryMs int
	// WriteTimeout is how long one write to a client may block (to half
	// as long again: the deadline is moved on at most once per half
	// timeout); a reader that stays stalled longer is dropped (it
	// resumes by cursor), so it holds no memory. Zero means 30 s.
	WriteTimeout time.Duration
}

func (o SSEOptions) withDefaults() SSEOptions {
	if o.Heartbeat <= 0 {
		o.Heartbeat = 15 * time.Second
	}
	if o.RetryMs <= 0 {
		o.RetryMs = 1000
	}
	if o.WriteTimeout <= 0 {
		o.WriteTimeout = 30 * time.Second
	}
	return o
}

// HTTPHandler serves the whole HTTP surface of a host: JSON-RPC on
// POST /rpc and GET /rpc/ws, GET /healthz, and the SSE endpoints
// GET /v1/sessions/{id}/events and GET /v1/processes/{id}/output, which
// stream h's events and processes' output (as [NewHostServer] does, with
// the host's shared encodings when it has them). Every route but
// /healthz is authenticated as [Server.Handler]'s are. The streams end
// when s closes.
func HTTPHandler(s *Server, h api.Host, opts SSEOptions) http.Handler {
	opts = opts.withDefaults()
	mux := http.NewServeMux()
	mux.Handle("/", s.Handler())
	mux.Handle("GET /v1/sessions/{id}/events", s.authenticate(&sseHandler{h: h, opts: opts, done: s.Done(), budget: s.budget}))
	mux.Handle("GET /v1/processes/{id}/output", s.authenticate(&processSSE{h: h, opts: opts, done: s.Done(), budget: s.budget}))
	return mux
}

// sseWriter writes one SSE stream with a deadline on every write, so a
// client that stops reading is dropped rather than kept forever. The
// stream budget may also drop it from another goroutine (evict). Its
// writes come from one goroutine.
type sseWriter struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
	until   time.Time // the write deadline set
	buf     []byte    // scratch for an event's id line and JSON head

	evicted atomic.Bool
	mu      sync.Mutex
	done    bool // the handler has returned: rc is not ours any more
}

func newSSEWriter(w http.ResponseWriter, timeout time.Duration) *sseWriter {
	return &sseWriter{w: w, rc: http.NewResponseController(w), timeout: timeout}
}

// deadline makes sure the write deadline is at least a timeout away,
// moving it to one and a half timeouts away when it is not (once per
// half timeout at most, rather than once per write: a write is given
// one to one and a half timeouts), and fails if the stream has been
// evicted (whose past deadline a move might otherwise undo).
func (sw *sseWriter) deadline() error {
	if now := time.Now(); sw.until.Before(now.Add(sw.timeout)) {
		sw.until = now.Add(sw.timeout + sw.timeout/2)
		if err := sw.rc.SetWriteDeadline(sw.until); err != nil && !errors.Is(err, http.ErrNotSupported) {
			return err
		}
	}
	if sw.evicted.Load() {
		return errEvicted
	}
	return nil
}

// evict ends the write in progress, and every later one, at once. It is
// safe to call from any goroutine, also after the handler returned.
func (sw *sseWriter) evict() {
	sw.evicted.Store(true)
	sw.mu.Lock()
	defer sw.mu.Unlock()
	if !sw.done {
		_ = sw.rc.SetWriteDeadline(time.Now())
	}
}

// finish marks the handler returned: evict no longer touches the
// connection, which may serve another request.
func (sw *sseWriter) finish() {
	sw.mu.Lock()
	sw.done = true
	sw.mu.Unlock()
}

// start writes the stream's headers and its retry hint.
func (sw *sseWriter) start(retryMs int) error {
	sw.w.Header().Set("Content-Type", "text/event-stream")
	sw.w.Header().Set("Cache-Control", "no-cache")
	sw.w.Header().Set("X-Accel-Buffering", "no")
	sw.w.WriteHeader(http.StatusOK)
	return sw.write(true, "retry: %d\n\n", retryMs)
}

// write writes one piece within the write deadline, flushing it when
// flush is set.
func (sw *sseWriter) write(flush bool, format string, args ...any) error {
	if err := sw.deadline(); err != nil {
		return err
	}
	if _, err := fmt.Fprintf(sw.w, format, args...); err != nil {
		return err
	}
	if flush {
		return sw.rc.Flush()
	}
	return nil
}

// events writes events, each as "id: SEQ" and "data: JSON" lines, within
// one write deadline, and flushes once. An event's JSON, or the data of
// an event without one (a replayed event), is written as it is, not
// copied: the response's buffer takes the short pieces around it.
func (sw *sseWriter) events(evs []event.Encoded) error {
	if err := sw.deadline(); err != nil {
		return err
	}
	for _, e := range evs {
		b := append(sw.buf[:0], "id: "...)
		b = strconv.AppendInt(b, e.Event.Seq, 10)
		b = append(b, "\ndata: "...)
		data, end := e.JSON, "\n\n"
		if data == nil {
			var err error
			if data, err = e.Event.JSONData(); err != nil {
				return err
			}
			b, end = e.Event.AppendJSONHead(b), "}\n\n"
		}
		sw.buf = b
		if _, err := sw.w.Write(b); err != nil {
			return err
		}
		if _, err := sw.w.Write(data); err != nil {
			return err
		}
		if _, err := io.WriteString(sw.w, end); err != nil {
			return err
		}
	}
	return sw.rc.Flush()
}

type processSSE struct {
	h      api.Host
	opts   SSEOptions
	done   <-chan struct{} // the server is closing
	budget *streamBudget
}

// ServeHTTP streams a process's output as Server-Sent Events, one chunk
// (JSON: stream, offset, base64 data; or a lost range: offset, lost,
// reason) per event whose id is the offset after it, so a reconnecting
// EventSource resumes where it stopped. The stream ends after the last
// chunk of an ended process.
// ?sessionId= acts as that session (visibility and grants apply).
func (ps *processSSE) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	id, sessionID := r.PathValue("id"), r.URL.Query().Get("sessionId")
	var offset int64
	cursor := r.Header.Get("Last-Event-ID")
	if cursor == "" {
		cursor = r.URL.Query().Get("offset")
	}
	if cursor != "" {
		n, err := strconv.ParseInt(cursor, 10, 64)
		if err != nil || n < 0 {
			writeHTTPError(w, http.StatusBadRequest, api.Errorf(api.KindInvalidParams, "offset %q is not a byte offset", cursor))
			return
		}
		offset = n
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	wg.Go(func() {
		select {
		case <-ps.done:
			cancel()
		case <-ctx.Done():
		}
	})
	sw := newSSEWriter(w, ps.opts.WriteTimeout)
	defer sw.finish()
	// The pages of output the stream reads count in the server's stream
	// budget from their read until written, as an event stream's do; a
	// stalled write may be evicted for others (see streamBudget).
	acct := ps.budget.open(func() {
		sw.evict()
		cancel()
	})
	defer acct.close()
	gate := &replayGate{acct: acct}
	seq, err := ps.h.FollowProcess(api.WithPageGate(ctx, gate), api.ProcessFollowParams{ID: id, SessionID: sessionID, Offset: offset})
	if err != nil {
		// A process this caller cannot see is not found, whatever the
		// reason: no process manager, no such process, another
		// session's. The params are the path's and the query's, checked
		// above, so an invalid_params from h is a host without
		// processes (session.ErrNoProcesses): not_found here.
		e := wireError(err)
		if e.Kind == api.KindInvalidParams {
			e = api.Errorf(api.KindNotFound, "process %s not found: %s", clip(id, 64), e.Message)
		}
		writeHTTPError(w, http.StatusNotFound, e)
		return
	}
	acct.startWrite()
	err = sw.start(ps.opts.RetryMs)
	acct.endWrite()
	if err != nil {
		return
	}
	for c, err := range seq {
		if err != nil {
			return
		}
		b, err := json.Marshal(c)
		if err != nil {
			return
		}
		acct.startWrite()
		err = sw.write(true, "id: %d\ndata: %s\n\n", c.End(), b)
		acct.endWrite()
		if err != nil {
			return
		}
		gate.releaseSome(int64(c.Cost()))
	}
	sw.write(true, "event: end\ndata: {}\n\n")
}

type sseHandler struct {
	h      api.Host
	opts   SSEOptions
	done   <-chan struct{} // the server is closing
	budget *streamBudget
}

// ServeHTTP streams a session's events as Server-Sent Events: each event's
// id is its seq, so an EventSource that reconnects sends Last-Event-ID and
// resumes exactly after the last event it saw. The stream ends when the
// client goes, when it falls too far behind (the client reconnects and
// resumes), or when the host shuts down.
func (sh *sseHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	var after int64
	cursor := r.Header.Get("Last-Event-ID")
	if cursor == "" {
		cursor = r.URL.Query().Get("after")
	}
	if cursor != "" {
		n, err := strconv.ParseInt(cursor, 10, 64)
		if err != nil {
			writeHTTPError(w, http.StatusBadRequest, api.Errorf(api.KindCursorInvalid, "cursor %q is not a seq", clip(cursor, 64)))
			return
		}
		after = n
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	sw := newSSEWriter(w, sh.opts.WriteTimeout)
	defer sw.finish()
	// What the stream holds (the page or the live batches it is writing)
	// counts in the server's stream budget; a stalled write may be
	// evicted for others (see streamBudget).
	acct := sh.budget.open(func() {
		sw.evict()
		cancel()
	})
	defer acct.close()
	gate := &replayGate{acct: acct}
	seq, err := encodedEvents(api.WithPageGate(ctx, gate), sh.h, api.SubscribeParams{SessionID: id, After: after, RunID: r.URL.Query().Get("runId")})
	if err != nil {
		e := wireError(err)
		status := http.StatusBadRequest
		switch {
		case errors.Is(err, api.ErrNotFound):
			status = http.StatusNotFound
		case e.Retryable:
			status = http.StatusServiceUnavailable
		}
		writeHTTPError(w, status, e)
		return
	}
	acct.startWrite()
	err = sw.start(sh.opts.RetryMs)
	acct.endWrite()
	if err != nil {
		return
	}
	type item struct {
		evs []event.Encoded
		err error
	}
	// The subscription is read in a goroutine of its own, so that
	// heartbeats go out while no event comes. It hands over what it read
	// at once (the slice is the iterator's until the next iteration) and
	// waits until it is written: what a stalled reader holds is that
	// slice, and its backlog in the session's journal until it is
	// dropped. The slice counts in the stream budget until written: a
	// replay page from its read (the gate), live batches (shared with
	// the journal, so counted without waiting) from when they are taken.
	items := make(chan item)
	written := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for evs, err := range seq {
			var live int64
			for _, e := range evs {
				live += int64(len(e.JSON))
			}
			acct.charge(live)
			select {
			case items <- item{evs, err}:
			case <-ctx.Done():
				return
			}
			if err != nil {
				return
			}
			select {
			case <-written:
			case <-ctx.Done():
				return
			}
			acct.release(live)
			gate.release()
		}
	})
	defer wg.Wait()
	defer cancel()
	tick := time.NewTicker(sh.opts.Heartbeat)
	defer tick.Stop()
	for {
		select {
		case it := <-items:
			if it.err != nil {
				return // the client reconnects with Last-Event-ID
			}
			acct.startWrite()
			err := sw.events(it.evs)
			acct.endWrite()
			if err != nil {
				return
			}
			select {
			case written <- struct{}{}:
			case <-ctx.Done():
				return
			}
		case <-tick.C:
			acct.startWrite()
			err := sw.write(true, ": ping\n\n")
			acct.endWrite()
			if err != nil {
				return
			}
		case <-sh.done:
			return
		case <-ctx.Done():
			return
		}
	}
}

// wireError is err as a client sees it: an *api.Error, or an opaque
// internal error.
func wireError(err error) *api.Error {
	var e *api.Error
	if errors.As(err, &e) {
		return e.Normalize()
	}
	return api.NewError(api.KindInternal, "internal error")
}

// clip shortens s to n bytes for an error message.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
