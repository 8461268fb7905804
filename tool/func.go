package tool

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/google/jsonschema-go/jsonschema"
)

// prevalidated is implemented by tools that validate their own arguments
// against a resolved schema; [Registry] reuses that schema and, having
// validated once, calls callValidated to skip the second check. resolved
// resolves the schema on its first call.
type prevalidated interface {
	resolved() (*jsonschema.Resolved, error)
	callValidated(ctx context.Context, c *Call) (Result, error)
}

// Func returns a typed tool: its input schema is derived once from In with
// [jsonschema.For], each call's arguments are validated against it and
// decoded into an In, and fn is called with it. The schema is resolved for
// validation at the tool's first call: resolving every tool's schema at
// start was a seventh of a one-shot `weft run`'s instructions.
//
// In must be a struct (or a map with string keys). Field names come from
// the json tags; a field without omitempty or omitzero is required; the
// jsonschema tag is the field's description. The derived schema sets
// additionalProperties to false, so an argument In has no field for is a
// schema error the model sees, naming the field, rather than being
// silently dropped.
//
// Func fails if name is invalid or In has no object schema. The returned
// Tool is safe for concurrent use if fn is. An error from fn becomes an
// error result.
func Func[In any](name, description string, fn func(ctx context.Context, call *Call, in In) (Result, error)) (Tool, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	if fn == nil {
		return nil, fmt.Errorf("tool %q: nil function", name)
	}
	schema, err := jsonschema.For[In](nil)
	if err != nil {
		return nil, fmt.Errorf("tool %q: deriving schema: %w", name, err)
	}
	if schema.Type != "object" {
		return nil, fmt.Errorf("tool %q: arguments must be an object, %T has schema type %q", name, *new(In), schema.Type)
	}
	raw, ok := appendSchema(nil, schema)
	if !ok {
		if raw, err = json.Marshal(schema); err != nil {
			return nil, fmt.Errorf("tool %q: encoding schema: %w", name, err)
		}
	}
	return &funcTool[In]{
		spec: Spec{Name: name, Description: description, InputSchema: raw},
		schema: sync.OnceValues(func() (*jsonschema.Resolved, error) {
			rs, err := schema.Resolve(nil)
			if err != nil {
				return nil, fmt.Errorf("resolving schema: %w", err)
			}
			return rs, nil
		}),
		fn: fn,
	}, nil
}

type funcTool[In any] struct {
	spec   Spec
	schema func() (*jsonschema.Resolved, error) // resolves once, at the first call
	fn     func(ctx context.Context, call *Call, in In) (Result, error)
}

func (t *funcTool[In]) Spec() Spec                              { return t.spec }
func (t *funcTool[In]) resolved() (*jsonschema.Resolved, error) { return t.schema() }

// Call validates call.Arguments, decodes them and calls the function.
func (t *funcTool[In]) Call(ctx context.Context, c *Call) (Result, error) {
	rs, err := t.schema()
	if err != nil {
		return Result{}, fmt.Errorf("tool %q: %w", t.spec.Name, err)
	}
	args, msg := validateArgs(rs, c.Arguments)
	if msg != "" {
		return Result{}, fmt.Errorf("tool %q: %s", t.spec.Name, msg)
	}
	cc := *c
	cc.Arguments = args
	return t.callValidated(ctx, &cc)
}

func (t *funcTool[In]) callValidated(ctx context.Context, c *Call) (Result, error) {
	var in In
	if err := json.Unmarshal(c.Arguments, &in); err != nil {
		return Result{}, fmt.Errorf("tool %q: decoding arguments: %w", t.spec.Name, err)
	}
	return t.fn(ctx, c, in)
}
