package host

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"weft.dev/weft/api"
	"weft.dev/weft/event"
	"weft.dev/weft/host/internal/idem"
	"weft.dev/weft/host/internal/session"
	"weft.dev/weft/store"
)

// ListEnv returns a session's current binding. The binding belongs to the
// session: it is what the next run (and the active run's next tool call)
// sees ([api.EnvList]).
func (h *Host) ListEnv(ctx context.Context, p api.ListEnvParams) (*api.ListEnvResult, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	s, err := h.sessionRecord(ctx, p.SessionID)
	if err != nil {
		return nil, err
	}
	cur, err := h.envCursor(ctx, p.SessionID)
	if err != nil {
		return nil, err
	}
	return &api.ListEnvResult{Environment: session.Environment(s.Binding.BindingVersion, s.Binding.Mounts), LatestEnvironmentCursor: cur}, nil
}

// envCursor returns the seq of the session's last mount change, or 1
// (session.created) when there was none.
func (h *Host) envCursor(ctx context.Context, sessionID string) (int64, error) {
	last := int64(1)
	err := h.mountEvents(ctx, sessionID, func(e event.Event) bool {
		last = e.Seq
		return true
	})
	return last, err
}

// opCursor returns the seq of the mount change made by the operation opID.
func (h *Host) opCursor(ctx context.Context, sessionID, opID string) (int64, error) {
	var seq int64
	err := h.mountEvents(ctx, sessionID, func(e event.Event) bool {
		var d event.MountChangeData
		if e.Decode(&d) == nil && d.OperationID == opID {
			seq = e.Seq
			return false
		}
		return true
	})
	return seq, err
}

// mountEvents calls yield with the session's mount.added and mount.removed
// events, in order, until it returns false.
func (h *Host) mountEvents(ctx context.Context, sessionID string, yield func(event.Event) bool) error {
	var after int64
	for {
		page, err := h.cfg.Store.Read(ctx, store.ReadParams{SessionID: sessionID, After: after, Limit: 1000, Types: []event.Type{event.MountAdded, event.MountRemoved}})
		if err != nil {
			return err
		}
		for _, e := range page {
			if !yield(e) {
				return nil
			}
		}
		if len(page) < 1000 {
			return nil
		}
		after = page[len(page)-1].Seq
	}
}

// replayMount returns the stored result of an earlier mount change, with
// its cursors looked up again and Applied false.
func (h *Host) replayMount(ctx context.Context, sessionID string, ref idem.Ref) (*api.MountResult, error) {
	var res api.MountResult
	if err := json.Unmarshal(ref.Result, &res); err != nil {
		return nil, fmt.Errorf("mount receipt %s: %w", ref.ID, err)
	}
	res.Applied = false
	var err error
	if res.EventCursor, err = h.opCursor(ctx, sessionID, ref.ID); err != nil {
		return nil, err
	}
	if ref.Steer != nil {
		res.SteeringCursor = h.steerCursor(ctx, sessionID, ref.Steer.RunID, ref.Steer.SteerID)
	}
	return &res, nil
}

// Mount attaches a mount to a session, or replaces one with p.Replace. The
// new binding applies to the active run's next tool call and to every
// later run; tool calls already running keep the binding they started
// with. Errors: InvalidParams for a mount that breaks a rule (see
// [env.NewBinding]; DefaultForShell needs a read-write mount),
// AlreadyExists for a taken ID without Replace, RunConflict when
// p.ExpectedBindingVersion is stale, IdempotencyConflict for a reused key
// ([api.EnvMount]).
func (h *Host) Mount(ctx context.Context, p api.MountParams) (*api.MountResult, error) {
	return mutate(ctx, h, api.EnvMount, p, h.mount, func(ctx context.Context, p api.MountParams, ref idem.Ref) (*api.MountResult, error) {
		return h.replayMount(ctx, p.SessionID, ref)
	})
}

func (h *Host) mount(ctx context.Context, p api.MountParams, rc *idem.Claim) (*api.MountResult, idem.Ref, error) {
	// The host's checks: the session (before a scratch mount's
	// directory is made for it), the mount's defaults and scratch
	// directory, and, for a remote client, where its path leads.
	rec, err := h.sessionRecord(ctx, p.SessionID)
	if err != nil {
		return nil, idem.Ref{}, err
	}
	// A binding holds at most api.MaxMounts: checked here, before a
	// scratch directory is made, and again exactly by the session's
	// Mount, in its order (concurrent mounts may all pass this one).
	if ms := rec.Binding.Mounts; len(ms) >= api.MaxMounts && !(p.Replace && slices.ContainsFunc(ms, func(m event.Mount) bool { return m.ID == p.Mount.ID })) {
		return nil, idem.Ref{}, invalid("mount", "the session has %d mounts; the limit is %d", len(ms), api.MaxMounts).With("limit", api.MaxMounts)
	}
	if err := h.normalizeMount(p.SessionID, &p.Mount); err != nil {
		return nil, idem.Ref{}, err
	}
	ms := []event.Mount{p.Mount}
	if err := h.protectMounts(ctx, "mount", ms); err != nil {
		return nil, idem.Ref{}, err
	}
	p.Mount = ms[0]
	var res *api.MountResult
	err = h.with(ctx, p.SessionID, func(s *session.Session) (err error) {
		res, err = s.Mount(ctx, p, rc)
		return err
	})
	if err != nil {
		return nil, idem.Ref{}, err
	}
	return res, idem.Ref{ID: res.OperationID}, nil
}

// Unmount detaches a mount from a session. The binding keeps at least one
// mount; unmounting the default needs p.NewDefaultMountID. A mount that
// owns a running process is refused with RunConflict naming
// "<mountId>:<processId>", and the binding is left as it was. Other
// errors are as for [Host.Mount]; an unknown mount is InvalidParams
// ([api.EnvUnmount]).
func (h *Host) Unmount(ctx context.Context, p api.UnmountParams) (*api.MountResult, error) {
	return mutate(ctx, h, api.EnvUnmount, p, h.unmount, func(ctx context.Context, p api.UnmountParams, ref idem.Ref) (*api.MountResult, error) {
		return h.replayMount(ctx, p.SessionID, ref)
	})
}

func (h *Host) unmount(ctx context.Context, p api.UnmountParams, rc *idem.Claim) (*api.MountResult, idem.Ref, error) {
	var res *api.MountResult
	err := h.with(ctx, p.SessionID, func(s *session.Session) (err error) {
		res, err = s.Unmount(ctx, p, rc)
		return err
	})
	if err != nil {
		return nil, idem.Ref{}, err
	}
	return res, idem.Ref{ID: res.OperationID}, nil
}
