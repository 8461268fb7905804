package storetest

import (
	"context"
	"sync"
	"time"

	"weft.dev/weft/store"
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
}

// FailAfterCommit makes the next n appends commit and then fail with
// err, as when the connection to a database drops after the server
// committed: the writer cannot tell whether its write is durable.
func (f *Faulty) FailAfterCommit(n int, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lies, f.lie = n, err
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
func (f *Faulty) PutReceipt(ctx context.Context, r store.Receipt) (store.Receipt, error) {
	if err := f.fault(); err != nil {
		return store.Receipt{}, err
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

// AppendProcess fails while a fault is set.
func (f *Faulty) AppendProcess(ctx context.Context, b store.ProcessBatch) error {
	if err := f.fault(); err != nil {
		return err
	}
	return f.Store.AppendProcess(ctx, b)
}
