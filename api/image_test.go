package api_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"image"
	"image/png"
	"strings"
	"testing"

	"weft.dev/weft/api"
	"weft.dev/weft/event"
)

// tinyPNG returns a w×h PNG.
func tinyPNG(t *testing.T, w, h int) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := png.Encode(&b, image.NewGray(image.Rect(0, 0, w, h))); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// run/start and run/steer take images as input parts; each bad image is
// refused with invalid_params naming the part, before anything is
// written: an unsupported media type (data: mediaTypes), an image over
// the per-image or per-input cap (data: limit), bytes that do not decode
// as the declared type, data that is not base64, an image part with text.
func TestInputImages(t *testing.T) {
	ok := tinyPNG(t, 2, 2)
	big := append(bytes.Clone(ok), make([]byte, event.MaxImageBytes)...) // decodes (the header is first), too large
	img := func(mt string, data []byte) event.Part {
		return event.Part{Type: event.PartImage, MediaType: mt, Data: data}
	}
	many := api.Input{event.Part{Type: "text", Text: "look"}}
	for range event.MaxImagesBytes/(event.MaxImageBytes/2) + 1 {
		many = append(many, img("image/png", append(bytes.Clone(ok), make([]byte, event.MaxImageBytes/2)...)))
	}
	for _, tc := range []struct {
		name  string
		in    api.Input
		field string
		data  string // a key the error's data must have
	}{
		{"unsupported type", api.Input{img("image/tiff", ok)}, "input[0]", "mediaTypes"},
		{"not an image type", api.Input{event.Part{Type: "text", Text: "x"}, img("application/pdf", ok)}, "input[1]", "mediaTypes"},
		{"over the per-image cap", api.Input{img("image/png", big)}, "input[0]", "limit"},
		{"over the per-input cap", many, "input", "limit"},
		{"undecodable", api.Input{img("image/png", []byte("not a png at all"))}, "input[0]", ""},
		{"declared jpeg, is png", api.Input{img("image/jpeg", ok)}, "input[0]", ""},
		{"webp without its header", api.Input{img("image/webp", []byte("RIFF\x00\x00\x00\x00WEBPJUNK"))}, "input[0]", ""},
		{"image part with text", api.Input{{Type: event.PartImage, MediaType: "image/png", Data: ok, Text: "x"}}, "input[0]", ""},
		{"text part with data", api.Input{{Type: event.PartText, Text: "x", Data: ok}}, "input[0]", ""},
		{"unknown part type", api.Input{{Type: "video", Data: ok}}, "input[0]", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, p := range []api.Params{
				&api.StartRunParams{SessionID: "s", Input: tc.in},
				&api.SteerParams{RunID: "r", Input: tc.in},
			} {
				err := p.Validate()
				var e *api.Error
				if !errors.As(err, &e) || e.Kind != api.KindInvalidParams {
					t.Fatalf("%T: err = %v, want invalid_params", p, err)
				}
				if e.Data["field"] != tc.field {
					t.Errorf("%T: field = %v, want %s (%v)", p, e.Data["field"], tc.field, err)
				}
				if _, ok := e.Data[tc.data]; tc.data != "" && !ok {
					t.Errorf("%T: data %v has no %s", p, e.Data, tc.data)
				}
			}
		})
	}

	// Good images pass, alone or with text; and a bad base64 is refused
	// when the params are decoded.
	for _, in := range []api.Input{{img("image/png", ok)}, {{Type: "text", Text: "what is this?"}, img("image/png", ok)}} {
		if err := (&api.StartRunParams{SessionID: "s", Input: in}).Validate(); err != nil {
			t.Errorf("good input refused: %v", err)
		}
	}
	var p api.StartRunParams
	raw := `{"sessionId":"s","input":[{"type":"image","mediaType":"image/png","data":"%%%not base64"}]}`
	err := json.Unmarshal([]byte(raw), &p)
	if !errors.Is(err, api.ErrInvalidParams) || !strings.Contains(err.Error(), "base64") {
		t.Errorf("bad base64: err = %v, want invalid_params about base64", err)
	}
	// Round trip: the wire form carries the bytes as base64.
	b, _ := json.Marshal(api.Input{img("image/png", ok)})
	if !strings.Contains(string(b), base64.StdEncoding.EncodeToString(ok)) || !strings.Contains(string(b), `"mediaType":"image/png"`) {
		t.Errorf("encoding %s", b)
	}
}
