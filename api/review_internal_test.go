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

// A value refused for not being one of a field's choices (or a tool name
// refused for its shape) is quoted in the error, clipped: the error of a
// 64 KiB "busy" is not 64 KiB.
func TestValidateClipsRefusedChoices(t *testing.T) {
	big := strings.Repeat("v", 64<<10)
	text := Input{{Type: "text", Text: "hi"}}
	for name, p := range map[string]Params{
		"network":       CreateSessionParams{Network: big},
		"busy":          StartRunParams{SessionID: "s", Input: text, Busy: big},
		"decision":      DecideParams{ApprovalID: "a", Decision: big},
		"status":        ListRequestsParams{Status: big},
		"kind":          ListRequestsParams{Kind: big},
		"tools[0].name": CreateSessionParams{Tools: []ToolSpec{{Name: big, InputSchema: []byte(`{"type":"object"}`)}}},
	} {
		err := p.Validate()
		checkFieldError(t, name, err, name)
		if err != nil && len(err.Error()) > 1<<10 {
			t.Errorf("%s: the error is %d bytes", name, len(err.Error()))
		}
	}
}
