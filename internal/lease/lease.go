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
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"

	"weft.dev/weft/store"
)

// ErrHeld reports a session owned by another live process. It is
// [store.ErrLeaseHeld], so that callers need not tell a kernel lock from a
// lease row.
var ErrHeld = store.ErrLeaseHeld

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
			return nil, &store.LeaseHeldError{SessionID: name, Holder: "another weft process on this machine (lock " + path + ")"}
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

// Dir is a [store.Leases] of flock files in a directory: a session's lease
// is Acquire(Path, sessionID). Its leases have epoch 0 (unfenced: the
// kernel, not the store, keeps a second writer away, on this machine
// only) and are never lost while their process lives.
type Dir struct {
	// Path is the directory, created 0700 on first use.
	Path string
}

// File returns the path of session sessionID's lock file, for a purge
// to remove it (while holding it).
func (d Dir) File(sessionID string) string { return filepath.Join(d.Path, sessionID+".lock") }

// Acquire implements [store.Leases]. It does not block: a session another
// process holds fails with a [*store.LeaseHeldError] naming the lock file.
func (d Dir) Acquire(_ context.Context, sessionID string) (store.Lease, error) {
	l, err := Acquire(d.Path, sessionID)
	if err != nil {
		return nil, err
	}
	return &fileLease{l: l}, nil
}

// fileLease is a session's flock as a [store.Lease].
type fileLease struct {
	l    *Lease
	once sync.Once
	err  error
}

func (f *fileLease) Epoch() int64 { return 0 }

// Lost returns nil: the kernel keeps the lock while the process lives.
func (f *fileLease) Lost() <-chan struct{} { return nil }

func (f *fileLease) Release(context.Context) error {
	f.once.Do(func() { f.err = f.l.Release() })
	return f.err
}
