package checkpoint

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"weft.dev/weft/event"
)

// Plan is what a rewind of one mount does: for each path, the state the
// log says it is in now (Expect; nil: absent) and the state to put back
// (Target; nil: absent).
type Plan struct {
	Expect map[string]*event.FileState
	Target map[string]*event.FileState
}

// Check reports, without changing anything, whether the plan can be
// carried out: every path is as Expect says (else an error wrapping
// [ErrChanged] naming it) and every content Target needs is kept (else
// [ErrMissing]).
func (t *Tracker) Check(p Plan) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.check(p)
}

func (t *Tracker) check(p Plan) error {
	for _, rel := range sortedKeys(p.Expect) {
		want := p.Expect[rel]
		got, err := t.current(rel, want)
		if err != nil {
			return err
		}
		if !sameState(got, want) {
			return fmt.Errorf("mount %s: %s: %w (the log says %s, it is %s)", t.mount, rel, ErrChanged, describe(want), describe(got))
		}
	}
	for rel, st := range p.Target {
		if st != nil && st.Kind == "file" {
			if _, err := os.Stat(t.s.blobPath(st.Hash)); err != nil {
				return fmt.Errorf("mount %s: %s: %w (%s)", t.mount, rel, ErrMissing, st.Hash)
			}
		}
	}
	return nil
}

// current returns the state of rel now (nil if absent), hashing a file
// only when want is a file of its size.
func (t *Tracker) current(rel string, want *event.FileState) (*event.FileState, error) {
	full := filepath.Join(t.root, filepath.FromSlash(rel))
	fi, err := os.Lstat(full)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	} else if err != nil {
		return nil, fmt.Errorf("mount %s: %w", t.mount, err)
	}
	st := &event.FileState{Kind: kindOf(fi), Mode: uint32(fi.Mode().Perm()), Size: sizeOf(fi)}
	switch st.Kind {
	case "link":
		st.Link, _ = os.Readlink(full)
	case "file":
		if want != nil && want.Kind == "file" && want.Size == st.Size {
			if st.Hash, err = t.hashFile(rel); err != nil {
				return nil, fmt.Errorf("mount %s: %w", t.mount, err)
			}
		}
	}
	return st, nil
}

func sameState(a, b *event.FileState) bool {
	if a == nil || b == nil {
		return a == b
	}
	if a.Kind == "dir" && b.Kind == "dir" {
		return a.Mode == b.Mode
	}
	return *a == *b
}

func describe(s *event.FileState) string {
	if s == nil {
		return "absent"
	}
	switch s.Kind {
	case "file":
		return fmt.Sprintf("a file of %d bytes, mode %o", s.Size, s.Mode)
	case "link":
		return "a link to " + s.Link
	}
	return fmt.Sprintf("a %s, mode %o", s.Kind, s.Mode)
}

// Restore checks the plan (see [Tracker.Check]) and carries it out
// through an [os.Root] of the mount: paths whose target is absent (or of
// another kind) are removed, deepest first; directories are made,
// shallowest first; files are written from the blob store (into a
// temporary file renamed over the path) and links made; modes are set.
// It returns the paths it changed. The manifest learns the restored
// states, so the next step does not see the rewind as a change of its
// own.
func (t *Tracker) Restore(p Plan) ([]string, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.check(p); err != nil {
		return nil, err
	}
	root, err := os.OpenRoot(t.root)
	if err != nil {
		return nil, fmt.Errorf("mount %s: %w", t.mount, err)
	}
	defer root.Close()
	var changed []string
	paths := sortedKeys(p.Target)
	// Removals, deepest first.
	for i := len(paths) - 1; i >= 0; i-- {
		rel := paths[i]
		want, cur := p.Target[rel], p.Expect[rel]
		if cur == nil || want != nil && want.Kind == cur.Kind && (want.Kind != "link" || want.Link == cur.Link) {
			continue
		}
		if err := root.RemoveAll(filepath.FromSlash(rel)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return changed, fmt.Errorf("mount %s: remove %s: %w", t.mount, rel, err)
		}
		changed = append(changed, rel)
	}
	// Directories, files and links, shallowest first.
	for _, rel := range paths {
		want, cur := p.Target[rel], p.Expect[rel]
		if want == nil || sameState(want, cur) {
			continue
		}
		name := filepath.FromSlash(rel)
		switch want.Kind {
		case "dir":
			if err := root.Mkdir(name, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
				return changed, fmt.Errorf("mount %s: make %s: %w", t.mount, rel, err)
			}
		case "link":
			if err := root.Symlink(want.Link, name); err != nil && !errors.Is(err, fs.ErrExist) {
				return changed, fmt.Errorf("mount %s: link %s: %w", t.mount, rel, err)
			}
		case "file":
			if cur == nil || cur.Hash != want.Hash || cur.Kind != "file" {
				if err := t.writeBlob(root, name, want); err != nil {
					return changed, fmt.Errorf("mount %s: write %s: %w", t.mount, rel, err)
				}
			}
		}
		if want.Kind != "link" {
			if err := root.Chmod(name, fs.FileMode(want.Mode)); err != nil {
				return changed, fmt.Errorf("mount %s: mode of %s: %w", t.mount, rel, err)
			}
		}
		changed = append(changed, rel)
	}
	// The manifest learns what is there now.
	if t.files != nil {
		budget := t.s.cfg.MaxBytes
		for _, rel := range paths {
			fi, err := os.Lstat(filepath.Join(t.root, filepath.FromSlash(rel)))
			if err != nil {
				delete(t.files, rel)
				continue
			}
			s := statOfInfo(fi)
			if e, err := t.look(rel, &s, t.files[rel], &budget); err == nil {
				e.gen = t.gen
				t.files[rel] = &e
			}
		}
	}
	slices.Sort(changed)
	return slices.Compact(changed), nil
}

// writeBlob writes the content of st into name, atomically.
func (t *Tracker) writeBlob(root *os.Root, name string, st *event.FileState) error {
	src, err := os.Open(t.s.blobPath(st.Hash))
	if err != nil {
		return err
	}
	defer src.Close()
	tmp := path.Join(filepath.ToSlash(filepath.Dir(name)), ".weft-rewind-"+st.Hash[:16])
	dst, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		root.Remove(tmp)
		return err
	}
	if err := dst.Close(); err != nil {
		root.Remove(tmp)
		return err
	}
	if err := root.Rename(tmp, name); err != nil {
		root.Remove(tmp)
		return err
	}
	return nil
}

func sortedKeys(m map[string]*event.FileState) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.SortFunc(out, func(a, b string) int {
		// Parents before children: compare by components.
		return strings.Compare(strings.ReplaceAll(a, "/", "\x00"), strings.ReplaceAll(b, "/", "\x00"))
	})
	return out
}
