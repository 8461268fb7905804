package checkpoint_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"weft.dev/weft/event"
	"weft.dev/weft/host/internal/checkpoint"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func write(t *testing.T, root, rel, content string) {
	t.Helper()
	p := filepath.Join(root, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestScan: a walk finds what changed since the baseline, leaves Git's
// objects out, and marks a change of a file over the cap incomplete;
// a restore puts the paths back and refuses a path changed since.
func TestScan(t *testing.T) {
	root := t.TempDir()
	write(t, root, "a.txt", "a")
	write(t, root, "big.bin", strings.Repeat("b", 100))
	write(t, root, ".git/objects/ab/cdef", "object")
	write(t, root, ".git/HEAD", "ref: main")
	s, err := checkpoint.New(checkpoint.Config{Dir: t.TempDir(), MaxFileBytes: 64})
	if err != nil {
		t.Fatal(err)
	}
	tr := s.Tracker("ses", "work", root)
	if err := tr.Baseline(); err != nil {
		t.Fatal(err)
	}
	write(t, root, "a.txt", "changed")
	write(t, root, ".git/objects/ab/0123", "new object")
	write(t, root, ".git/HEAD", "ref: other")
	res, err := tr.Scan()
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, c := range res.Changes {
		paths = append(paths, c.Path)
	}
	if strings.Join(paths, " ") != ".git/HEAD a.txt" || res.Incomplete != "" {
		t.Fatalf("changes %v, incomplete %q", paths, res.Incomplete)
	}
	write(t, root, "big.bin", "small")
	res, err = tr.Scan()
	if err != nil {
		t.Fatal(err)
	}
	if res.Incomplete == "" || len(res.Changes) != 1 {
		t.Fatalf("a change of a file over the cap: %+v", res)
	}

	// Put a.txt back; a path changed since its checkpoint refuses it all.
	plan := checkpoint.Plan{
		Expect: map[string]*event.FileState{"a.txt": {Kind: "file", Mode: 0o644, Size: 7}},
		Target: map[string]*event.FileState{},
	}
	first, _ := tr.Scan() // nothing new
	if len(first.Changes) != 0 {
		t.Fatalf("a second look found %+v", first.Changes)
	}
	write(t, root, "a.txt", "mine!!!")
	if err := tr.Check(plan); !errors.Is(err, checkpoint.ErrChanged) {
		t.Fatalf("Check of a changed path = %v; want ErrChanged", err)
	}
}

func TestIgnored(t *testing.T) {
	for rel, want := range map[string]bool{
		".git/objects": true, ".git/objects/ab/cd": true, "sub/.git/objects/x": true,
		".git/HEAD": false, "objects/x": false, "a/.gitobjects": false,
	} {
		if got := checkpoint.Ignored(rel); got != want {
			t.Errorf("Ignored(%q) = %v; want %v", rel, got, want)
		}
	}
}
