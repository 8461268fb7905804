package env

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"weft.dev/weft/event"
)

// Path is a path resolved by [Binding.Resolve]: a mount, the path relative
// to the mount's root, and the access it was resolved for. Its helpers do
// every I/O through the mount's [os.Root], so a symbolic link that leads
// out of the mount is refused even if it was swapped in after Resolve.
//
// Errors from the helpers are an [*Error] for refusals (escape, irregular
// file, read-only) and otherwise an [*fs.PathError] naming the display path,
// so errors.Is(err, fs.ErrNotExist) works; no error names a host path.
//
// A Path is immutable and safe for concurrent use; it is valid until its
// Binding is closed.
type Path struct {
	b      *Binding // the binding (or view) that resolved it
	m      *mount
	rel    string // slash-separated, cleaned, "." for the mount root
	access Access
}

// String returns the display path, /environment/<id>/<rel>, which is what
// tools print.
func (p *Path) String() string {
	if p.rel == "." {
		return Prefix + "/" + p.m.m.ID
	}
	return Prefix + "/" + p.m.m.ID + "/" + p.rel
}

// MountID returns the id of the mount the path is in.
func (p *Path) MountID() string { return p.m.m.ID }

// Mount returns the mount the path is in.
func (p *Path) Mount() event.Mount { return cloneMount(p.m.m) }

// Rel returns the slash-separated path relative to the mount root; "." is
// the root itself.
func (p *Path) Rel() string { return p.rel }

// Access returns the access the path was resolved for.
func (p *Path) Access() Access { return p.access }

func (p *Path) name() string { return filepath.FromSlash(p.rel) }

// Join returns the child name of p (a single path component, as returned
// by [Path.ReadDir]) with the same mount and access.
func (p *Path) Join(name string) (*Path, error) {
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\x00") {
		return nil, &Error{Path: p.String() + "/" + name, MountID: p.m.m.ID, Err: ErrBadPath, Reason: "not a single path component"}
	}
	rel := name
	if p.rel != "." {
		rel = p.rel + "/" + name
	}
	return p.b.newPath(p.m, rel, p.access), nil
}

// Stat returns the file info, following symbolic links inside the mount.
func (p *Path) Stat() (fs.FileInfo, error) {
	fi, err := p.m.root.Stat(p.name())
	return fi, p.wrap("stat", err)
}

// Lstat returns the file info without following a final symbolic link.
func (p *Path) Lstat() (fs.FileInfo, error) {
	fi, err := p.m.root.Lstat(p.name())
	return fi, p.wrap("lstat", err)
}

// Open opens the file or directory for reading. It refuses devices, named
// pipes and sockets with [ErrNotRegular], checking the opened file itself
// (the open does not block on a named pipe), and in a guarded binding
// what the guard refuses, by where the opened file really is, with
// [ErrDenied]. The caller closes the file. The file's Name is a host
// path: do not show it to the model.
func (p *Path) Open() (*os.File, error) {
	if fi, err := p.m.root.Stat(p.name()); err != nil {
		return nil, p.wrap("open", err)
	} else if err := p.checkMode(fi.Mode(), true); err != nil {
		return nil, err
	}
	f, err := p.m.root.OpenFile(p.name(), os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, p.wrap("open", err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, p.wrap("open", err)
	}
	if err := p.checkMode(fi.Mode(), true); err != nil {
		f.Close()
		return nil, err
	}
	if err := p.vet(f); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// ReadFile returns the contents of a regular file. If the file is larger
// than limit bytes (limit > 0), it returns an [*Error] wrapping
// [ErrTooLarge] and no data.
func (p *Path) ReadFile(limit int64) ([]byte, error) {
	f, err := p.Open()
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, p.wrap("read", err)
	}
	if fi.IsDir() {
		return nil, p.wrap("read", syscall.EISDIR)
	}
	if limit > 0 && fi.Size() > limit {
		return nil, p.tooLarge(fi.Size(), limit)
	}
	r := io.Reader(f)
	if limit > 0 {
		r = io.LimitReader(f, limit+1)
	}
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, p.wrap("read", err)
	}
	if limit > 0 && int64(len(data)) > limit {
		return nil, p.tooLarge(int64(len(data)), limit)
	}
	return data, nil
}

func (p *Path) tooLarge(size, limit int64) error {
	return &Error{Path: p.String(), MountID: p.m.m.ID, Err: ErrTooLarge,
		Reason: fmt.Sprintf("%d bytes or more, the limit is %d", size, limit)}
}

// WriteFile replaces the contents of a regular file with data, creating
// it (mode 0644 before umask) and its parent directories as needed. An
// existing file keeps its mode and is written in place. The Path must have
// been resolved for [Write]; devices, named pipes and sockets are refused
// with [ErrNotRegular].
//
// The write lands where the path leads ([Path.EvalSymlinks]): through a
// link to an existing file, or a dangling one, whose target is then
// created. A guarded binding asks its guard about that place before
// anything is created, and about the opened file before it is changed; a
// file this call created and the guard then refuses (a link swapped in
// between) is removed again.
func (p *Path) WriteFile(data []byte) error {
	if err := p.needWrite(); err != nil {
		return err
	}
	if p.rel == "." {
		return p.wrap("write", syscall.EISDIR)
	}
	t, err := p.EvalSymlinks()
	if err != nil {
		return err
	}
	if t.rel == "." {
		return p.wrap("write", syscall.EISDIR)
	}
	if p.guarded() {
		if err := p.allow(p.b.locations(t.hostPath(), p.access)); err != nil {
			return err
		}
	}
	if dir := filepath.Dir(t.name()); dir != "." {
		if err := p.m.root.MkdirAll(dir, 0o755); err != nil {
			return p.wrap("mkdir", err)
		}
	}
	if fi, err := p.m.root.Stat(t.name()); err == nil {
		if err := p.checkMode(fi.Mode(), false); err != nil {
			return err
		}
	}
	// No O_TRUNC: the file is truncated only once it is known to be
	// regular and allowed. A new file is made with O_EXCL, which follows
	// no link: one swapped in since EvalSymlinks fails the write.
	const flags = os.O_WRONLY | syscall.O_NONBLOCK | syscall.O_NOCTTY
	created := false
	f, err := p.m.root.OpenFile(t.name(), flags, 0)
	if errors.Is(err, fs.ErrNotExist) {
		f, err = p.m.root.OpenFile(t.name(), flags|os.O_CREATE|os.O_EXCL, 0o644)
		created = err == nil
	}
	if err != nil {
		return p.wrap("write", err)
	}
	fi, err := f.Stat()
	if err == nil {
		err = p.checkMode(fi.Mode(), false)
	} else {
		err = p.wrap("write", err)
	}
	if err == nil {
		if err = p.vet(f); err != nil && created {
			t.removeIfSame(fi)
		}
	}
	if err == nil {
		err = p.wrap("write", f.Truncate(0))
	}
	if err == nil {
		_, err = f.Write(data)
		err = p.wrap("write", err)
	}
	if cerr := f.Close(); err == nil {
		err = p.wrap("write", cerr)
	}
	return err
}

// removeIfSame removes the file p names if it is still the file fi
// describes: an empty file a refused write created.
func (p *Path) removeIfSame(fi fs.FileInfo) {
	if cur, err := p.m.root.Lstat(p.name()); err == nil && os.SameFile(cur, fi) {
		p.m.root.Remove(p.name())
	}
}

// MkdirAll creates the directory and its parents (mode 0755 before umask).
// The Path must have been resolved for [Write].
func (p *Path) MkdirAll() error {
	if err := p.needWrite(); err != nil {
		return err
	}
	return p.wrap("mkdir", p.m.root.MkdirAll(p.name(), 0o755))
}

// ReadDir returns the directory's entries sorted by name. With limit > 0
// it reads at most limit entries, in directory order, before sorting them:
// a caller that wants to know whether there are more asks for one extra.
// In a guarded binding, the entries the guard refuses are left out and
// counted in hidden (they count toward limit).
func (p *Path) ReadDir(limit int) (ents []fs.DirEntry, hidden int, err error) {
	f, err := p.Open()
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	n := -1
	if limit > 0 {
		n = limit
	}
	ents, err = f.ReadDir(n)
	if err != nil && !(errors.Is(err, io.EOF) && n > 0) {
		return nil, 0, p.wrap("readdir", err)
	}
	if p.guarded() {
		dirHost, err := p.openedHost(f)
		if err != nil {
			return nil, 0, err
		}
		kept := ents[:0]
		for _, e := range ents {
			child, err := p.Join(e.Name())
			if err == nil {
				err = child.allow(p.entryAt(child, e, e.Name(), dirHost))
			}
			if err != nil {
				hidden++
				continue
			}
			kept = append(kept, e)
		}
		ents = kept
	}
	slices.SortFunc(ents, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	return ents, hidden, nil
}

// WalkDir walks the tree rooted at p in lexical order, as [fs.WalkDir]
// does, calling fn with each file's Path. It does not follow symbolic links
// to directories. fn may return [fs.SkipDir] or [fs.SkipAll]. Opening the
// files it reports still goes through [Path.Open].
//
// In a guarded binding p itself must pass the guard (as for [Path.Open]),
// and an entry the guard refuses is reported with an error wrapping
// [ErrDenied] (and a refused directory is not entered, whatever fn
// returns).
func (p *Path) WalkDir(fn func(p *Path, d fs.DirEntry, err error) error) error {
	var baseHost string
	if p.guarded() {
		f, err := p.Open()
		if err != nil {
			return fn(p, nil, err)
		}
		baseHost, err = p.openedHost(f)
		f.Close()
		if err != nil {
			return fn(p, nil, err)
		}
	}
	return fs.WalkDir(p.m.root.FS(), p.rel, func(name string, d fs.DirEntry, err error) error {
		child := p.b.newPath(p.m, name, p.access)
		if err != nil {
			return fn(child, d, child.wrap("walk", err))
		}
		if !p.guarded() || name == p.rel {
			return fn(child, d, nil)
		}
		rel := name
		if p.rel != "." {
			rel = strings.TrimPrefix(name, p.rel+"/")
		}
		if gerr := child.allow(p.entryAt(child, d, rel, baseHost)); gerr != nil {
			err := fn(child, d, gerr)
			if err == nil && d.IsDir() {
				return fs.SkipDir
			}
			return err
		}
		return fn(child, d, nil)
	})
}

// HostDir returns the host path of the directory, for the working
// directory of a process. The directory is opened through the mount's root
// first; then its real host path (symbolic links evaluated) must still lie
// inside the mount's real host path, else [ErrOutside]. The result is a
// snapshot: the process itself is not confined by the resolver.
func (p *Path) HostDir() (string, error) {
	f, err := p.Open()
	if err != nil {
		return "", err
	}
	fi, err := f.Stat()
	f.Close()
	if err != nil {
		return "", p.wrap("stat", err)
	}
	if !fi.IsDir() {
		return "", p.wrap("chdir", syscall.ENOTDIR)
	}
	host := filepath.Join(p.m.hostReal, p.name())
	real, err := filepath.EvalSymlinks(host)
	if err != nil {
		return "", p.wrap("chdir", errors.Unwrap(err))
	}
	if real != p.m.hostReal && !strings.HasPrefix(real, p.m.hostReal+string(filepath.Separator)) {
		return "", &Error{Path: p.String(), MountID: p.m.m.ID, Err: ErrOutside, Reason: "the directory lies outside the mount on the host"}
	}
	return real, nil
}

func (p *Path) needWrite() error {
	if p.access != Write {
		return fmt.Errorf("env: %s: resolved for %v, not write", p, p.access)
	}
	if p.m.m.Mode != event.ModeReadWrite {
		return &Error{Path: p.String(), MountID: p.m.m.ID, Err: ErrReadOnly, Reason: "writes are refused"}
	}
	return nil
}

// checkMode refuses irregular files; directories pass when dirOK.
func (p *Path) checkMode(m fs.FileMode, dirOK bool) error {
	if m.IsRegular() || (dirOK && m.IsDir()) {
		return nil
	}
	var what string
	switch {
	case m.IsDir():
		return p.wrap("write", syscall.EISDIR)
	case m&fs.ModeNamedPipe != 0:
		what = "a named pipe"
	case m&fs.ModeSocket != 0:
		what = "a socket"
	case m&fs.ModeCharDevice != 0:
		what = "a character device"
	case m&fs.ModeDevice != 0:
		what = "a block device"
	default:
		what = "an irregular file"
	}
	return &Error{Path: p.String(), MountID: p.m.m.ID, Err: ErrNotRegular, Reason: "it is " + what}
}

// errPathEscapes is the text of the unexported error os.Root returns when
// a name or a symbolic link leads out of the root. TestSymlinkOutIsErrOutside
// notices if it changes.
const errPathEscapes = "path escapes from parent"

// wrap turns an error from the os package into one that names the display
// path instead of a host path.
func (p *Path) wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	var e *Error
	if errors.As(err, &e) {
		return err
	}
	inner := err
	var pe *fs.PathError
	var le *os.LinkError
	switch {
	case errors.As(err, &pe):
		inner = pe.Err
	case errors.As(err, &le):
		inner = le.Err
	}
	switch {
	case inner.Error() == errPathEscapes:
		return &Error{Path: p.String(), MountID: p.m.m.ID, Err: ErrOutside, Reason: "a symbolic link leads outside the mount"}
	case errors.Is(inner, syscall.ENXIO):
		return &Error{Path: p.String(), MountID: p.m.m.ID, Err: ErrNotRegular, Reason: "it is a device, named pipe or socket"}
	}
	return &fs.PathError{Op: op, Path: p.String(), Err: inner}
}
