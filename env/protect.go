package env

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"weft.dev/weft/internal/mountinfo"
)

// ErrProtected means a host path a client supplied reaches what the host
// keeps from sessions (see [Protected]). The RPC layer maps it to Denied
// (-32018).
var ErrProtected = errors.New("protected path")

// kernelDirs are the kernel's interfaces to its processes and devices:
// /proc/<pid>/environ holds the host's API keys, /proc/<pid>/root its
// whole file system.
var kernelDirs = []string{"/proc", "/sys", "/dev"}

// kernelTypes are the file systems that are such interfaces wherever
// they are mounted (a bind mount of /proc elsewhere included).
var kernelTypes = map[string]bool{
	"proc": true, "sysfs": true, "devtmpfs": true, "devpts": true, "securityfs": true, "debugfs": true,
	"tracefs": true, "bpf": true, "efivarfs": true, "configfs": true, "pstore": true, "cgroup": true,
	"cgroup2": true, "binfmt_misc": true, "fusectl": true, "mqueue": true, "hugetlbfs": true,
}

// Protected is the set of host paths that what a client of the host
// supplies (a session's mount, an MCP server's readOnly path or command)
// must not reach: /proc, /sys and /dev, every mount point of such a
// kernel file system, and the paths the host adds (its state directory,
// its store, its token file, its configuration file). A path reaches one
// if it is it, lies under it or contains it: a mount of / or of a home
// directory that holds the state directory is refused, since an
// allow-only confinement (Landlock) cannot carve a hole in a directory it
// grants. The operator's own configuration and command line are not
// checked.
//
// A Protected is immutable and safe for concurrent use. A nil *Protected
// protects the kernel's file systems only.
type Protected struct {
	paths []protectedPath
}

type protectedPath struct {
	clean, real string
}

// NewProtected returns the set of the kernel's file systems and paths
// (absolute; relative ones are ignored). A path that does not exist yet
// is protected as written, and through its existing parent's links.
func NewProtected(paths ...string) *Protected {
	p := &Protected{}
	for _, s := range append(append([]string(nil), kernelDirs...), paths...) {
		if !filepath.IsAbs(s) {
			continue
		}
		c := filepath.Clean(s)
		p.paths = append(p.paths, protectedPath{clean: c, real: realPath(c)})
	}
	return p
}

// Check resolves the absolute host path path (following its symbolic
// links; the part that does not exist is kept as written) and returns its
// real form, or an error wrapping [ErrProtected] that names what it
// reaches, or one that says the path is not absolute.
func (p *Protected) Check(path string) (string, error) {
	if !filepath.IsAbs(path) || strings.ContainsRune(path, 0) {
		return "", fmt.Errorf("%q is not an absolute path", path)
	}
	if p == nil {
		p = NewProtected()
	}
	clean := filepath.Clean(path)
	real := realPath(clean)
	for _, x := range []string{clean, real} {
		for _, q := range p.paths {
			for _, y := range []string{q.clean, q.real} {
				if err := reaches(path, x, y); err != nil {
					return "", err
				}
			}
		}
		for _, m := range kernelMounts() {
			if err := reaches(path, x, m); err != nil {
				return "", err
			}
		}
	}
	return real, nil
}

// reaches returns the error of path (whose cleaned or real form is x)
// if x is, lies under or contains the protected y.
func reaches(path, x, y string) error {
	how := ""
	switch {
	case x == y:
		how = "is"
	case within(x, y):
		how = "lies under"
	case within(y, x):
		how = "contains"
	default:
		return nil
	}
	if x != filepath.Clean(path) {
		how = "leads to " + x + ", which " + how
	}
	return fmt.Errorf("%s: %w: it %s %s, which the host keeps from sessions (its processes, keys and state)", path, ErrProtected, how, y)
}

// within reports whether x lies under the directory dir.
func within(x, dir string) bool {
	if dir == "/" {
		return x != "/"
	}
	return strings.HasPrefix(x, dir+"/")
}

// realPath returns the cleaned absolute path p with the symbolic links
// of its longest existing part evaluated.
func realPath(p string) string {
	rest := ""
	for cur := p; ; {
		if r, err := filepath.EvalSymlinks(cur); err == nil {
			return filepath.Join(r, rest)
		} else if !errors.Is(err, fs.ErrNotExist) {
			return p
		}
		parent := filepath.Dir(cur)
		if parent == cur {
			return p
		}
		rest = filepath.Join(filepath.Base(cur), rest)
		cur = parent
	}
}

// kernelMounts returns the mount points of the kernel's file systems in
// this process's mount namespace (from /proc/self/mountinfo; none where
// it cannot be read).
func kernelMounts() []string {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		// id parent major:minor root mountpoint options... - fstype source super
		fields := strings.Fields(sc.Text())
		sep := -1
		for i, f := range fields {
			if f == "-" {
				sep = i
				break
			}
		}
		if len(fields) < 5 || sep < 0 || sep+1 >= len(fields) || !kernelTypes[fields[sep+1]] {
			continue
		}
		out = append(out, mountinfo.Unescape(fields[4]))
	}
	return out
}

// RealPath returns the host path of mount id's root as the binding opened
// it, symbolic links resolved; false for an unknown mount.
func (b *Binding) RealPath(id string) (string, bool) {
	if b == nil || b.byID[id] == nil {
		return "", false
	}
	return b.byID[id].hostReal, true
}
