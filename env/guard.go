package env

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// A Guard vets what the helpers of a guarded [Binding] are about to hand
// to a tool, by where it really is: the approval policy's path rules, so
// that a rule holds on the file a tool opens and not only on the path it
// was given. [Binding.WithGuard] installs one.
//
// A guarded Binding calls Allow
//
//   - after [Path.Open] (and so [Path.ReadFile] and [Path.ReadDir]) has
//     opened a file or directory, before a byte of it is read: the target's
//     Real locations are those of the file that was opened, whatever links
//     were swapped in between;
//   - before [Path.WriteFile] creates or changes a file, with the place the
//     write will land, and again once the file is open, before it is
//     changed;
//   - for each entry [Path.ReadDir] and [Path.WalkDir] list, with where the
//     entry is (and, for a symbolic link, where it leads).
//
// An error from Allow refuses the target: the helper returns an [*Error]
// wrapping [ErrDenied] whose Reason is the error's text, and a listing
// leaves the entry out. Allow must be safe for concurrent use; it is
// called on the tool's goroutine and must not block for long.
type Guard interface {
	Allow(t Target) error
}

// Target is what a guarded helper asks its [Guard] about.
type Target struct {
	// Path is the path as the tool named it, or for an entry of a listing
	// or a walk, the entry's path under the directory listed.
	Path *Path
	// Real are the places in the binding's mounts where the target
	// really is, symbolic links followed: one per mount it lies in
	// (mounts may nest on the host), and none when the target lies in
	// no mount (a file reached through a mount point inside a mount that
	// is outside every mount). Each has the access of Path.
	Real []*Path
}

// WithGuard returns a view of b whose paths have every file they open,
// write or list vetted by g (see [Guard]). The view shares b's mounts: it
// is valid while b is open, and its Close does nothing. A nil g, or a nil
// b, returns b.
func (b *Binding) WithGuard(g Guard) *Binding {
	if b == nil || g == nil {
		return b
	}
	v := *b
	v.guard, v.view = g, true
	return &v
}

// allow asks the binding's guard about p, whose real host path is host
// (empty: the locations are given in real), and wraps a refusal.
func (p *Path) allow(real []*Path) error {
	if p.b == nil || p.b.guard == nil {
		return nil
	}
	if err := p.b.guard.Allow(Target{Path: p, Real: real}); err != nil {
		var e *Error
		if errors.As(err, &e) && errors.Is(err, ErrDenied) {
			return err
		}
		return &Error{Path: p.String(), MountID: p.m.m.ID, Err: ErrDenied, Reason: err.Error()}
	}
	return nil
}

// guarded reports whether p's binding has a guard.
func (p *Path) guarded() bool { return p.b != nil && p.b.guard != nil }

// vet asks the guard about f, which p opened: where f really is comes
// from the kernel (the file descriptor's path) where it can tell, and
// otherwise from following p's links again and checking that they lead
// to the very file f is.
func (p *Path) vet(f *os.File) error {
	if !p.guarded() {
		return nil
	}
	real, err := p.openedAt(f)
	if err != nil {
		return err
	}
	return p.allow(real)
}

// openedAt returns where the open file f, opened through p, lies in the
// binding's mounts.
func (p *Path) openedAt(f *os.File) ([]*Path, error) {
	host, err := p.openedHost(f)
	if err != nil {
		return nil, err
	}
	return p.b.locations(host, p.access), nil
}

// changed is the error of a file that was replaced while it was opened.
func (p *Path) changed() error {
	return &Error{Path: p.String(), MountID: p.m.m.ID, Err: ErrDenied,
		Reason: "it changed while it was opened (a link was swapped), so where it leads cannot be told; try again"}
}

// hostPath is p's host path under its mount's real root.
func (p *Path) hostPath() string {
	if p.rel == "." {
		return p.m.hostReal
	}
	return p.m.hostReal + string(filepath.Separator) + p.name()
}

// locations returns the paths, one per mount, of the host path host (a
// path with no symbolic links), with the given access.
func (b *Binding) locations(host string, access Access) []*Path {
	var out []*Path
	for _, m := range b.mounts {
		var rel string
		switch {
		case host == m.hostReal:
			rel = "."
		case strings.HasPrefix(host, m.hostReal+string(filepath.Separator)):
			rel = filepath.ToSlash(host[len(m.hostReal)+1:])
		case m.hostReal == string(filepath.Separator) && strings.HasPrefix(host, m.hostReal):
			rel = filepath.ToSlash(host[1:])
		default:
			continue
		}
		out = append(out, b.newPath(m, rel, access))
	}
	return out
}

// maxLinks is how many symbolic links one path may go through, as
// [os.Root] allows.
const maxLinks = 8

// EvalSymlinks returns where p leads in its mount: the path with every
// symbolic link replaced by its target, as [os.Root] follows them (a
// link's ".." climbs from the directory the link is in; an absolute
// target or a ".." above the mount root leaves the mount and fails with
// [ErrOutside]; more than 8 links fail with ELOOP). The part of the path
// that does not exist yet is kept as written, so that for a write the
// result is where the file will be created, through a dangling link too.
// The result has p's access. The answer is a snapshot: a link may change
// right after, which is why a guarded [Binding] checks what it opened.
func (p *Path) EvalSymlinks() (*Path, error) {
	var parts []string
	if p.rel != "." {
		parts = strings.Split(p.rel, "/")
	}
	var done []string
	links := 0
	missing := false
	for len(parts) > 0 {
		c := parts[0]
		parts = parts[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			if len(done) == 0 {
				return nil, &Error{Path: p.String(), MountID: p.m.m.ID, Err: ErrOutside, Reason: "a symbolic link leads outside the mount"}
			}
			done = done[:len(done)-1]
			continue
		}
		if missing {
			done = append(done, c)
			continue
		}
		cand := filepath.FromSlash(strings.Join(append(done, c), "/"))
		fi, err := p.m.root.Lstat(cand)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			missing = true
			done = append(done, c)
			continue
		case err != nil:
			return nil, p.wrap("lstat", err)
		case fi.Mode()&fs.ModeSymlink == 0:
			done = append(done, c)
			continue
		}
		if links++; links > maxLinks {
			return nil, p.wrap("lstat", syscall.ELOOP)
		}
		target, err := p.m.root.Readlink(cand)
		if err != nil {
			return nil, p.wrap("readlink", err)
		}
		if target == "" || filepath.IsAbs(target) {
			return nil, &Error{Path: p.String(), MountID: p.m.m.ID, Err: ErrOutside, Reason: "a symbolic link leads outside the mount"}
		}
		parts = append(strings.Split(filepath.ToSlash(target), "/"), parts...)
	}
	rel := "."
	if len(done) > 0 {
		rel = strings.Join(done, "/")
	}
	return p.b.newPath(p.m, rel, p.access), nil
}

// Locate resolves p (as [Binding.Resolve] does for [Read]) and returns
// the display paths of where it leads ([Path.EvalSymlinks]), one for each
// mount the target lies in. It is what the approval policy decides on
// (policy.Call.Resolve). Errors are those of Resolve and EvalSymlinks.
func (b *Binding) Locate(p string) ([]string, error) {
	rp, err := b.Resolve(p, Read)
	if err != nil {
		return nil, err
	}
	t, err := rp.EvalSymlinks()
	if err != nil {
		return nil, err
	}
	var out []string
	for _, l := range b.locations(t.hostPath(), Read) {
		out = append(out, l.String())
	}
	if len(out) == 0 {
		out = append(out, t.String())
	}
	return out, nil
}

// entryAt returns where the entry child lies, whose path relative to
// the directory listed is rel, given dirHost, the directory's real host
// path; for a symbolic link also where it leads.
func (p *Path) entryAt(child *Path, d fs.DirEntry, rel, dirHost string) []*Path {
	real := p.b.locations(filepath.Join(dirHost, filepath.FromSlash(rel)), p.access)
	if d != nil && d.Type()&fs.ModeSymlink != 0 {
		if t, err := child.EvalSymlinks(); err == nil {
			real = append(real, p.b.locations(t.hostPath(), p.access)...)
		}
	}
	return real
}

// openedHost returns the real host path of f, opened through p, checked
// as [Path.vet] checks it.
func (p *Path) openedHost(f *os.File) (string, error) {
	if host, ok := fdPath(f); ok {
		return host, nil
	}
	t, err := p.EvalSymlinks()
	if err != nil {
		return "", err
	}
	want, err := p.m.root.Lstat(t.name())
	if err != nil {
		return "", p.changed()
	}
	got, err := f.Stat()
	if err != nil || !os.SameFile(want, got) {
		return "", p.changed()
	}
	return t.hostPath(), nil
}

// String returns a description of the target for messages.
func (t Target) String() string {
	if len(t.Real) == 0 {
		return t.Path.String()
	}
	var b strings.Builder
	b.WriteString(t.Path.String())
	for _, r := range t.Real {
		if r.String() != t.Path.String() {
			fmt.Fprintf(&b, " -> %s", r)
		}
	}
	return b.String()
}
