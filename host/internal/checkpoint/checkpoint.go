// Package checkpoint records what the steps of a run change in the
// read-write mounts of a session, so that a rewind can put the files
// back: the content of every file a step changed or deleted is kept in a
// content-addressed store of blobs (sha256) under the host's checkpoint
// directory, and the changes themselves go to the session's log as
// checkpoint.recorded events.
//
// A [Tracker] keeps, per session and mount, the manifest of the mount as
// last seen (each path's kind, mode, size, inode, times and content
// hash). Before a step's first write it takes the mount's baseline (every
// file's content into the blob store, once per mount and process); after
// the step it compares the mount with the manifest (a walk of the whole
// mount after shells and background processes, a look at the written
// paths after file tools) and reports what changed. [Tracker.Restore]
// puts a set of paths back to given states, after checking that they are
// still as the log says they were left.
package checkpoint

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"weft.dev/weft/event"
)

// Config configures a [Store]. Zero fields take the documented defaults.
type Config struct {
	// Dir holds the blobs (Dir/blobs/ab/abcdef…). Required.
	Dir string
	// MaxFileBytes is the largest file whose content is kept; a step that
	// changes or deletes a larger one makes its checkpoint incomplete.
	// Zero means 64 MiB.
	MaxFileBytes int64
	// MaxBytes bounds the bytes of new content one checkpoint (or one
	// baseline) keeps; past it the checkpoint is incomplete. Zero means
	// 1 GiB.
	MaxBytes int64
	// MaxChanges bounds the paths one checkpoint records; past it the
	// checkpoint is incomplete. Zero means 10,000.
	MaxChanges int
}

// Errors a rewind branches on.
var (
	// ErrChanged reports a path that is no longer as the last checkpoint
	// left it: something changed it since, and a rewind would lose that.
	ErrChanged = errors.New("changed since the checkpoint")
	// ErrMissing reports content a rewind needs that the blob store does
	// not hold.
	ErrMissing = errors.New("content missing from the checkpoint store")
)

// Ignored reports whether rel (slash-separated, relative to the mount) is
// left out of checkpoints: the objects of a Git repository, which Git
// only ever adds (a rewind leaves new objects behind, unreferenced).
func Ignored(rel string) bool {
	return rel == ".git/objects" || strings.HasPrefix(rel, ".git/objects/") ||
		strings.Contains(rel, "/.git/objects/") || strings.HasSuffix(rel, "/.git/objects")
}

// Store is the host's checkpoint store: the blobs and one [Tracker] per
// session and mount. It is safe for concurrent use.
type Store struct {
	cfg Config
	mu  sync.Mutex
	trk map[trackerKey]*Tracker
	// fresh, during a sweep (see sweep.go), holds the hashes put since it
	// began; nil otherwise.
	fresh map[string]struct{}
}

type trackerKey struct{ session, mount, root string }

// New returns the store of cfg. Its directory is made when the first
// content is kept.
func New(cfg Config) (*Store, error) {
	if cfg.Dir == "" {
		return nil, errors.New("checkpoint: no directory")
	}
	if cfg.MaxFileBytes == 0 {
		cfg.MaxFileBytes = 64 << 20
	}
	if cfg.MaxBytes == 0 {
		cfg.MaxBytes = 1 << 30
	}
	if cfg.MaxChanges == 0 {
		cfg.MaxChanges = 10_000
	}
	return &Store{cfg: cfg, trk: make(map[trackerKey]*Tracker)}, nil
}

// Tracker returns the tracker of a session's mount at root (a host
// directory), made on first use.
func (s *Store) Tracker(session, mount, root string) *Tracker {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := trackerKey{session, mount, root}
	t, ok := s.trk[k]
	if !ok {
		t = &Tracker{s: s, mount: mount, root: root}
		s.trk[k] = t
	}
	return t
}

// Forget drops the trackers of a session (when it is unloaded or
// deleted); the next step takes a new baseline.
func (s *Store) Forget(session string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k := range s.trk {
		if k.session == session {
			delete(s.trk, k)
		}
	}
}

// blobPath is where the content of hash h is kept.
func (s *Store) blobPath(h string) string {
	return filepath.Join(s.cfg.Dir, "blobs", h[:2], h)
}

// errTooBig is put's answer to content over its limit: the file grew
// after its stat, and is not kept.
var errTooBig = errors.New("checkpoint: the file grew past its limit while it was read")

// put keeps the content of f, at most limit bytes, and returns its hash;
// more than limit bytes is errTooBig.
func (s *Store) put(f io.Reader, limit int64) (string, error) {
	if err := os.MkdirAll(filepath.Join(s.cfg.Dir, "blobs"), 0o700); err != nil {
		return "", err
	}
	tmp, err := os.CreateTemp(filepath.Join(s.cfg.Dir, "blobs"), ".put-*")
	if err != nil {
		return "", err
	}
	defer os.Remove(tmp.Name())
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(tmp, h), io.LimitReader(f, limit+1))
	if err == nil && n > limit {
		err = errTooBig
	}
	if err != nil {
		tmp.Close()
		return "", err
	}
	if err := tmp.Close(); err != nil {
		return "", err
	}
	sum := hex.EncodeToString(h.Sum(nil))
	s.noteFresh(sum)
	dst := s.blobPath(sum)
	if _, err := os.Stat(dst); err == nil {
		return sum, nil
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
		return "", err
	}
	return sum, os.Rename(tmp.Name(), dst)
}

// entry is what a manifest knows of one path.
type entry struct {
	st    event.FileState
	mtime int64
	ctime int64
	ino   uint64
	kept  bool   // a file's content is in the blob store
	gen   uint64 // the last Scan that saw the path
}

// same reports whether s is what e saw (so its content is e's too).
func (e *entry) same(s *stat) bool {
	return s.keys && e.st.Kind == s.kind && e.st.Mode == s.mode && e.st.Size == s.size &&
		e.mtime == s.mtime && e.ctime == s.ctime && e.ino == s.ino
}

func kindOf(fi fs.FileInfo) string {
	switch {
	case fi.IsDir():
		return "dir"
	case fi.Mode()&fs.ModeSymlink != 0:
		return "link"
	case fi.Mode().IsRegular():
		return "file"
	}
	return "other"
}

func sizeOf(fi fs.FileInfo) int64 {
	if fi.Mode().IsRegular() {
		return fi.Size()
	}
	return 0
}

// Tracker follows one mount of one session. Its methods are safe for
// concurrent use; they serialise on the tracker.
type Tracker struct {
	s     *Store
	mount string
	root  string

	mu    sync.Mutex
	files map[string]*entry // nil until the baseline
	gen   uint64            // of the last Scan
	// Wide is set once a step may have left something running that
	// writes (a background process): every later step walks the mount.
	wide bool
}

// Result is what one look at a mount found.
type Result struct {
	Changes []event.FileChange
	// Incomplete, if set, says why the changes cannot all be undone.
	Incomplete string
}

// Baseline takes the mount's manifest if the tracker has none, keeping
// the content of every file (up to the caps); a file it could not keep
// makes a later change of it incomplete.
func (t *Tracker) Baseline() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.baseline()
}

func (t *Tracker) baseline() error {
	if t.files != nil {
		return nil
	}
	files := make(map[string]*entry)
	budget := t.s.cfg.MaxBytes
	err := t.walk(func(rel []byte, s *stat) error {
		r := string(rel)
		e, err := t.look(r, s, nil, &budget)
		if err != nil {
			return err
		}
		files[r] = &e
		return nil
	})
	if err != nil {
		return fmt.Errorf("checkpoint: baseline of mount %s: %w", t.mount, err)
	}
	t.files = files
	return nil
}

// SetWide makes every later step walk the whole mount.
func (t *Tracker) SetWide() {
	t.mu.Lock()
	t.wide = true
	t.mu.Unlock()
}

// Wide reports whether steps walk the whole mount.
func (t *Tracker) Wide() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.wide
}

// Scan walks the whole mount and returns what changed since the
// manifest, which it updates. Without a baseline it takes one and
// reports nothing.
func (t *Tracker) Scan() (Result, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.files == nil {
		return Result{}, t.baseline()
	}
	// Each path the walk finds is marked with this scan's generation;
	// the paths left unmarked are gone. An unchanged path costs one map
	// look-up and no allocation.
	t.gen++
	gen := t.gen
	var res Result
	budget := t.s.cfg.MaxBytes
	err := t.walk(func(rel []byte, s *stat) error {
		if e := t.files[string(rel)]; e != nil && e.same(s) {
			e.gen = gen
			return nil
		}
		r := string(rel)
		if err := t.update(r, s, &res, &budget); err != nil {
			return err
		}
		t.files[r].gen = gen
		return nil
	})
	if err != nil {
		// The manifest holds what the walk updated; a path it did not
		// reach keeps its entry, and the next Scan compares it again.
		return Result{}, fmt.Errorf("checkpoint: scan of mount %s: %w", t.mount, err)
	}
	for rel, old := range t.files {
		if old.gen != gen {
			t.gone(rel, old, &res)
		}
	}
	t.finish(&res)
	return res, nil
}

// ScanPaths looks at the given paths (relative, slash-separated) and
// their directories only: what file tools wrote. A path that is a
// symbolic link, or under one, is reported by needWalk: the write went
// elsewhere and only a walk finds it.
func (t *Tracker) ScanPaths(rels []string) (res Result, needWalk bool, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.files == nil {
		return Result{}, true, nil
	}
	look := map[string]bool{}
	for _, rel := range rels {
		for p := path.Clean(rel); p != "." && p != "/" && p != ""; p = path.Dir(p) {
			look[p] = true
		}
	}
	paths := make([]string, 0, len(look))
	for p := range look {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	budget := t.s.cfg.MaxBytes
	for _, rel := range paths {
		if Ignored(rel) {
			continue
		}
		fi, err := os.Lstat(filepath.Join(t.root, filepath.FromSlash(rel)))
		switch {
		case errors.Is(err, fs.ErrNotExist):
			if old, ok := t.files[rel]; ok {
				t.gone(rel, old, &res)
			}
			continue
		case err != nil:
			return Result{}, false, fmt.Errorf("checkpoint: mount %s: %w", t.mount, err)
		case fi.Mode()&fs.ModeSymlink != 0:
			return Result{}, true, nil
		}
		s := statOfInfo(fi)
		if err := t.update(rel, &s, &res, &budget); err != nil {
			return Result{}, false, fmt.Errorf("checkpoint: mount %s: %w", t.mount, err)
		}
	}
	t.finish(&res)
	return res, false, nil
}

// look returns the entry of rel as s shows it, reusing old's hash when
// unchanged (old may be nil) and otherwise reading (and keeping, within
// budget) its content.
func (t *Tracker) look(rel string, s *stat, old *entry, budget *int64) (entry, error) {
	if old != nil && old.same(s) {
		return *old, nil
	}
	e := entry{st: event.FileState{Kind: s.kind, Mode: s.mode, Size: s.size}, mtime: s.mtime, ctime: s.ctime, ino: s.ino}
	full := filepath.Join(t.root, filepath.FromSlash(rel))
	switch e.st.Kind {
	case "link":
		target, err := os.Readlink(full)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return entry{}, err
		}
		e.st.Link = target
	case "file":
		if e.st.Size > t.s.cfg.MaxFileBytes || e.st.Size > *budget {
			e.st.Hash = "" // not kept: a change of it is incomplete
			return e, nil
		}
		f, err := t.open(rel)
		if errors.Is(err, fs.ErrNotExist) {
			return e, nil
		} else if err != nil {
			return entry{}, err
		}
		sum, err := t.s.put(f, min(t.s.cfg.MaxFileBytes, *budget))
		f.Close()
		if errors.Is(err, errTooBig) {
			e.st.Hash = "" // not kept: a change of it is incomplete
			return e, nil
		}
		if err != nil {
			return entry{}, err
		}
		e.st.Hash, e.kept = sum, true
		*budget -= e.st.Size
	}
	return e, nil
}

// update records rel as s shows it, adding its change to res.
func (t *Tracker) update(rel string, s *stat, res *Result, budget *int64) error {
	old := t.files[rel]
	had := old != nil
	e, err := t.look(rel, s, old, budget)
	if err != nil {
		return err
	}
	t.files[rel] = &e
	if had && old.st == e.st {
		return nil
	}
	c := event.FileChange{Path: rel, After: state(&e)}
	if had {
		c.Before = state(old)
		if old.st.Kind == "file" && !old.kept {
			res.incomplete(fmt.Sprintf("%s changed, and its earlier content (%d bytes) was not kept", rel, old.st.Size))
		}
	}
	if e.st.Kind == "file" && !e.kept {
		res.incomplete(fmt.Sprintf("%s is %d bytes, over the checkpoint's caps", rel, e.st.Size))
	}
	res.Changes = append(res.Changes, c)
	return nil
}

// gone records that rel no longer exists.
func (t *Tracker) gone(rel string, old *entry, res *Result) {
	delete(t.files, rel)
	if old.st.Kind == "file" && !old.kept {
		res.incomplete(fmt.Sprintf("%s was deleted, and its content (%d bytes) was not kept", rel, old.st.Size))
	}
	res.Changes = append(res.Changes, event.FileChange{Path: rel, Before: state(old)})
}

// finish sorts the changes and bounds them.
func (t *Tracker) finish(res *Result) {
	slices.SortFunc(res.Changes, func(a, b event.FileChange) int { return strings.Compare(a.Path, b.Path) })
	if len(res.Changes) > t.s.cfg.MaxChanges {
		res.incomplete(fmt.Sprintf("%d paths changed; a checkpoint keeps %d", len(res.Changes), t.s.cfg.MaxChanges))
		res.Changes = res.Changes[:t.s.cfg.MaxChanges]
	}
}

func (r *Result) incomplete(why string) {
	if r.Incomplete == "" {
		r.Incomplete = why
	}
}

func state(e *entry) *event.FileState {
	st := e.st
	return &st
}

// hashFile returns the sha256 of the mount's file rel (see open).
func (t *Tracker) hashFile(rel string) (string, error) {
	f, err := t.open(rel)
	if err != nil {
		return "", err
	}
	defer f.Close()
	var h hash.Hash = sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// open opens the mount's file rel for reading within the mount: a path
// component a command swapped for a link out of it since the walk saw a
// file there is refused, so that no file outside the mount is copied
// into a checkpoint (and later restored into the mount for the model to
// read).
func (t *Tracker) open(rel string) (*os.File, error) {
	r, err := os.OpenRoot(t.root)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return r.Open(filepath.FromSlash(rel))
}
