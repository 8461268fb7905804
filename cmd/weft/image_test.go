package main

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	"image/gif"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"weft.dev/weft/event"
)

// `weft run --image FILE` (repeatable) sends the files as image parts of
// the prompt: they are in the log and reach the model. A file that is not
// a PNG, JPEG, GIF or WebP, one that does not decode, one over the limit
// and a missing one are refused before anything is written, naming it.
func TestRunImage(t *testing.T) {
	e := newEnv(t)
	write := func(name string, data []byte) string {
		p := filepath.Join(e.dir, name)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	var pb, gb bytes.Buffer
	png.Encode(&pb, image.NewGray(image.Rect(0, 0, 4, 4)))
	gif.Encode(&gb, image.NewPaletted(image.Rect(0, 0, 2, 2), color.Palette{color.Black}), nil)
	pic, anim := write("a.png", pb.Bytes()), write("b.gif", gb.Bytes())
	s := e.script("see.json", `{"steps":[{"text":"I see {{images}}."}]}`)

	out, stderr, code := e.weft("", "run", "-m", "scripted:"+s, "-p", "what are these?", "--image", pic, "--image", anim)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	want := fmt.Sprintf("I see image/png %d bytes, image/gif %d bytes.", pb.Len(), gb.Len())
	if !strings.Contains(out, want) {
		t.Errorf("stdout %q lacks %q", out, want)
	}
	var d event.MessageUserData
	for _, ev := range e.events(e.onlySession()) {
		if ev.Type == event.MessageUser {
			ev.Decode(&d)
		}
	}
	if len(d.Content) != 3 || d.Content[0].Text != "what are these?" || !bytes.Equal(d.Content[1].Data, pb.Bytes()) || d.Content[2].MediaType != "image/gif" {
		t.Errorf("message.user %+v", d)
	}

	// Bad files.
	sessions := func() string { o, _, _ := e.weft("", "sessions"); return o }
	before := sessions()
	text := write("notes.txt", []byte("just text"))
	broken := write("broken.png", pb.Bytes()[:20])
	big := write("big.png", append(bytes.Clone(pb.Bytes()), make([]byte, event.MaxImageBytes)...))
	for _, tc := range []struct{ name, file, want string }{
		{"unsupported type", text, "text/plain"},
		{"undecodable", broken, "does not decode"},
		{"over the limit", big, "larger than"},
		{"missing", filepath.Join(e.dir, "nope.png"), "nope.png"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, stderr, code := e.weft("", "run", "-m", "scripted:"+s, "-p", "x", "--image", tc.file)
			if code != 2 || !strings.Contains(stderr, tc.want) || !strings.Contains(stderr, "--image") {
				t.Errorf("exit %d, stderr %q; want 2 and %q", code, stderr, tc.want)
			}
		})
	}
	if after := sessions(); after != before {
		t.Errorf("a refused image left a session:\n%s", after)
	}
}
