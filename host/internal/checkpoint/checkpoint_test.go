package checkpoint_test

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
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

// TestScanNested: a walk of a tree several directories deep and wide
// (read in parallel, a depth at a time) finds files created, changed and
// deleted at every depth, a directory replaced by a file (its files
// gone), a file replaced by a directory, mode changes, and leaves a
// nested repository's objects out; a second scan finds nothing.
func TestScanNested(t *testing.T) {
	// Several workers even on a machine of one CPU.
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4))
	root := t.TempDir()
	for _, d := range []string{"a", "b", "c", "d"} {
		for _, e := range []string{"x", "y", "z"} {
			write(t, root, d+"/"+e+"/f.txt", d+e)
			write(t, root, d+"/"+e+"/deep/g.txt", d+e)
		}
		write(t, root, d+"/top.txt", d)
	}
	write(t, root, "b/x/.git/objects/ab/cd", "object")
	write(t, root, "swap", "a file that becomes a directory")
	s, err := checkpoint.New(checkpoint.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	tr := s.Tracker("ses", "work", root)
	if err := tr.Baseline(); err != nil {
		t.Fatal(err)
	}

	write(t, root, "a/x/deep/new.txt", "created deep")
	write(t, root, "d/z/f.txt", "changed")
	write(t, root, "b/x/.git/objects/ab/ef", "ignored")
	if err := os.Remove(filepath.Join(root, "c/y/deep/g.txt")); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(root, "b/top.txt"), 0o600); err != nil {
		t.Fatal(err)
	}
	// c/z, a directory of two levels, becomes a file.
	if err := os.RemoveAll(filepath.Join(root, "c/z")); err != nil {
		t.Fatal(err)
	}
	write(t, root, "c/z", "now a file")
	if err := os.Remove(filepath.Join(root, "swap")); err != nil {
		t.Fatal(err)
	}
	write(t, root, "swap/inside.txt", "now a directory")

	res, err := tr.Scan()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, c := range res.Changes {
		switch {
		case c.Before == nil:
			got[c.Path] = "created " + c.After.Kind
		case c.After == nil:
			got[c.Path] = "deleted " + c.Before.Kind
		default:
			got[c.Path] = c.Before.Kind + "→" + c.After.Kind
		}
	}
	want := map[string]string{
		"a/x/deep/new.txt": "created file",
		"b/top.txt":        "file→file",
		"c/y/deep/g.txt":   "deleted file",
		"c/z":              "dir→file",
		"c/z/f.txt":        "deleted file",
		"c/z/deep":         "deleted dir",
		"c/z/deep/g.txt":   "deleted file",
		"d/z/f.txt":        "file→file",
		"swap":             "file→dir",
		"swap/inside.txt":  "created file",
	}
	if len(got) != len(want) {
		t.Errorf("changes %v; want %v", got, want)
	}
	for p, w := range want {
		if got[p] != w {
			t.Errorf("%s: %q; want %q", p, got[p], w)
		}
	}
	if res.Incomplete != "" {
		t.Errorf("incomplete: %s", res.Incomplete)
	}
	for i := 1; i < len(res.Changes); i++ {
		if res.Changes[i-1].Path >= res.Changes[i].Path {
			t.Fatalf("changes out of order: %s before %s", res.Changes[i-1].Path, res.Changes[i].Path)
		}
	}
	again, err := tr.Scan()
	if err != nil || len(again.Changes) != 0 {
		t.Fatalf("a second scan: %+v, %v", again.Changes, err)
	}
}
