package host

import (
	"time"

	"weft.dev/weft/host/internal/session"
	"weft.dev/weft/host/internal/stats"
)

// Metrics is what a host is doing and has done since it started, for an
// operator's monitoring (`weft serve`'s /metrics).
type Metrics struct {
	// SessionsLoaded counts the sessions loaded (owned) by this host.
	SessionsLoaded int
	// RunsRunning counts the runs executing now, RunsWaiting those parked
	// for answers, and RunsQueued the runs queued behind them (the
	// queue depth), over the loaded sessions.
	RunsRunning, RunsWaiting, RunsQueued int
	// Subscribers counts the live subscriptions to the loaded sessions'
	// logs.
	Subscribers int
	// RunsStarted counts run.started events this host committed;
	// RunsEnded counts the runs it ended, by terminal status
	// (completed, failed, cancelled, interrupted).
	RunsStarted uint64
	RunsEnded   map[string]uint64
	// LeaseTakeovers counts the sessions this host took over after
	// another holder's lease on them expired (a dead host's, recovered
	// at start); LeasesLost the sessions it dropped because their lease
	// moved to another holder or could not be renewed.
	LeaseTakeovers, LeasesLost uint64
	// AppendLatency is the latency of the store's append transactions.
	AppendLatency Histogram
}

// Histogram is a latency distribution in buckets.
type Histogram struct {
	// Bounds are the buckets' upper bounds, increasing; Counts has one
	// more element than Bounds (the last counts what is above every
	// bound), and each counts only its own range.
	Bounds []time.Duration
	Counts []uint64
	// Sum is the total of every latency observed.
	Sum time.Duration
}

// Metrics returns the host's metrics now. It is safe for concurrent use
// and takes no session's lock while it holds the registry's.
func (h *Host) Metrics() Metrics {
	h.mu.Lock()
	loaded := make([]*session.Session, 0, len(h.sessions))
	for _, e := range h.sessions {
		select {
		case <-e.ready:
			if e.s != nil {
				loaded = append(loaded, e.s)
			}
		default:
		}
	}
	h.mu.Unlock()
	m := Metrics{SessionsLoaded: len(loaded), RunsEnded: map[string]uint64{}}
	for _, s := range loaded {
		l := s.Holding()
		m.RunsRunning += l.Running
		m.RunsWaiting += l.Waiting
		m.RunsQueued += l.Queued
		m.Subscribers += l.Subscribers
	}
	snap := h.stats.Snapshot()
	m.RunsStarted = snap.RunsStarted
	for i, st := range stats.Statuses {
		m.RunsEnded[st] = snap.RunsEnded[i]
	}
	m.LeaseTakeovers, m.LeasesLost = snap.Takeovers, snap.LeasesLost
	m.AppendLatency = Histogram{Bounds: snap.AppendBounds, Counts: snap.AppendCounts, Sum: snap.AppendSum}
	return m
}
