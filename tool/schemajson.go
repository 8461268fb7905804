package tool

import (
	"math"
	"reflect"
	"slices"
	"strconv"

	"github.com/google/jsonschema-go/jsonschema"
	"weft.dev/weft/internal/jsonstr"
)

// appendSchema appends s encoded exactly as json.Marshal encodes it, for a
// schema that uses only the keywords [jsonschema.For] gives a tool's input:
// type, description, properties (in PropertyOrder, then the rest sorted),
// items, minimum, maximum, required, additionalProperties and not. ok is false for a schema
// with any other keyword set, or one json.Marshal refuses; the caller then
// encodes it with json.Marshal. jsonschema's own encoder marshals every
// nested schema on its own and builds a map of its field names for each:
// for the 14 built-in tools that was a fifth of a one-shot `weft run`'s
// instructions.
func appendSchema(b []byte, s *jsonschema.Schema) (_ []byte, ok bool) {
	if s == nil {
		return append(b, "null"...), true
	}
	rest := *s
	rest.Type, rest.Types, rest.Description, rest.Properties, rest.PropertyOrder = "", nil, "", nil, nil
	rest.Items, rest.Required, rest.AdditionalProperties, rest.Not = nil, nil, nil, nil
	rest.Minimum, rest.Maximum = nil, nil
	if !reflect.ValueOf(&rest).Elem().IsZero() || s.Type != "" && s.Types != nil {
		return b, false
	}
	start := len(b)
	b = append(b, '{')
	field := func(name string) {
		if b[len(b)-1] != '{' {
			b = append(b, ',')
		}
		b = append(b, '"')
		b = append(b, name...)
		b = append(b, '"', ':')
	}
	switch {
	case s.Type != "":
		field("type")
		b = jsonstr.Append(b, s.Type)
	case s.Types != nil:
		field("type")
		b = appendStrings(b, s.Types)
	}
	if s.Properties != nil {
		field("properties")
		b = append(b, '{')
		done := make(map[string]bool, len(s.Properties))
		var names []string
		for _, n := range s.PropertyOrder {
			if done[n] {
				return b[:start], false // json.Marshal refuses a repeated name
			}
			done[n] = true
			if _, in := s.Properties[n]; in {
				names = append(names, n)
			}
		}
		var more []string
		for n := range s.Properties {
			if !done[n] {
				more = append(more, n)
			}
		}
		slices.Sort(more)
		for i, n := range append(names, more...) {
			if i > 0 {
				b = append(b, ',')
			}
			b = jsonstr.Append(b, n)
			b = append(b, ':')
			if b, ok = appendSchema(b, s.Properties[n]); !ok {
				return b[:start], false
			}
		}
		b = append(b, '}')
	}
	if s.Items != nil {
		field("items")
		if b, ok = appendSchema(b, s.Items); !ok {
			return b[:start], false
		}
	}
	if s.Description != "" {
		field("description")
		b = jsonstr.Append(b, s.Description)
	}
	for _, n := range []struct {
		name string
		f    *float64
	}{{"minimum", s.Minimum}, {"maximum", s.Maximum}} {
		if n.f == nil {
			continue
		}
		if math.IsNaN(*n.f) || math.IsInf(*n.f, 0) {
			return b[:start], false // json.Marshal refuses them
		}
		field(n.name)
		b = appendJSONFloat(b, *n.f)
	}
	if len(s.Required) > 0 {
		field("required")
		b = appendStrings(b, s.Required)
	}
	for _, sub := range []struct {
		name string
		s    *jsonschema.Schema
	}{{"additionalProperties", s.AdditionalProperties}, {"not", s.Not}} {
		if sub.s == nil {
			continue
		}
		field(sub.name)
		if b, ok = appendSchema(b, sub.s); !ok {
			return b[:start], false
		}
	}
	b = append(b, '}')
	// As jsonschema does: {} is true, {"not":true} is false.
	switch string(b[start:]) {
	case `{}`:
		b = append(b[:start], "true"...)
	case `{"not":true}`:
		b = append(b[:start], "false"...)
	}
	return b, true
}

// appendJSONFloat appends f as json.Marshal does a float64.
func appendJSONFloat(b []byte, f float64) []byte {
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		// e-09 to e-9, as json does
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}

func appendStrings(b []byte, ss []string) []byte {
	b = append(b, '[')
	for i, s := range ss {
		if i > 0 {
			b = append(b, ',')
		}
		b = jsonstr.Append(b, s)
	}
	return append(b, ']')
}
