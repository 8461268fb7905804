package sim

import (
	"context"
	"errors"
	"io/fs"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"weft.dev/weft/store"
	"weft.dev/weft/store/record"
)

// The errors the faulty store returns, as a real store's would look.
var (
	errDiskFull = &fs.PathError{Op: "write", Path: "sim.db-wal", Err: syscall.ENOSPC}
	errIO       = &fs.PathError{Op: "write", Path: "sim.db-wal", Err: syscall.EIO}
	errLost     = errors.New("sim: the connection dropped after the commit")
	errCrashed  = errors.New("sim: the host crashed; nothing more commits")
)

// phase says what kind of step is running. Faults that strike at the
// n-th append (a crash) or hold an append (a slow commit) only strike in
// phaseChain, where one chain of causes runs (a command, a model chunk, a
// tool's end): there the order of appends is fixed by the seed. While fake
// time advances several sessions' timers may fire at the same instant, and
// while a host closes its sessions close in parallel, so the global order
// of appends is not fixed there.
type phase int

const (
	phaseChain phase = iota
	phaseClock
	phaseRestart
)

// faultStore is the simulation's store: the underlying store (the disk,
// which survives crashes) behind faults the driver sets. Reads always
// pass. Safe for concurrent use.
type faultStore struct {
	store.Store

	mu    sync.Mutex
	phase phase
	// full refuses every write, as a full disk does.
	full bool
	// refuse and lose count a session's next appends that fail: refused
	// (nothing commits) or lost (they commit, the writer hears an error).
	refuse, lose map[string]int
	// hold marks sessions whose next append (in phaseChain) waits in held
	// until the driver releases it.
	hold map[string]bool
	held []*heldAppend
	// crashIn counts the appends (in phaseChain) until the crash; 0 is
	// not armed. crashCommits says whether the append that crashes
	// commits first.
	crashIn      int
	crashCommits bool
	// dead is set by the crash: from then on no write commits, until the
	// next host starts (revive).
	dead bool
	// faulted is when each session's last write failed; a session
	// recovers within its backoff after that.
	faulted map[string]time.Time
	// appends counts the appends that committed.
	appends int
}

// heldAppend is an append waiting for the driver's verdict.
type heldAppend struct {
	session string
	verdict chan heldVerdict
}

// heldVerdict is what becomes of a held append.
type heldVerdict int

const (
	commitHeld heldVerdict = iota // it commits and its writer hears so
	refuseHeld                    // it fails, nothing committed
	crashHeld                     // the host crashes before it commits
	crashAfter                    // it commits and the host crashes before the answer
)

func newFaultStore(disk store.Store) *faultStore {
	return &faultStore{Store: disk, refuse: map[string]int{}, lose: map[string]int{}, hold: map[string]bool{},
		faulted: map[string]time.Time{}}
}

func (f *faultStore) setPhase(p phase) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.phase = p
}

// writeErr is the error every write gets now, if any. Called with mu held.
func (f *faultStore) writeErr() error {
	switch {
	case f.dead:
		return errCrashed
	case f.full:
		return errDiskFull
	}
	return nil
}

// failed records that session's write failed. Called with mu held.
func (f *faultStore) failed(session string) {
	if session != "" {
		f.faulted[session] = time.Now()
	}
}

// Append applies the faults, in this order: a crashed or full store
// refuses; the session's refused, then lost appends; the crash counter;
// the session's hold.
func (f *faultStore) Append(ctx context.Context, b store.Batch) error {
	f.mu.Lock()
	if err := f.writeErr(); err != nil {
		f.failed(b.SessionID)
		f.mu.Unlock()
		return err
	}
	if f.refuse[b.SessionID] > 0 {
		f.refuse[b.SessionID]--
		f.failed(b.SessionID)
		f.mu.Unlock()
		return errIO
	}
	lose := false
	if f.lose[b.SessionID] > 0 {
		f.lose[b.SessionID]--
		lose = true
	}
	if f.phase == phaseChain && f.crashIn > 0 {
		f.crashIn--
		if f.crashIn == 0 {
			f.dead = true
			commit := f.crashCommits
			f.mu.Unlock()
			if commit {
				f.commit(ctx, b)
			}
			return errCrashed
		}
	}
	if f.phase == phaseChain && f.hold[b.SessionID] {
		delete(f.hold, b.SessionID)
		h := &heldAppend{session: b.SessionID, verdict: make(chan heldVerdict, 1)}
		f.held = append(f.held, h)
		f.mu.Unlock()
		var v heldVerdict
		select {
		case v = <-h.verdict:
		case <-ctx.Done():
			return ctx.Err()
		}
		switch v {
		case refuseHeld, crashHeld:
			f.mu.Lock()
			f.failed(b.SessionID)
			f.mu.Unlock()
			if v == crashHeld {
				return errCrashed
			}
			return errIO
		case crashAfter:
			f.commit(ctx, b)
			return errCrashed
		}
		f.mu.Lock()
	}
	f.mu.Unlock()
	if err := f.commit(ctx, b); err != nil {
		return err
	}
	if lose {
		f.mu.Lock()
		f.failed(b.SessionID)
		f.mu.Unlock()
		return errLost
	}
	return nil
}

// commit appends b to the disk.
func (f *faultStore) commit(ctx context.Context, b store.Batch) error {
	err := f.Store.Append(ctx, b)
	if err == nil {
		f.mu.Lock()
		f.appends++
		f.mu.Unlock()
	}
	return err
}

// heldSessions returns the sessions with an append held, in the order
// they were held.
func (f *faultStore) heldSessions() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, h := range f.held {
		out = append(out, h.session)
	}
	return out
}

// holding reports whether session has an append held or its next one
// will be.
func (f *faultStore) holding(session string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.hold[session] || slices.ContainsFunc(f.held, func(h *heldAppend) bool { return h.session == session })
}

// release ends session's held append with v.
func (f *faultStore) release(session string, v heldVerdict) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, h := range f.held {
		if h.session == session {
			f.held = slices.Delete(f.held, i, i+1)
			h.verdict <- v
			return true
		}
	}
	return false
}

// crash kills the store now: held appends end as pick says, and no write
// commits until revive.
func (f *faultStore) crash(pick func(session string) heldVerdict) {
	f.mu.Lock()
	f.dead = true
	held := f.held
	f.held = nil
	f.mu.Unlock()
	for _, h := range held {
		h.verdict <- pick(h.session)
	}
}

// crashed reports whether the store crashed.
func (f *faultStore) crashed() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.dead
}

// revive is the start of a new host on the same disk: writes commit
// again; the faults the crash cut short (its counter, the holds not yet
// taken, the sessions' refused and lost appends) are forgotten. A full
// disk stays full.
func (f *faultStore) revive() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.dead = false
	f.crashIn = 0
	clear(f.hold)
	clear(f.refuse)
	clear(f.lose)
}

// recovering reports whether session's writes failed lately enough that
// its owner may still be retrying them (backoff is the longest wait
// between its attempts), or the disk is full.
func (f *faultStore) recovering(session string, backoff time.Duration) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.full {
		return true
	}
	t, ok := f.faulted[session]
	return ok && time.Since(t) <= backoff
}

// describe says which faults are set, for the trace.
func (f *faultStore) describe() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var s []string
	if f.full {
		s = append(s, "disk full")
	}
	if f.crashIn > 0 {
		s = append(s, "crash armed")
	}
	if len(f.held) > 0 {
		s = append(s, "commits held")
	}
	return strings.Join(s, ", ")
}

// PutReceipt fails while the store is crashed or full.
func (f *faultStore) PutReceipt(ctx context.Context, r record.Receipt) (record.Receipt, error) {
	f.mu.Lock()
	err := f.writeErr()
	f.mu.Unlock()
	if err != nil {
		return record.Receipt{}, err
	}
	return f.Store.PutReceipt(ctx, r)
}

// PruneReceipts fails while the store is crashed or full.
func (f *faultStore) PruneReceipts(ctx context.Context, before time.Time) (int, error) {
	f.mu.Lock()
	err := f.writeErr()
	f.mu.Unlock()
	if err != nil {
		return 0, err
	}
	return f.Store.PruneReceipts(ctx, before)
}

// PutSnapshot fails while the store is crashed or full.
func (f *faultStore) PutSnapshot(ctx context.Context, s record.Snapshot) error {
	f.mu.Lock()
	err := f.writeErr()
	f.mu.Unlock()
	if err != nil {
		return err
	}
	return f.Store.PutSnapshot(ctx, s)
}

// AppendProcess fails while the store is crashed or full.
func (f *faultStore) AppendProcess(ctx context.Context, b store.ProcessBatch) error {
	f.mu.Lock()
	err := f.writeErr()
	f.mu.Unlock()
	if err != nil {
		return err
	}
	return f.Store.AppendProcess(ctx, b)
}
