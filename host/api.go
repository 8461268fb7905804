package host

import (
	"context"
	"errors"
	"iter"
	"os"
	"path/filepath"
	"strings"
	"time"

	"weft.dev/weft/agent"
	"weft.dev/weft/env"
	"weft.dev/weft/event"
	"weft.dev/weft/internal/journal"
	"weft.dev/weft/process"
	"weft.dev/weft/store"
)

// Method names, shared with the rpc package's method table.
const (
	MethodSessionCreate = "session/create"
	MethodSessionDelete = "session/delete"
	MethodRunStart      = "run/start"
	MethodRunSteer      = "run/steer"
	MethodRunCancel     = "run/cancel"
)

// CreateSession creates a session with its mounts.
func (h *Host) CreateSession(ctx context.Context, p CreateSessionParams) (*SessionResult, error) {
	key := p.IdempotencyKey
	p.IdempotencyKey = ""
	fp := fingerprint(p)
	ref, ok, release, err := h.claim(ctx, key, MethodSessionCreate, fp)
	if err != nil {
		return nil, err
	}
	defer release()
	if ok {
		s, err := h.GetSession(ctx, ref.ID)
		if err != nil {
			return nil, err
		}
		s.Replayed = true
		return s, nil
	}
	if p.Network != "" && p.Network != "allow" && p.Network != "deny" {
		return nil, errf(ErrInvalidParams, nil, "network %q: want allow or deny", p.Network)
	}
	id := h.cfg.NewID("ses")
	mounts, err := h.prepareMounts(id, p.Mounts)
	if err != nil {
		return nil, err
	}
	h.mu.Lock()
	closed := h.closed
	h.mu.Unlock()
	if closed {
		return nil, ErrClosed
	}
	s, err := h.load(ctx, id, &event.SessionCreatedData{Title: p.Title, Model: p.Model, Mounts: mounts, Network: p.Network},
		receipts(key, MethodSessionCreate, fp, id, receiptRef{ID: id})...)
	if err != nil {
		return nil, err
	}
	h.mu.Lock()
	h.sessions[id] = s
	h.mu.Unlock()
	return &SessionResult{Session: s.j.Session()}, nil
}

// prepareMounts validates mounts (by opening them as a binding) and
// creates the directories of scratch mounts.
func (h *Host) prepareMounts(sessionID string, mounts []event.Mount) ([]event.Mount, error) {
	out := append([]event.Mount(nil), mounts...)
	for i := range out {
		if out[i].Kind == "" {
			out[i].Kind = event.KindLocal
		}
		if out[i].Mode == "" {
			out[i].Mode = event.ModeReadWrite
		}
		if out[i].Kind == event.KindScratch {
			if h.cfg.ScratchDir == "" {
				return nil, errf(ErrInvalidParams, nil, "mount %s: scratch mounts need a host scratch directory", out[i].ID)
			}
			dir := filepath.Join(h.cfg.ScratchDir, sessionID, out[i].ID)
			if err := os.MkdirAll(dir, 0o700); err != nil {
				return nil, err
			}
			out[i].Path = dir
		}
	}
	if len(out) == 0 {
		return out, nil
	}
	b, err := env.NewBinding(1, out)
	if err != nil {
		return nil, errf(ErrInvalidParams, nil, "mounts: %v", err)
	}
	defer b.Close()
	return b.Mounts(), nil
}

// GetSession returns a session.
func (h *Host) GetSession(ctx context.Context, id string) (*SessionResult, error) {
	h.mu.Lock()
	s, ok := h.sessions[id]
	h.mu.Unlock()
	if ok {
		return &SessionResult{Session: s.j.Session()}, nil
	}
	rec, err := h.cfg.Store.Session(ctx, id)
	if errors.Is(err, store.ErrNotFound) || err == nil && rec.Deleted {
		return nil, errf(ErrNotFound, map[string]any{"sessionId": id}, "session %s not found", id)
	}
	if err != nil {
		return nil, err
	}
	return &SessionResult{Session: rec}, nil
}

// ListSessions pages through sessions, newest first.
func (h *Host) ListSessions(ctx context.Context, p ListSessionsParams) (*ListSessionsResult, error) {
	if p.Limit < 0 {
		return nil, errf(ErrInvalidParams, nil, "limit must not be negative")
	}
	if p.Limit == 0 || p.Limit > 1000 {
		p.Limit = min(max(p.Limit, 100), 1000)
	}
	ss, err := h.cfg.Store.Sessions(ctx, store.ListSessionsParams{Before: p.Cursor, Limit: p.Limit})
	if err != nil {
		return nil, err
	}
	res := &ListSessionsResult{Sessions: ss}
	if len(ss) == p.Limit {
		res.NextCursor = ss[len(ss)-1].ID
	}
	if res.Sessions == nil {
		res.Sessions = []store.Session{}
	}
	return res, nil
}

// DeleteSession deletes a session that has no active or queued run.
func (h *Host) DeleteSession(ctx context.Context, p SessionIDParams) (*DeleteResult, error) {
	key := p.IdempotencyKey
	p.IdempotencyKey = ""
	fp := fingerprint(p)
	_, ok, release, err := h.claim(ctx, key, MethodSessionDelete, fp)
	if err != nil {
		return nil, err
	}
	defer release()
	if ok {
		return &DeleteResult{SessionID: p.SessionID, Deleted: true, Replayed: true}, nil
	}
	s, err := h.lockedSession(ctx, p.SessionID)
	if err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	if id := s.activeID(); id != "" || len(s.queue) > 0 {
		return nil, errf(ErrRunConflict, map[string]any{"sessionId": s.id, "activeRunId": id}, "session %s has an active run %s", s.id, id)
	}
	if m := h.cfg.Processes; m != nil {
		// Owner-bound processes end with their session.
		live, err := m.List(ctx, process.ListParams{Statuses: []string{store.ProcessRunning}}, process.Caller{SessionID: s.id})
		if err != nil {
			return nil, procErr(err)
		}
		for _, p := range live {
			if p.SessionID == s.id && p.Disposition == store.OwnerBound {
				if _, err := m.Cancel(ctx, p.ID, "session deleted", process.Caller{Host: true}); err != nil && !errors.Is(err, process.ErrEnded) {
					return nil, procErr(err)
				}
			}
		}
	}
	e, _ := event.New("", event.SessionDeleted, struct{}{})
	if _, err := s.j.AppendReceipts(ctx, receipts(key, MethodSessionDelete, fp, s.id, receiptRef{ID: s.id}), e); err != nil {
		return nil, err
	}
	h.mu.Lock()
	delete(h.sessions, s.id)
	h.mu.Unlock()
	s.close()
	if h.cfg.ScratchDir != "" {
		os.RemoveAll(filepath.Join(h.cfg.ScratchDir, s.id))
	}
	return &DeleteResult{SessionID: s.id, Deleted: true}, nil
}

// StartRun admits a run under p.Busy.
func (h *Host) StartRun(ctx context.Context, p StartRunParams) (*RunResult, error) {
	if p.SessionID == "" {
		return nil, errf(ErrInvalidParams, nil, "sessionId is required")
	}
	if strings.TrimSpace(event.Text(p.Input)) == "" {
		return nil, errf(ErrInvalidParams, nil, "input is empty")
	}
	switch p.Busy {
	case "":
		p.Busy = BusyReject
	case BusyReject, BusyQueue, BusyInterrupt, BusySteer:
	default:
		return nil, errf(ErrInvalidParams, nil, "busy %q: want reject, queue, interrupt or steer", p.Busy)
	}
	if p.MaxSteps < 0 {
		return nil, errf(ErrInvalidParams, nil, "maxSteps must not be negative")
	}
	if p.Model != "" {
		if _, err := h.cfg.ResolveModel(p.Model); err != nil {
			return nil, errf(ErrInvalidParams, nil, "model: %v", err)
		}
	}
	key := p.IdempotencyKey
	p.IdempotencyKey = ""
	fp := fingerprint(p)
	ref, ok, release, err := h.claim(ctx, key, MethodRunStart, fp)
	if err != nil {
		return nil, err
	}
	defer release()
	if ok {
		r, err := h.GetRun(ctx, RunIDParams{RunID: ref.ID})
		if err != nil {
			return nil, err
		}
		if ref.Steer != nil {
			ref.Steer.Replayed = true
			ref.Steer.EventCursor = h.steerCursor(ctx, r.SessionID, r.ID, ref.Steer.SteerID)
		}
		r.Steer, r.Replayed = ref.Steer, true
		return r, nil
	}
	s, err := h.lockedSession(ctx, p.SessionID)
	if err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	activeID := s.activeID()
	q := queuedRun{id: h.cfg.NewID("run"), model: p.Model, maxSteps: p.MaxSteps, input: p.Input}
	if activeID == "" && len(s.queue) == 0 {
		r, err := s.admit(ctx, q, receipts(key, MethodRunStart, fp, s.id, receiptRef{ID: q.id}), false)
		return &RunResult{Run: r}, err
	}
	switch p.Busy {
	case BusyQueue:
		r, err := s.admit(ctx, q, receipts(key, MethodRunStart, fp, s.id, receiptRef{ID: q.id}), false)
		return &RunResult{Run: r}, err
	case BusyInterrupt:
		r, err := s.admit(ctx, q, receipts(key, MethodRunStart, fp, s.id, receiptRef{ID: q.id}), true)
		if err != nil {
			return nil, err
		}
		if s.active != nil {
			s.active.cancel(errors.New("interrupted by run " + q.id))
		}
		return &RunResult{Run: r}, nil
	case BusySteer:
		if activeID == "" {
			break // only queued runs: nothing to steer
		}
		steerID := h.cfg.NewID("steer")
		rcpt := &SteerReceipt{SteerID: steerID, RunID: activeID, Status: "accepted"}
		cur, err := s.steer(ctx, s.active, steerID, p.Input, receipts(key, MethodRunStart, fp, s.id, receiptRef{ID: activeID, Steer: rcpt}))
		if err != nil {
			return nil, err
		}
		rcpt.EventCursor = cur
		r, _ := s.j.Run(activeID)
		return &RunResult{Run: r, Steer: rcpt}, nil
	}
	return nil, errf(ErrRunConflict, map[string]any{"sessionId": s.id, "activeRunId": activeID},
		"session %s is busy with run %s (pass busy: queue, interrupt or steer)", s.id, activeID)
}

// steer appends steer.accepted and hands the input to the active run.
// Called with s.mu held.
func (s *session) steer(ctx context.Context, a *activeRun, steerID string, input []event.Part, rcpts []store.Receipt) (int64, error) {
	var cursor int64
	err := a.inbox.Add(func() error {
		e, err := event.New(a.id, event.SteerAccepted, event.SteerData{SteerID: steerID, Input: input})
		if err != nil {
			return err
		}
		evs, err := s.j.AppendReceipts(ctx, rcpts, e)
		if err != nil {
			return err
		}
		cursor = evs[0].Seq
		return nil
	}, agent.Steer{ID: steerID, Input: input})
	if errors.Is(err, agent.ErrSteersClosed) {
		return 0, errf(ErrRunConflict, map[string]any{"runId": a.id, "status": "finishing"}, "run %s is finishing and takes no more steering", a.id)
	}
	return cursor, err
}

// steerCursor finds the seq of a steer's steer.accepted event.
func (h *Host) steerCursor(ctx context.Context, sessionID, runID, steerID string) int64 {
	evs, err := h.cfg.Store.Read(ctx, store.ReadParams{SessionID: sessionID, RunID: runID, Types: []event.Type{event.SteerAccepted}, Limit: 1000})
	if err != nil {
		return 0
	}
	for _, e := range evs {
		var d event.SteerData
		if e.Decode(&d) == nil && d.SteerID == steerID {
			return e.Seq
		}
	}
	return 0
}

// SteerRun injects input into an active run.
func (h *Host) SteerRun(ctx context.Context, p SteerParams) (*SteerReceipt, error) {
	if strings.TrimSpace(event.Text(p.Input)) == "" {
		return nil, errf(ErrInvalidParams, nil, "input is empty")
	}
	key := p.IdempotencyKey
	p.IdempotencyKey = ""
	fp := fingerprint(p)
	ref, ok, release, err := h.claim(ctx, key, MethodRunSteer, fp)
	if err != nil {
		return nil, err
	}
	defer release()
	if ok && ref.Steer != nil {
		r := *ref.Steer
		r.Replayed = true
		run, err := h.GetRun(ctx, RunIDParams{RunID: r.RunID})
		if err == nil {
			r.EventCursor = h.steerCursor(ctx, run.SessionID, r.RunID, r.SteerID)
		}
		return &r, nil
	}
	run, err := h.GetRun(ctx, RunIDParams{RunID: p.RunID})
	if err != nil {
		return nil, err
	}
	s, err := h.lockedSession(ctx, run.SessionID)
	if err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	activeID := ""
	if s.active != nil {
		activeID = s.active.id
	}
	if p.ExpectedRunID != "" && p.ExpectedRunID != activeID {
		return nil, errf(ErrRunConflict, map[string]any{"expectedRunId": p.ExpectedRunID, "activeRunId": activeID},
			"expected active run %s, but the active run is %q", p.ExpectedRunID, activeID)
	}
	if activeID != p.RunID {
		cur, _ := s.j.Run(p.RunID)
		return nil, errf(ErrRunConflict, map[string]any{"runId": p.RunID, "status": cur.Status, "activeRunId": activeID},
			"run %s is not active (status %s)", p.RunID, cur.Status)
	}
	steerID := h.cfg.NewID("steer")
	rcpt := &SteerReceipt{SteerID: steerID, RunID: p.RunID, Status: "accepted"}
	cur, err := s.steer(ctx, s.active, steerID, p.Input, receipts(key, MethodRunSteer, fp, s.id, receiptRef{ID: p.RunID, Steer: rcpt}))
	if err != nil {
		return nil, err
	}
	rcpt.EventCursor = cur
	return rcpt, nil
}

// GetRun returns a run.
func (h *Host) GetRun(ctx context.Context, p RunIDParams) (*RunResult, error) {
	r, err := h.cfg.Store.Run(ctx, p.RunID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, errf(ErrNotFound, map[string]any{"runId": p.RunID}, "run %s not found", p.RunID)
	}
	if err != nil {
		return nil, err
	}
	return &RunResult{Run: r}, nil
}

// ListRuns lists a session's runs, oldest first.
func (h *Host) ListRuns(ctx context.Context, p ListRunsParams) (*ListRunsResult, error) {
	if _, err := h.GetSession(ctx, p.SessionID); err != nil {
		return nil, err
	}
	lp := store.ListRunsParams{SessionID: p.SessionID}
	if p.Status != "" {
		lp.Statuses = []string{p.Status}
	}
	runs, err := h.cfg.Store.Runs(ctx, lp)
	if err != nil {
		return nil, err
	}
	if runs == nil {
		runs = []store.Run{}
	}
	return &ListRunsResult{Runs: runs}, nil
}

// WaitRun waits until the run is terminal or the timeout passes.
func (h *Host) WaitRun(ctx context.Context, p WaitRunParams) (*WaitRunResult, error) {
	r, err := h.GetRun(ctx, RunIDParams{RunID: p.RunID})
	if err != nil {
		return nil, err
	}
	if store.IsTerminal(r.Status) {
		return &WaitRunResult{Run: r.Run}, nil
	}
	if p.TimeoutMs < 0 {
		return nil, errf(ErrInvalidParams, nil, "timeoutMs must not be negative")
	}
	s, err := h.lockedSession(ctx, r.SessionID)
	if err != nil {
		return nil, err
	}
	ch, ok := s.done[p.RunID]
	s.mu.Unlock()
	if ok {
		t := time.NewTimer(time.Duration(p.TimeoutMs) * time.Millisecond)
		defer t.Stop()
		select {
		case <-ch:
		case <-t.C:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	cur, _ := s.j.Run(p.RunID)
	return &WaitRunResult{Run: cur, TimedOut: !store.IsTerminal(cur.Status)}, nil
}

// CancelRun cancels a run and returns once run.cancelled is committed.
// Cancelling a terminal run returns it as it is.
func (h *Host) CancelRun(ctx context.Context, p CancelParams) (*RunResult, error) {
	key := p.IdempotencyKey
	r, err := h.GetRun(ctx, RunIDParams{RunID: p.RunID})
	if err != nil {
		return nil, err
	}
	if store.IsTerminal(r.Status) {
		return r, nil
	}
	s, err := h.session(ctx, r.SessionID)
	if err != nil {
		return nil, err
	}
	reason := p.Reason
	if reason == "" {
		reason = "cancelled by a client"
	}
	s.mu.Lock()
	ch := s.done[p.RunID]
	switch {
	case s.active != nil && s.active.id == p.RunID:
		s.active.cancel(errors.New(reason))
	default:
		for i, q := range s.queue {
			if q.id != p.RunID {
				continue
			}
			s.queue = append(s.queue[:i], s.queue[i+1:]...)
			e, _ := event.New(q.id, event.RunCancelled, event.RunEndedData{Reason: reason})
			if _, err := s.j.Append(ctx, e); err != nil {
				s.mu.Unlock()
				return nil, err
			}
			close(ch)
			delete(s.done, q.id)
			break
		}
	}
	s.mu.Unlock()
	if ch != nil {
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	cur, _ := s.j.Run(p.RunID)
	res := &RunResult{Run: cur}
	if key != "" {
		p.IdempotencyKey = ""
		fp := fingerprint(p)
		if _, err := h.cfg.Store.PutReceipt(ctx, receipts(key, MethodRunCancel, fp, s.id, receiptRef{ID: p.RunID})[0]); err != nil {
			h.cfg.Logger.Warn("store cancel receipt", "run", p.RunID, "err", err)
		}
	}
	return res, nil
}

// ReadEvents returns a page of a session's events after a cursor.
func (h *Host) ReadEvents(ctx context.Context, p ReadEventsParams) (*ReadEventsResult, error) {
	if p.Limit < 0 {
		return nil, errf(ErrInvalidParams, nil, "limit must not be negative")
	}
	if p.Limit == 0 {
		p.Limit = 200
	}
	p.Limit = min(p.Limit, 1000)
	last, err := h.lastSeq(ctx, p.SessionID, p.After)
	if err != nil {
		return nil, err
	}
	evs, err := h.cfg.Store.Read(ctx, store.ReadParams{SessionID: p.SessionID, After: p.After, Limit: p.Limit, RunID: p.RunID})
	if err != nil {
		return nil, err
	}
	res := &ReadEventsResult{Events: evs, NextCursor: p.After}
	if len(evs) > 0 {
		res.NextCursor = evs[len(evs)-1].Seq
	}
	res.HasMore = len(evs) == p.Limit && res.NextCursor < last
	if res.Events == nil {
		res.Events = []event.Event{}
	}
	return res, nil
}

// lastSeq checks a cursor against a session's log.
func (h *Host) lastSeq(ctx context.Context, sessionID string, after int64) (int64, error) {
	last, err := h.cfg.Store.LastSeq(ctx, sessionID)
	if errors.Is(err, store.ErrNotFound) {
		return 0, errf(ErrNotFound, map[string]any{"sessionId": sessionID}, "session %s not found", sessionID)
	}
	if err != nil {
		return 0, err
	}
	if after < 0 || after > last {
		return 0, errf(ErrCursorInvalid, map[string]any{"sessionId": sessionID, "cursor": after, "lastSeq": last},
			"cursor %d is not in session %s (last seq %d)", after, sessionID, last)
	}
	return last, nil
}

// Subscribe returns the session's events after the cursor: the replay,
// then the live tail, with no gap and no duplicate. The iterator ends
// with an error wrapping journal.ErrLagged (overflow) when the consumer
// falls behind, ErrClosed when the host closes, or ctx's error.
func (h *Host) Subscribe(ctx context.Context, sessionID string, after int64, runID string) (iter.Seq2[event.Event, error], error) {
	if _, err := h.lastSeq(ctx, sessionID, after); err != nil {
		return nil, err
	}
	s, err := h.session(ctx, sessionID)
	if err != nil {
		return nil, err
	}
	return s.j.Events(ctx, after, journal.SubscribeOptions{RunID: runID, Buffer: h.cfg.SubscriberBuffer}), nil
}
