package env

import (
	"os"
	"strconv"
	"strings"
	"syscall"
)

// fdPath returns the host path of the open file f as the kernel names
// it (readlink of /proc/self/fd/N; for a file deleted since it was
// opened, where it was), or false when it cannot tell (no /proc).
func fdPath(f *os.File) (string, bool) {
	rc, err := f.SyscallConn()
	if err != nil {
		return "", false
	}
	var p string
	var lerr error
	if err := rc.Control(func(fd uintptr) {
		p, lerr = os.Readlink("/proc/self/fd/" + strconv.FormatUint(uint64(fd), 10))
	}); err != nil || lerr != nil {
		return "", false
	}
	if !strings.HasPrefix(p, "/") {
		return "", false
	}
	// A file unlinked since it was opened (replaced by a rename, say) is
	// named where it was, with this suffix; a file whose name merely
	// ends so still has links.
	if base, ok := strings.CutSuffix(p, " (deleted)"); ok {
		fi, err := f.Stat()
		st, _ := fi.Sys().(*syscall.Stat_t)
		if err == nil && st != nil && st.Nlink == 0 {
			return base, true
		}
	}
	return p, true
}
