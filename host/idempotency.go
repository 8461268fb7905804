package host

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"time"

	"weft.dev/weft/store"
)

// fingerprint digests params as canonical JSON; the caller zeroes the
// idempotency key first so that it does not count.
func fingerprint(params any) string {
	b, _ := json.Marshal(params)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// receiptRef is what a receipt stores: the identity of what the first
// request made. A replay returns that object's current state.
type receiptRef struct {
	ID     string        `json:"id"`
	Steer  *SteerReceipt `json:"steer,omitempty"`
	Result any           `json:"result,omitempty"`
}

// replay looks up (key, method). It returns the stored reference when the
// params match, an IdempotencyConflict when they do not, and ok=false when
// there is no receipt. Call it with the key's lock held.
func (h *Host) replay(ctx context.Context, key, method, fp string) (ref receiptRef, ok bool, err error) {
	r, err := h.cfg.Store.Receipt(ctx, key, method)
	if errors.Is(err, store.ErrNotFound) {
		return ref, false, nil
	}
	if err != nil {
		return ref, false, err
	}
	if r.Fingerprint != fp {
		return ref, false, errf(ErrIdempotencyConflict, map[string]any{"idempotencyKey": key, "method": method},
			"idempotency key %q was used for %s with other params", key, method)
	}
	if err := json.Unmarshal(r.Result, &ref); err != nil {
		return ref, false, err
	}
	return ref, true, nil
}

// claim serialises the requests that carry key and looks up its receipt
// for method: ok reports a receipt with the same params (replay ref), a
// receipt with other params is an IdempotencyConflict. The caller defers
// release, which frees the key once the mutation and its receipt are
// stored. Without a key, claim does nothing.
func (h *Host) claim(ctx context.Context, key, method, fp string) (ref receiptRef, ok bool, release func(), err error) {
	if key == "" {
		return ref, false, func() {}, nil
	}
	l := h.keyLock(key)
	l.Lock()
	ref, ok, err = h.replay(ctx, key, method, fp)
	if err != nil {
		l.Unlock()
		return ref, false, func() {}, err
	}
	return ref, ok, l.Unlock, nil
}

// receipts returns the receipt to store with a mutation, or none without a key.
func receipts(key, method, fp, sessionID string, ref receiptRef) []store.Receipt {
	if key == "" {
		return nil
	}
	b, _ := json.Marshal(ref)
	return []store.Receipt{{Key: key, Method: method, Fingerprint: fp, Result: b, SessionID: sessionID, CreatedAt: time.Now().UTC()}}
}
