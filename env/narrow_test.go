package env_test

import (
	"errors"
	"path/filepath"
	"testing"

	"weft.dev/weft/env"
	"weft.dev/weft/event"
)

// OnlyWritable: one mount writable, the others read-only, the view
// sharing the binding's mounts and closing nothing.
func TestOnlyWritable(t *testing.T) {
	dir := t.TempDir()
	work, scratch, docs := filepath.Join(dir, "work"), filepath.Join(dir, "scratch"), filepath.Join(dir, "docs")
	mkdirs(t, work, scratch, docs)
	b := mustBinding(t,
		event.Mount{ID: "work", Kind: event.KindLocal, Path: work, Mode: event.ModeReadWrite, Default: true, DefaultForShell: true},
		event.Mount{ID: "scratch", Kind: event.KindLocal, Path: scratch, Mode: event.ModeReadWrite},
		event.Mount{ID: "docs", Kind: event.KindLocal, Path: docs, Mode: event.ModeReadOnly},
	)
	v, err := b.OnlyWritable("scratch")
	if err != nil {
		t.Fatal(err)
	}
	modes := map[string]string{}
	for _, m := range v.Mounts() {
		modes[m.ID] = m.Mode
		if m.DefaultForShell != (m.ID == "scratch") {
			t.Errorf("%s: defaultForShell %v", m.ID, m.DefaultForShell)
		}
	}
	if modes["work"] != event.ModeReadOnly || modes["scratch"] != event.ModeReadWrite || modes["docs"] != event.ModeReadOnly {
		t.Errorf("modes of the view: %v", modes)
	}
	if err := v.WriteFile("/environment/work/a", []byte("x")); !errors.Is(err, env.ErrReadOnly) {
		t.Errorf("a write in work through the view: %v", err)
	}
	if err := v.WriteFile("/environment/scratch/a", []byte("x")); err != nil {
		t.Errorf("a write in scratch through the view: %v", err)
	}
	if m, ok := v.ShellMount(); !ok || m.ID != "scratch" {
		t.Errorf("the view's shell mount: %+v %v", m, ok)
	}
	if id, ok := v.Narrowed(); !ok || id != "scratch" {
		t.Errorf("Narrowed: %q %v", id, ok)
	}
	if _, ok := b.Narrowed(); ok {
		t.Error("the binding itself is narrowed")
	}
	// The binding is unchanged, and the view's Close leaves it open.
	if err := v.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.WriteFile("/environment/work/a", []byte("x")); err != nil {
		t.Errorf("a write in work through the binding after the view closed: %v", err)
	}
	if _, err := b.OnlyWritable("docs"); !errors.Is(err, env.ErrReadOnly) {
		t.Errorf("a read-only mount: %v", err)
	}
	if _, err := b.OnlyWritable("nope"); !errors.Is(err, env.ErrNoMount) {
		t.Errorf("an unknown mount: %v", err)
	}
	var none *env.Binding
	if _, err := none.OnlyWritable("work"); !errors.Is(err, env.ErrNoMount) {
		t.Errorf("a nil binding: %v", err)
	}
}
