package filled_test

import (
	"encoding/json"
	"reflect"
	"testing"

	"weft.dev/weft/internal/filled"
)

type inner struct {
	N   int
	Raw json.RawMessage
}

type outer struct {
	S       string
	F       float64
	B       bool
	P       *inner
	L       []inner
	M       map[string]uint
	private *int
}

// TestFill: every exported field is set, nested ones too, and an
// unexported one is left alone.
func TestFill(t *testing.T) {
	var o outer
	filled.Fill(reflect.ValueOf(&o).Elem())
	want := outer{S: "s1", F: 0.5, B: true, P: &inner{N: 3, Raw: json.RawMessage(`{"k":1}`)},
		L: []inner{{N: 3, Raw: json.RawMessage(`{"k":1}`)}}, M: map[string]uint{"s2": 3}}
	if o.private != nil {
		t.Errorf("Fill set an unexported field")
	}
	if !reflect.DeepEqual(o, want) {
		t.Fatalf("Fill = %+v, want %+v", o, want)
	}
}
