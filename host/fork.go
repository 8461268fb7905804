package host

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"

	"weft.dev/weft/api"
	"weft.dev/weft/event"
	"weft.dev/weft/host/internal/idem"
	"weft.dev/weft/host/internal/session"
	"weft.dev/weft/store"
	"weft.dev/weft/store/record"
)

// ForkSession creates a session whose history is another's up to a seq
// ([api.SessionFork]). The fork's log holds none of the source's events:
// the store reads them through it (store.SessionLog.Read), so a fork
// costs the same whatever the source's size, and nothing the source does
// later (runs, a rewind, a compaction, its deletion) changes the fork.
func (h *Host) ForkSession(ctx context.Context, p api.ForkSessionParams) (*api.ForkResult, error) {
	return mutate(ctx, h, api.SessionFork, p, h.forkSession, h.replayFork)
}

func (h *Host) forkSession(ctx context.Context, p api.ForkSessionParams, rc *idem.Claim) (*api.ForkResult, idem.Ref, error) {
	src, err := h.sessionRecord(ctx, p.SessionID)
	if err != nil {
		return nil, idem.Ref{}, err
	}
	last, err := h.cfg.Store.LastSeq(ctx, p.SessionID)
	if err != nil {
		return nil, idem.Ref{}, apiError(err)
	}
	at := p.AtSeq
	if at == 0 {
		at = last
	}
	if at > last {
		return nil, idem.Ref{}, api.Errorf(api.KindCursorInvalid, "atSeq %d is beyond the log of session %s (last seq %d)", at, p.SessionID, last).
			With("sessionId", p.SessionID).With("atSeq", at).With("lastSeq", last)
	}
	boundary, err := h.stepBoundary(ctx, src.Session, at)
	if err != nil {
		return nil, idem.Ref{}, apiError(err)
	}

	id := h.cfg.NewID("ses")
	var mounts []event.Mount
	var shared []string
	if p.Mounts != nil {
		p.Mounts = slices.Clone(p.Mounts)
		if err := h.protectMounts(ctx, "mounts[%d]", p.Mounts); err != nil {
			return nil, idem.Ref{}, err
		}
		mounts, err = h.prepareMounts(id, p.Mounts)
	} else {
		mounts, shared, err = h.forkMounts(id, src.Binding.Mounts)
	}
	if err != nil {
		h.dropScratch(ctx, id)
		return nil, idem.Ref{}, err
	}
	title := src.Title
	if p.Title != nil {
		title = *p.Title
	}
	data := event.SessionForkedData{
		SessionCreatedData: event.SessionCreatedData{Title: title, Model: src.Model, Metadata: src.Metadata,
			Mounts: mounts, Network: src.Binding.Network, Limits: src.Binding.Limits, Policy: src.Policy,
			Tools: src.Tools, MCPServers: src.MCPServers, Budget: src.Budget},
		From: p.SessionID, Seq: boundary, SharedMounts: shared,
	}
	if boundary != at {
		data.RequestedSeq = at
	}
	s, err := session.Fork(ctx, &h.scfg, id, data, rc)
	if err != nil {
		h.dropScratch(ctx, id)
		return nil, idem.Ref{}, err
	}
	if err := h.add(s); err != nil {
		return nil, idem.Ref{}, err
	}
	h.shareSnapshot(ctx, p.SessionID, id, boundary, s.Epoch())
	return &api.ForkResult{Session: s.Record(), AtSeq: boundary, SharedMounts: shared}, idem.Ref{ID: id}, nil
}

// shareSnapshot gives fork the source's transcript snapshot when it is
// through a seq the fork holds (the events before it are the same), so
// that the fork's first run folds only the events after it, not the
// whole of the source's log. epoch is the fork's lease epoch. A snapshot is a cache: failing to copy it
// costs that run a read of the log, nothing else.
func (h *Host) shareSnapshot(ctx context.Context, src, fork string, through, epoch int64) {
	snap, err := h.cfg.Store.Snapshot(ctx, src, record.SnapshotTranscript)
	if err != nil || snap.Seq > through {
		return
	}
	snap.SessionID, snap.Epoch = fork, epoch // under the fork's lease
	_ = h.cfg.Store.PutSnapshot(ctx, snap)
}

// replayFork answers a retry of session/fork with the fork as it is now.
func (h *Host) replayFork(ctx context.Context, _ api.ForkSessionParams, ref idem.Ref) (*api.ForkResult, error) {
	s, err := h.sessionRecord(ctx, ref.ID)
	if err != nil {
		return nil, err
	}
	res := &api.ForkResult{Session: s.Session, Replayed: true}
	if s.Fork != nil {
		res.AtSeq = s.Fork.Seq
	}
	for _, m := range s.Binding.Mounts {
		if m.Kind != event.KindScratch && m.Mode == event.ModeReadWrite {
			res.SharedMounts = append(res.SharedMounts, m.ID)
		}
	}
	return res, nil
}

// forkMounts returns the mounts of fork id taken from its source's: a
// local directory is shared (its ID is in shared when it is read-write),
// a scratch directory, which goes with the session that owns it, is
// copied into the fork's own.
func (h *Host) forkMounts(id string, src []event.Mount) (mounts []event.Mount, shared []string, err error) {
	for _, m := range src {
		if m.Kind == event.KindScratch {
			from := m.Path
			if err := h.normalizeMount(id, &m); err != nil {
				return nil, nil, err
			}
			if err := os.CopyFS(m.Path, os.DirFS(from)); err != nil {
				return nil, nil, api.Wrap(api.KindEnvironmentUnavailable, err, "mount %s: copy the source's scratch directory: %v", m.ID, err).With("mountId", m.ID)
			}
		} else if m.Mode == event.ModeReadWrite {
			shared = append(shared, m.ID)
		}
		mounts = append(mounts, m)
	}
	return mounts, shared, nil
}

// stepBoundary returns the seq a fork of src asked for at starts from:
// at itself, unless at falls inside a run's step, and then the seq
// before that step's step.started (or before the run's run.queued if it
// had not started a step). What it reads is bounded by the run's steps,
// never by the log's length.
func (h *Host) stepBoundary(ctx context.Context, src record.Session, at int64) (int64, error) {
	// The run open at `at`, if any, shows in the first event after it
	// that belongs to a run; past the end of the log, the active run.
	after, err := h.cfg.Store.Read(ctx, store.ReadParams{SessionID: src.ID, After: at, Limit: 256})
	if err != nil {
		return 0, err
	}
	var next *event.Event
	for i := range after {
		// A run queued meanwhile says nothing of the run that is going.
		if after[i].RunID != "" && after[i].Type != event.RunQueued {
			next = &after[i]
			break
		}
	}
	runID := src.ActiveRunID
	if next != nil {
		runID = next.RunID
		switch next.Type {
		case event.StepStarted, event.SteerConsumed, event.RunStarted,
			event.RunCompleted, event.RunFailed, event.RunCancelled, event.RunInterrupted:
			return at, nil // between steps
		}
	}
	if runID == "" {
		return at, nil
	}
	r, err := h.cfg.Store.Run(ctx, runID)
	if errors.Is(err, store.ErrNotFound) {
		return at, nil
	} else if err != nil {
		return 0, err
	}
	if r.FirstSeq > at || next == nil && record.IsTerminal(r.Status) {
		return at, nil
	}
	steps, err := h.cfg.Store.Read(ctx, store.ReadParams{SessionID: src.ID, RunID: runID, Types: []event.Type{event.StepStarted},
		After: r.FirstSeq - 1, Through: at, Limit: 1 << 20})
	if err != nil {
		return 0, fmt.Errorf("session %s: steps of run %s: %w", src.ID, runID, err)
	}
	if len(steps) == 0 {
		return r.FirstSeq - 1, nil
	}
	return steps[len(steps)-1].Seq - 1, nil
}
