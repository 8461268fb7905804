package session

import (
	"sync"

	"weft.dev/weft/host/internal/idem"
)

// heldClaims are the idempotency claims of the run/cancel requests that
// came while a run was going: their receipts are stored in the batch that
// holds the run's terminal event, whoever writes it (the run's goroutine
// or a cancel of the parked run). The zero value is empty and ready.
//
// Its methods are safe for concurrent use: the session adds under its
// lock while the run's goroutine takes without it. Its lock is a leaf.
type heldClaims struct {
	mu     sync.Mutex // leaf
	claims []*idem.Claim
}

// add holds rc until the run's terminal event is written.
func (h *heldClaims) add(rc *idem.Claim) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.claims = append(h.claims, rc)
}

// take removes and returns the claims held now, oldest first.
func (h *heldClaims) take() []*idem.Claim {
	h.mu.Lock()
	defer h.mu.Unlock()
	c := h.claims
	h.claims = nil
	return c
}

// putBack returns claims that take gave and that were not stored (the
// write failed), ahead of any added since, so a later write stores them.
func (h *heldClaims) putBack(claims []*idem.Claim) {
	if len(claims) == 0 {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.claims = append(claims, h.claims...)
}
