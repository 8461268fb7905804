package bench

import (
	"os"
	"os/exec"
	"testing"
	"time"
)

var testModules = newModuleIndex("weft.dev/weft", []string{
	"gopkg.in/yaml.v3", "github.com/openai/openai-go/v3", "golang.org/x/net",
	"cloud.google.com/go", "cloud.google.com/go/auth",
})

func TestSymbolModule(t *testing.T) {
	for _, tc := range []struct{ sym, want string }{
		{"weft.dev/weft/store/sqlite.(*Store).Append", "weft.dev/weft"},
		{"weft.dev/weft/host/internal/journal.(*Journal).publish.func1", "weft.dev/weft"},
		{"main.main", "weft.dev/weft"},
		{"main.(*benchCmd).Run", "weft.dev/weft"},
		{"runtime.mallocgc", stdModule},
		{"net/http.(*Server).Serve", stdModule},
		{"vendor/golang.org/x/net/http2/hpack.(*Decoder).Write", stdModule},
		{"slices.SortFunc[go.shape.[]weft.dev/weft/event.Event]", stdModule},
		{"golang.org/x/net/http2.(*Framer).ReadFrame", "golang.org/x/net"},
		{"gopkg.in/yaml.v3.Unmarshal", "gopkg.in/yaml.v3"},
		{"cloud.google.com/go/auth.New", "cloud.google.com/go/auth"},
		{"cloud.google.com/go/civil.Date.String", "cloud.google.com/go"},
		{"github.com/openai/openai-go/v3/responses.(*ResponseService).New", "github.com/openai/openai-go/v3"},
		{"type:*weft.dev/weft/event.Event", "weft.dev/weft"},
		{"type:.eq.weft.dev/weft/event.Event", "weft.dev/weft"},
		{"type:map[string]*github.com/openai/openai-go/v3.Client", "github.com/openai/openai-go/v3"},
		{"type:func(context.Context) error", stdModule},
		{"go:itab.*github.com/openai/openai-go/v3/internal.X,io.Reader", "github.com/openai/openai-go/v3"},
		{"go:itab.*net/http.Server,io.Closer", stdModule},
		{"go:buildinfo", linkerData},
		{"x_cgo_init", cModule},
		{"example.com/x.F", "example.com/x"},
	} {
		if got := testModules.symbolModule(tc.sym); got != tc.want {
			t.Errorf("symbolModule(%q) = %q, want %q", tc.sym, got, tc.want)
		}
	}
}

func TestPkgModule(t *testing.T) {
	for _, tc := range []struct{ pkg, want string }{
		{"weft.dev/weft/llm/gemini", "weft.dev/weft"},
		{"golang.org/x/net/http2", "golang.org/x/net"},
		{"golang.org/x/netx", ""},
		{"cloud.google.com/go/auth/internal", "cloud.google.com/go/auth"},
		{"encoding/json", stdModule},
		{"vendor/golang.org/x/crypto/chacha20", stdModule},
	} {
		if got := testModules.pkgModule(tc.pkg); got != tc.want {
			t.Errorf("pkgModule(%q) = %q, want %q", tc.pkg, got, tc.want)
		}
	}
}

func TestParseInittrace(t *testing.T) {
	es, err := parseInittrace("weft 1.0\ninit runtime @0.10 ms, 0.072 ms clock, 0 bytes, 0 allocs\n" +
		"init github.com/openai/openai-go/v3 @19 ms, 0.97 ms clock, 145408 bytes, 1083 allocs\n")
	if err != nil {
		t.Fatal(err)
	}
	want := []initEntry{
		{pkg: "runtime", at: 100 * time.Microsecond, clock: 72 * time.Microsecond},
		{pkg: "github.com/openai/openai-go/v3", at: 19 * time.Millisecond, clock: 970 * time.Microsecond, bytes: 145408, allocs: 1083},
	}
	if len(es) != len(want) {
		t.Fatalf("got %+v", es)
	}
	for i := range want {
		if es[i] != want[i] {
			t.Errorf("entry %d: %+v, want %+v", i, es[i], want[i])
		}
	}
	if _, err := parseInittrace("init runtime @soon, 1 ms clock\n"); err == nil {
		t.Error("a malformed init line parsed")
	}
}

// TestInittraceOfThisBinary checks the parser against the runtime's own
// output: this test binary run with GODEBUG=inittrace=1.
func TestInittraceOfThisBinary(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	c := exec.CommandContext(t.Context(), exe, "-test.run=^$")
	c.Env = append(os.Environ(), "GODEBUG=inittrace=1")
	out, err := c.CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	es, err := parseInittrace(string(out))
	if err != nil {
		t.Fatal(err)
	}
	pkgs := map[string]bool{}
	for _, e := range es {
		pkgs[e.pkg] = true
	}
	if !pkgs["runtime"] || len(es) < 20 {
		t.Errorf("%d init lines, runtime among them: %v; output:\n%s", len(es), pkgs["runtime"], lastLines(string(out), 5))
	}
	std := false
	for _, m := range initByModule([][]initEntry{es}, testModules) {
		std = std || m.module == stdModule && m.packages > 0
	}
	if !std {
		t.Error("no standard library package among the inits")
	}
}

func TestInitByModule(t *testing.T) {
	run := func(scale time.Duration) []initEntry {
		return []initEntry{
			{pkg: "runtime", clock: 1 * scale, bytes: 10},
			{pkg: "encoding/json", clock: 1 * scale, bytes: 10},
			{pkg: "golang.org/x/net/http2", clock: 4 * scale, bytes: 100},
			{pkg: "main", clock: 2 * scale},
			{pkg: "example.com/x", clock: 1 * scale},
		}
	}
	got := initByModule([][]initEntry{run(time.Millisecond), run(3 * time.Millisecond)}, testModules)
	want := []moduleInit{
		{module: "golang.org/x/net", packages: 1, clock: 8 * time.Millisecond, bytes: 100},
		{module: stdModule, packages: 2, clock: 4 * time.Millisecond, bytes: 20},
		{module: "weft.dev/weft", packages: 1, clock: 4 * time.Millisecond},
		{module: "example.com/x", packages: 1, clock: 2 * time.Millisecond},
	}
	if len(got) != len(want) {
		t.Fatalf("got %+v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("%d: %+v, want %+v", i, got[i], want[i])
		}
	}
}
