package tool

import (
	"encoding/json"
	"fmt"
	"math"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
)

type schemaInner struct {
	Name string   `json:"name" jsonschema:"a name with <html> & \"quotes\""`
	Tags []string `json:"tags,omitempty"`
}

type schemaEmbedded struct {
	Depth int `json:"depth,omitempty" jsonschema:"how deep"`
}

// schemaKinds has a field of every kind a tool's input struct uses, and
// some it may.
type schemaKinds struct {
	schemaEmbedded
	Path    string            `json:"path" jsonschema:"the file: relative to the default mount, or /environment/<mount>/..."`
	Offset  int64             `json:"offset,omitempty" jsonschema:"line\nbreak\ttab \u2028 \u2029 \x01 and \x7f"`
	Limit   uint              `json:"limit,omitzero"`
	Ratio   float64           `json:"ratio,omitempty"`
	All     bool              `json:"all,omitempty" jsonschema:"replace every occurrence"`
	Handle  map[string]any    `json:"handle" jsonschema:"the process handle {\"__handle__\":\"process\",\"id\":…}"`
	Env     map[string]string `json:"env,omitempty"`
	Args    []string          `json:"args,omitempty"`
	Matrix  [][]int           `json:"matrix,omitempty"`
	Inner   schemaInner       `json:"inner"`
	Inners  []schemaInner     `json:"inners,omitempty"`
	Ptr     *schemaInner      `json:"ptr,omitempty"`
	PtrInt  *int              `json:"ptrInt,omitempty"`
	Any     any               `json:"any,omitempty"`
	Raw     json.RawMessage   `json:"raw,omitempty"`
	Bytes   []byte            `json:"bytes,omitempty"`
	Skipped string            `json:"-"`
}

// appendSchema encodes every schema jsonschema.For gives as json.Marshal
// does, byte for byte, or declines.
func TestAppendSchemaAsMarshal(t *testing.T) {
	schemas := map[string]*jsonschema.Schema{}
	add := func(name string, s *jsonschema.Schema, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(name, err)
		}
		schemas[name] = s
	}
	add(forSchema[schemaKinds]("kinds"))
	add(forSchema[struct{}]("empty"))
	add(forSchema[map[string]any]("map"))
	add(forSchema[struct {
		Command string `json:"command" jsonschema:"the shell command line"`
		Timeout int    `json:"timeout,omitempty"`
	}]("shell"))
	// Hand-made ones: unordered and partly ordered properties, Types,
	// empty properties, true and false.
	add("unordered", &jsonschema.Schema{Type: "object", Properties: map[string]*jsonschema.Schema{
		"b": {Type: "string"}, "a": {Types: []string{"null", "integer"}}, "c": {}, "d": nil}}, nil)
	add("partial", &jsonschema.Schema{Type: "object", PropertyOrder: []string{"z", "missing"},
		Properties: map[string]*jsonschema.Schema{"z": {}, "b": {Not: &jsonschema.Schema{}}, "a": {Items: &jsonschema.Schema{Type: "string"}}},
		Required:   []string{}}, nil)
	add("emptyprops", &jsonschema.Schema{Properties: map[string]*jsonschema.Schema{}, Types: []string{}}, nil)
	add("not", &jsonschema.Schema{Not: &jsonschema.Schema{Type: "string"}, AdditionalProperties: &jsonschema.Schema{}}, nil)
	for i, f := range []float64{0, -1, 255, 1.5, 1e-7, 1e21, -3e-10, 123456789012, 1e20} {
		add(fmt.Sprint("float", i), &jsonschema.Schema{Type: "number", Minimum: &f, Maximum: &f}, nil)
	}
	for name, s := range schemas {
		want, err := json.Marshal(s)
		if err != nil {
			t.Fatal(name, err)
		}
		got, ok := appendSchema([]byte("prefix"), s)
		if !ok {
			t.Errorf("%s: declined %s", name, want)
			continue
		}
		if string(got) != "prefix"+string(want) {
			t.Errorf("%s:\n got %s\nwant prefix%s", name, got, want)
		}
	}
	// Other keywords, and what json.Marshal refuses, are declined.
	min, nan := 1.0, math.NaN()
	for name, s := range map[string]*jsonschema.Schema{
		"multipleOf": {Type: "number", MultipleOf: &min},
		"nan":        {Type: "number", Minimum: &nan},
		"enum":       {Enum: []any{"a"}},
		"nested":     {Type: "object", Properties: map[string]*jsonschema.Schema{"x": {Format: "date"}}},
		"both":       {Type: "string", Types: []string{"null"}},
		"repeated":   {Properties: map[string]*jsonschema.Schema{"x": {}}, PropertyOrder: []string{"x", "x"}},
		"extra":      {Extra: map[string]any{"x-y": 1}},
		"deepitems":  {Items: &jsonschema.Schema{Items: &jsonschema.Schema{Pattern: "a"}}},
	} {
		if got, ok := appendSchema([]byte("prefix"), s); ok || string(got) != "prefix" {
			t.Errorf("%s: got %q, %v; want declined", name, got, ok)
		}
	}
}

func forSchema[T any](name string) (string, *jsonschema.Schema, error) {
	s, err := jsonschema.For[T](nil)
	return name, s, err
}
