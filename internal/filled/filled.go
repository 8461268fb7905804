// Package filled sets every field of a value to one that is not its zero,
// so that a test of an encoding, a schema or a client shows any field that
// is dropped on the way.
package filled

import (
	"encoding/json"
	"fmt"
	"reflect"
)

// maxDepth bounds how deep Fill goes into nested and recursive types.
const maxDepth = 4

// Fill sets every exported field of v, which must be settable, to a value
// that is not its zero: strings name their depth ("s0", "s1", …), numbers
// are 3 (floats 0.5), bools true, slices and maps hold one element,
// pointers point at a filled value and a json.RawMessage is an object.
// It stops maxDepth levels down.
func Fill(v reflect.Value) { fill(v, 0) }

func fill(v reflect.Value, depth int) {
	if depth > maxDepth {
		return
	}
	if v.Type() == reflect.TypeFor[json.RawMessage]() {
		v.SetBytes([]byte(`{"k":1}`))
		return
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(fmt.Sprintf("s%d", depth))
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(3)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(3)
	case reflect.Float32, reflect.Float64:
		v.SetFloat(0.5)
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(v.Elem(), depth+1)
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		fill(v.Index(0), depth+1)
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		fill(k, depth+1)
		fill(e, depth+1)
		m.SetMapIndex(k, e)
		v.Set(m)
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(v.Field(i), depth+1)
			}
		}
	}
}
