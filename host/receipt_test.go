package host_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"weft.dev/weft/api"
	"weft.dev/weft/store"
	"weft.dev/weft/store/memory"
	"weft.dev/weft/store/record"
	"weft.dev/weft/store/storetest"
)

// racingStore is a store on which another writer stores a receipt
// between a host's lookup of the key and its append: Receipt reports the
// keys in hidden as absent once, as it would before the other writer
// committed.
type racingStore struct {
	store.Store
	mu     sync.Mutex
	hidden map[string]bool
}

func (r *racingStore) hide(key string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.hidden[key] = true
}

func (r *racingStore) Receipt(ctx context.Context, key, method string) (record.Receipt, error) {
	r.mu.Lock()
	hidden := r.hidden[key]
	delete(r.hidden, key)
	r.mu.Unlock()
	if hidden {
		return record.Receipt{}, store.ErrNotFound
	}
	return r.Store.Receipt(ctx, key, method)
}

// A duplicate idempotency key found by the store (store.ErrReceiptExists:
// the key was stored by another writer after the host looked it up)
// refuses that one append, not the session: the request is answered as
// the retry it is (a replay of the stored result, or an idempotency
// conflict for other params), never -32603, and the session goes on
// taking runs without a recovery.
func TestReceiptExistsAtStoreIsOneRequestsError(t *testing.T) {
	ctx := context.Background()
	rs := &racingStore{Store: memory.New(), hidden: map[string]bool{}}
	h := newFaultHost(t, &storetest.Faulty{Store: rs})
	s, err := h.CreateSession(ctx, api.CreateSessionParams{})
	if err != nil {
		t.Fatal(err)
	}
	p := api.StartRunParams{SessionID: s.ID, Input: input("one"), IdempotencyKey: "k"}
	first := start(t, h, p)
	wait(t, h, first.ID)
	before, err := h.GetSession(ctx, api.SessionGetParams{SessionID: s.ID})
	if err != nil {
		t.Fatal(err)
	}

	rs.hide("k")
	again, err := h.StartRun(ctx, p)
	if err != nil || !again.Replayed || again.ID != first.ID {
		t.Fatalf("run/start whose key the store already holds: %+v, %v; want a replay of %s", again, err, first.ID)
	}
	rs.hide("k")
	other := p
	other.Input = input("other")
	_, err = h.StartRun(ctx, other)
	var ae *api.Error
	if !errors.Is(err, api.ErrIdempotencyConflict) || !errors.As(err, &ae) || ae.Code != api.CodeIdempotencyConflict {
		t.Fatalf("run/start with other params whose key the store already holds: %v; want an idempotency conflict", err)
	}
	// Nothing was written, and the session takes the next run at once.
	after, err := h.GetSession(ctx, api.SessionGetParams{SessionID: s.ID})
	if err != nil || after.LastSeq != before.LastSeq {
		t.Fatalf("session after the refused appends: %+v, %v; want last seq %d", after, err, before.LastSeq)
	}
	next, err := h.StartRun(ctx, api.StartRunParams{SessionID: s.ID, Input: input("two")})
	if err != nil {
		t.Fatalf("run/start after a refused append: %v; want it admitted (no recovery)", err)
	}
	if got := wait(t, h, next.ID); got.Status != record.RunCompleted {
		t.Fatalf("next run: %s", got.Status)
	}
}
