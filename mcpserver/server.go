package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"net/http"
	"reflect"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"weft.dev/weft/api"
	"weft.dev/weft/event"
)

// Host is what the tools call: the part of [api.Host] they use. The host
// in this process (host.Host) and a connection to one (client.Client)
// implement it. Its methods must be safe for concurrent use.
type Host interface {
	CreateSession(ctx context.Context, p api.CreateSessionParams) (*api.SessionResult, error)
	DeleteSession(ctx context.Context, p api.SessionIDParams) (*api.DeleteResult, error)
	ListSessions(ctx context.Context, p api.ListSessionsParams) (*api.ListSessionsResult, error)
	StartRun(ctx context.Context, p api.StartRunParams) (*api.RunResult, error)
	GetRun(ctx context.Context, p api.RunIDParams) (*api.RunResult, error)
	SteerRun(ctx context.Context, p api.SteerParams) (*api.SteerReceipt, error)
	CancelRun(ctx context.Context, p api.CancelParams) (*api.RunResult, error)
	ReadEvents(ctx context.Context, p api.ReadEventsParams) (*api.ReadEventsResult, error)
	Subscribe(ctx context.Context, p api.SubscribeParams) (iter.Seq2[event.Event, error], error)
	ListRequests(ctx context.Context, p api.ListRequestsParams) (*api.ListRequestsResult, error)
	DecideApproval(ctx context.Context, p api.DecideParams) (*api.RequestResult, error)
	AnswerInput(ctx context.Context, p api.AnswerParams) (*api.RequestResult, error)
}

var _ Host = api.Host(nil)

// Options configure a server. A nil *Options, and zero fields, take the
// defaults.
type Options struct {
	// Version is the server's version in initialize; "" means "dev".
	Version string
	// Dir, if set, is the directory relative mount paths resolve
	// against, and the default mount ("work", read-write) of a session
	// that start_run or create_session makes without mounts: an agent's
	// project. Empty means relative paths are refused and such a session
	// gets the host's default environment.
	Dir string
	// DefaultPreset is the approval preset of the runs start_run starts
	// that name none (run/start defaultPreset: it ranks below the
	// session's rules); "" leaves it to the host's policy.
	DefaultPreset string
	// Transport names the connection in the host's records of who
	// answered an approval (api.Client.Transport); "" means "mcp". A call
	// is always a remote client's: it is held to the host's limits on
	// what sessions may mount.
	Transport string
	// MaxAwait caps await_run's timeout; zero means 10 minutes.
	MaxAwait time.Duration
	// Done, when closed, ends the waits in progress: await_run answers
	// at once with the run where it stands, as at its timeout. A server
	// that shuts down closes it, so that an agent's await does not hold
	// the shutdown. Nil never closes.
	Done <-chan struct{}
	// Logger receives diagnostics (the cause of an internal error); nil
	// means silent.
	Logger *slog.Logger
}

// ErrorMetaKey is the _meta key of an error result's details:
// {"kind", "code", "retryable", "data"} of the [api.Error].
const ErrorMetaKey = "weft.dev/error"

// server holds what the tools share. It is immutable after New.
type server struct {
	h    Host
	opts Options
	log  *slog.Logger
}

// New returns an MCP server whose tools drive h (see the package
// documentation). Serve it over any of the SDK's transports; it is safe
// for concurrent use by many sessions. New panics only if h is nil.
func New(h Host, opts *Options) *mcp.Server {
	if h == nil {
		panic("mcpserver: nil Host")
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Version == "" {
		o.Version = "dev"
	}
	if o.Transport == "" {
		o.Transport = "mcp"
	}
	if o.MaxAwait <= 0 {
		o.MaxAwait = 10 * time.Minute
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &server{h: h, opts: o, log: log}
	ms := mcp.NewServer(&mcp.Implementation{Name: "weft", Title: "weft: a durable host for agent runs", Version: o.Version}, &mcp.ServerOptions{
		Instructions: instructions,
		Logger:       sdkLogger(o.Logger),
		Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{}},
	})
	s.register(ms)
	return ms
}

// instructions tell the calling agent how the tools fit together.
const instructions = `weft runs agent work durably: a run goes on when you exit, and its ID is a handle you can await later.
Start work with start_run (it answers at once with runId and sessionId), then await_run with a timeout; call await_run again while done is false.
A run whose status is "waiting" asks for an answer: its pendingRequests say what; answer with answer_approval or answer_question.
Continue a conversation by passing the sessionId to start_run. read_events pages through a session's log after a cursor.`

// Handler serves the server of h as MCP's streamable HTTP transport,
// stateless (each request stands alone, so no MCP session outlives it;
// weft's sessions and runs are the state). It does no authentication:
// mount it behind the host's (rpc.Server.Authenticate), as `weft serve`
// does at /mcp.
func Handler(h Host, opts *Options) http.Handler {
	ms := New(h, opts)
	var log *slog.Logger
	if opts != nil {
		log = opts.Logger
	}
	return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return ms }, &mcp.StreamableHTTPOptions{
		Stateless: true, Logger: sdkLogger(log),
	})
}

// sdkLogger is log for the SDK, which logs every connection at Info: only
// its warnings and errors pass. nil stays nil (silent).
func sdkLogger(log *slog.Logger) *slog.Logger {
	if log == nil {
		return nil
	}
	return slog.New(warnings{log.Handler()})
}

// warnings passes a handler's records of level Warn and above.
type warnings struct{ slog.Handler }

func (w warnings) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelWarn && w.Handler.Enabled(ctx, l)
}

func (w warnings) WithAttrs(as []slog.Attr) slog.Handler { return warnings{w.Handler.WithAttrs(as)} }
func (w warnings) WithGroup(name string) slog.Handler    { return warnings{w.Handler.WithGroup(name)} }

// handlerFunc is a typed tool handler: its input decoded and validated,
// its output the result's structured content.
type handlerFunc[In, Out any] func(ctx context.Context, req *mcp.CallToolRequest, in In) (*Out, error)

// schemaOptions infer schemas from weft's types: raw JSON (an event's
// data, a tool call's arguments) is any value.
func schemaOptions() *jsonschema.ForOptions {
	return &jsonschema.ForOptions{TypeSchemas: map[reflect.Type]*jsonschema.Schema{
		reflect.TypeFor[json.RawMessage](): {},
	}}
}

// addTool adds tool t, whose input and output schemas are inferred from
// In and Out (edit, if set, adjusts the input schema: enums), with
// handler h. Unlike mcp.AddTool, arguments that do not match the schema
// are a result of kind invalid_params like every other error, so a
// client branches on one shape. It panics on a schema that cannot be
// inferred (a programmer's error).
func addTool[In, Out any](s *server, ms *mcp.Server, t *mcp.Tool, edit func(*jsonschema.Schema), h handlerFunc[In, Out]) {
	in, err := jsonschema.For[In](schemaOptions())
	if err != nil {
		panic(fmt.Sprintf("mcpserver: tool %s: %v", t.Name, err))
	}
	if edit != nil {
		edit(in)
	}
	out, err := jsonschema.For[Out](schemaOptions())
	if err != nil {
		panic(fmt.Sprintf("mcpserver: tool %s: %v", t.Name, err))
	}
	resolved, err := in.Resolve(nil)
	if err != nil {
		panic(fmt.Sprintf("mcpserver: tool %s: %v", t.Name, err))
	}
	tt := *t
	tt.InputSchema, tt.OutputSchema = in, out
	ms.AddTool(&tt, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var v In
		if err := decodeArgs(req.Params.Arguments, resolved, &v); err != nil {
			return s.errorResult(err), nil
		}
		ctx = api.WithClient(ctx, api.Client{Name: clientName(req), Transport: s.opts.Transport})
		o, err := h(ctx, req, v)
		if err != nil {
			return s.errorResult(err), nil
		}
		b, err := json.Marshal(o)
		if err != nil {
			return s.errorResult(fmt.Errorf("encode %s result: %w", t.Name, err)), nil
		}
		return &mcp.CallToolResult{
			Content:           []mcp.Content{&mcp.TextContent{Text: string(b)}},
			StructuredContent: json.RawMessage(b),
		}, nil
	})
}

// decodeArgs validates raw against schema and decodes it into v; what is
// wrong is an error of kind invalid_params.
func decodeArgs(raw json.RawMessage, schema *jsonschema.Resolved, v any) error {
	m := map[string]any{}
	if len(raw) > 0 && string(raw) != "null" {
		if err := json.Unmarshal(raw, &m); err != nil {
			return api.Errorf(api.KindInvalidParams, "arguments: want a JSON object (%v)", err)
		}
	}
	if err := schema.Validate(m); err != nil {
		return api.Errorf(api.KindInvalidParams, "arguments: %v", err)
	}
	b, _ := json.Marshal(m)
	if err := json.Unmarshal(b, v); err != nil {
		return api.Errorf(api.KindInvalidParams, "arguments: %v", err)
	}
	return nil
}

// clientName is the calling client's name from initialize, if it gave
// one.
func clientName(req *mcp.CallToolRequest) string {
	if req.Session == nil {
		return ""
	}
	if p := req.Session.InitializeParams(); p != nil && p.ClientInfo != nil {
		return p.ClientInfo.Name
	}
	return ""
}

// errorInfo is the _meta[ErrorMetaKey] of an error result.
type errorInfo struct {
	Kind      api.Kind       `json:"kind"`
	Code      int            `json:"code"`
	Message   string         `json:"message"`
	Retryable bool           `json:"retryable"`
	Data      map[string]any `json:"data,omitempty"`
}

// errorResult is the result of a call that failed with err: its text is
// "KIND: message", its _meta the error's details. An error that is not an
// *api.Error says nothing of its cause to the client (it goes to the
// log): internal, or overloaded when the call's context ended.
func (s *server) errorResult(err error) *mcp.CallToolResult {
	var e *api.Error
	switch {
	case errors.As(err, &e):
		e = e.Normalize()
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		e = api.NewError(api.KindOverloaded, "the call ended before the host answered: try again")
	default:
		s.log.Error("mcpserver: tool call failed", "err", err)
		e = api.NewError(api.KindInternal, "internal error (the cause is in the server's log)")
	}
	res := &mcp.CallToolResult{
		IsError: true,
		Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("%s: %s", e.Kind, e.Message)}},
	}
	res.Meta = mcp.Meta{ErrorMetaKey: errorInfo{Kind: e.Kind, Code: e.Code, Message: e.Message, Retryable: e.Retryable, Data: e.Data}}
	return res
}
