package host

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"

	"weft.dev/weft/api"
	"weft.dev/weft/host/internal/idem"
	"weft.dev/weft/store"
)

// mutation performs one mutating method. rc is the claim on the request's
// idempotency key (nil without a key): a mutation that appends to a log
// stores rc's receipt in that append's transaction (and marks it stored);
// otherwise the wrapper stores it once the mutation succeeded. ref names
// what the mutation made, for that receipt.
type mutation[P, R any] func(ctx context.Context, p P, rc *idem.Claim) (res *R, ref idem.Ref, err error)

// replayer answers an exact retry from the receipt's ref.
type replayer[P, R any] func(ctx context.Context, p P, ref idem.Ref) (*R, error)

// mutate serves one call of the mutating method m: p's own checks
// (p.Validate), then weft's idempotency. Requests with the same key are
// serialised; an exact retry (same method, same params) is answered by
// replay; the same key with other params is api.ErrIdempotencyConflict;
// the first request's receipt is stored with its mutation (a mutation the
// store refuses because another writer stored the key meanwhile,
// store.ErrReceiptExists, is answered as a retry of that writer's). The
// receipt is keyed by m.Name. P has a string field IdempotencyKey (the
// table's test holds every mutating method to it), which does not count
// in the params' fingerprint. Every mutating method of the Host is this
// call and nothing else, so none can miss the wrapper.
func mutate[P api.Params, R any](ctx context.Context, h *Host, m api.Method[P, R], p P, do mutation[P, R], replay replayer[P, R]) (*R, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	v := reflect.ValueOf(&p).Elem()
	keyField := v.FieldByName("IdempotencyKey")
	if !m.Mutating || !keyField.IsValid() || keyField.Kind() != reflect.String {
		panic(fmt.Sprintf("host: %s is not a mutating method with an IdempotencyKey", m.Name))
	}
	key := keyField.String()
	keyField.SetString("")
	fp := fingerprint(p)
	rc := idem.NewClaim(key, m.Name, fp)
	if rc == nil {
		res, _, err := do(ctx, p, nil)
		return res, err
	}
	l := h.keyLock(key)
	l.Lock()
	defer l.Unlock()
	ref, found, err := h.lookupReceipt(ctx, key, m.Name, fp)
	if err != nil {
		return nil, err
	}
	if found {
		return replay(ctx, p, ref)
	}
	res, ref, err := do(ctx, p, rc)
	if errors.Is(err, store.ErrReceiptExists) {
		// Another writer (a host that shares the store) committed the
		// key after the lookup, and the store refused this mutation
		// whole: it is a retry of that one.
		ref, found, lerr := h.lookupReceipt(ctx, key, m.Name, fp)
		switch {
		case lerr != nil:
			return nil, lerr
		case found:
			return replay(ctx, p, ref)
		}
		return nil, apiError(err)
	}
	if err != nil || rc.IsStored() {
		return res, err
	}
	if _, perr := h.cfg.Store.PutReceipt(ctx, rc.Receipt(sessionOf(v), ref)); perr != nil {
		// The mutation happened; only a retry's replay is lost.
		h.cfg.Logger.Warn("store an idempotency receipt", "method", m.Name, "err", perr)
	}
	return res, nil
}

// sessionOf returns the SessionID field of params, if any.
func sessionOf(v reflect.Value) string {
	f := v.FieldByName("SessionID")
	if f.IsValid() && f.Kind() == reflect.String {
		return f.String()
	}
	return ""
}

// fingerprint digests params as canonical JSON; the wrapper zeroes the
// idempotency key first so that it does not count.
func fingerprint(params any) string {
	b, _ := json.Marshal(params)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// lookupReceipt looks up (key, method). It returns the stored ref when
// the params match, an IdempotencyConflict when they do not, and
// found=false when there is no receipt.
func (h *Host) lookupReceipt(ctx context.Context, key, method, fp string) (ref idem.Ref, found bool, err error) {
	r, err := h.cfg.Store.Receipt(ctx, key, method)
	if errors.Is(err, store.ErrNotFound) {
		return ref, false, nil
	}
	if err != nil {
		return ref, false, apiError(err)
	}
	if r.Fingerprint != fp {
		return ref, false, api.Errorf(api.KindIdempotencyConflict, "idempotency key %q was used for %s with other params", key, method).
			With("idempotencyKey", key).With("method", method)
	}
	if err := json.Unmarshal(r.Result, &ref); err != nil {
		return ref, false, fmt.Errorf("receipt %q of %s: %w", key, method, err)
	}
	return ref, true, nil
}
