package sqlstore

import (
	"cmp"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"weft.dev/weft/store"
	"weft.dev/weft/store/record"
)

// EncodeTime stores t as Unix nanoseconds; the zero time becomes the
// smallest int64 so that it comes back as the zero time.
// [store.ValidateBatch] and its siblings have rejected the times that do
// not fit.
func EncodeTime(t time.Time) int64 {
	if t.IsZero() {
		return math.MinInt64
	}
	return t.UnixNano()
}

// DecodeTime is the time [EncodeTime] stored as n, in UTC.
func DecodeTime(n int64) time.Time {
	if n == math.MinInt64 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}

// SortKey is [EncodeTime] for the columns lists sort and filter on,
// clamped instead of validated: a record's time is not checked.
func SortKey(t time.Time) int64 {
	switch {
	case t.IsZero() || t.Year() < 1678:
		return math.MinInt64
	case t.Year() > 2261:
		return math.MaxInt64
	}
	return t.UnixNano()
}

// Bytes is b, or nil (SQL NULL) when b is empty.
func Bytes[T ~[]byte](b T) []byte {
	if len(b) == 0 {
		return nil
	}
	return b
}

// Records are the records of a batch, encoded for the database.
type Records struct {
	// Session is the session record as stored, nil if the batch has none.
	Session []byte
	// Runs are the batch's run records, the last of each ID, in ID order,
	// with their times in UTC; RunJSON holds each one as stored.
	Runs    []record.Run
	RunJSON [][]byte
	// Requests and RequestJSON are the batch's requests, likewise.
	Requests    []record.Request
	RequestJSON [][]byte
}

// EncodeBatch checks b ([store.ValidateBatch]) and encodes its records,
// before the transaction that writes them. Each ID is written once, in ID
// order, which suits every driver: a statement that upserts many rows may
// touch each once, and transactions that lock rows in one order cannot
// deadlock on them. A record JSON cannot encode is [store.ErrInvalid].
func EncodeBatch(b store.Batch) (Records, error) {
	if err := store.ValidateBatch(b); err != nil {
		return Records{}, err
	}
	var out Records
	if b.Session != nil {
		rec := *b.Session
		rec.CreatedAt, rec.UpdatedAt = rec.CreatedAt.UTC(), rec.UpdatedAt.UTC()
		var err error
		if out.Session, err = json.Marshal(rec); err != nil {
			return Records{}, fmt.Errorf("%w: session %s: encode record: %v", store.ErrInvalid, b.SessionID, err)
		}
	}
	out.Runs = lastByID(b.Runs, func(r record.Run) string { return r.ID })
	if len(out.Runs) > 0 {
		out.RunJSON = make([][]byte, len(out.Runs))
	}
	for i := range out.Runs {
		r := &out.Runs[i]
		r.CreatedAt, r.StartedAt, r.EndedAt = r.CreatedAt.UTC(), utc(r.StartedAt), utc(r.EndedAt)
		var err error
		if out.RunJSON[i], err = json.Marshal(r); err != nil {
			return Records{}, fmt.Errorf("%w: session %s run %s: encode record: %v", store.ErrInvalid, b.SessionID, r.ID, err)
		}
	}
	out.Requests = lastByID(b.Requests, func(q record.Request) string { return q.ID })
	if len(out.Requests) > 0 {
		out.RequestJSON = make([][]byte, len(out.Requests))
	}
	for i, q := range out.Requests {
		var err error
		if out.RequestJSON[i], err = json.Marshal(q); err != nil {
			return Records{}, fmt.Errorf("%w: session %s: encode request %s: %v", store.ErrInvalid, b.SessionID, q.ID, err)
		}
	}
	return out, nil
}

// EncodeProcessBatch checks b ([store.ValidateProcessBatch]) and returns
// its record as stored (times in UTC, its grants its own) and encoded;
// data is nil when b has no record. A record JSON cannot encode is
// [store.ErrInvalid].
func EncodeProcessBatch(b store.ProcessBatch) (rec record.Process, data []byte, err error) {
	if err := store.ValidateProcessBatch(b); err != nil {
		return record.Process{}, nil, err
	}
	if b.Record == nil {
		return record.Process{}, nil, nil
	}
	rec = *b.Record
	rec.StartedAt, rec.EndedAt = rec.StartedAt.UTC(), utc(rec.EndedAt)
	rec.Grants = slices.Clone(rec.Grants)
	if data, err = json.Marshal(rec); err != nil {
		return record.Process{}, nil, fmt.Errorf("%w: process %s: encode record: %v", store.ErrInvalid, rec.ID, err)
	}
	return rec, data, nil
}

// utc returns a copy of *t in UTC, or nil.
func utc(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

// lastByID returns the last of each ID of xs, in ID order; nil for none.
func lastByID[T any](xs []T, id func(T) string) []T {
	switch len(xs) {
	case 0:
		return nil
	case 1:
		return []T{xs[0]}
	}
	seen := make(map[string]int, len(xs))
	var out []T
	for _, x := range xs {
		if i, ok := seen[id(x)]; ok {
			out[i] = x
			continue
		}
		seen[id(x)] = len(out)
		out = append(out, x)
	}
	slices.SortFunc(out, func(a, b T) int { return cmp.Compare(id(a), id(b)) })
	return out
}

// Continues checks that a batch whose first seq is first continues the
// log of the session or process (kind) id, whose last seq is last;
// otherwise the error wraps [store.ErrSeqConflict].
func Continues(kind, id string, last, first int64) error {
	if first != last+1 {
		return fmt.Errorf("%w: %s %s: expected seq %d, got %d", store.ErrSeqConflict, kind, id, last+1, first)
	}
	return nil
}

// ScanProcessLastSeq reads the last seq of a process from its row of
// [ProcessLastSeqSQL]; a process without a row (a new one) has none yet.
// An error is the row's.
func ScanProcessLastSeq(row Row) (last int64, exists bool, err error) {
	err = row.Scan(&last)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, nil
	}
	return last, err == nil, err
}

// ContinuesProcess checks that the batch b continues the log of its
// process, whose last seq is last ([store.ErrSeqConflict] otherwise), and
// that the first batch of a process (one that does not exist yet) carries
// its record ([store.ErrInvalid] otherwise).
func ContinuesProcess(b store.ProcessBatch, last int64, exists bool) error {
	if err := Continues("process", b.ProcessID, last, b.Events[0].Seq); err != nil {
		return err
	}
	if !exists && b.Record == nil {
		return fmt.Errorf("%w: process %s: the first batch must carry the record", store.ErrInvalid, b.ProcessID)
	}
	return nil
}

// FitSnapshot checks snap against the last seq of its session's log (0:
// the session has no event): a snapshot of an unknown session is
// [store.ErrNotFound], one beyond the log [store.ErrSeqConflict].
func FitSnapshot(snap record.Snapshot, last int64) error {
	switch {
	case last == 0:
		return fmt.Errorf("snapshot of session %s: %w", snap.SessionID, store.ErrNotFound)
	case snap.Seq < 0 || snap.Seq > last:
		return fmt.Errorf("%w: snapshot of session %s through seq %d, last seq %d", store.ErrSeqConflict, snap.SessionID, snap.Seq, last)
	}
	return nil
}

// The statements the drivers write alike. Their arguments are the
// columns in the order named; times are [EncodeTime]'s, created_at of a
// prune [SortKey]'s.
const (
	// PutReceiptSQL stores a receipt unless its (key, method) is stored.
	PutReceiptSQL = `INSERT INTO receipts (key, method, fingerprint, result, session_id, created_at)
		VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (key, method) DO NOTHING`
	// ReceiptSQL reads the receipt of (key, method): see [ScanReceipt].
	ReceiptSQL = `SELECT fingerprint, result, session_id, created_at FROM receipts WHERE key = $1 AND method = $2`
	// PruneReceiptsSQL deletes the receipts created before $1.
	PruneReceiptsSQL = `DELETE FROM receipts WHERE created_at < $1`
	// PutSnapshotSQL stores a snapshot (session_id, kind, seq, data,
	// created_at) unless one through a later seq is stored.
	PutSnapshotSQL = `INSERT INTO snapshots (session_id, kind, seq, data, created_at) VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (session_id, kind) DO UPDATE SET seq = excluded.seq, data = excluded.data, created_at = excluded.created_at
		WHERE excluded.seq >= snapshots.seq`
	// ProcessLastSeqSQL reads the last seq of process $1 from its record
	// (dropped output may have removed the log's last rows).
	ProcessLastSeqSQL = `SELECT last_seq FROM processes WHERE id = $1`
	// DropOutputSQL deletes the output chunks of process $1 that end at
	// or before offset $2.
	DropOutputSQL = `DELETE FROM process_events WHERE process_id = $1 AND out_size > 0 AND out_off + out_size <= $2`
	// SetProcessLastSeqSQL sets the last seq of process $2 to $1.
	SetProcessLastSeqSQL = `UPDATE processes SET last_seq = $1 WHERE id = $2`
)
