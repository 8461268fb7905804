package store

import (
	"encoding/json"
	"fmt"
	"time"

	"weft.dev/weft/store/record"
)

// ValidateBatch checks what can be checked of b without stored state: a
// session ID, at least one event, events of that session with a type,
// contiguous seqs, storable times and valid JSON data, a session record and
// run records of that session, and valid receipts of that session with no
// (key, method) twice. It does not check that b continues the stored log or
// that its receipts are new; [Store.Append] does that.
//
// The error wraps [ErrSeqConflict] for a gap in the batch's seqs,
// [ErrReceiptExists] for a (key, method) repeated in the batch, and
// [ErrInvalid] for anything else. It is safe for concurrent use.
func ValidateBatch(b Batch) error {
	if b.SessionID == "" {
		return fmt.Errorf("%w: batch without session ID", ErrInvalid)
	}
	if len(b.Events) == 0 {
		return fmt.Errorf("%w: session %s: batch without events", ErrInvalid, b.SessionID)
	}
	first := b.Events[0].Seq
	for i, e := range b.Events {
		if e.SessionID != b.SessionID {
			return fmt.Errorf("%w: session %s: event seq %d belongs to session %q", ErrInvalid, b.SessionID, e.Seq, e.SessionID)
		}
		if e.Type == "" {
			return fmt.Errorf("%w: session %s: event seq %d has no type", ErrInvalid, b.SessionID, e.Seq)
		}
		if want := first + int64(i); e.Seq != want {
			return fmt.Errorf("%w: session %s: expected seq %d, got %d", ErrSeqConflict, b.SessionID, want, e.Seq)
		}
		if !validTime(e.Time) {
			return fmt.Errorf("%w: session %s: event seq %d: time %s outside the years 1678..2261", ErrInvalid, b.SessionID, e.Seq, e.Time)
		}
		if len(e.Data) > 0 && !json.Valid(e.Data) {
			return fmt.Errorf("%w: session %s: event seq %d: data is not valid JSON", ErrInvalid, b.SessionID, e.Seq)
		}
	}
	if b.Session != nil && b.Session.ID != b.SessionID {
		return fmt.Errorf("%w: session %s: batch carries record of session %q", ErrInvalid, b.SessionID, b.Session.ID)
	}
	for _, r := range b.Runs {
		if r.ID == "" || r.SessionID != b.SessionID {
			return fmt.Errorf("%w: session %s: run %q of session %q", ErrInvalid, b.SessionID, r.ID, r.SessionID)
		}
	}
	for _, q := range b.Requests {
		if q.ID == "" || q.SessionID != b.SessionID || q.RunID == "" {
			return fmt.Errorf("%w: session %s: request %q of session %q, run %q", ErrInvalid, b.SessionID, q.ID, q.SessionID, q.RunID)
		}
	}
	for _, r := range b.Receipts {
		if r.SessionID != "" && r.SessionID != b.SessionID {
			return fmt.Errorf("%w: session %s: receipt %s %s of session %q", ErrInvalid, b.SessionID, r.Method, r.Key, r.SessionID)
		}
	}
	return validateReceipts("session "+b.SessionID, b.Receipts)
}

// validateReceipts checks each receipt and that no (key, method) comes
// twice in one batch.
func validateReceipts(batch string, rs []record.Receipt) error {
	type key struct{ key, method string }
	seen := make(map[key]bool, len(rs))
	for _, r := range rs {
		if err := ValidateReceipt(r); err != nil {
			return fmt.Errorf("%s: %w", batch, err)
		}
		k := key{r.Key, r.Method}
		if seen[k] {
			return fmt.Errorf("%w: %s: receipt %s %s twice in one batch", ErrReceiptExists, batch, r.Method, r.Key)
		}
		seen[k] = true
	}
	return nil
}

// ValidateReceipt checks what can be checked of r without stored state: a
// key, a method and a storable CreatedAt (the zero time is allowed). It does
// not check that (key, method) is new. The error wraps [ErrInvalid]. It is
// safe for concurrent use.
func ValidateReceipt(r record.Receipt) error {
	if r.Key == "" || r.Method == "" {
		return fmt.Errorf("%w: receipt needs a key and a method (got %q, %q)", ErrInvalid, r.Key, r.Method)
	}
	if !validTime(r.CreatedAt) {
		return fmt.Errorf("%w: receipt %s %s: time %s outside the years 1678..2261", ErrInvalid, r.Method, r.Key, r.CreatedAt)
	}
	return nil
}

// ValidateProcessBatch checks what can be checked of b without stored
// state: a process ID, at least one event, events of that process with a
// type, contiguous seqs, storable times, valid JSON data and no negative
// output range, and a record, if any, of that process with a session and a
// storable start time. It does not check that b continues the stored log or
// that the first batch of a process carries the record;
// [ProcessLog.AppendProcess] does that.
//
// The error wraps [ErrSeqConflict] for a gap in the batch's seqs and
// [ErrInvalid] for anything else. It is safe for concurrent use.
func ValidateProcessBatch(b ProcessBatch) error {
	if b.ProcessID == "" {
		return fmt.Errorf("%w: process batch without process ID", ErrInvalid)
	}
	if len(b.Events) == 0 {
		return fmt.Errorf("%w: process %s: batch without events", ErrInvalid, b.ProcessID)
	}
	first := b.Events[0].Seq
	for i, e := range b.Events {
		if e.ProcessID != b.ProcessID {
			return fmt.Errorf("%w: process %s: event seq %d belongs to process %q", ErrInvalid, b.ProcessID, e.Seq, e.ProcessID)
		}
		if e.Type == "" {
			return fmt.Errorf("%w: process %s: event seq %d has no type", ErrInvalid, b.ProcessID, e.Seq)
		}
		if want := first + int64(i); e.Seq != want {
			return fmt.Errorf("%w: process %s: expected seq %d, got %d", ErrSeqConflict, b.ProcessID, want, e.Seq)
		}
		if !validTime(e.Time) {
			return fmt.Errorf("%w: process %s: event seq %d: time %s outside the years 1678..2261", ErrInvalid, b.ProcessID, e.Seq, e.Time)
		}
		if len(e.Data) > 0 && !json.Valid(e.Data) {
			return fmt.Errorf("%w: process %s: event seq %d: data is not valid JSON", ErrInvalid, b.ProcessID, e.Seq)
		}
		if e.Size < 0 || e.Offset < 0 {
			return fmt.Errorf("%w: process %s: event seq %d: negative output range", ErrInvalid, b.ProcessID, e.Seq)
		}
	}
	if r := b.Record; r != nil {
		if r.ID != b.ProcessID {
			return fmt.Errorf("%w: process %s: batch carries record of process %q", ErrInvalid, b.ProcessID, r.ID)
		}
		if r.SessionID == "" {
			return fmt.Errorf("%w: process %s: record without session", ErrInvalid, b.ProcessID)
		}
		if !validTime(r.StartedAt) {
			return fmt.Errorf("%w: process %s: start time %s outside the years 1678..2261", ErrInvalid, b.ProcessID, r.StartedAt)
		}
	}
	return validateReceipts("process "+b.ProcessID, b.Receipts)
}

// validTime reports whether t can be stored as Unix nanoseconds, as
// store/sqlite stores it; the zero time is allowed and kept as such.
func validTime(t time.Time) bool {
	return t.IsZero() || (t.Year() >= 1678 && t.Year() <= 2261)
}
