package bench

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"weft.dev/weft/internal/testenv"
)

// TestMeasureBinary builds testdata/sizeprobe and reads it (an ELF
// binary: Linux only): sections that add up, and symbols grouped by
// module, this module, goleak and the standard library among them. (Test
// binaries have no symbol table.)
func TestMeasureBinary(t *testing.T) {
	testenv.Command(t, "go")
	exe := filepath.Join(t.TempDir(), "sizeprobe")
	if out, err := exec.CommandContext(t.Context(), "go", "build", "-o", exe, "./testdata/sizeprobe").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	bs, err := measureBinary(exe)
	if err != nil {
		t.Fatal(err)
	}
	if bs.Text == 0 || bs.FuncTables == 0 || bs.Loaded < bs.Text+bs.FuncTables+bs.ReadOnly || bs.File < bs.Loaded || !bs.Symbols {
		t.Errorf("sections do not add up: %+v", *bs)
	}
	got := map[string]moduleSize{}
	var sum int64
	for _, m := range bs.Modules {
		got[m.Module] = m
		sum += m.Share
		if m.Code > m.Bytes || m.Share < m.Bytes {
			t.Errorf("%s: %+v", m.Module, m)
		}
	}
	for _, mod := range []string{"weft.dev/weft", stdModule, "go.uber.org/goleak"} {
		if got[mod].Code == 0 {
			t.Errorf("no code of %s; modules: %v", mod, bs.Modules)
		}
	}
	if got[stdModule].Share < 10*got["go.uber.org/goleak"].Share {
		t.Errorf("std (%d) not much larger than goleak (%d)", got[stdModule].Share, got["go.uber.org/goleak"].Share)
	}
	if sum > bs.Loaded {
		t.Errorf("modules add up to %d, more than the %d bytes loaded", sum, bs.Loaded)
	}
	stripped := exe + "-s"
	if out, err := exec.CommandContext(t.Context(), "go", "build", "-ldflags=-s -w", "-o", stripped, "./testdata/sizeprobe").CombinedOutput(); err != nil {
		t.Fatalf("go build -ldflags='-s -w': %v\n%s", err, out)
	}
	bs, err = measureBinary(stripped)
	if err != nil || bs.Symbols || bs.Debug != 0 || bs.Text == 0 {
		t.Errorf("stripped: %v, %+v", err, bs)
	}
	if row := binarySizeResult("b", bs); !strings.Contains(row.Note, "no symbol table") {
		t.Errorf("stripped binary's note: %s", row.Note)
	}
}
