//go:build !linux

package env

import "os"

// fdPath cannot tell the host path of an open file here; callers follow
// the path's links again and compare the files instead.
func fdPath(*os.File) (string, bool) { return "", false }
