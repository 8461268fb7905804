// Package lease makes one process the owner of a session: an exclusive,
// non-blocking flock on a file per session. The kernel releases it when the
// owner dies, however it dies, so a lease that can be taken means no live
// process is writing the session and its active runs were left by a crash.
//
// A store also has a host lease ([AcquireHost], [AcquireHostShared]): held
// exclusively by the one process that serves the store, before it recovers
// anything, and shared by one-shot in-process runs.
package lease

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// ErrHeld reports a session owned by another live process.
var ErrHeld = errors.New("session is in use by another weft process")

// Lease is a held lock. Release it with Release.
type Lease struct {
	f *os.File
}

// Acquire takes the lease of name in dir (created 0700 if missing) without
// blocking. It returns ErrHeld, wrapped with the path, when another process
// holds it.
func Acquire(dir, name string) (*Lease, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("lease directory %s: %w", dir, err)
	}
	path := filepath.Join(dir, name+".lock")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lease %s: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w (lock %s)", ErrHeld, path)
		}
		return nil, fmt.Errorf("lease %s: %w", path, err)
	}
	return &Lease{f: f}, nil
}

// Release gives the lease up. It is safe to call on nil and more than once.
func (l *Lease) Release() error {
	if l == nil || l.f == nil {
		return nil
	}
	err := l.f.Close() // closing the descriptor drops the flock
	l.f = nil
	return err
}
