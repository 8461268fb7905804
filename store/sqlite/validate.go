package sqlite

import (
	"encoding/json"
	"fmt"
	"time"

	"weft.dev/weft/store"
)

// validate checks what can be checked without the database: the rules are
// those of store/memory, which the conformance suite holds both to.
func validate(b store.Batch) error {
	if b.SessionID == "" {
		return fmt.Errorf("%w: batch without session ID", store.ErrInvalid)
	}
	if len(b.Events) == 0 {
		return fmt.Errorf("%w: session %s: batch without events", store.ErrInvalid, b.SessionID)
	}
	first := b.Events[0].Seq
	for i, e := range b.Events {
		if e.SessionID != b.SessionID {
			return fmt.Errorf("%w: session %s: event seq %d belongs to session %q", store.ErrInvalid, b.SessionID, e.Seq, e.SessionID)
		}
		if e.Type == "" {
			return fmt.Errorf("%w: session %s: event seq %d has no type", store.ErrInvalid, b.SessionID, e.Seq)
		}
		if want := first + int64(i); e.Seq != want {
			return fmt.Errorf("%w: session %s: expected seq %d, got %d", store.ErrSeqConflict, b.SessionID, want, e.Seq)
		}
		if !validTime(e.Time) {
			return fmt.Errorf("%w: session %s: event seq %d: time %s outside the years 1678..2261", store.ErrInvalid, b.SessionID, e.Seq, e.Time)
		}
		if len(e.Data) > 0 && !json.Valid(e.Data) {
			return fmt.Errorf("%w: session %s: event seq %d: data is not valid JSON", store.ErrInvalid, b.SessionID, e.Seq)
		}
	}
	if b.Session != nil && b.Session.ID != b.SessionID {
		return fmt.Errorf("%w: session %s: batch carries record of session %q", store.ErrInvalid, b.SessionID, b.Session.ID)
	}
	for _, r := range b.Runs {
		if r.ID == "" || r.SessionID != b.SessionID {
			return fmt.Errorf("%w: session %s: run %q of session %q", store.ErrInvalid, b.SessionID, r.ID, r.SessionID)
		}
	}
	type key struct{ key, method string }
	seen := make(map[key]bool, len(b.Receipts))
	for _, r := range b.Receipts {
		if err := validReceipt(r); err != nil {
			return fmt.Errorf("session %s: %w", b.SessionID, err)
		}
		if r.SessionID != "" && r.SessionID != b.SessionID {
			return fmt.Errorf("%w: session %s: receipt %s %s of session %q", store.ErrInvalid, b.SessionID, r.Method, r.Key, r.SessionID)
		}
		k := key{r.Key, r.Method}
		if seen[k] {
			return fmt.Errorf("%w: session %s: receipt %s %s twice in one batch", store.ErrReceiptExists, b.SessionID, r.Method, r.Key)
		}
		seen[k] = true
	}
	return nil
}

func validReceipt(r store.Receipt) error {
	if r.Key == "" || r.Method == "" {
		return fmt.Errorf("%w: receipt needs a key and a method (got %q, %q)", store.ErrInvalid, r.Key, r.Method)
	}
	if !validTime(r.CreatedAt) {
		return fmt.Errorf("%w: receipt %s %s: time %s outside the years 1678..2261", store.ErrInvalid, r.Method, r.Key, r.CreatedAt)
	}
	return nil
}

// validTime reports whether t can be stored as Unix nanoseconds; the zero
// time is allowed and kept as such.
func validTime(t time.Time) bool {
	return t.IsZero() || (t.Year() >= 1678 && t.Year() <= 2261)
}
