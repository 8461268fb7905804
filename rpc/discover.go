package rpc

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"

	"weft.dev/weft/api"
	"weft.dev/weft/event"
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

// The types of the built-in methods, from package api.
type (
	// InitializeParams are the params of initialize.
	InitializeParams = api.InitializeParams
	// Capabilities tells a client what the connection supports.
	Capabilities = api.Capabilities
	// InitializeResult is the result of initialize.
	InitializeResult = api.InitializeResult
)

// registerNotification describes a notification the server sends, for
// rpc.discover.
func (s *Server) registerNotification(n api.NotificationInfo) {
	sch, err := jsonschema.ForType(n.Params, &jsonschema.ForOptions{TypeSchemas: s.cfg.TypeSchemas})
	if err != nil {
		panic(fmt.Sprintf("rpc: notification %q: %v", n.Name, err))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.notes[n.Name] = &eventInfo{name: n.Name, doc: n.Doc, schema: sch}
	s.docJSON = nil
}

// wireSchemas returns types, copied, with the schemas of the api types
// whose JSON is not their Go shape added where types has none.
func wireSchemas(types map[reflect.Type]*jsonschema.Schema) map[reflect.Type]*jsonschema.Schema {
	out := maps.Clone(types)
	if out == nil {
		out = map[reflect.Type]*jsonschema.Schema{}
	}
	add := func(t reflect.Type, s *jsonschema.Schema) {
		if _, ok := out[t]; !ok {
			out[t] = s
		}
	}
	// Input is a string or a list of content parts.
	parts, err := jsonschema.For[[]event.Part](&jsonschema.ForOptions{TypeSchemas: out})
	if err != nil {
		panic(fmt.Sprintf("rpc: schema of input parts: %v", err))
	}
	// An image's data is []byte in Go and base64 text on the wire.
	if parts.Items != nil && parts.Items.Properties["data"] != nil {
		parts.Items.Properties["data"] = &jsonschema.Schema{Type: "string", ContentEncoding: "base64", Description: "an image's bytes"}
	}
	add(reflect.TypeFor[api.Input](), &jsonschema.Schema{
		Description: "text, or a list of content parts",
		OneOf:       []*jsonschema.Schema{{Type: "string"}, parts},
	})
	add(reflect.TypeFor[api.Handle](), &jsonschema.Schema{
		Description: `a process handle: {"__handle__":"process","id":…}`,
		Type:        "object",
		Properties: map[string]*jsonschema.Schema{
			"__handle__": {Const: jsonschema.Ptr[any](api.HandleKind)},
			"id":         {Type: "string"},
		},
		Required:             []string{"__handle__", "id"},
		AdditionalProperties: &jsonschema.Schema{Not: &jsonschema.Schema{}},
	})
	add(reflect.TypeFor[json.RawMessage](), &jsonschema.Schema{Description: "any JSON value"})
	add(reflect.TypeFor[api.DiscoverResult](), &jsonschema.Schema{Type: "object", Description: "an OpenRPC document"})
	return out
}

// requestSchemas returns types, copied, with the schemas of the types
// that a request may send with fewer fields than a reply carries added
// where types has none: a mount needs only its id (the host fills in
// kind, mode and a scratch mount's path), a client's tool its name and
// input schema. Params are described with them, results without.
func requestSchemas(types map[reflect.Type]*jsonschema.Schema) map[reflect.Type]*jsonschema.Schema {
	out := maps.Clone(types)
	if out == nil {
		out = map[reflect.Type]*jsonschema.Schema{}
	}
	requires := func(t reflect.Type, required ...string) {
		if _, ok := out[t]; ok {
			return
		}
		s, err := jsonschema.ForType(t, &jsonschema.ForOptions{TypeSchemas: types})
		if err != nil {
			panic(fmt.Sprintf("rpc: schema of %s: %v", t, err))
		}
		s.Required = required
		out[t] = s
	}
	requires(reflect.TypeFor[event.Mount](), "id")
	requires(reflect.TypeFor[api.ToolSpec](), "name", "inputSchema")
	return out
}

func (s *Server) registerBuiltins() {
	s.add(newMethod(api.Initialize.Name, api.Initialize.Doc,
		func(ctx context.Context, p *api.InitializeParams) (*api.InitializeResult, error) {
			if err := p.Validate(); err != nil {
				return nil, err
			}
			push := false
			if c := ConnFrom(ctx); c != nil {
				push = c.stream != nil
				c.client.Store(&api.Client{Name: p.ClientInfo.Name, Transport: c.transport})
			}
			return &api.InitializeResult{
				ServerInfo:      s.cfg.ServerInfo,
				ProtocolVersion: s.cfg.ProtocolVersion,
				Capabilities:    api.Capabilities{Notifications: push, Batch: true, Discover: true},
			}, nil
		}, s.cfg.TypeSchemas))
	m := newMethod(api.Discover.Name, api.Discover.Doc,
		func(ctx context.Context, _ *api.DiscoverParams) (*api.DiscoverResult, error) { return nil, nil }, s.cfg.TypeSchemas)
	m.call = func(ctx context.Context, raw json.RawMessage) (any, error) {
		if err := m.decodeParams(raw, &api.DiscoverParams{}); err != nil {
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
	// Mutating marks a method that takes an idempotencyKey.
	Mutating bool `json:"x-mutating,omitempty"`
	// Notifications name, for a stream, the notifications that carry it:
	// its items', then its end's.
	Notifications []string `json:"x-notifications,omitempty"`
}

// openrpcNotification is a notification the server sends: its params
// by name, as a method's, and as one schema.
type openrpcNotification struct {
	Name         string              `json:"name"`
	Description  string              `json:"description,omitempty"`
	Params       []contentDescriptor `json:"params"`
	ParamsSchema *jsonschema.Schema  `json:"x-paramsSchema"`
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
	Methods       []openrpcMethod       `json:"methods"`
	Notifications []openrpcNotification `json:"x-notifications"`
	Events        []openrpcEvent        `json:"x-events"`
	Errors        []openrpcErrorKind    `json:"x-errors"`
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
		d.Methods = append(d.Methods, openrpcMethod{
			Name: n, Description: m.doc, ParamStructure: "by-name",
			Params:        byName(m.paramsSchema),
			Result:        contentDescriptor{Name: "result", Schema: m.resultSchema},
			ParamsSchema:  m.paramsSchema,
			Mutating:      m.mutating,
			Notifications: m.notes,
		})
	}
	d.Notifications = []openrpcNotification{}
	for _, n := range slices.Sorted(maps.Keys(s.notes)) {
		e := s.notes[n]
		d.Notifications = append(d.Notifications, openrpcNotification{
			Name: n, Description: e.doc, Params: byName(e.schema), ParamsSchema: e.schema,
		})
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

// byName lists the properties of an object schema as by-name params,
// in the schema's order (else sorted), the required ones marked.
func byName(sch *jsonschema.Schema) []contentDescriptor {
	out := []contentDescriptor{}
	order := sch.PropertyOrder
	if len(order) == 0 {
		order = slices.Sorted(maps.Keys(sch.Properties))
	}
	for _, p := range order {
		ps := sch.Properties[p]
		if ps == nil {
			continue
		}
		out = append(out, contentDescriptor{
			Name: p, Description: ps.Description, Schema: ps,
			Required: slices.Contains(sch.Required, p),
		})
	}
	return out
}
