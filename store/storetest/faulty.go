package storetest

import (
	"context"
	"slices"
	"sync"
	"time"

	"weft.dev/weft/event"
	"weft.dev/weft/store"
	"weft.dev/weft/store/record"
)

// Faulty is a store whose writes fail while a fault is set, as a real
// store's do when its disk fills or its device fails; reads keep working.
// It is for testing what the users of a store do when writes fail (the
// host's recovery), not for testing stores. Safe for concurrent use.
type Faulty struct {
	store.Store

	mu   sync.Mutex
	err  error
	lies int   // appends left that commit and then report lie
	lie  error // what they report

	procLies int   // process appends left that commit and then report procLie
	procLie  error // what they report

	refused map[string]*Refused // by process ID
}

// Refused is what the process appends a Faulty refused carried, for one
// process: enough for a test to know that a writer tried to store
// something (and so holds or has lost it) without reaching into it.
type Refused struct {
	// Batches counts the refused appends.
	Batches int
	// OutputEnd is the end of the furthest output range a refused batch
	// carried (the highest Offset+Size).
	OutputEnd int64
	// Types are the event types refused batches carried, each once, in
	// the order first seen.
	Types []event.Type
}

// RefusedProcess reports what the appends refused for process id carried.
func (f *Faulty) RefusedProcess(id string) Refused {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.refused[id]
	if r == nil {
		return Refused{}
	}
	out := *r
	out.Types = slices.Clone(r.Types)
	return out
}

// FailAfterCommit makes the next n appends commit and then fail with
// err, as when the connection to a database drops after the server
// committed: the writer cannot tell whether its write is durable.
func (f *Faulty) FailAfterCommit(n int, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lies, f.lie = n, err
}

// FailProcessAfterCommit makes the next n process appends
// (AppendProcess) commit and then fail with err, as FailAfterCommit does
// for session appends.
func (f *Faulty) FailProcessAfterCommit(n int, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.procLies, f.procLie = n, err
}

// Fail makes every write fail with err until Fail(nil).
func (f *Faulty) Fail(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.err = err
}

func (f *Faulty) fault() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.err
}

// Append fails while a fault is set, and after committing while
// FailAfterCommit says so.
func (f *Faulty) Append(ctx context.Context, b store.Batch) error {
	if err := f.fault(); err != nil {
		return err
	}
	if err := f.Store.Append(ctx, b); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.lies > 0 {
		f.lies--
		return f.lie
	}
	return nil
}

// PutReceipt fails while a fault is set.
func (f *Faulty) PutReceipt(ctx context.Context, r record.Receipt) (record.Receipt, error) {
	if err := f.fault(); err != nil {
		return record.Receipt{}, err
	}
	return f.Store.PutReceipt(ctx, r)
}

// PruneReceipts fails while a fault is set.
func (f *Faulty) PruneReceipts(ctx context.Context, before time.Time) (int, error) {
	if err := f.fault(); err != nil {
		return 0, err
	}
	return f.Store.PruneReceipts(ctx, before)
}

// AppendProcess fails while a fault is set, and notes what it refused
// (see [Faulty.RefusedProcess]); after committing, it fails while
// FailProcessAfterCommit says so.
func (f *Faulty) AppendProcess(ctx context.Context, b store.ProcessBatch) error {
	f.mu.Lock()
	err := f.err
	if err != nil {
		if f.refused == nil {
			f.refused = make(map[string]*Refused)
		}
		r := f.refused[b.ProcessID]
		if r == nil {
			r = &Refused{}
			f.refused[b.ProcessID] = r
		}
		r.Batches++
		for _, e := range b.Events {
			r.OutputEnd = max(r.OutputEnd, e.Offset+e.Size)
			if !slices.Contains(r.Types, e.Type) {
				r.Types = append(r.Types, e.Type)
			}
		}
	}
	f.mu.Unlock()
	if err != nil {
		return err
	}
	if err := f.Store.AppendProcess(ctx, b); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.procLies > 0 {
		f.procLies--
		return f.procLie
	}
	return nil
}
