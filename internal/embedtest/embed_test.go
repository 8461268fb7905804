package embedtest

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// readmeProgram is the Go program of the README's section on using weft
// from another Go program.
func readmeProgram(t *testing.T, root string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, sec, ok := strings.Cut(string(b), "## Using weft from another Go program")
	if !ok {
		t.Fatal("README.md has no section \"Using weft from another Go program\"")
	}
	_, prog, ok := strings.Cut(sec, "```go\n")
	if !ok {
		t.Fatal("the README's section has no Go program")
	}
	prog, _, ok = strings.Cut(prog, "```")
	if !ok {
		t.Fatal("the README's Go program is not closed")
	}
	return prog
}

// TestREADMERecipe builds and runs the README's program in a module of
// its own that requires weft.dev/weft through a replace line, as the
// README says, offline (GOPROXY=off: every module is in the cache, as
// this repository's build put it there) and with this repository's
// go.sum, so that nothing but the recipe is tested.
func TestREADMERecipe(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	write := func(name, body string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("main.go", readmeProgram(t, root))
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	write("go.sum", string(sum))
	gobin := filepath.Join(os.Getenv("GOROOT"), "bin", "go")
	if _, err := os.Stat(gobin); err != nil {
		gobin = "go"
	}
	run := func(args ...string) string {
		t.Helper()
		return runIn(t, dir, gobin, args...)
	}
	run("mod", "init", "example.com/hello")
	run("mod", "edit", "-require", "weft.dev/weft@v0.0.0", "-replace", "weft.dev/weft="+root)
	// -e: offline, tidy cannot look up the modules that only the tests
	// of weft's dependencies import (the README's online tidy can);
	// nothing the program builds with is missing, as the run shows.
	run("mod", "tidy", "-e")
	if out := run("run", "."); strings.TrimSpace(out) != "Hello, world!" {
		t.Errorf("the README's program printed %q, want \"Hello, world!\"", out)
	}
	// The library's map is reachable from go doc in the checkout.
	if out := runIn(t, root, gobin, "doc", "weft.dev/weft"); !strings.Contains(out, "package weft") || !strings.Contains(out, "go doc -http weft.dev/weft/host") {
		t.Errorf("go doc weft.dev/weft:\n%s", out)
	}
}

// runIn runs gobin with args in dir, offline, and returns its output; a
// failure fails the test with the output.
func runIn(t *testing.T, dir, gobin string, args ...string) string {
	t.Helper()
	c := exec.Command(gobin, args...)
	c.Dir = dir
	c.Env = append(os.Environ(), "GOPROXY=off", "GOFLAGS=-mod=mod", "GOWORK=off", "CGO_ENABLED=0")
	var out bytes.Buffer
	c.Stdout, c.Stderr = &out, &out
	if err := c.Run(); err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out.String())
	}
	return out.String()
}
