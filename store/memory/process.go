package memory

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"weft.dev/weft/store"
	"weft.dev/weft/store/record"
)

// procEntry is one process: its record (as JSON, like runs) and its log.
type procEntry struct {
	sessionID string
	status    string
	mountID   string
	grants    []string
	startedAt time.Time
	lastSeq   int64
	record    []byte                // JSON of record.Process
	events    []record.ProcessEvent // ascending seq; dropped chunks removed
}

// AppendProcess writes b atomically. It returns an error wrapping
// [store.ErrInvalid] for a malformed batch (no events, a record of another
// process, a first batch without a record), [store.ErrSeqConflict] if the
// batch does not continue the process's log, and [store.ErrClosed] after
// Close.
func (s *Store) AppendProcess(ctx context.Context, b store.ProcessBatch) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := store.ValidateProcessBatch(b); err != nil {
		return err
	}
	events := make([]record.ProcessEvent, len(b.Events))
	for i, e := range b.Events {
		e.Time = e.Time.UTC()
		e.Data = cloneBytes(e.Data)
		events[i] = e
	}
	var rec []byte
	var recv record.Process
	if b.Record != nil {
		recv = normProcess(*b.Record)
		var err error
		if rec, err = json.Marshal(recv); err != nil {
			return fmt.Errorf("%w: process %s: encode record: %v", store.ErrInvalid, b.ProcessID, err)
		}
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return store.ErrClosed
	}
	if s.procs == nil {
		s.procs = make(map[string]*procEntry)
	}
	p := s.procs[b.ProcessID]
	var last int64
	if p != nil {
		last = p.lastSeq
	}
	if first := b.Events[0].Seq; first != last+1 {
		return fmt.Errorf("%w: process %s: expected seq %d, got %d", store.ErrSeqConflict, b.ProcessID, last+1, first)
	}
	if p == nil && rec == nil {
		return fmt.Errorf("%w: process %s: the first batch must carry the record", store.ErrInvalid, b.ProcessID)
	}
	for _, r := range b.Receipts {
		if _, ok := s.receipts[receiptKey{r.Key, r.Method}]; ok {
			return fmt.Errorf("%w: process %s: receipt %s %s", store.ErrReceiptExists, b.ProcessID, r.Method, r.Key)
		}
	}
	for _, r := range b.Receipts {
		s.receipts[receiptKey{r.Key, r.Method}] = cloneReceipt(r)
	}
	if p == nil {
		p = &procEntry{}
		s.procs[b.ProcessID] = p
	}
	if b.DropOutputBefore > 0 {
		p.events = slices.DeleteFunc(p.events, func(e record.ProcessEvent) bool {
			return e.Size > 0 && e.Offset+e.Size <= b.DropOutputBefore
		})
	}
	p.events = append(p.events, events...)
	p.lastSeq = events[len(events)-1].Seq
	if rec != nil {
		p.sessionID, p.status, p.mountID, p.startedAt = recv.SessionID, recv.Status, recv.MountID, recv.StartedAt
		p.grants = recv.Grants
		p.record = rec
	}
	return nil
}

// ReadProcess returns up to p.Limit (default 1000) events of p.ProcessID
// with seq > p.After, filtered by p.Types. An unknown process returns an
// error wrapping [store.ErrNotFound].
func (s *Store) ReadProcess(ctx context.Context, p store.ReadProcessParams) ([]record.ProcessEvent, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	limit := p.Limit
	if limit <= 0 {
		limit = 1000
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return nil, store.ErrClosed
	}
	pe, ok := s.procs[p.ProcessID]
	if !ok {
		return nil, fmt.Errorf("%w: process %s", store.ErrNotFound, p.ProcessID)
	}
	i, _ := slices.BinarySearchFunc(pe.events, p.After+1, func(e record.ProcessEvent, seq int64) int { return cmp.Compare(e.Seq, seq) })
	out := []record.ProcessEvent{}
	for _, e := range pe.events[i:] {
		if len(out) == limit {
			break
		}
		if len(p.Types) > 0 && !slices.Contains(p.Types, e.Type) {
			continue
		}
		e.Data = cloneBytes(e.Data)
		out = append(out, e)
	}
	return out, nil
}

// ProcessOutput returns up to p.Limit (default 100) output chunks of
// p.ProcessID that end after p.Offset. An unknown process returns an error
// wrapping [store.ErrNotFound].
func (s *Store) ProcessOutput(ctx context.Context, p store.ProcessOutputParams) ([]record.ProcessEvent, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	limit := p.Limit
	if limit <= 0 {
		limit = 100
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return nil, store.ErrClosed
	}
	pe, ok := s.procs[p.ProcessID]
	if !ok {
		return nil, fmt.Errorf("%w: process %s", store.ErrNotFound, p.ProcessID)
	}
	out := []record.ProcessEvent{}
	for _, e := range pe.events {
		if len(out) == limit {
			break
		}
		if e.Size == 0 || e.Offset+e.Size <= p.Offset {
			continue
		}
		e.Data = cloneBytes(e.Data)
		out = append(out, e)
	}
	return out, nil
}

// Process returns a process record or an error wrapping
// [store.ErrNotFound] or [store.ErrClosed].
func (s *Store) Process(ctx context.Context, id string) (record.Process, error) {
	if err := ctx.Err(); err != nil {
		return record.Process{}, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return record.Process{}, store.ErrClosed
	}
	pe, ok := s.procs[id]
	if !ok {
		return record.Process{}, fmt.Errorf("%w: process %s", store.ErrNotFound, id)
	}
	var out record.Process
	if err := json.Unmarshal(pe.record, &out); err != nil {
		return record.Process{}, fmt.Errorf("process %s: decode record: %w", id, err)
	}
	return out, nil
}

// Processes lists the records matching p, oldest first (by StartedAt,
// then ID), at most p.Limit (default 1000).
func (s *Store) Processes(ctx context.Context, p store.ListProcessesParams) ([]record.Process, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	limit := p.Limit
	if limit <= 0 {
		limit = 1000
	}
	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		return nil, store.ErrClosed
	}
	type hit struct {
		id string
		e  *procEntry
	}
	var hits []hit
	for id, e := range s.procs {
		if p.SessionID != "" && e.sessionID != p.SessionID && !(p.IncludeGranted && slices.Contains(e.grants, p.SessionID)) {
			continue
		}
		if len(p.Statuses) > 0 && !slices.Contains(p.Statuses, e.status) {
			continue
		}
		if p.MountID != "" && e.mountID != p.MountID {
			continue
		}
		hits = append(hits, hit{id, e})
	}
	slices.SortFunc(hits, func(a, b hit) int {
		return cmp.Or(a.e.startedAt.Compare(b.e.startedAt), cmp.Compare(a.id, b.id))
	})
	hits = hits[:min(len(hits), limit)]
	recs := make([][]byte, len(hits))
	for i, h := range hits {
		recs[i] = h.e.record
	}
	s.mu.RUnlock()
	out := make([]record.Process, 0, len(recs))
	for i, rec := range recs {
		var pr record.Process
		if err := json.Unmarshal(rec, &pr); err != nil {
			return nil, fmt.Errorf("process %s: decode record: %w", hits[i].id, err)
		}
		out = append(out, pr)
	}
	return out, nil
}

func normProcess(p record.Process) record.Process {
	p.StartedAt = p.StartedAt.UTC()
	if p.EndedAt != nil {
		t := p.EndedAt.UTC()
		p.EndedAt = &t
	}
	p.Grants = slices.Clone(p.Grants)
	return p
}
