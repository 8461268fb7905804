package host

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"

	"weft.dev/weft/api"
	"weft.dev/weft/event"
	"weft.dev/weft/host/internal/checkpoint"
	"weft.dev/weft/host/internal/idem"
	"weft.dev/weft/host/internal/session"
	"weft.dev/weft/store"
)

// contextCompacted is the type of the compaction event: a rewind never
// goes back past one (the conversation before it is a summary).
const contextCompacted event.Type = "context.compacted"

// RewindSession takes a session back to an earlier seq
// ([api.SessionRewind]): later runs see the conversation as it was then
// (session.rewound; the log keeps everything), and with p.Files the
// read-write mounts' files are put back as the checkpoints of the steps
// after it recorded them. It refuses, with nothing changed, what it could
// not do whole: a seq beyond the log or undone by an earlier rewind
// (-32016), one before a compaction, a rewind while a run is active or
// queued (-32013), and for files a checkpoint that is incomplete, a mount
// that is gone or another directory now, or a file that changed since
// its checkpoint (-32031).
func (h *Host) RewindSession(ctx context.Context, p api.RewindParams) (*api.RewindResult, error) {
	return mutate(ctx, h, api.SessionRewind, p, h.rewindSession, h.replayRewind)
}

func (h *Host) replayRewind(_ context.Context, p api.RewindParams, ref idem.Ref) (*api.RewindResult, error) {
	var res api.RewindResult
	if len(ref.Result) > 0 && json.Unmarshal(ref.Result, &res) == nil {
		res.Replayed = true
		return &res, nil
	}
	return &api.RewindResult{ToSeq: p.ToSeq, Files: p.Files, Replayed: true}, nil
}

// undone is the range of seqs an earlier rewind took back: (to, at).
type undone struct {
	to, at int64
	files  bool
}

func (h *Host) rewindSession(ctx context.Context, p api.RewindParams, rc *idem.Claim) (*api.RewindResult, idem.Ref, error) {
	src, err := h.sessionRecord(ctx, p.SessionID)
	if err != nil {
		return nil, idem.Ref{}, err
	}
	last, err := h.cfg.Store.LastSeq(ctx, p.SessionID)
	if err != nil {
		return nil, idem.Ref{}, apiError(err)
	}
	if p.ToSeq > last {
		return nil, idem.Ref{}, api.Errorf(api.KindCursorInvalid, "toSeq %d is beyond the log of session %s (last seq %d)", p.ToSeq, p.SessionID, last).
			With("sessionId", p.SessionID).With("toSeq", p.ToSeq).With("lastSeq", last)
	}
	to, err := h.stepBoundary(ctx, src.Session, p.ToSeq)
	if err != nil {
		return nil, idem.Ref{}, apiError(err)
	}
	if f := src.Fork; f != nil && p.Files && to < f.Seq {
		// The fork's events through f.Seq are its source's, and so are
		// the file changes they record: the source rewinds those.
		return nil, idem.Ref{}, api.Errorf(api.KindCursorInvalid, "seq %d of fork %s is an event of session %s, which it was forked from at seq %d: rewind the files there, or the fork's conversation only", to, p.SessionID, f.SessionID, f.Seq).
			With("sessionId", p.SessionID).With("toSeq", to).With("forkOf", f.SessionID).With("forkSeq", f.Seq)
	}
	// What happened after it: compactions, rewinds, checkpoints.
	var rewinds []undone
	var checkpoints []event.Event
	for after := to; ; {
		evs, err := h.cfg.Store.Read(ctx, store.ReadParams{SessionID: p.SessionID, After: after, Limit: 1000,
			Types: []event.Type{contextCompacted, event.SessionRewound, event.CheckpointRecorded}})
		if err != nil {
			return nil, idem.Ref{}, apiError(err)
		}
		for _, e := range evs {
			switch e.Type {
			case contextCompacted:
				return nil, idem.Ref{}, api.Errorf(api.KindCursorInvalid, "session %s was compacted at seq %d, after seq %d: a rewind does not go back past a compaction", p.SessionID, e.Seq, to).
					With("sessionId", p.SessionID).With("toSeq", to).With("compactedAt", e.Seq)
			case event.SessionRewound:
				var d event.SessionRewoundData
				if err := e.Decode(&d); err != nil {
					return nil, idem.Ref{}, apiError(err)
				}
				if d.ToSeq < to {
					return nil, idem.Ref{}, api.Errorf(api.KindCursorInvalid, "seq %d of session %s was undone by the rewind at seq %d (to seq %d)", to, p.SessionID, e.Seq, d.ToSeq).
						With("sessionId", p.SessionID).With("toSeq", to).With("rewoundAt", e.Seq)
				}
				rewinds = append(rewinds, undone{to: d.ToSeq, at: e.Seq, files: d.Files})
			case event.CheckpointRecorded:
				checkpoints = append(checkpoints, e)
			}
		}
		if len(evs) < 1000 {
			break
		}
		after = evs[len(evs)-1].Seq
	}
	res := &api.RewindResult{ToSeq: to, Files: p.Files}
	var restore func(ctx context.Context) (json.RawMessage, error)
	if p.Files {
		plans, err := h.rewindPlans(src.Binding.Mounts, checkpoints, rewinds, p.SessionID)
		if err != nil {
			return nil, idem.Ref{}, err
		}
		restore = func(ctx context.Context) (json.RawMessage, error) {
			for _, pl := range plans {
				if err := pl.t.Check(pl.plan); err != nil {
					return nil, rewindFileErr(p.SessionID, pl.mount, err)
				}
			}
			for _, pl := range plans {
				paths, err := pl.t.Restore(pl.plan)
				for _, rel := range paths {
					res.RestoredCount++
					if len(res.Restored) < api.MaxRewindPaths {
						res.Restored = append(res.Restored, pl.mount+"/"+rel)
					}
				}
				if err != nil {
					return nil, rewindFileErr(p.SessionID, pl.mount, err)
				}
			}
			return json.Marshal(res)
		}
	} else {
		restore = func(context.Context) (json.RawMessage, error) { return json.Marshal(res) }
	}
	err = h.with(ctx, p.SessionID, func(s *session.Session) error {
		_, err := s.Rewind(ctx, event.SessionRewoundData{ToSeq: to, Files: p.Files}, restore, rc)
		return err
	})
	if err != nil {
		return nil, idem.Ref{}, err
	}
	return res, idem.Ref{ID: p.SessionID}, nil
}

// mountPlan is the rewind of one mount.
type mountPlan struct {
	mount string
	t     *checkpoint.Tracker
	plan  checkpoint.Plan
}

// rewindPlans folds the checkpoints after the rewind's seq (those no
// earlier file rewind undid) into one plan per mount: each path goes back
// to its state before the first of them and is expected as the last left
// it. It refuses an incomplete checkpoint and a mount that is gone or
// another directory now.
func (h *Host) rewindPlans(mounts []event.Mount, cps []event.Event, rewinds []undone, sid string) ([]mountPlan, error) {
	if len(cps) > 0 && h.ckpt == nil {
		return nil, api.Errorf(api.KindEnvironmentUnavailable, "this host keeps no file checkpoints (no checkpoint directory)").With("sessionId", sid)
	}
	plans := map[string]*mountPlan{}
	var order []string
	for _, e := range cps {
		if undoneBy(e.Seq, rewinds) {
			continue
		}
		var d event.CheckpointData
		if err := e.Decode(&d); err != nil {
			return nil, apiError(err)
		}
		if d.Incomplete != "" {
			return nil, api.Errorf(api.KindEnvironmentUnavailable, "the checkpoint of mount %s at seq %d is incomplete (%s): its files cannot be put back", d.MountID, e.Seq, d.Incomplete).
				With("sessionId", sid).With("mountId", d.MountID).With("seq", e.Seq).With("reason", "incomplete")
		}
		pl := plans[d.MountID]
		if pl == nil {
			var m *event.Mount
			for i := range mounts {
				if mounts[i].ID == d.MountID {
					m = &mounts[i]
				}
			}
			if m == nil {
				return nil, api.Errorf(api.KindEnvironmentUnavailable, "mount %s, whose files changed at seq %d, is no longer mounted", d.MountID, e.Seq).
					With("sessionId", sid).With("mountId", d.MountID).With("reason", "unmounted")
			}
			real, err := filepath.EvalSymlinks(m.Path)
			if err != nil || real != d.Path {
				return nil, api.Errorf(api.KindEnvironmentUnavailable, "mount %s is now %s, not the directory %s its checkpoint at seq %d recorded", d.MountID, m.Path, d.Path, e.Seq).
					With("sessionId", sid).With("mountId", d.MountID).With("reason", "remounted")
			}
			pl = &mountPlan{mount: d.MountID, t: h.ckpt.Tracker(sid, d.MountID, d.Path),
				plan: checkpoint.Plan{Expect: map[string]*event.FileState{}, Target: map[string]*event.FileState{}}}
			plans[d.MountID] = pl
			order = append(order, d.MountID)
		}
		for _, c := range d.Changes {
			if _, ok := pl.plan.Target[c.Path]; !ok {
				pl.plan.Target[c.Path] = c.Before
			}
			pl.plan.Expect[c.Path] = c.After
		}
	}
	out := make([]mountPlan, 0, len(order))
	for _, id := range order {
		out = append(out, *plans[id])
	}
	return out, nil
}

// undoneBy reports whether seq lies in a range a file rewind undid.
func undoneBy(seq int64, rewinds []undone) bool {
	for _, r := range rewinds {
		if r.files && r.to < seq && seq < r.at {
			return true
		}
	}
	return false
}

// rewindFileErr is the typed refusal of a rewind of mount's files.
func rewindFileErr(sid, mount string, err error) error {
	reason := "restore"
	switch {
	case errors.Is(err, checkpoint.ErrChanged):
		reason = "changed"
	case errors.Is(err, checkpoint.ErrMissing):
		reason = "missing"
	}
	return api.Wrap(api.KindEnvironmentUnavailable, err, "session %s: the files of mount %s cannot be put back: %v", sid, mount, err).
		With("sessionId", sid).With("mountId", mount).With("reason", reason)
}
