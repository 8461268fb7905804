// Package mountinfo reads the fields of /proc/self/mountinfo
// (proc_pid_mountinfo(5)), which the kernel writes with octal escapes.
package mountinfo

import (
	"strconv"
	"strings"
)

// Unescape undoes a mountinfo field's octal escapes: the kernel writes a
// space, tab, newline and backslash in a path as \040, \011, \012 and
// \134. A backslash not followed by three octal digits stays as it is.
func Unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
