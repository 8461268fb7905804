package checkpoint

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
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

// TestOpenStaysInTheMount: a file the walk saw whose directory a command
// then swapped for a link out of the mount is not read through the link,
// so nothing outside the mount reaches a checkpoint; and a file that grew
// past the limit while it was read is not kept.
func TestOpenStaysInTheMount(t *testing.T) {
	root, outside := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "f"), []byte("secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(root, "d")); err != nil {
		t.Fatal(err)
	}
	s, err := New(Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	tr := s.Tracker("s", "m", root)
	if f, err := tr.open("d/f"); err == nil {
		f.Close()
		t.Fatal("opened d/f through a link out of the mount")
	}
	if _, err := tr.hashFile("d/f"); err == nil {
		t.Fatal("hashed d/f through a link out of the mount")
	}
	if _, err := s.put(strings.NewReader("0123456789"), 4); !errors.Is(err, errTooBig) {
		t.Fatalf("put of 10 bytes with limit 4: %v, want errTooBig", err)
	}
}
