// Package llmhttp enforces [llm.Timeouts] on the HTTP exchanges of the
// model providers (llm/openai, llm/anthropic, llm/gemini): a limit on
// getting a connection, on the wait for the first byte of the response's
// body, and on each wait for more of it. A hit limit cancels the request
// and surfaces as an *[llm.TimeoutError], from the round trip or from the
// body's Read, which the providers turn into an [llm.KindTimeout] error
// with [llm.TimeoutFrom].
package llmhttp

import (
	"context"
	"io"
	"net/http"
	"net/http/httptrace"
	"sync"
	"time"

	"weft.dev/weft/llm"
)

// Client returns an http.Client that sends through hc (nil means
// http.DefaultClient) and enforces t ([llm.Timeouts.Resolve] applies its
// defaults). It shares hc's transport, so connections are pooled as
// before; hc's other fields are copied.
func Client(hc *http.Client, t llm.Timeouts) *http.Client {
	if hc == nil {
		hc = http.DefaultClient
	}
	c := *hc
	c.Transport = Transport(hc.Transport, t)
	return &c
}

// Transport returns a RoundTripper that sends through base (nil means
// http.DefaultTransport) and enforces t ([llm.Timeouts.Resolve] applies
// its defaults). It is safe for concurrent use.
//
// The connect limit runs from the start of the round trip until a
// connection is got (httptrace's GotConn; when base reports no trace,
// until the response's header); the first-byte limit from then until a
// Read of the body returns data; the idle limit during each later Read.
// Time the caller spends between Reads is not counted: a slow consumer is
// not a silent server.
func Transport(base http.RoundTripper, t llm.Timeouts) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return &transport{base: base, t: t.Resolve()}
}

// IdleConnsPerHost is how many idle connections to one host a
// [NewPooledClient] keeps.
const IdleConnsPerHost = 64

// WriteBufferSize is the write buffer of a [NewPooledClient]'s HTTP/1.1
// connections. A request body larger than the buffer goes to the
// connection through a 32 KiB buffer allocated for each request (the
// body net/http writes hides its io.WriterTo); a smaller one is copied
// into the buffer. The cost is bounded by the pool: 64 KiB a connection.
const WriteBufferSize = 64 << 10

// NewPooledClient returns an http.Client for the providers of a host that
// runs many sessions at once: its transport is configured as
// http.DefaultTransport but keeps up to [IdleConnsPerHost] idle
// connections to a host rather than 2, and writes through a buffer of
// [WriteBufferSize]. With 2, every model call beyond two at once opened a
// connection (a TCP and TLS handshake) and closed it when done. Share one
// among the providers; it holds no timeout (see [Client]).
func NewPooledClient() *http.Client {
	var t *http.Transport
	if def, ok := http.DefaultTransport.(*http.Transport); ok {
		t = def.Clone()
	} else {
		t = &http.Transport{Proxy: http.ProxyFromEnvironment, ForceAttemptHTTP2: true}
	}
	t.MaxIdleConnsPerHost = IdleConnsPerHost
	t.MaxIdleConns = max(t.MaxIdleConns, IdleConnsPerHost)
	t.WriteBufferSize = WriteBufferSize
	return &http.Client{Transport: t}
}

type transport struct {
	base http.RoundTripper
	t    llm.Timeouts
}

func (tr *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx, cancel := context.WithCancel(req.Context())
	w := &watch{cancel: cancel}
	w.arm(llm.LimitConnect, tr.t.Connect)
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		GotConn: func(httptrace.GotConnInfo) { w.connected(tr.t.FirstByte) },
	})
	res, err := tr.base.RoundTrip(req.WithContext(ctx))
	if err != nil {
		w.stop()
		cancel()
		if te := w.err(); te != nil {
			return nil, te
		}
		return nil, err
	}
	w.connected(tr.t.FirstByte) // a base that reports no trace
	res.Body = &body{rc: res.Body, w: w, idle: tr.t.Idle}
	return res, nil
}

// body enforces the first-byte and idle limits on a response's body.
type body struct {
	rc   io.ReadCloser
	w    *watch
	idle time.Duration
	// mu serialises Reads' use of started; Close may run concurrently.
	mu      sync.Mutex
	started bool // a Read returned data
}

func (b *body) Read(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.started {
		b.w.arm(llm.LimitIdle, b.idle)
	}
	n, err := b.rc.Read(p)
	if n > 0 {
		b.started = true
		b.w.disarm()
	}
	if err != nil {
		if te := b.w.err(); te != nil {
			return n, te
		}
	}
	return n, err
}

func (b *body) Close() error {
	b.w.stop()
	err := b.rc.Close()
	b.w.cancel()
	return err
}

// watch is the one timer of a request: the limit that runs now, its
// deadline, and what it did when it fired.
type watch struct {
	cancel context.CancelFunc

	mu        sync.Mutex
	timer     *time.Timer
	scheduled bool      // the timer will fire
	fireAt    time.Time // when it will fire, if scheduled
	limit     string    // the limit that runs; "" for none
	after     time.Duration
	deadline  time.Time
	done      bool // stopped or fired
	fired     *llm.TimeoutError
}

// arm starts limit, which ends after d (no limit when d is zero).
func (w *watch) arm(limit string, d time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.done {
		return
	}
	if d <= 0 {
		w.limit = ""
		return
	}
	w.limit, w.after, w.deadline = limit, d, time.Now().Add(d)
	switch {
	case w.timer == nil:
		w.timer = time.AfterFunc(d, w.check)
	case !w.scheduled || w.deadline.Before(w.fireAt):
		w.timer.Reset(d)
	default:
		return // the timer fires before the deadline and reschedules
	}
	w.scheduled, w.fireAt = true, w.deadline
}

// connected ends the connect limit and starts the first-byte limit, once.
func (w *watch) connected(firstByte time.Duration) {
	w.mu.Lock()
	if w.limit != llm.LimitConnect {
		w.mu.Unlock()
		return
	}
	w.mu.Unlock()
	w.arm(llm.LimitFirstByte, firstByte)
}

// disarm ends the limit that runs.
func (w *watch) disarm() {
	w.mu.Lock()
	w.limit = ""
	w.mu.Unlock()
}

// check runs when the timer fires: it fires the limit if its deadline
// has passed, else reschedules.
func (w *watch) check() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.scheduled = false
	if w.done || w.limit == "" {
		return
	}
	if left := time.Until(w.deadline); left > 0 {
		w.timer.Reset(left)
		w.scheduled, w.fireAt = true, w.deadline
		return
	}
	w.done = true
	w.fired = &llm.TimeoutError{Limit: w.limit, After: w.after}
	w.cancel()
}

// stop ends the watch without firing.
func (w *watch) stop() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.done = true
	if w.timer != nil {
		w.timer.Stop()
	}
}

// err is the limit that fired, or nil.
func (w *watch) err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.fired == nil {
		return nil
	}
	return w.fired
}
