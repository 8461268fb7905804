// Package env holds a session's mounted environments and the one point
// through which every tool resolves a path: a [Binding] opens an [os.Root]
// per mount and refuses anything that would leave it.
//
// The agent sees a single tree. Mount "work" appears at /environment/work;
// a relative path resolves in the default mount; every other absolute path
// is refused. [Binding.Resolve] checks a path lexically (NUL bytes, length,
// ".." climbing above the mount root, read-only mounts) and returns a
// [Path]; the helpers on [Path] then do the I/O through the mount's
// [os.Root], which follows symbolic links only while they stay inside the
// root, even when a link is swapped between check and use.
//
// Limits, inherited from [os.Root] and documented here so nobody relies on
// more: a hard link created on the host inside a mount to a file outside it
// is, to the kernel, a file inside the mount and is readable; bind mounts
// and other file-system boundaries under a mount are crossed. Device files,
// named pipes and sockets inside a mount are refused on open. The shell is
// not confined by the resolver: [Path.HostDir] only chooses its working
// directory.
//
// Where a path really leads is [Path.EvalSymlinks] (and, as display
// paths in every mount the target lies in, [Binding.Locate]): what the
// approval policy decides on. A view made by [Binding.WithGuard] asks its
// [Guard] about every file it opens, writes or lists, by where the open
// file really is, so that a rule holds whatever links appear between the
// decision and the open. A hard link is a second name the guard cannot
// see through: the kernel names a file by the link it was opened by.
//
// [Protected] is the set of host paths that what a client supplies (a
// mount, an MCP server's paths) must not reach.
package env

import (
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"strings"

	"weft.dev/weft/event"
)

// Prefix is the directory under which the agent sees its mounts.
const Prefix = "/environment"

// MaxPathLen is the longest path, in bytes, that [Binding.Resolve] accepts.
const MaxPathLen = 4096

// Access is what a caller means to do with a resolved path.
type Access int

const (
	// Read is for opening, listing and stat-ing.
	Read Access = iota + 1
	// Write is for creating, truncating and writing; refused on ro mounts.
	Write
)

// String returns "read" or "write".
func (a Access) String() string {
	switch a {
	case Read:
		return "read"
	case Write:
		return "write"
	}
	return fmt.Sprintf("Access(%d)", int(a))
}

// mount is one opened mount.
type mount struct {
	m        event.Mount
	root     *os.Root
	hostReal string // m.Path with symbolic links evaluated
}

// Binding is an immutable snapshot of a session's mounts at one binding
// version, with an open [os.Root] per mount. A tool call receives one
// Binding and sees it whole for the duration of the call.
//
// A Binding is safe for concurrent use. A nil *Binding has no mounts: every
// path resolves to [ErrNoMount]. Whoever calls [NewBinding] calls
// [Binding.Close] once no call uses the Binding any more.
type Binding struct {
	// guard vets what paths open (WithGuard); view marks a guarded view,
	// which shares the mounts of the Binding it was made from.
	guard Guard
	view  bool

	version  int64
	mounts   []*mount
	byID     map[string]*mount
	def      *mount // nil only when there are no mounts
	shell    *mount // nil when no rw mount is the shell default
	snapshot []event.Mount
	network  string
	limits   *event.Limits
	session  string
	narrowed bool // made by OnlyWritable
}

// Open opens the binding b describes: its mounts at its version, with its
// network policy and limits. See [NewBinding] for the rules mounts must
// follow.
func Open(b event.Binding) (*Binding, error) {
	return OpenSession("", b)
}

// OpenSession is [Open] for a binding of session id, which
// [Binding.Session] reports: the sandbox gives the commands of one
// session what they share (a network namespace, a cgroup).
func OpenSession(id string, b event.Binding) (*Binding, error) {
	nb, err := NewBinding(b.BindingVersion, b.Mounts)
	if err != nil {
		return nil, err
	}
	nb.network = b.Network
	if b.Limits != nil {
		l := *b.Limits
		nb.limits = &l
	}
	nb.session = id
	return nb, nil
}

// Session returns the session the binding is of (see [OpenSession]), or
// "".
func (b *Binding) Session() string {
	if b == nil {
		return ""
	}
	return b.session
}

// Limits returns the session's own limits of each command, or nil for the
// host's defaults. The caller must not modify them.
func (b *Binding) Limits() *event.Limits {
	if b == nil {
		return nil
	}
	return b.limits
}

// Network returns the shells' network policy ("allow" or "deny"), or ""
// for the host's default.
func (b *Binding) Network() string {
	if b == nil {
		return ""
	}
	return b.network
}

// NewBinding validates mounts and opens each one. Rules:
//
//   - IDs are slugs ([a-z0-9][a-z0-9_-]*), unique;
//   - Mode is "ro" or "rw"; Kind is "local" or "scratch";
//   - Path is an absolute path to an existing directory;
//   - exactly one mount is the default: if several are flagged the last
//     wins; if none is flagged a single mount becomes the default, and
//     several unflagged mounts are an error;
//   - DefaultForShell may only be set on an rw mount (if several, the last
//     wins); if none is flagged and the default mount is rw, it takes it.
//
// The mounts returned by [Binding.Mounts] carry the normalised flags. No
// mounts at all is allowed and gives a Binding that refuses every path.
// On error nothing stays open.
func NewBinding(version int64, mounts []event.Mount) (*Binding, error) {
	b := &Binding{version: version, byID: make(map[string]*mount, len(mounts))}
	def, shell := -1, -1
	for i, m := range mounts {
		if !validID(m.ID) {
			return nil, fmt.Errorf("env: mount %d: id %q is not a slug [a-z0-9][a-z0-9_-]*", i, m.ID)
		}
		if _, dup := b.byID[m.ID]; dup {
			return nil, fmt.Errorf("env: mount %q: duplicate id", m.ID)
		}
		b.byID[m.ID] = nil
		if m.Mode != event.ModeReadOnly && m.Mode != event.ModeReadWrite {
			return nil, fmt.Errorf("env: mount %q: mode %q is neither %q nor %q", m.ID, m.Mode, event.ModeReadOnly, event.ModeReadWrite)
		}
		if m.Kind != event.KindLocal && m.Kind != event.KindScratch {
			return nil, fmt.Errorf("env: mount %q: kind %q is neither %q nor %q", m.ID, m.Kind, event.KindLocal, event.KindScratch)
		}
		if !filepath.IsAbs(m.Path) {
			return nil, fmt.Errorf("env: mount %q: path %q is not absolute", m.ID, m.Path)
		}
		if m.Default {
			def = i
		}
		if m.DefaultForShell {
			if m.Mode != event.ModeReadWrite {
				return nil, fmt.Errorf("env: mount %q: defaultForShell needs a read-write mount", m.ID)
			}
			shell = i
		}
	}
	if def < 0 && len(mounts) > 1 {
		return nil, fmt.Errorf("env: %d mounts and none is the default", len(mounts))
	}
	if def < 0 && len(mounts) == 1 {
		def = 0
	}
	if shell < 0 && def >= 0 && mounts[def].Mode == event.ModeReadWrite {
		shell = def
	}

	for i, m := range mounts {
		m.Default = i == def
		m.DefaultForShell = i == shell
		m.Metadata = maps.Clone(m.Metadata)
		mt, err := openMount(m)
		if err != nil {
			b.Close()
			return nil, err
		}
		b.mounts = append(b.mounts, mt)
		b.byID[m.ID] = mt
		b.snapshot = append(b.snapshot, m)
		if i == def {
			b.def = mt
		}
		if i == shell {
			b.shell = mt
		}
	}
	return b, nil
}

func openMount(m event.Mount) (*mount, error) {
	fi, err := os.Stat(m.Path)
	if err != nil {
		return nil, fmt.Errorf("env: mount %q: %w", m.ID, err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("env: mount %q: %s is not a directory", m.ID, m.Path)
	}
	root, err := os.OpenRoot(m.Path)
	if err != nil {
		return nil, fmt.Errorf("env: mount %q: %w", m.ID, err)
	}
	real, err := rootPath(root, m.Path)
	if err != nil {
		root.Close()
		return nil, fmt.Errorf("env: mount %q: %w", m.ID, err)
	}
	return &mount{m: m, root: root, hostReal: real}, nil
}

// rootPath returns the real host path of the directory root opened,
// whose name was path: as the kernel names it, or else path with its
// links evaluated, checked to be the same directory.
func rootPath(root *os.Root, path string) (string, error) {
	d, err := root.Open(".")
	if err != nil {
		return "", err
	}
	defer d.Close()
	if p, ok := fdPath(d); ok {
		return p, nil
	}
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return "", err
	}
	want, err := os.Stat(real)
	if err != nil {
		return "", err
	}
	got, err := d.Stat()
	if err != nil {
		return "", err
	}
	if !os.SameFile(want, got) {
		return "", fmt.Errorf("%s changed while it was opened", path)
	}
	return real, nil
}

func validID(id string) bool {
	if id == "" {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
		case (c == '_' || c == '-') && i > 0:
		default:
			return false
		}
	}
	return true
}

// MountVar is the environment variable that tells a shell where mount id
// is on the host: WEFT_MOUNT_ and the ID in upper case, with '-' as '_'
// ("my-docs" is WEFT_MOUNT_MY_DOCS). File tools call the same directory
// /environment/<id>.
func MountVar(id string) string {
	return "WEFT_MOUNT_" + strings.ToUpper(strings.ReplaceAll(id, "-", "_"))
}

// ShellVars returns MountVar(id)=<host path> for every mount, for the
// environment of shells, so that a shell command and a file tool can
// name the same mount. A nil Binding has none.
func (b *Binding) ShellVars() []string {
	if b == nil {
		return nil
	}
	out := make([]string, 0, len(b.mounts))
	for _, m := range b.mounts {
		out = append(out, MountVar(m.m.ID)+"="+m.m.Path)
	}
	return out
}

// Close closes every mount's root. Paths resolved from the Binding (and
// from its views, [Binding.WithGuard] and [Binding.OnlyWritable]) fail
// afterwards. Close must not run while a call still uses the Binding; it
// may be called more than once and on a nil Binding. Close of a view
// does nothing.
func (b *Binding) Close() error {
	if b == nil || b.view {
		return nil
	}
	var first error
	for _, m := range b.mounts {
		if err := m.root.Close(); err != nil && first == nil {
			first = fmt.Errorf("env: closing mount %q: %w", m.m.ID, err)
		}
	}
	return first
}

// Version returns the binding version.
func (b *Binding) Version() int64 {
	if b == nil {
		return 0
	}
	return b.version
}

// Mounts returns a copy of the mounts, in the order given, with the
// Default and DefaultForShell flags normalised.
func (b *Binding) Mounts() []event.Mount {
	if b == nil {
		return nil
	}
	out := make([]event.Mount, len(b.snapshot))
	for i, m := range b.snapshot {
		m.Metadata = maps.Clone(m.Metadata)
		out[i] = m
	}
	return out
}

// Mount returns the mount with the given id.
func (b *Binding) Mount(id string) (event.Mount, bool) {
	if b == nil {
		return event.Mount{}, false
	}
	m := b.byID[id]
	if m == nil {
		return event.Mount{}, false
	}
	return cloneMount(m.m), true
}

// DefaultMount returns the mount relative paths resolve in, or false when
// the binding has no mounts.
func (b *Binding) DefaultMount() (event.Mount, bool) {
	if b == nil || b.def == nil {
		return event.Mount{}, false
	}
	return cloneMount(b.def.m), true
}

// ShellMount returns the read-write mount shells start in, or false when
// there is none.
func (b *Binding) ShellMount() (event.Mount, bool) {
	if b == nil || b.shell == nil {
		return event.Mount{}, false
	}
	return cloneMount(b.shell.m), true
}

// ShellDir resolves the root of the shell mount for a process's working
// directory; see [Path.HostDir]. It fails with [ErrNoMount] when there is
// no read-write shell mount.
func (b *Binding) ShellDir() (*Path, error) {
	if b == nil || b.shell == nil {
		return nil, &Error{Path: Prefix, Err: ErrNoMount, Reason: "no read-write mount is the shell default"}
	}
	return b.newPath(b.shell, ".", Write), nil
}

func cloneMount(m event.Mount) event.Mount {
	m.Metadata = maps.Clone(m.Metadata)
	return m
}

// Resolve maps a path the model wrote to a [Path] inside one mount:
//
//   - /environment/<id>/rest is rest inside mount <id>;
//   - a relative path is inside the default mount;
//   - /environment alone or /environment/<unknown> fails with [ErrNoMount];
//   - any other absolute path fails with [ErrOutside].
//
// The rest is cleaned lexically: empty and "." components are dropped and
// ".." removes the previous component ("a/../b" is "b" even when a is a
// symbolic link); a ".." that would climb above the mount root fails with
// [ErrOutside]. Paths over [MaxPathLen] bytes, empty paths and paths with a
// NUL byte fail with [ErrBadPath]; Write access to an ro mount fails with
// [ErrReadOnly]. Resolve does no I/O: symbolic links are checked by the
// [Path] helpers, which go through the mount's [os.Root]. Every error is an
// [*Error].
func (b *Binding) Resolve(p string, access Access) (*Path, error) {
	if access != Read && access != Write {
		return nil, fmt.Errorf("env: resolve %q: invalid access %v", p, access)
	}
	if p == "" {
		return nil, &Error{Path: p, Err: ErrBadPath, Reason: "empty path"}
	}
	if len(p) > MaxPathLen {
		return nil, &Error{Path: p[:64] + "...", Err: ErrBadPath, Reason: fmt.Sprintf("%d bytes long, more than %d", len(p), MaxPathLen)}
	}
	if strings.IndexByte(p, 0) >= 0 {
		return nil, &Error{Path: strings.ReplaceAll(p, "\x00", `\x00`), Err: ErrBadPath, Reason: "contains a NUL byte"}
	}
	var m *mount
	rest := p
	if p[0] == '/' {
		head, tail := nextComponent(p)
		if head != "environment" {
			return nil, &Error{Path: p, Err: ErrOutside, Reason: "only " + Prefix + " is visible"}
		}
		id, tail := nextComponent(tail)
		switch id {
		case "":
			return nil, &Error{Path: p, Err: ErrNoMount, Reason: "name a mount: " + Prefix + "/<id>/..." + b.mountList()}
		case "..":
			return nil, &Error{Path: p, Err: ErrOutside, Reason: `".." escapes ` + Prefix}
		}
		if b != nil {
			m = b.byID[id]
		}
		if m == nil {
			return nil, &Error{Path: p, MountID: id, Err: ErrNoMount, Reason: "unknown mount" + b.mountList()}
		}
		rest = tail
	} else {
		if b != nil {
			m = b.def
		}
		if m == nil {
			return nil, &Error{Path: p, Err: ErrNoMount, Reason: "no mounts are attached"}
		}
	}
	rel, ok := cleanRel(rest)
	if !ok {
		return nil, &Error{Path: p, MountID: m.m.ID, Err: ErrOutside, Reason: `".." escapes the mount root`}
	}
	if access == Write && m.m.Mode != event.ModeReadWrite {
		return nil, &Error{Path: p, MountID: m.m.ID, Err: ErrReadOnly, Reason: "writes are refused"}
	}
	return b.newPath(m, rel, access), nil
}

func (b *Binding) mountList() string {
	if b == nil || len(b.mounts) == 0 {
		return "; no mounts are attached"
	}
	ids := make([]string, len(b.mounts))
	for i, m := range b.mounts {
		ids[i] = Prefix + "/" + m.m.ID
	}
	return "; mounts: " + strings.Join(ids, ", ")
}

// nextComponent skips leading slashes and "." components and returns the
// next component and what follows it.
func nextComponent(s string) (head, tail string) {
	for {
		s = strings.TrimLeft(s, "/")
		head, tail, _ = strings.Cut(s, "/")
		if head != "." {
			return head, tail
		}
		s = tail
	}
}

// cleanRel cleans a slash-separated relative path lexically. It reports
// false if a ".." climbs above the start. The result is "." for the root.
func cleanRel(s string) (string, bool) {
	if isClean(s) {
		return s, true
	}
	var parts []string
	for c := range strings.SplitSeq(s, "/") {
		switch c {
		case "", ".":
		case "..":
			if len(parts) == 0 {
				return "", false
			}
			parts = parts[:len(parts)-1]
		default:
			parts = append(parts, c)
		}
	}
	if len(parts) == 0 {
		return ".", true
	}
	return strings.Join(parts, "/"), true
}

func (b *Binding) newPath(m *mount, rel string, access Access) *Path {
	return &Path{b: b, m: m, rel: rel, access: access}
}

// ReadFile resolves p for [Read] and returns [Path.ReadFile] of it.
func (b *Binding) ReadFile(p string, limit int64) ([]byte, error) {
	rp, err := b.Resolve(p, Read)
	if err != nil {
		return nil, err
	}
	return rp.ReadFile(limit)
}

// WriteFile resolves p for [Write] and returns [Path.WriteFile] of it.
func (b *Binding) WriteFile(p string, data []byte) error {
	rp, err := b.Resolve(p, Write)
	if err != nil {
		return err
	}
	return rp.WriteFile(data)
}

// Stat resolves p for [Read] and returns [Path.Stat] of it.
func (b *Binding) Stat(p string) (fs.FileInfo, error) {
	rp, err := b.Resolve(p, Read)
	if err != nil {
		return nil, err
	}
	return rp.Stat()
}

// isClean reports whether s is a non-empty relative path without empty,
// "." or ".." components, which cleanRel would return unchanged.
func isClean(s string) bool {
	if s == "" {
		return false
	}
	for c := range strings.SplitSeq(s, "/") {
		if c == "" || c == "." || c == ".." {
			return false
		}
	}
	return true
}
