// Package idem is the receipt side of weft's idempotency: what a receipt
// stores, and the claim a mutation holds on its key while it runs, so that
// the receipt can be written in the mutation's own transaction.
package idem

import (
	"encoding/json"
	"sync/atomic"
	"time"

	"weft.dev/weft/api"
	"weft.dev/weft/store/record"
)

// Ref is what a receipt stores: the identity of what the first request
// made (a run, a session, a process, a steer), or for mutations without
// such an object their result. A replay returns the object's current state.
type Ref struct {
	ID     string            `json:"id,omitempty"`
	Steer  *api.SteerReceipt `json:"steer,omitempty"`
	Result json.RawMessage   `json:"result,omitempty"`
}

// Claim is one request's hold on its idempotency key while its mutation
// runs. A nil *Claim (no key) stores nothing. The request that holds a
// claim is the only one with its key (the host serialises them); the
// goroutine that commits the mutation may be another (a run's terminal
// event carries the receipt of the cancel that ended it), so Stored and
// IsStored are safe for concurrent use.
type Claim struct {
	key, method, fp string
	stored          atomic.Bool
}

// NewClaim returns the claim of key for method with params fingerprint fp,
// or nil when key is empty.
func NewClaim(key, method, fp string) *Claim {
	if key == "" {
		return nil
	}
	return &Claim{key: key, method: method, fp: fp}
}

// Key returns the idempotency key, or "" for a nil claim.
func (c *Claim) Key() string {
	if c == nil {
		return ""
	}
	return c.key
}

// Receipts returns the receipt to store in the mutation's transaction,
// naming ref, or none for a nil claim. The caller calls [Claim.Stored]
// once the transaction commits.
func (c *Claim) Receipts(sessionID string, ref Ref) []record.Receipt {
	if c == nil {
		return nil
	}
	return []record.Receipt{c.Receipt(sessionID, ref)}
}

// Receipt returns the receipt naming ref.
func (c *Claim) Receipt(sessionID string, ref Ref) record.Receipt {
	b, _ := json.Marshal(ref)
	return record.Receipt{Key: c.key, Method: c.method, Fingerprint: c.fp, Result: b, SessionID: sessionID, CreatedAt: time.Now().UTC()}
}

// Stored records that the receipt was committed with the mutation.
func (c *Claim) Stored() {
	if c != nil {
		c.stored.Store(true)
	}
}

// IsStored reports whether the receipt was committed with the mutation;
// if not, the host stores it after the mutation succeeds.
func (c *Claim) IsStored() bool { return c == nil || c.stored.Load() }
