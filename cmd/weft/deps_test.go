package main

import (
	"os/exec"
	"strings"
	"testing"

	"weft.dev/weft/internal/testenv"
)

// TestProductLinksNoBenchSuite checks that the product binary carries no
// developer tooling: the benchmark suite (its harness, its plotting
// library and fonts) is the separate command weft-bench, so no package of
// weft's with a "bench" path element, and none of gonum's plot, is among
// weft's dependencies.
func TestProductLinksNoBenchSuite(t *testing.T) {
	testenv.Command(t, "go")
	out, err := exec.CommandContext(t.Context(), "go", "list", "-deps", "-f", "{{.ImportPath}}", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	var found []string
	for pkg := range strings.FieldsSeq(string(out)) {
		switch {
		case strings.HasPrefix(pkg, "gonum.org/v1/plot"), strings.HasPrefix(pkg, "codeberg.org/go-fonts/"):
			found = append(found, pkg)
		case strings.HasPrefix(pkg, "weft.dev/weft/") && isBenchPath(pkg):
			found = append(found, pkg)
		}
	}
	if len(found) > 0 {
		t.Errorf("weft links the benchmark suite: %s", strings.Join(found, ", "))
	}
}

// isBenchPath reports whether an element of the import path pkg names the
// benchmark suite (bench, weft-bench).
func isBenchPath(pkg string) bool {
	for el := range strings.SplitSeq(pkg, "/") {
		if el == "bench" || el == "weft-bench" {
			return true
		}
	}
	return false
}
