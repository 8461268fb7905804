package env_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"
	"weft.dev/weft/env"
	"weft.dev/weft/event"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func mkdirs(t testing.TB, dirs ...string) {
	t.Helper()
	for _, d := range dirs {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

func writeFile(t testing.TB, name, content string) {
	t.Helper()
	mkdirs(t, filepath.Dir(name))
	if err := os.WriteFile(name, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func mustBinding(t testing.TB, mounts ...event.Mount) *env.Binding {
	t.Helper()
	b, err := env.NewBinding(1, mounts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

func TestNewBinding(t *testing.T) {
	dir := t.TempDir()
	a, c := filepath.Join(dir, "a"), filepath.Join(dir, "c")
	mkdirs(t, a, c)
	file := filepath.Join(dir, "f")
	writeFile(t, file, "x")
	rw := func(id, p string) event.Mount {
		return event.Mount{ID: id, Kind: event.KindLocal, Path: p, Mode: event.ModeReadWrite}
	}
	ro := func(id, p string) event.Mount {
		return event.Mount{ID: id, Kind: event.KindLocal, Path: p, Mode: event.ModeReadOnly}
	}
	def := func(m event.Mount) event.Mount { m.Default = true; return m }
	sh := func(m event.Mount) event.Mount { m.DefaultForShell = true; return m }

	bad := map[string][]event.Mount{
		"empty id":           {rw("", a)},
		"upper id":           {rw("Work", a)},
		"leading dash":       {rw("-w", a)},
		"slash id":           {rw("a/b", a)},
		"dot id":             {rw(".", a)},
		"duplicate":          {def(rw("a", a)), rw("a", c)},
		"bad mode":           {{ID: "a", Kind: event.KindLocal, Path: a, Mode: "rx"}},
		"bad kind":           {{ID: "a", Kind: "s3", Path: a, Mode: "rw"}},
		"relative path":      {rw("a", "a")},
		"missing dir":        {rw("a", filepath.Join(dir, "nope"))},
		"file not dir":       {rw("a", file)},
		"no default of many": {rw("a", a), rw("c", c)},
		"shell on ro":        {sh(ro("a", a))},
	}
	for name, ms := range bad {
		if b, err := env.NewBinding(1, ms); err == nil {
			b.Close()
			t.Errorf("%s: NewBinding succeeded", name)
		}
	}

	type flags struct{ def, shell string }
	good := []struct {
		name   string
		mounts []event.Mount
		want   flags
	}{
		{"single rw", []event.Mount{rw("a", a)}, flags{"a", "a"}},
		{"single ro", []event.Mount{ro("a", a)}, flags{"a", ""}},
		{"last default wins", []event.Mount{def(rw("a", a)), def(ro("c", c))}, flags{"c", ""}},
		{"default rw takes shell", []event.Mount{ro("a", a), def(rw("c", c))}, flags{"c", "c"}},
		{"explicit shell", []event.Mount{def(ro("a", a)), sh(rw("c", c))}, flags{"a", "c"}},
		{"none", nil, flags{"", ""}},
	}
	for _, tc := range good {
		b, err := env.NewBinding(7, tc.mounts)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		var got flags
		ndef := 0
		for _, m := range b.Mounts() {
			if m.Default {
				got.def = m.ID
				ndef++
			}
			if m.DefaultForShell {
				got.shell = m.ID
			}
		}
		if got != tc.want || (len(tc.mounts) > 0 && ndef != 1) {
			t.Errorf("%s: flags %+v (%d defaults), want %+v", tc.name, got, ndef, tc.want)
		}
		if sm, ok := b.ShellMount(); ok != (tc.want.shell != "") || sm.ID != tc.want.shell {
			t.Errorf("%s: ShellMount = %q, %v", tc.name, sm.ID, ok)
		}
		if b.Version() != 7 {
			t.Errorf("%s: version %d", tc.name, b.Version())
		}
		b.Close()
	}
}

func TestResolve(t *testing.T) {
	dir := t.TempDir()
	work, docs := filepath.Join(dir, "work"), filepath.Join(dir, "docs")
	mkdirs(t, work, docs)
	b := mustBinding(t,
		event.Mount{ID: "work", Kind: event.KindLocal, Path: work, Mode: "rw", Default: true},
		event.Mount{ID: "docs", Kind: event.KindScratch, Path: docs, Mode: "ro"},
	)
	tests := []struct {
		in      string
		access  env.Access
		display string
		rel     string
		err     error
	}{
		{"a.txt", env.Read, "/environment/work/a.txt", "a.txt", nil},
		{"./a/../b//c/", env.Read, "/environment/work/b/c", "b/c", nil},
		{".", env.Read, "/environment/work", ".", nil},
		{"/environment/work", env.Read, "/environment/work", ".", nil},
		{"/environment/docs/x/y", env.Read, "/environment/docs/x/y", "x/y", nil},
		{"//environment//./docs/x", env.Read, "/environment/docs/x", "x", nil},
		{"/environment/docs/x", env.Write, "", "", env.ErrReadOnly},
		{"/environment/work/x", env.Write, "/environment/work/x", "x", nil},
		{"/environment", env.Read, "", "", env.ErrNoMount},
		{"/environment/", env.Read, "", "", env.ErrNoMount},
		{"/environment/nope/x", env.Read, "", "", env.ErrNoMount},
		{"/environment/Work/x", env.Read, "", "", env.ErrNoMount},
		{"/environment/../etc", env.Read, "", "", env.ErrOutside},
		{"/environment/work/../docs/x", env.Read, "", "", env.ErrOutside},
		{"/etc/passwd", env.Read, "", "", env.ErrOutside},
		{"/environmentx/work", env.Read, "", "", env.ErrOutside},
		{"/", env.Read, "", "", env.ErrOutside},
		{"", env.Read, "", "", env.ErrBadPath},
		{"a\x00b", env.Read, "", "", env.ErrBadPath},
		{strings.Repeat("a/", 2049), env.Read, "", "", env.ErrBadPath},
		{"../x", env.Read, "", "", env.ErrOutside},
	}
	for _, tc := range tests {
		p, err := b.Resolve(tc.in, tc.access)
		if tc.err != nil {
			var e *env.Error
			if !errors.Is(err, tc.err) || !errors.As(err, &e) {
				t.Errorf("Resolve(%q) = %v, want %v", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("Resolve(%q): %v", tc.in, err)
			continue
		}
		if p.String() != tc.display || p.Rel() != tc.rel {
			t.Errorf("Resolve(%q) = %q rel %q, want %q rel %q", tc.in, p, p.Rel(), tc.display, tc.rel)
		}
	}

	_, err := b.Resolve("/environment/work/../../etc/passwd", env.Read)
	want := `/environment/work/../../etc/passwd: outside mount "work": ".." escapes the mount root`
	if err == nil || err.Error() != want {
		t.Errorf("message:\n got %v\nwant %s", err, want)
	}

	var nilb *env.Binding
	if _, err := nilb.Resolve("a", env.Read); !errors.Is(err, env.ErrNoMount) {
		t.Errorf("nil binding: %v", err)
	}
}

func TestReadWriteHelpers(t *testing.T) {
	dir := t.TempDir()
	work, docs := filepath.Join(dir, "work"), filepath.Join(dir, "docs")
	mkdirs(t, work, docs)
	writeFile(t, filepath.Join(docs, "r.txt"), "read me")
	b := mustBinding(t,
		event.Mount{ID: "work", Kind: event.KindLocal, Path: work, Mode: "rw", Default: true},
		event.Mount{ID: "docs", Kind: event.KindLocal, Path: docs, Mode: "ro"},
	)
	if err := b.WriteFile("deep/er/f.txt", []byte("hello")); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(filepath.Join(work, "deep/er/f.txt")); err != nil || string(got) != "hello" {
		t.Fatalf("host sees %q, %v", got, err)
	}
	if err := b.WriteFile("deep/er/f.txt", []byte("hi")); err != nil {
		t.Fatal(err)
	}
	if got, err := b.ReadFile("/environment/work/deep/er/f.txt", 0); err != nil || string(got) != "hi" {
		t.Fatalf("ReadFile = %q, %v", got, err)
	}
	if _, err := b.ReadFile("deep/er/f.txt", 1); !errors.Is(err, env.ErrTooLarge) {
		t.Errorf("cap: %v", err)
	}
	if got, err := b.ReadFile("/environment/docs/r.txt", 100); err != nil || string(got) != "read me" {
		t.Errorf("ro read = %q, %v", got, err)
	}
	if err := b.WriteFile("/environment/docs/r.txt", []byte("x")); !errors.Is(err, env.ErrReadOnly) {
		t.Errorf("ro write: %v", err)
	}
	_, err := b.ReadFile("missing.txt", 0)
	if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "/environment/work/missing.txt") || strings.Contains(err.Error(), dir) {
		t.Errorf("missing: %v", err)
	}
	p, _ := b.Resolve("deep", env.Read)
	ents, _, err := p.ReadDir(0)
	if err != nil || len(ents) != 1 || ents[0].Name() != "er" {
		t.Errorf("ReadDir = %v, %v", ents, err)
	}
	if err := p.WriteFile(nil); err == nil {
		t.Error("write through a read path succeeded")
	}
	hd, err := p.HostDir()
	if real, _ := filepath.EvalSymlinks(filepath.Join(work, "deep")); err != nil || hd != real {
		t.Errorf("HostDir = %q, %v", hd, err)
	}
	var seen []string
	root, _ := b.Resolve(".", env.Read)
	root.WalkDir(func(p *env.Path, d fs.DirEntry, err error) error {
		seen = append(seen, p.String())
		return err
	})
	if strings.Join(seen, " ") != "/environment/work /environment/work/deep /environment/work/deep/er /environment/work/deep/er/f.txt" {
		t.Errorf("WalkDir saw %v", seen)
	}
	sd, err := b.ShellDir()
	if err != nil || sd.String() != "/environment/work" {
		t.Errorf("ShellDir = %v, %v", sd, err)
	}
}
