// Package env holds a session's mounted environments and the one point
// through which every tool resolves a path: a [Binding] opens an [os.Root]
// per mount and refuses anything that would leave it.
package env

import (
	"weft.dev/weft/event"
)

// Binding is an immutable snapshot of a session's mounts at one binding
// version, with an open os.Root per mount. A tool call receives one Binding
// and sees it whole for the duration of the call. Safe for concurrent use.
type Binding struct {
	version int64
	mounts  []event.Mount
}

// Version returns the binding version.
func (b *Binding) Version() int64 { return b.version }

// Mounts returns a copy of the mounts.
func (b *Binding) Mounts() []event.Mount { return append([]event.Mount(nil), b.mounts...) }
