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

// TestProductLinksNoProviderSDK checks that the product binary speaks to
// the model providers over net/http alone: the providers' SDKs (and
// what they brought: gRPC, protobuf's generated types and registry,
// go-cmp) were most of the binary and of its start-up, paid by every weft
// command; they stay test-only dependencies of llm/openai, llm/anthropic
// and llm/gemini, whose tests compare weft's requests with theirs. The
// OpenTelemetry API and SDK are linked (tracing), but not the SDK's OTLP
// exporters, nor any of protobuf's packages: internal/telemetry writes
// OTLP's wire format itself (protowire's init hashed the executable on
// every start). Nor does it link the browser tests' chromedp, nor the
// clipboard library of bubbles' textarea and textinput (its init looked
// for six programs on PATH in every weft process): the terminal UI edits
// with internal/lineedit, and pastes through the terminal.
func TestProductLinksNoProviderSDK(t *testing.T) {
	testenv.Command(t, "go")
	out, err := exec.CommandContext(t.Context(), "go", "list", "-deps", "-f", "{{.ImportPath}}", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	banned := []string{
		"github.com/openai/openai-go", "github.com/anthropics/anthropic-sdk-go", "google.golang.org/genai",
		"google.golang.org/grpc", "google.golang.org/protobuf", "google.golang.org/genproto",
		"go.opentelemetry.io/otel/exporters/", "go.opentelemetry.io/proto/", "github.com/google/go-cmp",
		"cloud.google.com/", "github.com/chromedp/",
		"github.com/atotto/clipboard", "charm.land/bubbles/v2/textarea", "charm.land/bubbles/v2/textinput",
	}
	var found []string
	for pkg := range strings.FieldsSeq(string(out)) {
		for _, b := range banned {
			if strings.HasPrefix(pkg, b) {
				found = append(found, pkg)
				break
			}
		}
	}
	if len(found) > 0 {
		t.Errorf("weft links %d packages of the provider SDKs or test tools: %s", len(found), strings.Join(found[:min(len(found), 12)], ", "))
	}
}

// TestStartProbesNothing: what every weft command runs before main is
// dependencies' package initialisation, so none of it may look around
// the machine. protobuf's detrand hashed the executable, the clipboard
// library looked for six programs on PATH (see
// TestProductLinksNoProviderSDK): neither may initialise at all.
func TestStartProbesNothing(t *testing.T) {
	c := exec.CommandContext(t.Context(), weftBin, "version")
	c.Env = []string{"GODEBUG=inittrace=1", "PATH=/usr/bin:/bin"}
	out, err := c.CombinedOutput()
	if err != nil {
		t.Fatalf("weft version: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "init weft.dev/weft/") {
		t.Fatalf("no inittrace in weft version's output:\n%s", out)
	}
	for line := range strings.Lines(string(out)) {
		if strings.HasPrefix(line, "init google.golang.org/protobuf/") || strings.HasPrefix(line, "init github.com/atotto/clipboard") {
			t.Errorf("weft initialises a package that probes the machine: %s", strings.TrimSpace(line))
		}
	}
}
