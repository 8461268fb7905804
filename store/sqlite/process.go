package sqlite

import (
	"context"
	"fmt"

	"weft.dev/weft/store"
	"weft.dev/weft/store/internal/sqlstore"
	"weft.dev/weft/store/record"
)

// AppendProcess writes b in one transaction: its events, its record and
// its output drop, or nothing. It returns an error wrapping
// [store.ErrInvalid] for a malformed batch (no events, a record of another
// process, a first batch without a record), [store.ErrSeqConflict] if the
// batch does not continue the process's log, and [store.ErrClosed] after
// Close.
func (s *Store) AppendProcess(ctx context.Context, b store.ProcessBatch) error {
	r, rec, err := sqlstore.EncodeProcessBatch(b)
	if err != nil {
		return err
	}
	if err := s.guard.Enter(); err != nil {
		return err
	}
	defer s.guard.Leave()
	err = s.w.group(ctx, func(tx *wtx) error { return appendProcessTx(tx, b, r, rec) })
	if err != nil && !isStoreError(err) {
		return s.errorf("append to process "+b.ProcessID, err)
	}
	return err
}

// appendProcessTx writes batch b, whose record r is encoded as rec (nil
// if b has none), in tx. Errors the caller branches on wrap a store
// sentinel; the others are SQLite's, which AppendProcess wraps.
func appendProcessTx(tx *wtx, b store.ProcessBatch, r record.Process, rec []byte) error {
	last, exists, err := sqlstore.ScanProcessLastSeq(tx.row(stProcessLastSeq, b.ProcessID))
	if err != nil {
		return err
	}
	if err := sqlstore.ContinuesProcess(b, last, exists); err != nil {
		return err
	}
	if b.DropOutputBefore > 0 {
		if _, err := tx.exec(stDropOutput, b.ProcessID, b.DropOutputBefore); err != nil {
			return fmt.Errorf("drop output: %w", err)
		}
	}
	for _, e := range b.Events {
		if _, err := tx.exec(stInsertProcessEvent, b.ProcessID, e.Seq, string(e.Type), sqlstore.EncodeTime(e.Time), sqlstore.Bytes(e.Data), e.Offset, e.Size); err != nil {
			if isConstraint(err) {
				return fmt.Errorf("%w: process %s: seq %d already stored", store.ErrSeqConflict, b.ProcessID, e.Seq)
			}
			return err
		}
	}
	lastSeq := b.Events[len(b.Events)-1].Seq
	if rec != nil {
		if _, err := tx.exec(stUpsertProcess, b.ProcessID, r.SessionID, r.Status, r.MountID, sqlstore.SortKey(r.StartedAt), lastSeq, rec, r.Host, r.Epoch); err != nil {
			return fmt.Errorf("store record: %w", err)
		}
	} else if _, err := tx.exec(stSetProcessLastSeq, lastSeq, b.ProcessID); err != nil {
		return err
	}
	return insertReceipts(tx, "process", b.ProcessID, b.Receipts)
}
