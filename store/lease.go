package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
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
	// refused with ErrFenced anyway) and drop the session. It is nil for
	// a lease that cannot be lost while its holder lives (a lock the
	// kernel holds for the process), so that a holder need not wait on
	// it; it is not closed by Release.
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

// LeaseProvider is an optional interface of a [Store] that more than one
// host (process) may open at once: the store supplies the leases that
// keep its hosts apart, so that every program that builds a host over
// it — the CLI or an embedder of package host — gets the same safety.
// The host finds it by type assertion, as database/sql finds a driver's
// optional interfaces, and takes the store's leases before it recovers
// anything. store/postgres provides session leases as rows with fencing
// epochs; store/sqlite the flocks of a directory beside its file (a
// store-wide host lock and one per session); an in-memory store, which
// no other process can open, provides none.
type LeaseProvider interface {
	// HostLeases takes the store for one host and returns its leases,
	// which the host holds until it closes them. It does not block: a
	// store that admits one serving host at a time fails at once while
	// another holds it (store/sqlite: an error wrapping
	// lease.ErrHostHeld that names the holder's pid).
	HostLeases(ctx context.Context, p HostLeaseParams) (HostLeases, error)
}

// OrphanFinder is implemented by a store whose leases are fenced (several
// live hosts share it): it finds the sessions whose processes a dead host
// left running. Nothing else would settle them, since a session is
// reconciled only by the next holder of its lease and a session with no
// queued run is loaded only when a client asks for it; so each host looks
// about once a lease TTL and loads what it finds (host.Host does).
type OrphanFinder interface {
	// OrphanedSessions returns up to limit sessions, not deleted, that
	// have a running process and whose lease no live holder has. A
	// live holder keeps the lease of every session whose processes it
	// runs, so these are the sessions of dead (or partitioned) hosts.
	// It is one indexed query, cheap when there are none.
	OrphanedSessions(ctx context.Context, limit int) ([]string, error)
}

// HostLeaseParams says who takes a store's leases and how.
type HostLeaseParams struct {
	// Name describes the host ("weft serve") to other hosts: in a
	// PostgreSQL store's leases table (`weft nodes`), in the lock file
	// of a SQLite store and in the errors of hosts refused for it. The
	// store makes it unique to the process (store/postgres prefixes
	// HOSTNAME/PID/RANDOM). Empty names it by the process alone.
	Name string
	// Shared takes the store beside other live hosts that share it too
	// (a one-shot `weft run`; see host.Config.Shared) rather than as its
	// serving host. Stores whose leases admit any number of hosts
	// (store/postgres) ignore it.
	Shared bool
	// Logger receives failed renewals and lost leases; nil means silent.
	Logger *slog.Logger
}

// HostLeases are one host's leases on a store: the session leases it
// takes, and whatever the store holds for the host itself (a store-wide
// lock), until Close. Its methods are safe for concurrent use.
type HostLeases interface {
	Leases
	// Fenced reports whether the leases carry fencing epochs
	// ([Lease.Epoch] > 0), checked by the store on every write: then
	// several live hosts share the store, and what a host left behind (an
	// interrupted run, a running process) is reconciled only by the next
	// holder of its session's lease, never by a host because it starts.
	// Without fencing (kernel locks of one machine), the one serving host
	// reconciles everything at start.
	Fenced() bool
	// Close stops renewing the leases and gives up the host's hold on
	// the store. Session leases still held are lost; release them first
	// (by closing the host's sessions) to hand them over at once. It is
	// safe to call more than once.
	Close() error
}
