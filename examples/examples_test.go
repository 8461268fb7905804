// Package examples_test checks what the examples of weft promise: every
// public package shows its use in at least one runnable Example (one with
// an "// Output:" comment, which go test runs and compares), so that
// `go doc` and pkg.go.dev open each package with code that works.
package examples_test

import (
	"go/ast"
	"go/doc"
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"weft.dev/weft/internal/testenv"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestEveryPublicPackageHasRunnableExample lists the module's packages and
// fails for each public one (not internal, not a command, not a script,
// declaring an exported name) whose tests hold no Example with an output
// comment.
func TestEveryPublicPackageHasRunnableExample(t *testing.T) {
	testenv.Command(t, "go")
	out, err := exec.CommandContext(t.Context(), "go", "list", "-f", "{{.ImportPath}} {{.Name}} {{.Dir}}", "weft.dev/weft/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	checked := 0
	for line := range strings.Lines(string(out)) {
		f := strings.Fields(line)
		if len(f) != 3 {
			t.Fatalf("go list printed %q", line)
		}
		path, name, dir := f[0], f[1], f[2]
		if !public(path, name) {
			continue
		}
		exports, err := declaresExports(dir)
		if err != nil {
			t.Errorf("%s: %v", path, err)
			continue
		}
		if !exports {
			continue // documentation only (the module's root): nothing to show in use
		}
		checked++
		n, all, err := runnableExamples(dir)
		if err != nil {
			t.Errorf("%s: %v", path, err)
			continue
		}
		if n == 0 {
			t.Errorf("%s has no runnable Example (%d that only compile): add an Example… function ending in an // Output: comment to a *_example_test.go file", path, all)
		}
	}
	if checked < 20 {
		t.Errorf("checked %d public packages; go list found too few", checked)
	}
}

// public reports whether the package at import path with package name is
// part of weft's embedding API.
func public(path, name string) bool {
	if name == "main" {
		return false
	}
	for el := range strings.SplitSeq(strings.TrimPrefix(path, "weft.dev/weft/"), "/") {
		switch el {
		case "internal", "cmd", "scripts", "examples":
			return false
		}
	}
	return true
}

// declaresExports reports whether the package in dir (its non-test
// files) declares an exported name.
func declaresExports(dir string) (bool, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return false, err
	}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			return false, err
		}
		if ast.FileExports(f) {
			return true, nil
		}
	}
	return false, nil
}

// runnableExamples counts the Example functions of the tests in dir that
// go test runs (those with an output comment), and all of them.
func runnableExamples(dir string) (runnable, all int, err error) {
	files, err := filepath.Glob(filepath.Join(dir, "*_test.go"))
	if err != nil {
		return 0, 0, err
	}
	fset := token.NewFileSet()
	for _, name := range files {
		f, err := parser.ParseFile(fset, name, nil, parser.ParseComments)
		if err != nil {
			return 0, 0, err
		}
		for _, ex := range doc.Examples(f) {
			all++
			if ex.Output != "" || ex.EmptyOutput {
				runnable++
			}
		}
	}
	return runnable, all, nil
}
