package rpc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"weft.dev/weft/api"
	"weft.dev/weft/event"
	"weft.dev/weft/host"
	"weft.dev/weft/process"
)

// SSEOptions tunes the SSE endpoint. Zero fields take the defaults.
type SSEOptions struct {
	// Heartbeat is the interval of comment lines that keep proxies from
	// closing an idle stream; zero means 15 s.
	Heartbeat time.Duration
	// RetryMs is the reconnection delay hinted to EventSource; zero means 1000.
	RetryMs int
}

// HTTPHandler serves the whole HTTP surface of a host: JSON-RPC on
// POST /rpc and GET /rpc/ws, GET /healthz, and the SSE endpoint
// GET /v1/sessions/{id}/events. With a token configured on s, every route
// but /healthz requires it.
func HTTPHandler(s *Server, h *host.Host, opts SSEOptions) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/", s.Handler())
	var sse http.Handler = &sseHandler{h: h, opts: opts}
	if s.cfg.Token != "" {
		sse = RequireToken(s.cfg.Token, sse)
	}
	mux.Handle("GET /v1/sessions/{id}/events", sse)
	var out http.Handler = &processSSE{h: h, opts: opts}
	if s.cfg.Token != "" {
		out = RequireToken(s.cfg.Token, out)
	}
	mux.Handle("GET /v1/processes/{id}/output", out)
	return mux
}

type processSSE struct {
	h    *host.Host
	opts SSEOptions
}

// ServeHTTP streams a process's output as Server-Sent Events, one chunk
// (JSON: stream, offset, base64 data) per event whose id is the offset
// after it, so a reconnecting EventSource resumes where it stopped. The
// stream ends after the last chunk of an ended process.
// ?sessionId= acts as that session (visibility and grants apply).
func (ps *processSSE) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	pm := ps.h.Processes()
	if pm == nil {
		writeHTTPError(w, http.StatusNotFound, api.NewError(api.KindNotFound, "this host runs no background processes"))
		return
	}
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
	if _, err := ps.h.GetProcess(r.Context(), api.ProcessIDParams{ID: id, SessionID: sessionID}); err != nil {
		e := wireError(err)
		writeHTTPError(w, http.StatusNotFound, e)
		return
	}
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	fmt.Fprintf(w, "retry: %d\n\n", max(ps.opts.RetryMs, 1000))
	rc.Flush()
	caller := process.Caller{Host: sessionID == "", SessionID: sessionID}
	for c, err := range pm.Follow(r.Context(), id, offset, caller) {
		if err != nil {
			return
		}
		b, err := json.Marshal(c)
		if err != nil {
			return
		}
		if _, err := fmt.Fprintf(w, "id: %d\ndata: %s\n\n", c.Offset+int64(len(c.Data)), b); err != nil || rc.Flush() != nil {
			return
		}
	}
	fmt.Fprint(w, "event: end\ndata: {}\n\n")
	rc.Flush()
}

type sseHandler struct {
	h    *host.Host
	opts SSEOptions
}

// ServeHTTP streams a session's events as Server-Sent Events: each event's
// id is its seq, so an EventSource that reconnects sends Last-Event-ID and
// resumes exactly after the last event it saw. The stream ends when the
// client goes, when it falls too far behind (the client reconnects and
// resumes), or when the host shuts down.
func (sh *sseHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	heartbeat := sh.opts.Heartbeat
	if heartbeat <= 0 {
		heartbeat = 15 * time.Second
	}
	retry := sh.opts.RetryMs
	if retry <= 0 {
		retry = 1000
	}
	id := r.PathValue("id")
	var after int64
	cursor := r.Header.Get("Last-Event-ID")
	if cursor == "" {
		cursor = r.URL.Query().Get("after")
	}
	if cursor != "" {
		n, err := strconv.ParseInt(cursor, 10, 64)
		if err != nil {
			writeHTTPError(w, http.StatusBadRequest, api.Errorf(api.KindCursorInvalid, "cursor %q is not a seq", cursor))
			return
		}
		after = n
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	seq, err := sh.h.Subscribe(ctx, id, after, r.URL.Query().Get("runId"))
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
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	fmt.Fprintf(w, "retry: %d\n\n", retry)
	rc.Flush()

	type item struct {
		e   event.Event
		err error
	}
	items := make(chan item, 64)
	var wg sync.WaitGroup
	wg.Go(func() {
		for e, err := range seq {
			select {
			case items <- item{e, err}:
			case <-ctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	})
	defer wg.Wait()
	defer cancel()
	tick := time.NewTicker(heartbeat)
	defer tick.Stop()
	for {
		select {
		case it := <-items:
			if it.err != nil {
				return // the client reconnects with Last-Event-ID
			}
			b, err := json.Marshal(it.e)
			if err != nil {
				return
			}
			if _, err := fmt.Fprintf(w, "id: %d\ndata: %s\n\n", it.e.Seq, b); err != nil {
				return
			}
			// Flush only when nothing else is ready, so bursts share a write.
			if len(items) == 0 {
				if rc.Flush() != nil {
					return
				}
			}
		case <-tick.C:
			if _, err := fmt.Fprint(w, ": ping\n\n"); err != nil || rc.Flush() != nil {
				return
			}
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
