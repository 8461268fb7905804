package journal_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"

	"weft.dev/weft/event"
	"weft.dev/weft/host/internal/journal"
	"weft.dev/weft/store"
	"weft.dev/weft/store/memory"
	"weft.dev/weft/store/record"
)

// refusingStore refuses, whole and unwritten, every batch that carries a
// receipt with key "bad", with refusal; hold makes the next append wait
// for release.
type refusingStore struct {
	store.Store
	refusal error
	mu      sync.Mutex
	gate    chan struct{}
	batches int // appends that reached the store
}

func (r *refusingStore) hold() chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.gate = make(chan struct{})
	return r.gate
}

func (r *refusingStore) Append(ctx context.Context, b store.Batch) error {
	r.mu.Lock()
	gate := r.gate
	r.gate = nil
	r.batches++
	r.mu.Unlock()
	if gate != nil {
		<-gate
	}
	for _, rc := range b.Receipts {
		if rc.Key == "bad" {
			return fmt.Errorf("append session %s: %w", b.SessionID, r.refusal)
		}
	}
	return r.Store.Append(ctx, b)
}

func retryEvent(t *testing.T, run string, attempt int) event.Event {
	t.Helper()
	e, err := event.New(run, event.ModelRetry, event.ModelRetryData{Attempt: attempt})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// A batch the store refuses on its own merits (a duplicate receipt, an
// invalid record, an event the projection cannot apply) fails only the
// appends in it: the others that shared its group commit are committed
// without it, in order and gap-free, and the journal goes on. Only
// failures that say the store or the log is wrong (I/O, a seq conflict:
// another writer) fail the journal.
func TestRefusedBatchFailsOnlyItsWaiters(t *testing.T) {
	for _, tc := range []struct {
		name    string
		refusal error // what the store says of the bad batch
		ghost   bool  // the bad append is an event of an unknown run instead
		sticky  bool
	}{
		{name: "receipt exists", refusal: store.ErrReceiptExists},
		{name: "invalid", refusal: store.ErrInvalid},
		{name: "projection refuses", ghost: true},
		{name: "seq conflict", refusal: store.ErrSeqConflict, sticky: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx := context.Background()
				rs := &refusingStore{Store: memory.New(), refusal: tc.refusal}
				j, err := journal.Create(ctx, journal.Config{Store: rs}, "ses_1", event.SessionCreatedData{})
				if err != nil {
					t.Fatal(err)
				}
				defer j.Close()
				if _, err := j.Append(ctx, runQueued(t, "run_1")); err != nil {
					t.Fatal(err)
				}
				// The writer commits a first append while the others queue
				// up behind it, so that they share the next transaction.
				gate := rs.hold()
				type outcome struct {
					evs []event.Event
					err error
				}
				results := make([]outcome, 4)
				var wg sync.WaitGroup
				appendAt := func(i int, receipts []record.Receipt, e event.Event) {
					wg.Go(func() {
						evs, err := j.AppendReceipts(ctx, receipts, e)
						results[i] = outcome{evs, err}
					})
				}
				appendAt(0, nil, retryEvent(t, "run_1", 0))
				synctest.Wait()
				appendAt(1, []record.Receipt{{Key: "good-1", Method: "m", SessionID: "ses_1"}}, retryEvent(t, "run_1", 1))
				synctest.Wait()
				if tc.ghost {
					appendAt(2, nil, retryEvent(t, "run_ghost", 2))
				} else {
					appendAt(2, []record.Receipt{{Key: "bad", Method: "m", SessionID: "ses_1"}}, retryEvent(t, "run_1", 2))
				}
				synctest.Wait()
				appendAt(3, []record.Receipt{{Key: "good-3", Method: "m", SessionID: "ses_1"}}, retryEvent(t, "run_1", 3))
				synctest.Wait()
				close(gate)
				wg.Wait()

				if tc.sticky {
					if results[1].err == nil || results[3].err == nil || j.Err() == nil {
						t.Fatalf("a seq conflict did not fail the journal: %+v, err %v", results, j.Err())
					}
					return
				}
				want := store.ErrReceiptExists
				if tc.refusal != nil {
					want = tc.refusal
				}
				if tc.ghost {
					want = store.ErrInvalid
				}
				if !errors.Is(results[2].err, want) {
					t.Fatalf("the refused append: %v; want %v", results[2].err, want)
				}
				for _, i := range []int{0, 1, 3} {
					if results[i].err != nil {
						t.Fatalf("append %d, which shared a transaction with the refused one: %v", i, results[i].err)
					}
				}
				if err := j.Err(); err != nil {
					t.Fatalf("the journal failed: %v", err)
				}
				select {
				case <-j.Failed():
					t.Fatal("the journal reports a failure")
				default:
				}
				if _, err := j.Append(ctx, retryEvent(t, "run_1", 4)); err != nil {
					t.Fatalf("append after the refusal: %v", err)
				}
				evs := readAll(t, rs.Store, "ses_1")
				var attempts []int
				for i, e := range evs {
					if e.Seq != int64(i+1) {
						t.Fatalf("event %d has seq %d", i, e.Seq)
					}
					var d event.ModelRetryData
					if e.Type == event.ModelRetry && e.Decode(&d) == nil {
						attempts = append(attempts, d.Attempt)
					}
				}
				if fmt.Sprint(attempts) != "[0 1 3 4]" {
					t.Fatalf("stored appends %v; want [0 1 3 4]", attempts)
				}
				if got := results[3].evs[0].Seq; got != evs[len(evs)-2].Seq {
					t.Fatalf("append 3 was told seq %d; it is stored at %d", got, evs[len(evs)-2].Seq)
				}
				if j.LastSeq() != int64(len(evs)) || j.Session().LastSeq != int64(len(evs)) {
					t.Fatalf("journal at %d (projection %d); the log ends at %d", j.LastSeq(), j.Session().LastSeq, len(evs))
				}
				for _, k := range []string{"good-1", "good-3"} {
					if _, err := rs.Receipt(ctx, k, "m"); err != nil {
						t.Fatalf("receipt %s: %v", k, err)
					}
				}
				if _, err := rs.Receipt(ctx, "bad", "m"); !errors.Is(err, store.ErrNotFound) {
					t.Fatalf("the refused receipt: %v", err)
				}
			})
		})
	}
}
