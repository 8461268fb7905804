package memory

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"weft.dev/weft/store"
	"weft.dev/weft/store/record"
)

var _ store.Purger = (*Store)(nil)

// Purge removes session id and everything that is its own (see
// [store.Purger]) under the store's lock, so that no reader sees half of
// it. It returns an error wrapping [store.ErrNotFound] for an unknown
// session, [store.ErrInUse] while it has a run that has not ended or a
// running process, [store.ErrForkSource] while a fork reads through it,
// and [store.ErrClosed] after Close.
func (s *Store) Purge(ctx context.Context, id string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return store.ErrClosed
	}
	if _, ok := s.sessions[id]; !ok {
		if _, ok := s.logs[id]; !ok {
			return fmt.Errorf("%w: session %s", store.ErrNotFound, id)
		}
	}
	for rid, r := range s.runs {
		if r.sessionID == id && !record.IsTerminal(r.status) {
			return fmt.Errorf("%w: session %s has run %s %s", store.ErrInUse, id, rid, r.status)
		}
	}
	for pid, p := range s.procs {
		if p.sessionID == id && !record.IsProcessTerminal(p.status) {
			return fmt.Errorf("%w: session %s has process %s %s", store.ErrInUse, id, pid, p.status)
		}
	}
	for fid, f := range s.forks {
		if f.SessionID == id {
			return fmt.Errorf("%w: session %s is the source of fork %s", store.ErrForkSource, id, fid)
		}
	}
	for _, e := range s.logs[id] {
		if e.RunID != "" {
			delete(s.runLast, e.RunID)
		}
	}
	delete(s.logs, id)
	delete(s.forks, id)
	delete(s.sessions, id)
	for rid, r := range s.runs {
		if r.sessionID == id {
			delete(s.runs, rid)
			delete(s.runLast, rid)
		}
	}
	for k, r := range s.receipts {
		if r.SessionID == id {
			delete(s.receipts, k)
		}
	}
	for k := range s.snaps {
		if k.session == id {
			delete(s.snaps, k)
		}
	}
	for pid, p := range s.procs {
		if p.sessionID == id {
			delete(s.procs, pid)
		}
	}
	for qid := range s.requests {
		if s.requestSession(qid) == id {
			delete(s.requests, qid)
		}
	}
	return nil
}

// LockRetention takes the store's retention lock: one pass at a time in
// this process, which is the only one that sees the store. It returns an
// error wrapping [store.ErrLeaseHeld] while another holder has it.
func (s *Store) LockRetention(ctx context.Context) (func(), error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if !s.retention.TryLock() {
		return nil, fmt.Errorf("retention: %w", store.ErrLeaseHeld)
	}
	return sync.OnceFunc(s.retention.Unlock), nil
}

// requestSession returns the session of request qid. Called with s.mu
// held.
func (s *Store) requestSession(qid string) string {
	var q struct {
		SessionID string `json:"sessionId"`
	}
	if json.Unmarshal(s.requests[qid], &q) != nil {
		return ""
	}
	return q.SessionID
}
