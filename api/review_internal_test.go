package api

import (
	"reflect"
	"strings"
	"testing"
)

// An ID a client gives is at most MaxIDBytes (docs/protocol.md: "an ID or
// key 256 bytes"), refused by the params' Validate as invalid_params
// naming it: every string field of every params type whose wire name is
// "id" or ends in "Id", required or not. (A longer one would otherwise
// reach the store and come back, whole, in a not_found's message and
// data.)
func TestValidateBoundsEveryID(t *testing.T) {
	long := strings.Repeat("i", MaxIDBytes+1)
	for _, d := range Methods() {
		info := d.Info()
		for i := range info.Params.NumField() {
			f := info.Params.Field(i)
			if !isID(f) {
				continue
			}
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			p := d.NewParams()
			v := reflect.ValueOf(p).Elem()
			v.Field(i).SetString(long)
			err := v.Interface().(Params).Validate()
			if err == nil {
				t.Errorf("%s: a %d-byte %s passes Validate", info.Name, len(long), name)
				continue
			}
			// The first error may be another ID's (a required one left
			// empty): give the others and look again. IDs are checked
			// before the other fields.
			checkFieldError(t, info.Name+" "+name, err, "")
			for j := range info.Params.NumField() {
				if j != i && isID(info.Params.Field(j)) {
					v.Field(j).SetString("x")
				}
			}
			err = v.Interface().(Params).Validate()
			if err == nil {
				t.Errorf("%s: a %d-byte %s passes Validate", info.Name, len(long), name)
				continue
			}
			checkFieldError(t, info.Name+" "+name, err, name)
		}
	}
}

// isID reports whether f is an ID a client gives: a string whose wire
// name is "id" or ends in "Id".
func isID(f reflect.StructField) bool {
	name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
	return f.Type.Kind() == reflect.String && (name == "id" || strings.HasSuffix(name, "Id"))
}
