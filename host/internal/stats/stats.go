// Package stats counts what a host does for its operator's metrics: runs
// started and ended by status, lease takeovers and losses, and the
// latency of the store's append transactions. Counters are atomics, so
// counting costs no lock and no allocation on the hot path.
package stats

import (
	"slices"
	"sync/atomic"
	"time"

	"weft.dev/weft/event"
)

// appendBounds are the upper bounds of the append latency histogram's
// buckets; the last, implicit bucket is +Inf.
var appendBounds = [...]time.Duration{
	100 * time.Microsecond, 250 * time.Microsecond, 500 * time.Microsecond,
	time.Millisecond, 2500 * time.Microsecond, 5 * time.Millisecond,
	10 * time.Millisecond, 25 * time.Millisecond, 50 * time.Millisecond,
	100 * time.Millisecond, 250 * time.Millisecond, 500 * time.Millisecond,
	time.Second, 2500 * time.Millisecond, 5 * time.Second,
}

// Statuses are the terminal run statuses counted, in the order of
// [Snapshot.RunsEnded].
var Statuses = [...]string{"completed", "failed", "cancelled", "interrupted"}

// Stats is a host's counters. Its methods are safe for concurrent use; a
// nil *Stats counts nothing.
type Stats struct {
	runsStarted atomic.Uint64
	runsEnded   [len(Statuses)]atomic.Uint64
	takeovers   atomic.Uint64
	leasesLost  atomic.Uint64

	appendCounts [len(appendBounds) + 1]atomic.Uint64
	appendSum    atomic.Int64 // nanoseconds
}

// Observe counts the run starts and ends in a committed batch.
func (s *Stats) Observe(batch []event.Event) {
	if s == nil {
		return
	}
	for i := range batch {
		switch batch[i].Type {
		case event.RunStarted:
			s.runsStarted.Add(1)
		case event.RunCompleted:
			s.runsEnded[0].Add(1)
		case event.RunFailed:
			s.runsEnded[1].Add(1)
		case event.RunCancelled:
			s.runsEnded[2].Add(1)
		case event.RunInterrupted:
			s.runsEnded[3].Add(1)
		}
	}
}

// AppendTook records the latency of one append transaction.
func (s *Stats) AppendTook(d time.Duration) {
	if s == nil {
		return
	}
	i := 0
	for i < len(appendBounds) && d > appendBounds[i] {
		i++
	}
	s.appendCounts[i].Add(1)
	s.appendSum.Add(int64(d))
}

// Appends returns how many append transactions the host has made (failed
// ones too): a count that does not move says the host committed nothing
// meanwhile.
func (s *Stats) Appends() uint64 {
	if s == nil {
		return 0
	}
	var n uint64
	for i := range s.appendCounts {
		n += s.appendCounts[i].Load()
	}
	return n
}

// TookOver counts a session this host took over from another holder.
func (s *Stats) TookOver() {
	if s != nil {
		s.takeovers.Add(1)
	}
}

// LostLease counts a session lease this host lost to another holder.
func (s *Stats) LostLease() {
	if s != nil {
		s.leasesLost.Add(1)
	}
}

// Snapshot is the counters at one moment.
type Snapshot struct {
	RunsStarted uint64
	// RunsEnded counts the runs that ended, by Statuses.
	RunsEnded             [len(Statuses)]uint64
	Takeovers, LeasesLost uint64
	// AppendBounds are the buckets' upper bounds; AppendCounts has one
	// more bucket (+Inf), each counting only its own range.
	AppendBounds []time.Duration
	AppendCounts []uint64
	AppendSum    time.Duration
}

// Snapshot reads the counters (each atomically; together, nearly).
func (s *Stats) Snapshot() Snapshot {
	out := Snapshot{AppendBounds: slices.Clone(appendBounds[:]), AppendCounts: make([]uint64, len(appendBounds)+1)}
	if s == nil {
		return out
	}
	out.RunsStarted = s.runsStarted.Load()
	for i := range s.runsEnded {
		out.RunsEnded[i] = s.runsEnded[i].Load()
	}
	out.Takeovers, out.LeasesLost = s.takeovers.Load(), s.leasesLost.Load()
	for i := range s.appendCounts {
		out.AppendCounts[i] = s.appendCounts[i].Load()
	}
	out.AppendSum = time.Duration(s.appendSum.Load())
	return out
}
