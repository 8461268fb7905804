package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
)

// tempPrefix starts the name of every command's temporary directory:
// weft-cmd-PID-START-RANDOM, PID and START (its start time in clock ticks
// after boot, from /proc/PID/stat) naming the weft process that made it.
const tempPrefix = "weft-cmd-"

// makeTempDir makes a command's private temporary directory in root
// (empty: os.TempDir()).
func makeTempDir(root string) (string, error) {
	if root == "" {
		root = os.TempDir()
	}
	return os.MkdirTemp(root, tempOwner())
}

// tempOwner is the start of the names of this process's temporary
// directories: tempPrefix, its pid and its start time. It never changes,
// so it is read from /proc once.
var tempOwner = sync.OnceValue(func() string {
	return fmt.Sprintf("%s%d-%d-", tempPrefix, os.Getpid(), selfStart())
})

// parseTempName returns the owner of a temporary directory named by
// makeTempDir.
func parseTempName(name string) (pid int, start uint64, ok bool) {
	rest, ok := strings.CutPrefix(name, tempPrefix)
	if !ok {
		return 0, 0, false
	}
	f := strings.SplitN(rest, "-", 3)
	if len(f) != 3 || f[2] == "" {
		return 0, 0, false
	}
	pid, err := strconv.Atoi(f[0])
	if err != nil || pid <= 0 {
		return 0, 0, false
	}
	start, err = strconv.ParseUint(f[1], 10, 64)
	if err != nil {
		return 0, 0, false
	}
	return pid, start, true
}

// RemoveStale removes the commands' temporary directories left in root
// (empty: [os.TempDir]; use the [Config.TempRoot] commands were given) by
// weft processes that are gone: a process that is killed has no chance to
// remove them. It returns how many it removed.
//
// A directory is removed only if its name is one [Cmd] makes
// (weft-cmd-PID-START-…), it is a directory (not a symbolic link) owned
// by this process's user, and process PID does not exist or started at
// another time than START (its pid was reused), as seen in this process's
// PID namespace. So directories of live weft processes, of other users,
// and names from older weft versions are left alone. On systems other
// than Linux it removes nothing. It also removes, with whatever they
// still hold, the cgroups such processes left beneath this process's
// (weft-PID-START for a [Sessions]' groups, a command's named as its
// temporary directory). Errors from listing root and from
// removals are joined; the other directories are still handled. Safe for
// concurrent use, also by several processes.
func RemoveStale(root string) (int, error) {
	if root == "" {
		root = os.TempDir()
	}
	ents, err := os.ReadDir(root)
	if err != nil {
		return 0, fmt.Errorf("sandbox: %w", err)
	}
	var errs []error
	n := 0
	for _, e := range ents {
		pid, start, ok := parseTempName(e.Name())
		if !ok || !e.IsDir() || ownerAlive(pid, start) {
			continue
		}
		path := filepath.Join(root, e.Name())
		if fi, err := os.Lstat(path); err != nil || !fi.IsDir() || !ownedByMe(fi) {
			continue
		}
		if err := removeAll(path); err != nil {
			errs = append(errs, err)
			continue
		}
		n++
	}
	errs = append(errs, removeStaleCgroups())
	return n, errors.Join(errs...)
}
