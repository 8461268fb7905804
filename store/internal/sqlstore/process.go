package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"weft.dev/weft/event"
	"weft.dev/weft/store"
	"weft.dev/weft/store/record"
)

// ReadProcess returns up to p.Limit (default 1000) events of p.ProcessID
// with seq > p.After, filtered by p.Types. An unknown process returns an
// error wrapping [store.ErrNotFound].
func (r Reads) ReadProcess(ctx context.Context, p store.ReadProcessParams) ([]record.ProcessEvent, error) {
	if err := r.g.Enter(); err != nil {
		return nil, err
	}
	defer r.g.Leave()
	var q query
	q.add(`SELECT seq, type, time, data, out_off, out_size FROM process_events WHERE process_id = `, q.arg(p.ProcessID),
		` AND seq > `, q.arg(max(p.After, 0)))
	in(&q, "type", p.Types)
	q.add(` ORDER BY seq LIMIT `, q.arg(limitOr(p.Limit, 1000)))
	return r.processEvents(ctx, p.ProcessID, &q)
}

// ProcessOutput returns up to p.Limit (default 100) output chunks of
// p.ProcessID that end after p.Offset, in offset order. An unknown process
// returns an error wrapping [store.ErrNotFound].
func (r Reads) ProcessOutput(ctx context.Context, p store.ProcessOutputParams) ([]record.ProcessEvent, error) {
	if err := r.g.Enter(); err != nil {
		return nil, err
	}
	defer r.g.Leave()
	// Chunks are contiguous and ordered, so the chunk holding Offset is the
	// last one starting at or before it.
	q := query{args: []any{p.ProcessID, max(p.Offset, 0), limitOr(p.Limit, 100)}}
	q.add(`SELECT seq, type, time, data, out_off, out_size FROM process_events
		WHERE process_id = $1 AND out_size > 0 AND out_off + out_size > $2
		AND out_off >= coalesce((SELECT max(out_off) FROM process_events WHERE process_id = $1 AND out_size > 0 AND out_off <= $2), 0)
		ORDER BY out_off LIMIT $3`)
	return r.processEvents(ctx, p.ProcessID, &q)
}

// processEvents runs q, which selects events of process id; none, of a
// process without a record, is [store.ErrNotFound].
func (r Reads) processEvents(ctx context.Context, id string, q *query) ([]record.ProcessEvent, error) {
	op := "read process " + id
	// One set of destinations for every row (see Reads.Read).
	var e record.ProcessEvent
	var typ string
	var t int64
	dest := []any{&e.Seq, &typ, &t, (*[]byte)(&e.Data), &e.Offset, &e.Size}
	out, err := list(ctx, r, op, q, func(row Row) (record.ProcessEvent, error) {
		e = record.ProcessEvent{ProcessID: id}
		if err := row.Scan(dest...); err != nil {
			return record.ProcessEvent{}, err
		}
		e.Type, e.Time, e.Data = event.Type(typ), DecodeTime(t), Bytes(e.Data)
		return e, nil
	})
	if err != nil {
		return nil, err
	}
	if len(out) > 0 {
		return out, nil
	}
	var one int
	err = r.db.QueryRow(ctx, `SELECT 1 FROM processes WHERE id = $1`, id).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("%w: process %s", store.ErrNotFound, id)
	}
	if err != nil {
		return nil, r.db.Error(op, err)
	}
	return []record.ProcessEvent{}, nil
}

// Process returns a process record or an error wrapping
// [store.ErrNotFound].
func (r Reads) Process(ctx context.Context, id string) (record.Process, error) {
	if err := r.g.Enter(); err != nil {
		return record.Process{}, err
	}
	defer r.g.Leave()
	return one(ctx, r, "process", id, recordOf[record.Process](r, "process"), `SELECT id, record FROM processes WHERE id = $1`)
}

// Processes lists the records matching p, oldest first (by StartedAt,
// then ID), at most p.Limit (default 1000).
func (r Reads) Processes(ctx context.Context, p store.ListProcessesParams) ([]record.Process, error) {
	if err := r.g.Enter(); err != nil {
		return nil, err
	}
	defer r.g.Leave()
	var q query
	q.add(`SELECT id, record FROM processes WHERE true`)
	switch {
	case p.SessionID != "" && p.IncludeGranted:
		q.add(` AND `, fmt.Sprintf(r.d.Granted, q.arg(p.SessionID)))
	case p.SessionID != "":
		q.add(` AND session_id = `, q.arg(p.SessionID))
	}
	in(&q, "status", p.Statuses)
	if p.MountID != "" {
		q.add(` AND mount_id = `, q.arg(p.MountID))
	}
	q.add(` ORDER BY started_at, id LIMIT `, q.arg(limitOr(p.Limit, 1000)))
	return list(ctx, r, "list processes", &q, recordOf[record.Process](r, "process"))
}
