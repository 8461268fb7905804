package builtin_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"
	"weft.dev/weft/env"
	"weft.dev/weft/env/sandbox"
	"weft.dev/weft/event"
	"weft.dev/weft/internal/proctest"
	"weft.dev/weft/tool"
	"weft.dev/weft/tool/builtin"
)

// hostEnv makes the test binary a "host" that runs one foreground shell
// call and waits to be killed (see TestShellHostDeath); its value is
// CONTAINMENT:MARKER:DIR.
const hostEnv = "WEFT_BUILTIN_TEST_HOST"

func TestMain(m *testing.M) {
	// Sandboxed shells re-execute the test binary as the helper.
	if sandbox.IsHelper(os.Args) {
		sandbox.Main(os.Args)
	}
	if spec := os.Getenv(hostEnv); spec != "" {
		foregroundHost(spec)
		return
	}
	goleak.VerifyTestMain(m)
}

// foregroundHost runs the containment tree through the shell tool, with
// the containment, marker and mount directory of spec, until it is killed.
func foregroundHost(spec string) {
	f := strings.SplitN(spec, ":", 3)
	if len(f) != 3 {
		fmt.Println("bad spec", spec)
		os.Exit(2)
	}
	b, err := env.NewBinding(1, []event.Mount{{ID: "work", Kind: event.KindLocal, Path: f[2], Mode: event.ModeReadWrite, Default: true}})
	if err != nil {
		fmt.Println(err)
		os.Exit(2)
	}
	r := tool.NewRegistry()
	cfg := &sandbox.Config{Unsandboxed: true, Containment: f[0], TempRoot: f[2]}
	if err := builtin.Register(r, builtin.Options{Sandbox: cfg, ShellEnv: []string{proctest.Env(f[1])}}); err != nil {
		fmt.Println(err)
		os.Exit(2)
	}
	raw, _ := json.Marshal(map[string]any{"command": proctest.Tree})
	res := r.Call(context.Background(), "shell", &tool.Call{Arguments: raw, Env: b}, tool.CallOptions{})
	fmt.Println("the call returned:", res.Output)
	os.Exit(1)
}

type fixture struct {
	t          *testing.T
	dir        string
	work, docs string
	b          *env.Binding
	r          *tool.Registry
}

func newFixture(t *testing.T, opts builtin.Options, mounts ...event.Mount) *fixture {
	t.Helper()
	dir := t.TempDir()
	f := &fixture{t: t, dir: dir, work: filepath.Join(dir, "work"), docs: filepath.Join(dir, "docs")}
	f.write(filepath.Join(f.work, "a.txt"), "one\ntwo\nthree\n")
	f.write(filepath.Join(f.work, "src", "main.go"), "package main\n\nfunc main() {\n\tprintln(\"hi\")\n}\n")
	f.write(filepath.Join(f.work, "src", "util", "util.go"), "package util\n\n// Hi says hi.\nfunc Hi() string { return \"hi\" }\n")
	f.write(filepath.Join(f.work, "src", "util", "util_test.go"), "package util\n")
	f.write(filepath.Join(f.work, ".git", "HEAD"), "ref: refs/heads/main\nfunc main\n")
	f.write(filepath.Join(f.work, "bin.dat"), "ELF\x00\x01\x02func main")
	f.write(filepath.Join(f.docs, "readme.md"), "# Docs\nfunc main is documented here\n")
	f.write(filepath.Join(dir, "secret.txt"), "SECRET")
	if len(mounts) == 0 {
		mounts = []event.Mount{
			{ID: "work", Kind: event.KindLocal, Path: f.work, Mode: event.ModeReadWrite, Default: true},
			{ID: "docs", Kind: event.KindLocal, Path: f.docs, Mode: event.ModeReadOnly},
		}
	}
	b, err := env.NewBinding(1, mounts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	f.b = b
	f.r = tool.NewRegistry()
	if err := builtin.Register(f.r, opts); err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *fixture) write(name, content string) {
	f.t.Helper()
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		f.t.Fatal(err)
	}
	if err := os.WriteFile(name, []byte(content), 0o644); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) call(name string, args any) tool.Result {
	f.t.Helper()
	raw, err := json.Marshal(args)
	if err != nil {
		f.t.Fatal(err)
	}
	return f.r.Call(f.t.Context(), name, &tool.Call{ID: "c1", Arguments: raw, Env: f.b}, tool.CallOptions{ResultBudget: 1 << 20})
}

type m = map[string]any

func check(t *testing.T, res tool.Result, isErr bool, want ...string) {
	t.Helper()
	if res.IsError != isErr {
		t.Errorf("isError = %v, want %v; output:\n%s", res.IsError, isErr, res.Output)
		return
	}
	for _, w := range want {
		if !strings.Contains(res.Output, w) {
			t.Errorf("output lacks %q:\n%s", w, res.Output)
		}
	}
}

func TestSpecs(t *testing.T) {
	f := newFixture(t, builtin.Options{})
	var names []string
	for _, s := range f.r.Specs() {
		names = append(names, s.Name)
		if s.Description == "" || len(s.InputSchema) == 0 {
			t.Errorf("%s: empty description or schema", s.Name)
		}
	}
	if got := strings.Join(names, " "); got != "edit_file glob grep list_dir read_file shell write_file" {
		t.Errorf("tools: %s", got)
	}
	if err := builtin.Register(f.r, builtin.Options{}); err == nil {
		t.Error("second Register succeeded")
	}
}

func TestReadFile(t *testing.T) {
	f := newFixture(t, builtin.Options{ReadMaxLines: 50, ReadMaxBytes: 2000, MaxLineBytes: 100})
	var big strings.Builder
	for i := 1; i <= 200; i++ {
		fmt.Fprintf(&big, "line %d\n", i)
	}
	f.write(filepath.Join(f.work, "big.txt"), big.String())
	f.write(filepath.Join(f.work, "wide.txt"), strings.Repeat("x", 5000)+"\nshort\n")
	f.write(filepath.Join(f.work, "empty.txt"), "")
	f.write(filepath.Join(f.work, "noeol.txt"), "a\nb")

	check(t, f.call("read_file", m{"path": "a.txt"}), false, "     1\tone\n     2\ttwo\n     3\tthree\n")
	check(t, f.call("read_file", m{"path": "/environment/docs/readme.md"}), false, "     1\t# Docs")
	check(t, f.call("read_file", m{"path": "a.txt", "offset": 2, "limit": 1}), false, "     2\ttwo\n[lines 2-2 of 3; call read_file with offset=3")
	check(t, f.call("read_file", m{"path": "noeol.txt"}), false, "     2\tb\n")
	check(t, f.call("read_file", m{"path": "big.txt"}), false, "    50\tline 50\n[lines 1-50 of 200; call read_file with offset=51")
	check(t, f.call("read_file", m{"path": "big.txt", "offset": 190}), false, "   200\tline 200\n")
	check(t, f.call("read_file", m{"path": "wide.txt"}), false, "[line cut: 5000 bytes]", "     2\tshort")
	check(t, f.call("read_file", m{"path": "empty.txt"}), false, "/environment/work/empty.txt is empty")

	check(t, f.call("read_file", m{"path": "a.txt", "offset": 9}), true, "offset 9 is past the end of /environment/work/a.txt (3 lines)")
	check(t, f.call("read_file", m{"path": "missing.txt"}), true, "/environment/work/missing.txt", "no such file")
	check(t, f.call("read_file", m{"path": "bin.dat"}), true, "looks binary")
	check(t, f.call("read_file", m{"path": "src"}), true, "is a directory; use list_dir")
	check(t, f.call("read_file", m{"path": "../secret.txt"}), true, `outside mount "work"`)
	check(t, f.call("read_file", m{"path": filepath.Join(f.dir, "secret.txt")}), true, "only /environment is visible")
	check(t, f.call("read_file", m{"path": "/environment/nope/a.txt"}), true, `no such mount "nope"`)
	check(t, f.call("read_file", m{"path": "a.txt", "offset": -1}), true, "negative")
	check(t, f.call("read_file", m{}), true, `missing properties: ["path"]`)

	// Huge file: the result stays within the byte cap and says how to go on.
	var huge strings.Builder
	for i := range 100000 {
		fmt.Fprintf(&huge, "%d %s\n", i, strings.Repeat("y", 60))
	}
	f.write(filepath.Join(f.work, "huge.txt"), huge.String())
	res := f.call("read_file", m{"path": "huge.txt", "limit": 50})
	check(t, res, false, "output limit of 2000 bytes", "of 100000")
	if len(res.Output) > 2300 {
		t.Errorf("huge read returned %d bytes", len(res.Output))
	}

	// Nil binding.
	raw, _ := json.Marshal(m{"path": "a.txt"})
	check(t, f.r.Call(t.Context(), "read_file", &tool.Call{Arguments: raw}, tool.CallOptions{}), true, "no mounts are attached")
}

func TestWriteFile(t *testing.T) {
	f := newFixture(t, builtin.Options{})
	check(t, f.call("write_file", m{"path": "new/dir/x.txt", "content": "hello"}), false, "created /environment/work/new/dir/x.txt (5 bytes)")
	if data, _ := os.ReadFile(filepath.Join(f.work, "new/dir/x.txt")); string(data) != "hello" {
		t.Errorf("host sees %q", data)
	}
	check(t, f.call("write_file", m{"path": "/environment/work/a.txt", "content": ""}), false, "replaced /environment/work/a.txt (0 bytes)")
	check(t, f.call("write_file", m{"path": "/environment/docs/readme.md", "content": "x"}), true, `read-only mount "docs"`)
	check(t, f.call("write_file", m{"path": "../escape.txt", "content": "x"}), true, `outside mount "work"`)
	check(t, f.call("write_file", m{"path": "/tmp/x", "content": "x"}), true, "only /environment is visible")
	check(t, f.call("write_file", m{"path": "src", "content": "x"}), true, "is a directory")
	if _, err := os.Stat(filepath.Join(f.dir, "escape.txt")); err == nil {
		t.Error("escape.txt was written")
	}
	if data, _ := os.ReadFile(filepath.Join(f.docs, "readme.md")); !strings.HasPrefix(string(data), "# Docs") {
		t.Error("ro file changed")
	}
}

func TestEditFile(t *testing.T) {
	f := newFixture(t, builtin.Options{})
	f.write(filepath.Join(f.work, "e.txt"), "foo bar foo baz foo\n")
	check(t, f.call("edit_file", m{"path": "e.txt", "oldString": "bar", "newString": "BAR"}), false, "edited /environment/work/e.txt: replaced 1 occurrence")
	check(t, f.call("edit_file", m{"path": "e.txt", "oldString": "foo", "newString": "x"}), true, "oldString occurs 3 times in /environment/work/e.txt")
	check(t, f.call("edit_file", m{"path": "e.txt", "oldString": "foo", "newString": "x", "replaceAll": true}), false, "replaced 3 occurrences")
	if data, _ := os.ReadFile(filepath.Join(f.work, "e.txt")); string(data) != "x BAR x baz x\n" {
		t.Errorf("file is %q", data)
	}
	check(t, f.call("edit_file", m{"path": "e.txt", "oldString": "nope", "newString": "x"}), true, "oldString not found in /environment/work/e.txt")
	check(t, f.call("edit_file", m{"path": "e.txt", "oldString": "", "newString": "x"}), true, "oldString is empty")
	check(t, f.call("edit_file", m{"path": "e.txt", "oldString": "x", "newString": "x"}), true, "the same")
	check(t, f.call("edit_file", m{"path": "missing.txt", "oldString": "a", "newString": "b"}), true, "no such file")
	check(t, f.call("edit_file", m{"path": "/environment/docs/readme.md", "oldString": "Docs", "newString": "X"}), true, `read-only mount "docs"`)
	check(t, f.call("edit_file", m{"path": "bin.dat", "oldString": "ELF", "newString": "X"}), true, "binary")
	check(t, f.call("edit_file", m{"path": "e.txt", "oldString": "x", "newString": "y", "replace_all": true}), true, `additional properties ["replace_all"]`)
}

func TestListDir(t *testing.T) {
	f := newFixture(t, builtin.Options{ListLimit: 3})
	if err := os.Symlink("a.txt", filepath.Join(f.work, "ln")); err != nil {
		t.Fatal(err)
	}
	res := f.call("list_dir", m{})
	check(t, res, false, "/environment/work:\n", "[first 3 entries shown")
	if n := strings.Count(res.Output, "\n"); n != 5 {
		t.Errorf("%d lines:\n%s", n, res.Output)
	}
	res = f.call("list_dir", m{"path": "/environment/work/src"})
	check(t, res, false, "main.go", "util/")
	check(t, f.call("list_dir", m{"path": "/environment/docs"}), false, "readme.md")
	check(t, f.call("list_dir", m{"path": "a.txt"}), true, "not a directory")
	check(t, f.call("list_dir", m{"path": "/environment/work/.."}), true, "outside mount")
	f2 := newFixture(t, builtin.Options{})
	os.Symlink("a.txt", filepath.Join(f2.work, "ln"))
	check(t, f2.call("list_dir", m{}), false, "dir              -  .git/\n", "file            14  a.txt\n", "symlink          -  ln\n")
	os.Mkdir(filepath.Join(f2.work, "emptydir"), 0o755)
	check(t, f2.call("list_dir", m{"path": "emptydir"}), false, "(empty)")
}

func TestGlob(t *testing.T) {
	f := newFixture(t, builtin.Options{})
	check(t, f.call("glob", m{"pattern": "**/*.go"}), false,
		"/environment/work/src/main.go\n/environment/work/src/util/util.go\n/environment/work/src/util/util_test.go\n")
	res := f.call("glob", m{"pattern": "*.go", "path": "src"})
	if res.Output != "/environment/work/src/main.go\n" {
		t.Errorf("glob *.go in src: %q", res.Output)
	}
	check(t, f.call("glob", m{"pattern": "src/*"}), false, "/environment/work/src/util/\n")
	check(t, f.call("glob", m{"pattern": "**/HEAD"}), false, "no matches")
	check(t, f.call("glob", m{"pattern": "**/*.md", "path": "/environment/docs"}), false, "/environment/docs/readme.md")
	check(t, f.call("glob", m{"pattern": "[", "path": "."}), true, "syntax error")
	check(t, f.call("glob", m{"pattern": "/etc/*"}), true, "must be relative")
	check(t, f.call("glob", m{"pattern": "../*"}), true, "components are not allowed")
	check(t, f.call("glob", m{"pattern": "*", "path": "a.txt"}), true, "not a directory")
	check(t, f.call("glob", m{"pattern": "*", "path": "/"}), true, "only /environment is visible")

	f2 := newFixture(t, builtin.Options{GlobLimit: 2})
	check(t, f2.call("glob", m{"pattern": "**"}), false, "[first 2 matches shown")
}

func TestGrep(t *testing.T) {
	f := newFixture(t, builtin.Options{})
	res := f.call("grep", m{"pattern": `func \w+\(`})
	check(t, res, false, "/environment/work/src/main.go:3:func main() {\n", "/environment/work/src/util/util.go:4:func Hi() string")
	if strings.Contains(res.Output, ".git") || strings.Contains(res.Output, "bin.dat") {
		t.Errorf("grep searched .git or a binary file:\n%s", res.Output)
	}
	check(t, f.call("grep", m{"pattern": "HI", "ignoreCase": true, "glob": "*_test.go"}), false, "no matches")
	check(t, f.call("grep", m{"pattern": "hi", "glob": "src/util/*.go"}), false, "util.go:3:// Hi says hi.")
	check(t, f.call("grep", m{"pattern": "package", "path": "src/main.go"}), false, "/environment/work/src/main.go:1:package main")
	check(t, f.call("grep", m{"pattern": "documented", "path": "/environment/docs"}), false, "/environment/docs/readme.md:2:")
	check(t, f.call("grep", m{"pattern": "package", "limit": 2}), false, "[first 2 matches shown")
	check(t, f.call("grep", m{"pattern": "("}), true, "bad pattern")
	check(t, f.call("grep", m{"pattern": "x", "path": "../"}), true, "outside mount")
	check(t, f.call("grep", m{"pattern": "x", "path": "nope"}), true, "no such file")
}
