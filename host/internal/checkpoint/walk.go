package checkpoint

import (
	"errors"
	"io/fs"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"
)

// stat is what a manifest compares of a path: its kind, permission bits,
// size (of a regular file), times and inode. It is a plain value, so a
// walk of 10,000 paths boxes no fs.FileInfo.
type stat struct {
	kind         string // "file", "dir", "link" or "other"
	mode         uint32 // permission bits
	size         int64  // of a regular file; 0 otherwise
	mtime, ctime int64  // nanoseconds
	ino          uint64
	keys         bool // ctime and ino are known
}

// statOf returns the stat of a stat system call.
func statOf(st *unix.Stat_t) stat {
	s := stat{mode: st.Mode & 0o777, mtime: st.Mtim.Nano(), ctime: st.Ctim.Nano(), ino: st.Ino, keys: true}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		s.kind = "dir"
	case unix.S_IFLNK:
		s.kind = "link"
	case unix.S_IFREG:
		s.kind, s.size = "file", st.Size
	default:
		s.kind = "other"
	}
	return s
}

// statOfInfo returns the stat of fi (an os.Lstat).
func statOfInfo(fi fs.FileInfo) stat {
	s := stat{kind: kindOf(fi), mode: uint32(fi.Mode().Perm()), size: sizeOf(fi), mtime: fi.ModTime().UnixNano()}
	s.ctime, s.ino, s.keys = statKeys(fi)
	return s
}

// dirList is what a walk read of one directory: its path relative to the
// mount ("" for the root), and its entries with their stats, in the
// order the directory listed them.
type dirList struct {
	rel   string
	names []string
	stats []stat
	err   error
}

// walk calls fn for every path of the mount but its root and the ignored
// ones, without following links; rel is slash-separated and valid only
// during the call (fn copies it to keep it). It reads each directory's
// names once and stats them relative to the directory (fstatat), which
// costs the kernel no walk of the path for each file.
//
// The directories of one depth are read and stat'ed by up to GOMAXPROCS
// goroutines (the system calls are most of a walk's time), which all
// return before the next depth starts and before walk does; fn is called
// on the calling goroutine only, directory by directory in the order of
// a breadth-first walk, so its results do not depend on the scheduling.
// The first error in that order stops the walk.
func (t *Tracker) walk(fn func(rel []byte, st *stat) error) error {
	level := []string{""}
	var buf []byte
	for len(level) > 0 {
		lists := readLevel(t.root, level)
		var next []string
		for i := range lists {
			l := &lists[i]
			if l.err != nil {
				return l.err
			}
			for j, name := range l.names {
				buf = append(buf[:0], l.rel...)
				if l.rel != "" {
					buf = append(buf, '/')
				}
				buf = append(buf, name...)
				if err := fn(buf, &l.stats[j]); err != nil {
					return err
				}
				if l.stats[j].kind == "dir" {
					next = append(next, string(buf))
				}
			}
		}
		level = next
	}
	return nil
}

// readLevel reads the directories rels of the mount at root, in parallel
// when there are several, and returns what it read of each, in order.
func readLevel(root string, rels []string) []dirList {
	lists := make([]dirList, len(rels))
	workers := min(runtime.GOMAXPROCS(0), len(rels))
	if workers <= 1 {
		for i, rel := range rels {
			lists[i] = readDir(root, rel)
		}
		return lists
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= len(rels) {
					return
				}
				lists[i] = readDir(root, rels[i])
			}
		})
	}
	wg.Wait()
	return lists
}

// readDir reads the directory rel of the mount at root: its names, but
// the ignored ones, and their stats. A directory gone or replaced by
// something else since its parent was read has no entries; so has an
// entry gone since its directory was read.
func readDir(root, rel string) dirList {
	l := dirList{rel: rel}
	full := root
	if rel != "" {
		full = root + "/" + rel
	}
	// Below the root, not following a link: a directory replaced by a
	// link while walking must not lead the walk out of the mount.
	flag := os.O_RDONLY | syscall.O_DIRECTORY
	if rel != "" {
		flag |= syscall.O_NOFOLLOW
	}
	f, err := os.OpenFile(full, flag, 0)
	if err != nil {
		if rel != "" && (errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) || errors.Is(err, syscall.ELOOP)) {
			return l // gone, or replaced, while walking
		}
		l.err = err
		return l
	}
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		l.err = err
		return l
	}
	fd := int(f.Fd())
	l.names = names[:0]
	l.stats = make([]stat, 0, len(names))
	for _, name := range names {
		// Only a directory named objects can be ignored: the walk
		// does not go into one, so nothing under it is reached.
		if name == "objects" && Ignored(join(rel, name)) {
			continue
		}
		var st unix.Stat_t
		if err := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			if errors.Is(err, unix.ENOENT) {
				continue
			}
			l.err = &fs.PathError{Op: "fstatat", Path: full + "/" + name, Err: err}
			return l
		}
		l.names = append(l.names, name)
		l.stats = append(l.stats, statOf(&st))
	}
	return l
}

func join(rel, name string) string {
	if rel == "" {
		return name
	}
	return rel + "/" + name
}

// statKeys returns the change time and inode of fi, from either kind of
// stat.
func statKeys(fi fs.FileInfo) (ctime int64, ino uint64, ok bool) {
	switch st := fi.Sys().(type) {
	case *syscall.Stat_t:
		return st.Ctim.Nano(), st.Ino, true
	case *unix.Stat_t:
		return st.Ctim.Nano(), st.Ino, true
	}
	return 0, 0, false
}
