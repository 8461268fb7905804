package checkpoint

import (
	"os"
	"path/filepath"
	"testing"
)

// TestReadDirReplaced: a directory that is gone, or replaced by a file
// or a link (not followed out of the mount),
// by the time the walk reads it has no entries and is no error (its old
// paths are then reported deleted); the mount's root gone is an error.
func TestReadDirReplaced(t *testing.T) {
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "was-a-dir"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(root, "now-a-link")); err != nil {
		t.Fatal(err)
	}
	for _, rel := range []string{"was-a-dir", "gone", "now-a-link"} {
		l := readDir(root, rel)
		if l.err != nil || len(l.names) != 0 {
			t.Errorf("readDir(%q) = %d names, %v; want none and no error", rel, len(l.names), l.err)
		}
	}
	if l := readDir(filepath.Join(root, "no-root"), ""); l.err == nil {
		t.Error("readDir of a missing root: no error")
	}
}
