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

	mu  sync.Mutex
	err error
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

// Append fails while a fault is set.
func (f *Faulty) Append(ctx context.Context, b store.Batch) error {
	if err := f.fault(); err != nil {
		return err
	}
	return f.Store.Append(ctx, b)
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
