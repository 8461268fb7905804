package sqlite

import (
	"context"
	"fmt"
	"sync"

	"weft.dev/weft/internal/lease"
	"weft.dev/weft/store"
)

var _ store.LeaseProvider = (*Store)(nil)

// LockDir returns the directory of the store's leases: the file's path
// with ".locks" appended.
func (s *Store) LockDir() string { return s.path + ".locks" }

// HostLeases implements [store.LeaseProvider] with flock(2) files in
// [Store.LockDir]: first the store-wide host lock, exclusive for the
// store's one serving host (which may reconcile whatever a crash left,
// processes included) or shared with other one-shot hosts (p.Shared),
// then one lock per session, taken by the session's owner. The kernel
// drops them when their process dies, however it dies. The leases are
// not fenced (epoch 0): they keep other processes of this machine away,
// which is every process that can open the file.
//
// It does not block: while another process serves the store (or, for a
// serving host, while one-shot hosts use it) it fails at once with an
// error wrapping lease.ErrHostHeld that names the store and the serving
// host's pid.
func (s *Store) HostLeases(_ context.Context, p store.HostLeaseParams) (store.HostLeases, error) {
	dir := s.LockDir()
	var (
		host *lease.Lease
		err  error
	)
	if p.Shared {
		host, err = lease.AcquireHostShared(dir)
	} else {
		host, err = lease.AcquireHost(dir, p.Name)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %s", err, s.path)
	}
	return &fileLeases{Dir: lease.Dir{Path: dir}, host: host}, nil
}

// fileLeases are a host's flocks in a lock directory.
type fileLeases struct {
	lease.Dir
	host *lease.Lease
	once sync.Once
}

func (f *fileLeases) Fenced() bool { return false }

func (f *fileLeases) Close() error {
	var err error
	f.once.Do(func() { err = f.host.Release() })
	return err
}
