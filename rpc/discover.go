package rpc

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
	"weft.dev/weft/api"
)

// OpenRPCVersion is the OpenRPC specification version of the document
// served by rpc.discover.
const OpenRPCVersion = "1.3.2"

// eventInfo is one registered event type.
type eventInfo struct {
	name, doc string
	schema    *jsonschema.Schema
}

// RegisterEvent records an event type and the Go type of its data so that
// rpc.discover describes it under the "x-events" extension. It panics on
// an empty or duplicate name or a type without a JSON Schema (programmer
// error at setup). Safe for concurrent use.
func (s *Server) RegisterEvent(name, doc string, dataType reflect.Type) {
	if name == "" || dataType == nil {
		panic("rpc: RegisterEvent: empty name or nil type")
	}
	sch, err := jsonschema.ForType(dataType, nil)
	if err != nil {
		panic(fmt.Sprintf("rpc: RegisterEvent(%q): %v", name, err))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, dup := s.events[name]; dup {
		panic(fmt.Sprintf("rpc: RegisterEvent(%q): already registered", name))
	}
	s.events[name] = &eventInfo{name: name, doc: doc, schema: sch}
	s.docJSON = nil
}

// RegisterEventType is [Server.RegisterEvent] with the data type as a type
// argument: RegisterEventType[event.RunStarted](s, "run.started", "...").
func RegisterEventType[T any](s *Server, name, doc string) {
	s.RegisterEvent(name, doc, reflect.TypeFor[T]())
}

// MethodInfo describes one registered method, as listed by
// [Server.Methods].
type MethodInfo struct {
	Name         string
	Doc          string
	ParamsType   reflect.Type
	ResultType   reflect.Type
	ParamsSchema *jsonschema.Schema
	ResultSchema *jsonschema.Schema
}

// Methods returns the registered methods, built-ins included, sorted by
// name. The schemas are shared; do not modify them. Safe for concurrent
// use.
func (s *Server) Methods() []MethodInfo {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]MethodInfo, 0, len(s.methods))
	for _, m := range s.methods {
		out = append(out, MethodInfo{m.name, m.doc, m.params, m.result, m.paramsSchema, m.resultSchema})
	}
	slices.SortFunc(out, func(a, b MethodInfo) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// InitializeParams are the params of the built-in initialize method.
type InitializeParams struct {
	ClientInfo      Info   `json:"clientInfo" jsonschema:"the connecting program"`
	ProtocolVersion string `json:"protocolVersion" jsonschema:"the protocol version the client speaks"`
}

// Capabilities tells a client what the connection supports.
type Capabilities struct {
	// Notifications is true when the server can push notifications on
	// this connection (WebSocket, stdio), false on HTTP POST.
	Notifications bool `json:"notifications"`
	// Batch is true: JSON-RPC batches are accepted.
	Batch bool `json:"batch"`
	// Discover is true: rpc.discover serves an OpenRPC document.
	Discover bool `json:"discover"`
}

// InitializeResult is the result of the built-in initialize method. The
// server answers with its own protocolVersion; a client that cannot speak
// it should disconnect.
type InitializeResult struct {
	ServerInfo      Info         `json:"serverInfo"`
	ProtocolVersion string       `json:"protocolVersion"`
	Capabilities    Capabilities `json:"capabilities"`
}

// discoverParams are rpc.discover's (empty) params.
type discoverParams struct{}

func (s *Server) registerBuiltins() {
	s.add(newMethod("initialize", "Exchange program information and the protocol version; reports the connection's capabilities.",
		func(ctx context.Context, p *InitializeParams) (*InitializeResult, error) {
			push := false
			if c := ConnFrom(ctx); c != nil {
				push = c.stream != nil
				c.client.Store(&api.Client{Name: p.ClientInfo.Name, Transport: c.transport})
			}
			return &InitializeResult{
				ServerInfo:      s.cfg.ServerInfo,
				ProtocolVersion: s.cfg.ProtocolVersion,
				Capabilities:    Capabilities{Notifications: push, Batch: true, Discover: true},
			}, nil
		}, nil))
	m := newMethod("rpc.discover", "Return the OpenRPC document describing every method and event.",
		func(ctx context.Context, _ *discoverParams) (*map[string]any, error) { return nil, nil }, nil)
	m.call = func(ctx context.Context, raw json.RawMessage) (any, error) {
		if err := m.decodeParams(raw, &discoverParams{}); err != nil {
			return nil, err
		}
		return s.discoverDoc()
	}
	s.add(m)
}

// discoverDoc returns the cached OpenRPC document, building it if stale.
func (s *Server) discoverDoc() (json.RawMessage, error) {
	s.mu.RLock()
	doc := s.docJSON
	s.mu.RUnlock()
	if doc != nil {
		return doc, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.docJSON != nil {
		return s.docJSON, nil
	}
	b, err := json.Marshal(s.buildDocLocked())
	if err != nil {
		return nil, fmt.Errorf("rpc: build discovery document: %w", err)
	}
	s.docJSON = b
	return b, nil
}

type contentDescriptor struct {
	Name        string             `json:"name"`
	Description string             `json:"description,omitempty"`
	Required    bool               `json:"required,omitempty"`
	Schema      *jsonschema.Schema `json:"schema"`
}

type openrpcMethod struct {
	Name           string              `json:"name"`
	Description    string              `json:"description,omitempty"`
	ParamStructure string              `json:"paramStructure"`
	Params         []contentDescriptor `json:"params"`
	Result         contentDescriptor   `json:"result"`
	ParamsSchema   *jsonschema.Schema  `json:"x-paramsSchema"`
}

type openrpcEvent struct {
	Name        string             `json:"name"`
	Description string             `json:"description,omitempty"`
	Schema      *jsonschema.Schema `json:"schema"`
}

type openrpcErrorKind struct {
	Code      int      `json:"code"`
	Kind      api.Kind `json:"kind"`
	Retryable bool     `json:"retryable"`
}

type openrpcDoc struct {
	OpenRPC string `json:"openrpc"`
	Info    struct {
		Title   string `json:"title"`
		Version string `json:"version"`
	} `json:"info"`
	Methods []openrpcMethod    `json:"methods"`
	Events  []openrpcEvent     `json:"x-events"`
	Errors  []openrpcErrorKind `json:"x-errors"`
}

func (s *Server) buildDocLocked() *openrpcDoc {
	d := &openrpcDoc{OpenRPC: OpenRPCVersion}
	d.Info.Title = s.cfg.ServerInfo.Name
	if d.Info.Title == "" {
		d.Info.Title = "weft"
	}
	d.Info.Version = s.cfg.ProtocolVersion
	names := make([]string, 0, len(s.methods))
	for n := range s.methods {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		m := s.methods[n]
		om := openrpcMethod{
			Name: n, Description: m.doc, ParamStructure: "by-name",
			Params:       []contentDescriptor{},
			Result:       contentDescriptor{Name: "result", Schema: m.resultSchema},
			ParamsSchema: m.paramsSchema,
		}
		order := m.paramsSchema.PropertyOrder
		if len(order) == 0 {
			for k := range m.paramsSchema.Properties {
				order = append(order, k)
			}
			slices.Sort(order)
		}
		for _, p := range order {
			ps := m.paramsSchema.Properties[p]
			if ps == nil {
				continue
			}
			om.Params = append(om.Params, contentDescriptor{
				Name: p, Description: ps.Description, Schema: ps,
				Required: slices.Contains(m.required, p),
			})
		}
		d.Methods = append(d.Methods, om)
	}
	enames := make([]string, 0, len(s.events))
	for n := range s.events {
		enames = append(enames, n)
	}
	slices.Sort(enames)
	d.Events = []openrpcEvent{}
	for _, n := range enames {
		e := s.events[n]
		d.Events = append(d.Events, openrpcEvent{Name: n, Description: e.doc, Schema: e.schema})
	}
	for _, k := range api.Kinds() {
		e := api.NewError(k, "")
		d.Errors = append(d.Errors, openrpcErrorKind{e.Code, k, e.Retryable})
	}
	return d
}
