//go:build !unix

package rpc

// openFileLimit returns 0: the platform has no open file limit to
// derive a connection limit from.
func openFileLimit() uint64 { return 0 }
