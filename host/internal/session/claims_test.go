package session

import (
	"slices"
	"testing"

	"weft.dev/weft/host/internal/idem"
)

// Claims come out in the order they came, once; those put back after a
// failed write come out again ahead of the ones added meanwhile.
func TestHeldClaims(t *testing.T) {
	var h heldClaims
	a, b, c := &idem.Claim{}, &idem.Claim{}, &idem.Claim{}
	if got := h.take(); got != nil {
		t.Fatalf("take of none: %v", got)
	}
	h.add(a)
	h.add(b)
	got := h.take()
	if !slices.Equal(got, []*idem.Claim{a, b}) {
		t.Fatalf("take: %p, want a, b", got)
	}
	if again := h.take(); again != nil {
		t.Fatalf("taken twice: %p", again)
	}
	h.add(c)
	h.putBack(got)
	if got := h.take(); !slices.Equal(got, []*idem.Claim{a, b, c}) {
		t.Fatalf("after putBack: %p, want a, b, c", got)
	}
}
