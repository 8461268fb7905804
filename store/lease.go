package store

import (
	"context"
	"errors"
	"fmt"
)

// Lease errors that callers branch on with errors.Is.
var (
	// ErrFenced reports an append whose [Batch.Epoch] is not the epoch of
	// the session's current lease: its writer lost the lease (it expired
	// and another host took the session over, or it was released), so it
	// is no longer the session's owner. Nothing of the batch is written,
	// and no later append with that epoch will ever be: the owner must
	// stop, drop the session and never retry the write.
	ErrFenced = errors.New("lease lost: the session has another owner")
	// ErrLeaseHeld reports a lease that another live holder has. The
	// error that wraps it is a [*LeaseHeldError] naming the holder.
	ErrLeaseHeld = errors.New("session is leased by another holder")
)

// Leases grants session leases: the right to be a session's one writer,
// held by one holder (a host) at a time. A store that several hosts share
// needs them, so that two hosts never own one session; the fencing epoch
// of each lease makes a host that lost its lease unable to write.
//
// Acquire must be safe for concurrent use. It does not block on another
// holder: when a live holder has the session's lease it fails at once
// with a [*LeaseHeldError] (errors.Is [ErrLeaseHeld]).
type Leases interface {
	// Acquire takes the lease of session id.
	Acquire(ctx context.Context, sessionID string) (Lease, error)
}

// Lease is one held session lease. Its methods are safe for concurrent
// use.
type Lease interface {
	// Epoch is the lease's fencing token: every append of its holder
	// carries it ([Batch.Epoch]), and a store that checks epochs refuses
	// the append ([ErrFenced]) once a later lease of the session exists.
	// Each take-over of a session's lease has a greater epoch than every
	// lease of it before. Zero means unfenced: the lease keeps other
	// holders away by other means (a lock the kernel drops with its
	// process) and appends are not checked.
	Epoch() int64
	// Lost returns a channel that is closed when the lease is lost: it
	// could not be renewed before it expired, or it moved to another
	// holder. The holder must stop writing then (its appends would be
	// refused with ErrFenced anyway) and drop the session. It is never
	// nil; it is not closed by Release.
	Lost() <-chan struct{}
	// Release gives the lease up, so that another holder may take it at
	// once rather than after it expires. It is safe to call more than
	// once; a release that fails leaves the lease to expire.
	Release(ctx context.Context) error
}

// LeaseHeldError is the error of an Acquire that found the lease held by
// another live holder.
type LeaseHeldError struct {
	SessionID string
	// Holder names the holder, as it named itself (a host's name, or the
	// lock file of a process on this machine).
	Holder string
}

func (e *LeaseHeldError) Error() string {
	return fmt.Sprintf("session %s is held by %s", e.SessionID, e.Holder)
}

// Is reports ErrLeaseHeld.
func (e *LeaseHeldError) Is(target error) bool { return target == ErrLeaseHeld }
