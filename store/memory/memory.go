// Package memory is an in-memory [store.Store]: a real implementation with
// the same semantics as store/sqlite, for examples, tests and embedders that
// need no durability.
//
// Everything lives in maps behind one mutex. Data is copied on the way in and
// on the way out, so a caller can neither change stored events or records
// through a slice or map it passed to Append nor through one it got back.
// Records (sessions, runs) are kept as JSON, exactly as store/sqlite keeps
// them, so both stores normalise them the same way (for example an empty
// metadata map comes back nil).
package memory

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"weft.dev/weft/event"
	"weft.dev/weft/store"
	"weft.dev/weft/store/record"
)

// Store is an in-memory [store.Store]. The zero value is not usable; call
// [New]. All methods are safe for concurrent use.
type Store struct {
	mu       sync.RWMutex
	closed   bool
	logs     map[string][]event.Event // session ID -> its own events, index seq-1-forks[id].Seq
	forks    map[string]record.Fork   // fork's session ID -> its source
	sessions map[string]sessionEntry
	runs     map[string]runEntry
	receipts map[receiptKey]record.Receipt
	procs    map[string]*procEntry // process ID -> record and log; see process.go
	runLast  map[string]int64      // run ID -> seq of its last event
	requests map[string][]byte     // request ID -> JSON record
	snaps    map[snapKey]record.Snapshot
	// retention is the retention lock (see purge.go).
	retention sync.Mutex
}

type snapKey struct{ session, kind string }

type sessionEntry struct {
	createdAt time.Time
	deleted   bool
	record    []byte // JSON of record.Session
}

type runEntry struct {
	sessionID string
	status    string
	createdAt time.Time
	firstSeq  int64
	record    []byte // JSON of record.Run
}

type receiptKey struct{ key, method string }

// New returns an empty store.
func New() *Store {
	return &Store{
		logs:     make(map[string][]event.Event),
		forks:    make(map[string]record.Fork),
		sessions: make(map[string]sessionEntry),
		runs:     make(map[string]runEntry),
		receipts: make(map[receiptKey]record.Receipt),
		runLast:  make(map[string]int64),
		requests: make(map[string][]byte),
		snaps:    make(map[snapKey]record.Snapshot),
	}
}

// sessionTail returns the seq and time of a session's last event, which a
// session record's LastSeq and UpdatedAt are read from. Called with s.mu held.
func (s *Store) sessionTail(id string) (int64, time.Time) {
	log := s.logs[id]
	if len(log) == 0 {
		return 0, time.Time{}
	}
	last := log[len(log)-1]
	return last.Seq, last.Time
}

// lastSeq returns the seq of a session's last event and whether it has
// any: a fork's own events follow its source's Seq. Called with s.mu held.
func (s *Store) lastSeq(id string) (int64, bool) {
	log, ok := s.logs[id]
	return s.forks[id].Seq + int64(len(log)), ok
}

var _ store.Store = (*Store)(nil)

// Append writes b atomically: all of its events, records and receipts, or
// nothing. It returns an error wrapping [store.ErrInvalid] for a malformed
// batch, [store.ErrSeqConflict] if the first seq is not the session's last
// seq + 1 or the seqs have a gap, [store.ErrReceiptExists] for a receipt
// whose (key, method) is stored already, and [store.ErrClosed] after Close.
func (s *Store) Append(ctx context.Context, b store.Batch) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := store.ValidateBatch(b); err != nil {
		return err
	}
	// Encode everything before taking the lock; nothing below can fail
	// half-way.
	events := make([]event.Event, len(b.Events))
	for i, e := range b.Events {
		e.Time = e.Time.UTC()
		e.Data = cloneBytes(e.Data)
		events[i] = e
	}
	var sess *sessionEntry
	if b.Session != nil {
		rec := *b.Session
		normSession(&rec)
		js, err := json.Marshal(rec)
		if err != nil {
			return fmt.Errorf("%w: session %s: encode record: %v", store.ErrInvalid, b.SessionID, err)
		}
		sess = &sessionEntry{createdAt: rec.CreatedAt, deleted: rec.Deleted, record: js}
	}
	runs := make(map[string]runEntry, len(b.Runs))
	runOrder := make([]string, 0, len(b.Runs))
	for _, r := range b.Runs {
		normRun(&r)
		js, err := json.Marshal(r)
		if err != nil {
			return fmt.Errorf("%w: session %s run %s: encode record: %v", store.ErrInvalid, b.SessionID, r.ID, err)
		}
		if _, ok := runs[r.ID]; !ok {
			runOrder = append(runOrder, r.ID)
		}
		runs[r.ID] = runEntry{sessionID: r.SessionID, status: r.Status, createdAt: r.CreatedAt, firstSeq: r.FirstSeq, record: js}
	}
	receipts := make([]record.Receipt, len(b.Receipts))
	for i, r := range b.Receipts {
		receipts[i] = cloneReceipt(r)
	}
	requests := make(map[string][]byte, len(b.Requests))
	for _, q := range b.Requests {
		js, err := json.Marshal(q)
		if err != nil {
			return fmt.Errorf("%w: session %s: encode request %s: %v", store.ErrInvalid, b.SessionID, q.ID, err)
		}
		requests[q.ID] = js
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return store.ErrClosed
	}
	log := s.logs[b.SessionID]
	last, exists := s.lastSeq(b.SessionID)
	var fork *record.Fork
	if !exists && b.Session != nil && b.Session.Fork != nil {
		// The batch creates a fork: it continues its source's Seq.
		f := *b.Session.Fork
		if srcLast, ok := s.lastSeq(f.SessionID); !ok || f.Seq < 1 || srcLast < f.Seq {
			return fmt.Errorf("%w: session %s: a fork of session %s at seq %d, which its log does not hold (last seq %d)", store.ErrInvalid, b.SessionID, f.SessionID, f.Seq, srcLast)
		}
		fork, last = &f, f.Seq
	}
	if first := b.Events[0].Seq; first != last+1 {
		return fmt.Errorf("%w: session %s: expected seq %d, got %d", store.ErrSeqConflict, b.SessionID, last+1, first)
	}
	for _, id := range runOrder {
		if old, ok := s.runs[id]; ok && old.sessionID != b.SessionID {
			return fmt.Errorf("%w: session %s: run %s belongs to session %s", store.ErrInvalid, b.SessionID, id, old.sessionID)
		}
	}
	for _, r := range receipts {
		if _, ok := s.receipts[receiptKey{r.Key, r.Method}]; ok {
			return fmt.Errorf("%w: session %s: receipt %s %s", store.ErrReceiptExists, b.SessionID, r.Method, r.Key)
		}
	}
	for id := range requests {
		if old, ok := s.requests[id]; ok {
			var q record.Request
			if json.Unmarshal(old, &q) == nil && q.SessionID != b.SessionID {
				return fmt.Errorf("%w: session %s: request %s belongs to another session", store.ErrInvalid, b.SessionID, id)
			}
		}
	}
	maps.Copy(s.requests, requests)
	if fork != nil {
		s.forks[b.SessionID] = *fork
	}
	s.logs[b.SessionID] = append(log, events...)
	for _, e := range events {
		if e.RunID != "" {
			s.runLast[e.RunID] = e.Seq
		}
	}
	if sess != nil {
		s.sessions[b.SessionID] = *sess
	}
	for _, id := range runOrder {
		s.runs[id] = runs[id]
	}
	for _, r := range receipts {
		s.receipts[receiptKey{r.Key, r.Method}] = r
	}
	return nil
}

// Read returns up to p.Limit (default 1000) events of p.SessionID with
// seq > p.After, in seq order, filtered by p.RunID and p.Types (a fork's
// first events read through its source: see [store.ReadFork]). It
// returns an error wrapping [store.ErrNotFound] for a session without
// events and [store.ErrClosed] after Close.
func (s *Store) Read(ctx context.Context, p store.ReadParams) ([]event.Event, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return nil, store.ErrClosed
	}
	return s.read(ctx, p)
}

// read is Read with s.mu held.
func (s *Store) read(ctx context.Context, p store.ReadParams) ([]event.Event, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = 1000
	}
	log, ok := s.logs[p.SessionID]
	if !ok {
		return nil, fmt.Errorf("%w: session %s", store.ErrNotFound, p.SessionID)
	}
	base := int64(0)
	if f, ok := s.forks[p.SessionID]; ok {
		if p.After < f.Seq {
			return store.ReadFork(ctx, p, f, s.read)
		}
		base = f.Seq
	}
	start := max(p.After, 0) - base
	if start >= int64(len(log)) {
		return []event.Event{}, nil
	}
	out := make([]event.Event, 0, min(limit, len(log)-int(start)))
	size := 0
	for _, e := range log[start:] {
		if len(out) == limit || p.MaxBytes > 0 && size >= p.MaxBytes || p.Through > 0 && e.Seq > p.Through {
			break
		}
		if p.RunID != "" && e.RunID != p.RunID {
			continue
		}
		if len(p.Types) > 0 && !slices.Contains(p.Types, e.Type) {
			continue
		}
		e.Data = cloneBytes(e.Data)
		size += len(e.Data)
		out = append(out, e)
	}
	return out, nil
}

// LastSeq returns the seq of the session's last event, or an error wrapping
// [store.ErrNotFound] or [store.ErrClosed].
func (s *Store) LastSeq(ctx context.Context, sessionID string) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return 0, store.ErrClosed
	}
	last, ok := s.lastSeq(sessionID)
	if !ok {
		return 0, fmt.Errorf("%w: session %s", store.ErrNotFound, sessionID)
	}
	return last, nil
}

// Session returns the session record, deleted or not, or an error wrapping
// [store.ErrNotFound] or [store.ErrClosed].
func (s *Store) Session(ctx context.Context, id string) (record.Session, error) {
	if err := ctx.Err(); err != nil {
		return record.Session{}, err
	}
	s.mu.RLock()
	e, ok := s.sessions[id]
	closed := s.closed
	seq, at := s.sessionTail(id)
	s.mu.RUnlock()
	if closed {
		return record.Session{}, store.ErrClosed
	}
	if !ok {
		return record.Session{}, fmt.Errorf("%w: session %s", store.ErrNotFound, id)
	}
	var out record.Session
	if err := json.Unmarshal(e.record, &out); err != nil {
		return record.Session{}, fmt.Errorf("session %s: decode record: %w", id, err)
	}
	out.LastSeq, out.UpdatedAt = seq, at
	return out, nil
}

// Sessions lists sessions newest first (by CreatedAt, then ID), at most
// p.Limit (default 100), starting after the session p.Before. An unknown
// p.Before returns an error wrapping [store.ErrNotFound].
func (s *Store) Sessions(ctx context.Context, p store.ListSessionsParams) ([]record.Session, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	limit := p.Limit
	if limit <= 0 {
		limit = 100
	}
	type item struct {
		id  string
		e   sessionEntry
		seq int64
		at  time.Time
	}
	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		return nil, store.ErrClosed
	}
	var cursor *item
	if p.Before != "" {
		e, ok := s.sessions[p.Before]
		if !ok {
			s.mu.RUnlock()
			return nil, fmt.Errorf("%w: cursor session %s", store.ErrNotFound, p.Before)
		}
		cursor = &item{id: p.Before, e: e}
	}
	items := make([]item, 0, len(s.sessions))
	for id, e := range s.sessions {
		if e.deleted && !p.IncludeDeleted {
			continue
		}
		seq, at := s.sessionTail(id)
		items = append(items, item{id, e, seq, at})
	}
	s.mu.RUnlock()

	newer := func(a, b item) int { // >0 if a sorts after b (is older)
		if c := b.e.createdAt.Compare(a.e.createdAt); c != 0 {
			return c
		}
		return cmp.Compare(b.id, a.id)
	}
	slices.SortFunc(items, newer)
	if cursor != nil {
		i, _ := slices.BinarySearchFunc(items, *cursor, func(a, c item) int {
			if newer(a, c) <= 0 {
				return -1
			}
			return 1
		})
		items = items[i:]
	}
	items = items[:min(limit, len(items))]
	out := make([]record.Session, len(items))
	for i, it := range items {
		if err := json.Unmarshal(it.e.record, &out[i]); err != nil {
			return nil, fmt.Errorf("session %s: decode record: %w", it.id, err)
		}
		out[i].LastSeq, out[i].UpdatedAt = it.seq, it.at
	}
	return out, nil
}

// Run returns the run record or an error wrapping [store.ErrNotFound] or
// [store.ErrClosed].
func (s *Store) Run(ctx context.Context, id string) (record.Run, error) {
	if err := ctx.Err(); err != nil {
		return record.Run{}, err
	}
	s.mu.RLock()
	e, ok := s.runs[id]
	closed := s.closed
	last := s.runLast[id]
	s.mu.RUnlock()
	if closed {
		return record.Run{}, store.ErrClosed
	}
	if !ok {
		return record.Run{}, fmt.Errorf("%w: run %s", store.ErrNotFound, id)
	}
	var out record.Run
	if err := json.Unmarshal(e.record, &out); err != nil {
		return record.Run{}, fmt.Errorf("run %s: decode record: %w", id, err)
	}
	out.LastSeq = last
	return out, nil
}

// Request returns a request record or an error wrapping
// [store.ErrNotFound] or [store.ErrClosed].
func (s *Store) Request(ctx context.Context, id string) (record.Request, error) {
	if err := ctx.Err(); err != nil {
		return record.Request{}, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return record.Request{}, store.ErrClosed
	}
	js, ok := s.requests[id]
	if !ok {
		return record.Request{}, fmt.Errorf("%w: request %s", store.ErrNotFound, id)
	}
	var q record.Request
	err := json.Unmarshal(js, &q)
	return q, err
}

// Requests lists the requests matching p, oldest first (by session, then
// seq), at most p.Limit (default 1000).
func (s *Store) Requests(ctx context.Context, p store.ListRequestsParams) ([]record.Request, error) {
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
	var out []record.Request
	for _, js := range s.requests {
		var q record.Request
		if err := json.Unmarshal(js, &q); err != nil {
			s.mu.RUnlock()
			return nil, err
		}
		if p.SessionID != "" && q.SessionID != p.SessionID || p.RunID != "" && q.RunID != p.RunID ||
			len(p.Statuses) > 0 && !slices.Contains(p.Statuses, q.Status) {
			continue
		}
		out = append(out, q)
	}
	s.mu.RUnlock()
	slices.SortFunc(out, func(a, b record.Request) int {
		if c := cmp.Compare(a.SessionID, b.SessionID); c != 0 {
			return c
		}
		return cmp.Compare(a.Seq, b.Seq)
	})
	return out[:min(limit, len(out))], nil
}

// Runs lists the runs of p.SessionID (all sessions if empty) whose status is
// one of p.Statuses (any if empty), oldest first (by CreatedAt, then
// FirstSeq, then ID), at most p.Limit (default 1000). An unknown session
// yields an empty list.
func (s *Store) Runs(ctx context.Context, p store.ListRunsParams) ([]record.Run, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	limit := p.Limit
	if limit <= 0 {
		limit = 1000
	}
	type item struct {
		id   string
		e    runEntry
		last int64
	}
	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		return nil, store.ErrClosed
	}
	var items []item
	for id, e := range s.runs {
		if p.SessionID != "" && e.sessionID != p.SessionID {
			continue
		}
		if len(p.Statuses) > 0 && !slices.Contains(p.Statuses, e.status) {
			continue
		}
		items = append(items, item{id, e, s.runLast[id]})
	}
	s.mu.RUnlock()
	slices.SortFunc(items, func(a, b item) int {
		if c := a.e.createdAt.Compare(b.e.createdAt); c != 0 {
			return c
		}
		if c := cmp.Compare(a.e.firstSeq, b.e.firstSeq); c != 0 {
			return c
		}
		return cmp.Compare(a.id, b.id)
	})
	items = items[:min(limit, len(items))]
	out := make([]record.Run, len(items))
	for i, it := range items {
		if err := json.Unmarshal(it.e.record, &out[i]); err != nil {
			return nil, fmt.Errorf("run %s: decode record: %w", it.id, err)
		}
		out[i].LastSeq = it.last
	}
	return out, nil
}

// Receipt returns the receipt for (key, method) or an error wrapping
// [store.ErrNotFound] or [store.ErrClosed].
func (s *Store) Receipt(ctx context.Context, key, method string) (record.Receipt, error) {
	if err := ctx.Err(); err != nil {
		return record.Receipt{}, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return record.Receipt{}, store.ErrClosed
	}
	r, ok := s.receipts[receiptKey{key, method}]
	if !ok {
		return record.Receipt{}, fmt.Errorf("%w: receipt %s %s", store.ErrNotFound, method, key)
	}
	return cloneReceipt(r), nil
}

// PutReceipt stores r unless a receipt for (r.Key, r.Method) exists; either
// way it returns the stored receipt. An empty key or method is
// [store.ErrInvalid].
func (s *Store) PutReceipt(ctx context.Context, r record.Receipt) (record.Receipt, error) {
	if err := ctx.Err(); err != nil {
		return record.Receipt{}, err
	}
	if err := store.ValidateReceipt(r); err != nil {
		return record.Receipt{}, err
	}
	r = cloneReceipt(r)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return record.Receipt{}, store.ErrClosed
	}
	k := receiptKey{r.Key, r.Method}
	if old, ok := s.receipts[k]; ok {
		return cloneReceipt(old), nil
	}
	s.receipts[k] = r
	return cloneReceipt(r), nil
}

// PruneReceipts deletes the receipts created before t and returns how many.
func (s *Store) PruneReceipts(ctx context.Context, before time.Time) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return 0, store.ErrClosed
	}
	n := 0
	for k, r := range s.receipts {
		if r.CreatedAt.Before(before) {
			delete(s.receipts, k)
			n++
		}
	}
	return n, nil
}

// PutSnapshot implements [store.Store].
func (s *Store) PutSnapshot(ctx context.Context, snap record.Snapshot) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return store.ErrClosed
	}
	last, ok := s.lastSeq(snap.SessionID)
	if !ok {
		return fmt.Errorf("snapshot of session %s: %w", snap.SessionID, store.ErrNotFound)
	}
	if snap.Seq < 0 || snap.Seq > last {
		return fmt.Errorf("%w: snapshot of session %s through seq %d, last seq %d", store.ErrSeqConflict, snap.SessionID, snap.Seq, last)
	}
	k := snapKey{snap.SessionID, snap.Kind}
	if old, ok := s.snaps[k]; ok && old.Seq > snap.Seq {
		return nil
	}
	snap.Data = bytes.Clone(snap.Data)
	s.snaps[k] = snap
	return nil
}

// Snapshot implements [store.Store].
func (s *Store) Snapshot(ctx context.Context, sessionID, kind string) (record.Snapshot, error) {
	if err := ctx.Err(); err != nil {
		return record.Snapshot{}, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return record.Snapshot{}, store.ErrClosed
	}
	snap, ok := s.snaps[snapKey{sessionID, kind}]
	if !ok {
		return record.Snapshot{}, fmt.Errorf("snapshot %s of session %s: %w", kind, sessionID, store.ErrNotFound)
	}
	snap.Data = bytes.Clone(snap.Data)
	return snap, nil
}

// Close drops the store's data. Later calls return [store.ErrClosed]; Close
// itself may be called more than once.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	s.logs, s.sessions, s.runs, s.receipts = nil, nil, nil, nil
	return nil
}

func normSession(s *record.Session) {
	s.CreatedAt, s.UpdatedAt = s.CreatedAt.UTC(), s.UpdatedAt.UTC()
}

func normRun(r *record.Run) {
	r.CreatedAt = r.CreatedAt.UTC()
	if r.StartedAt != nil {
		t := r.StartedAt.UTC()
		r.StartedAt = &t
	}
	if r.EndedAt != nil {
		t := r.EndedAt.UTC()
		r.EndedAt = &t
	}
}

func cloneReceipt(r record.Receipt) record.Receipt {
	r.Result = cloneBytes(r.Result)
	r.CreatedAt = r.CreatedAt.UTC()
	return r
}

func cloneBytes[T ~[]byte](b T) T {
	if len(b) == 0 {
		return nil
	}
	return T(bytes.Clone(b))
}
