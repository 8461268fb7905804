package main

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"weft.dev/weft/api"
)

func TestKeyDecoder(t *testing.T) {
	var d keyDecoder
	// An escape sequence and a UTF-8 character split across reads.
	keys := d.decode([]byte("a\x1b["))
	keys = append(keys, d.decode([]byte("Aé"[:2]))...)
	keys = append(keys, d.decode([]byte("Aé"[2:]+"\x1b[3~\r\x03\x04\x7f"))...)
	want := []key{{code: keyRune, r: 'a'}, {code: keyUp}, {code: keyRune, r: 'é'}, {code: keyDelete}, {code: keyEnter},
		{code: keyInterrupt}, {code: keyEOF}, {code: keyBackspace}}
	if len(keys) != len(want) {
		t.Fatalf("keys %v, want %v", keys, want)
	}
	for i := range want {
		if keys[i] != want[i] {
			t.Fatalf("key %d is %v, want %v", i, keys[i], want[i])
		}
	}
}

func TestLineEditor(t *testing.T) {
	var out bytes.Buffer
	e := lineEditor{out: &out, history: []string{"first", "second"}}
	typeIn := func(s string) (string, bool) {
		var d keyDecoder
		var line string
		var done bool
		for _, k := range d.decode([]byte(s)) {
			line, done = e.key(k)
		}
		return line, done
	}
	e.start("› ")
	if line, done := typeIn("helo\x1b[Dl\r"); !done || line != "hello" {
		t.Fatalf("edit: %q %v", line, done)
	}
	e.remember("hello")
	e.start("› ")
	if line, _ := typeIn("x\x1b[A\x1b[A\r"); line != "second" {
		t.Fatalf("two ups: %q", line)
	}
	e.start("› ")
	if line, _ := typeIn("draft\x1b[A\x1b[B\r"); line != "draft" {
		t.Fatalf("up and down back to the draft: %q", line)
	}
	e.start("› ")
	if line, _ := typeIn("one two\x17three\x01\x0b\r"); line != "" {
		t.Fatalf("Ctrl-W, Ctrl-A, Ctrl-K: %q", line)
	}
	e.start("› ")
	if line, _ := typeIn("abc\x15z\r"); line != "z" {
		t.Fatalf("Ctrl-U: %q", line)
	}
	if !strings.Contains(out.String(), "\r\033[2K› hello") {
		t.Fatalf("rendering: %q", out.String())
	}
}

func TestWithFlags(t *testing.T) {
	cases := []struct{ cmd, msg, want string }{
		{"mount", "session s already has mount docs (replace it with --replace, or replace: true)", "session s already has mount docs (replace it with --replace)"},
		{"unmount", "mount work is the default mount: name the new default (--new-default, or newDefaultMountId)", "mount work is the default mount: name the new default (--new-default)"},
		{"run", "session s is busy with run r (start with busy queue, interrupt or steer)", "session s is busy with run r (start with --busy queue, interrupt or steer)"},
		{"run", "nothing to map", "nothing to map"},
	}
	for _, c := range cases {
		err := withFlags(c.cmd, api.Errorf(api.KindInvalidParams, "%s", c.msg))
		var ae *api.Error
		if !errors.As(err, &ae) || ae.Message != c.want {
			t.Errorf("%s: %q, want %q", c.cmd, err, c.want)
		}
	}
	plain := errors.New("busy queue")
	if withFlags("run", plain) != plain {
		t.Error("an error that is not the host's was changed")
	}
}
