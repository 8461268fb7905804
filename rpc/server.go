package rpc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"reflect"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/jsonschema-go/jsonschema"

	"weft.dev/weft/api"
	"weft.dev/weft/internal/jsonrpc"
)

// Defaults for zero [Config] fields.
const (
	DefaultMaxFrameBytes        = api.DefaultMaxFrameBytes
	DefaultMaxConcurrentPerConn = 64
	DefaultMaxConns             = 256
	DefaultNotifyQueue          = 256
	DefaultNotifyBytes          = 4 << 20
	DefaultWriteTimeout         = 30 * time.Second
	DefaultProtocolVersion      = "2026-01-01"
)

// Info names a program on either end of a connection, as exchanged by
// initialize: [api.Info].
type Info = api.Info

// Config configures a [Server]. The zero value is usable: each zero field
// means the default stated on it. NewServer copies the Config; later
// changes to the caller's value have no effect.
type Config struct {
	// Forward, if set, sends a request for a session another live host
	// owns (the method failed with a store.LeaseHeldError) to that host
	// and answers with its answer, unless the request was itself
	// forwarded: then it answers overloaded (retryable), naming the
	// holder (see ForwardedHeader). Nil answers run_conflict naming
	// the holder.
	Forward Forwarder

	// Logger receives request failures (with the request id and method),
	// panics and transport errors. Nil means silent.
	Logger *slog.Logger

	// MaxFrameBytes bounds one inbound frame: a stdio line, an HTTP body or
	// a WebSocket message. Larger frames are answered with -32600 kind
	// too_large. Zero means DefaultMaxFrameBytes (8 MiB).
	MaxFrameBytes int64

	// MaxConcurrentPerConn bounds the requests running at once on one
	// connection (each batch element counts); a request beyond it is
	// answered with -32001 kind overloaded, retryable. Zero means
	// DefaultMaxConcurrentPerConn.
	MaxConcurrentPerConn int

	// MaxConns bounds concurrent connections across transports: WebSocket
	// and stdio connections and in-flight HTTP POSTs. Beyond it HTTP
	// answers 503 with an overloaded error. Zero means DefaultMaxConns.
	MaxConns int

	// NotifyQueue bounds the outbound notifications queued on one
	// connection; when full, [Conn.Notify] fails with [ErrNotifyOverflow].
	// Zero means DefaultNotifyQueue.
	NotifyQueue int

	// NotifyBytes bounds the bytes of the notifications queued on one
	// connection, as NotifyQueue bounds their number: a subscription's
	// events wait for room (a client that reads too slowly is dropped
	// by the write deadline and resumes by cursor), other notifications
	// fail with [ErrNotifyOverflow]. One notification is always admitted
	// into an empty queue, whatever its size. Zero means
	// DefaultNotifyBytes.
	NotifyBytes int

	// StreamBytes bounds, across the whole server, the bytes its event
	// streams hold to write to their clients: the replay pages that SSE
	// streams and subscriptions read, the live events SSE streams are
	// writing, and the notifications queued on WebSocket and stdio
	// connections. A stream waits for room before it reads a page or
	// queues an event, in turn; while any waits, the stream whose write
	// to its client has been blocked the longest, past StallGrace, is
	// dropped (its client resumes by cursor). Zero means
	// DefaultStreamBytes (4 MiB).
	StreamBytes int64

	// StallGrace is how long a write to a client may be blocked before
	// its stream can be dropped for others waiting on StreamBytes; with
	// nobody waiting, only WriteTimeout (or SSEOptions.WriteTimeout)
	// drops it. Zero means DefaultStallGrace (1 s).
	StallGrace time.Duration

	// WriteTimeout bounds one write to a WebSocket client (a frame, or a
	// batch of queued frames of at most 256 KiB, sent together); a
	// client that stops reading for longer is disconnected (its
	// subscriptions resume by cursor when it comes back), so that it
	// holds no memory. Over WebSocket the deadline is kept per
	// connection and moved on at most once per half timeout, so a write
	// may block for up to half as long again. Zero means
	// DefaultWriteTimeout.
	WriteTimeout time.Duration

	// ServerInfo is returned by initialize: the server's name, version
	// and working directory (Info.Cwd), as the embedder sets them; the
	// server reads none of them itself.
	ServerInfo Info

	// ProtocolVersion is returned by initialize and in the discovery
	// document. Empty means DefaultProtocolVersion.
	ProtocolVersion string

	// AllowedOrigins lists extra Origin host patterns (path.Match syntax, as
	// in coder/websocket's AcceptOptions.OriginPatterns) allowed to open
	// WebSockets or POST from a browser. The request's own host is always
	// allowed; requests without an Origin header (non-browser clients) are
	// always allowed.
	AllowedOrigins []string

	// Token is the bearer token [Server.Handler] requires on /rpc and
	// /rpc/ws, through [RequireToken]; /healthz stays open. Empty means
	// every request to those routes is answered 401 (fail closed), unless
	// NoAuth is set.
	Token string

	// NoAuth, with an empty Token, serves /rpc and /rpc/ws without
	// authentication: anyone who can reach the handler drives the host. It
	// is meant for a loopback listener on a single-user machine, or for a
	// handler mounted behind the embedder's own authentication. It has no
	// effect when Token is set. False means Token is required.
	NoAuth bool

	// Loopback declares that the handler is reached over loopback only:
	// every route of [Server.Handler], /healthz included, then answers 403
	// (kind unauthorized) to a request whose Host header is not
	// "localhost" or a loopback IP address (any port), so that a page
	// whose DNS name was rebound to 127.0.0.1 cannot reach it. False means
	// any Host is accepted.
	Loopback bool

	// ConsoleSessionTTL is how long a web console session cookie lives
	// after its login. The cookie is signed with a key derived from
	// Token, so any server with the same Token accepts it and rotating
	// the token ends every console session. Zero means
	// DefaultConsoleSessionTTL (12 h).
	ConsoleSessionTTL time.Duration

	// ConsoleCodes records the one-time login codes ([NewConsoleCode])
	// redeemed at POST /console/login, so each is redeemed once. Servers
	// sharing a Token should share it. Nil means a ledger in this
	// server's memory: a code is then single-use at this server only.
	ConsoleCodes CodeLedger

	// Console serves the web console's static page (GET / and
	// GET /assets/...) behind the Host rule; it needs no authentication,
	// as the page holds no data and logs in through /console/login.
	// Nil serves no page.
	Console http.Handler

	// MapError maps errors returned by handlers that are not already an
	// *api.Error (for example the host's sentinels) to wire errors. Returning
	// nil means "not mine": the error becomes an opaque -32603 and is
	// logged with the request id. Nil means no mapping. It is called
	// concurrently.
	MapError func(error) *api.Error

	// TypeSchemas overrides the JSON Schema inferred for these Go types in
	// method params and results (for types with a custom UnmarshalJSON
	// that accepts more than their Go shape). The wire types of package
	// api that encode otherwise than their Go shape (api.Input,
	// api.Handle, json.RawMessage, api.DiscoverResult) are described
	// unless this map names them. Nil means only those.
	TypeSchemas map[reflect.Type]*jsonschema.Schema
}

// Server is a JSON-RPC 2.0 server: a method table plus transports
// ([Server.ServeStdio], [Server.Handler]).
//
// Methods are added with [Register] and events with [RegisterEvent]; both
// are safe to call concurrently with serving, though hosts normally
// register everything first. [Server.Close] ends every connection.
type Server struct {
	cfg Config
	log *slog.Logger

	mu      sync.RWMutex
	methods map[string]*method
	events  map[string]*eventInfo
	notes   map[string]*eventInfo // notifications, as the document describes them
	docJSON []byte                // cached discovery document; nil when stale

	budget  *streamBudget // what every event stream holds to write
	console *consoleAuth  // the web console's login

	connMu   sync.Mutex
	conns    map[*Conn]struct{}
	nconns   int // live conns plus in-flight HTTP POSTs
	closed   bool
	done     chan struct{} // closed by Close
	connWG   sync.WaitGroup
	nextConn uint64
}

// NewServer returns a Server configured by cfg, with the built-in methods
// initialize and rpc.discover registered.
func NewServer(cfg Config) *Server {
	if cfg.MaxFrameBytes <= 0 {
		cfg.MaxFrameBytes = DefaultMaxFrameBytes
	}
	if cfg.MaxConcurrentPerConn <= 0 {
		cfg.MaxConcurrentPerConn = DefaultMaxConcurrentPerConn
	}
	if cfg.MaxConns <= 0 {
		cfg.MaxConns = DefaultMaxConns
	}
	if cfg.NotifyQueue <= 0 {
		cfg.NotifyQueue = DefaultNotifyQueue
	}
	if cfg.NotifyBytes <= 0 {
		cfg.NotifyBytes = DefaultNotifyBytes
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = DefaultWriteTimeout
	}
	if cfg.StreamBytes <= 0 {
		cfg.StreamBytes = DefaultStreamBytes
	}
	if cfg.StallGrace <= 0 {
		cfg.StallGrace = DefaultStallGrace
	}
	if cfg.ProtocolVersion == "" {
		cfg.ProtocolVersion = DefaultProtocolVersion
	}
	cfg.AllowedOrigins = slices.Clone(cfg.AllowedOrigins)
	cfg.TypeSchemas = wireSchemas(cfg.TypeSchemas)
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{
		cfg:     cfg,
		log:     log,
		methods: map[string]*method{},
		events:  map[string]*eventInfo{},
		notes:   map[string]*eventInfo{},
		conns:   map[*Conn]struct{}{},
		done:    make(chan struct{}),
		budget:  newStreamBudget(cfg.StreamBytes, cfg.StallGrace),
		console: newConsoleAuth(cfg),
	}
	s.registerBuiltins()
	return s
}

// method is one entry of the method table.
type method struct {
	name, doc    string
	params       reflect.Type
	result       reflect.Type
	paramsSchema *jsonschema.Schema
	resultSchema *jsonschema.Schema
	known        map[string]bool // exact top-level names when params is a struct
	required     []string
	mutating     bool     // the method takes an idempotencyKey (api.MethodInfo.Mutating)
	notes        []string // the notifications a stream sends (api.MethodInfo.Notifications)
	call         func(ctx context.Context, params json.RawMessage) (any, error)
}

// Register adds method to s, handled by h with params decoded into a fresh
// *P and the result *R encoded as the response result (a nil *R encodes as
// the zero R).
//
// Params must be a JSON object. They are decoded strictly: unknown fields
// are rejected with -32602 naming the field (top-level names match
// exactly; nested names follow encoding/json), required fields (those
// without omitempty/omitzero) must be present, and absent params mean {}
// only when P has no required fields. The JSON Schemas of P and R, inferred
// with jsonschema-go, feed rpc.discover; doc becomes the method's
// description.
//
// Register panics on programmer error at setup: an empty or duplicate
// method name, a name starting with "rpc." (reserved), or types for which
// no JSON Schema can be inferred. h is called concurrently, in its own
// goroutine per request, with a ctx that carries the [Conn] ([ConnFrom])
// and is cancelled when the connection ends. Errors from h are sent as
// described on [Config.MapError]; a panic in h becomes an internal error.
func Register[P, R any](s *Server, method, doc string, h func(ctx context.Context, p *P) (*R, error)) {
	if strings.HasPrefix(method, "rpc.") {
		panic(fmt.Sprintf("rpc: Register(%q): the rpc. prefix is reserved", method))
	}
	s.add(newMethod(method, doc, h, s.cfg.TypeSchemas))
}

func newMethod[P, R any](name, doc string, h func(ctx context.Context, p *P) (*R, error), types map[reflect.Type]*jsonschema.Schema) *method {
	m := describe(name, doc, reflect.TypeFor[P](), reflect.TypeFor[R](), types)
	m.call = func(ctx context.Context, raw json.RawMessage) (any, error) {
		p := new(P)
		if err := m.decodeParams(raw, p); err != nil {
			return nil, err
		}
		r, err := h(ctx, p)
		if err != nil {
			return nil, err
		}
		if r == nil {
			r = new(R)
		}
		return r, nil
	}
	return m
}

// describe returns method name with its params and result types and
// their schemas (the params' as a request may send them:
// requestSchemas), and no call yet. It panics on programmer error: an
// empty name, or types for which no JSON Schema can be inferred.
func describe(name, doc string, params, result reflect.Type, types map[reflect.Type]*jsonschema.Schema) *method {
	if name == "" {
		panic("rpc: Register: empty method name")
	}
	opts := &jsonschema.ForOptions{TypeSchemas: types}
	ps, err := jsonschema.ForType(params, &jsonschema.ForOptions{TypeSchemas: requestSchemas(types)})
	if err != nil {
		panic(fmt.Sprintf("rpc: Register(%q): params schema: %v", name, err))
	}
	rs, err := jsonschema.ForType(result, opts)
	if err != nil {
		panic(fmt.Sprintf("rpc: Register(%q): result schema: %v", name, err))
	}
	m := &method{
		name: name, doc: doc,
		params: params, result: result,
		paramsSchema: ps, resultSchema: rs,
		required: slices.Clone(ps.Required),
	}
	pt := m.params
	for pt.Kind() == reflect.Pointer {
		pt = pt.Elem()
	}
	if pt.Kind() == reflect.Struct {
		m.known = map[string]bool{}
		for k := range ps.Properties {
			m.known[k] = true
		}
	}
	return m
}

func (s *Server) add(m *method) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, dup := s.methods[m.name]; dup {
		panic(fmt.Sprintf("rpc: Register(%q): method already registered", m.name))
	}
	s.methods[m.name] = m
	s.docJSON = nil
}

func (s *Server) lookup(name string) *method {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.methods[name]
}

// decodeParams decodes raw into p strictly, returning an invalid_params
// *api.Error on any failure.
func (m *method) decodeParams(raw json.RawMessage, p any) error {
	raw = bytes.TrimSpace(raw)
	if raw == nil {
		if len(m.required) > 0 {
			return api.Errorf(api.KindInvalidParams, "missing params; required: %s", strings.Join(m.required, ", ")).
				With("required", m.required)
		}
		raw = []byte("{}")
	}
	if len(raw) == 0 || raw[0] != '{' {
		return api.NewError(api.KindInvalidParams, "params must be a JSON object")
	}
	if m.known != nil {
		var members map[string]json.RawMessage
		if err := json.Unmarshal(raw, &members); err != nil {
			return api.NewError(api.KindInvalidParams, "params must be a JSON object")
		}
		var unknown []string
		for k := range members {
			if !m.known[k] {
				unknown = append(unknown, k)
			}
		}
		if len(unknown) > 0 {
			slices.Sort(unknown)
			return api.Errorf(api.KindInvalidParams, "unknown field %s", strconv.Quote(unknown[0])).With("field", unknown[0])
		}
		for _, r := range m.required {
			if _, ok := members[r]; !ok {
				return api.Errorf(api.KindInvalidParams, "missing required field %s", strconv.Quote(r)).With("field", r)
			}
		}
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(p); err != nil {
		return paramsError(err)
	}
	return nil
}

// paramsError turns a decoding error into an invalid_params error without
// Go type names.
func paramsError(err error) *api.Error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		e := api.Errorf(api.KindInvalidParams, "field %s: cannot use JSON %s here (want %s)", strconv.Quote(te.Field), te.Value, jsonKind(te.Type))
		return e.With("field", te.Field)
	}
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "json: unknown field "); ok {
		field, uerr := strconv.Unquote(name)
		if uerr != nil {
			field = name
		}
		return api.Errorf(api.KindInvalidParams, "unknown field %s", strconv.Quote(field)).With("field", field)
	}
	return api.Errorf(api.KindInvalidParams, "invalid params: %s", strings.TrimPrefix(msg, "json: "))
}

func jsonKind(t reflect.Type) string {
	if t == nil {
		return "value"
	}
	switch t.Kind() {
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "integer"
	case reflect.Float32, reflect.Float64:
		return "number"
	case reflect.Slice, reflect.Array:
		return "array"
	case reflect.Map, reflect.Struct:
		return "object"
	case reflect.Pointer:
		return jsonKind(t.Elem())
	}
	return "value"
}

// toError maps a handler error to a wire error, logging what it hides.
func (s *Server) toError(err error, method string, id json.RawMessage) *api.Error {
	var e *api.Error
	if errors.As(err, &e) {
		if cause := errors.Unwrap(e); cause != nil {
			// The client sees the kind and message; the log keeps the cause.
			level := slog.LevelDebug
			if e.Retryable {
				level = slog.LevelWarn
			}
			s.log.Log(context.Background(), level, "rpc: request failed", "method", method, "id", string(id), "kind", e.Kind, "err", cause)
		}
		return e.Normalize()
	}
	if s.cfg.MapError != nil {
		if m := s.cfg.MapError(err); m != nil {
			return m.Normalize()
		}
	}
	s.log.Error("rpc: internal error", "method", method, "id", string(id), "err", err)
	return api.NewError(api.KindInternal, "internal error")
}

// dispatch runs one valid request and returns the encoded result or error
// object. It recovers panics from the handler.
func (s *Server) dispatch(ctx context.Context, req *jsonrpc.Request) (result []byte, errObj *api.Error) {
	m := s.lookup(req.Method)
	if m == nil {
		return nil, api.Errorf(api.KindMethodNotFound, "method not found: %s", strconv.Quote(req.Method)).With("method", req.Method)
	}
	defer func() {
		if p := recover(); p != nil {
			s.log.Error("rpc: handler panic", "method", req.Method, "id", string(req.ID), "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
			result, errObj = nil, api.NewError(api.KindInternal, "internal error")
		}
	}()
	r, err := m.call(ctx, req.Params)
	if raw, ferr, ok := s.forward(ctx, req, err); ok {
		if ferr != nil {
			return nil, s.toError(ferr, req.Method, req.ID)
		}
		return raw, nil
	}
	if err != nil {
		return nil, s.toError(err, req.Method, req.ID)
	}
	if raw, ok := r.(json.RawMessage); ok {
		return raw, nil
	}
	b, err := json.Marshal(r)
	if err != nil {
		return nil, s.toError(fmt.Errorf("rpc: encode result of %s: %w", req.Method, err), req.Method, req.ID)
	}
	return b, nil
}
