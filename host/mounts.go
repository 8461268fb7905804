package host

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"weft.dev/weft/agent"
	"weft.dev/weft/env"
	"weft.dev/weft/event"
	"weft.dev/weft/store"
)

// Method names of the environment, shared with the rpc package's method
// table. They are also the methods idempotency receipts are kept under.
const (
	MethodEnvList    = "env/list"
	MethodEnvMount   = "env/mount"
	MethodEnvUnmount = "env/unmount"
)

// Warning codes of [MountResult.Warnings].
const (
	// WarnNoActiveRun: injectContext was asked but no run was active; the
	// change applies to the session's next run.
	WarnNoActiveRun = "no_active_run"
	// WarnSteerFailed: the active run was finishing and took no steering.
	WarnSteerFailed = "steer_failed"
	// WarnShellDefaultDropped: a replacement made the shell default
	// read-only, so the shell default moved (or there is none now).
	WarnShellDefaultDropped = "shell_default_dropped"
)

// Environment is a session's binding as clients see it. An empty
// DefaultMountID means the binding has no mounts; an empty
// DefaultShellMountID means no read-write mount is the shell default.
type Environment struct {
	BindingVersion      int64         `json:"bindingVersion"`
	DefaultMountID      string        `json:"defaultMountId,omitempty"`
	DefaultShellMountID string        `json:"defaultShellMountId,omitempty"`
	Mounts              []event.Mount `json:"mounts"`
}

// ListEnvParams are the params of env/list.
type ListEnvParams struct {
	SessionID string `json:"sessionId"`
}

// ListEnvResult is a session's current binding.
type ListEnvResult struct {
	Environment
	// LatestEnvironmentCursor is the seq of the event that made the current
	// binding: the last mount.added or mount.removed, or session.created.
	LatestEnvironmentCursor int64 `json:"latestEnvironmentCursor"`
}

// MountParams are the params of env/mount.
type MountParams struct {
	SessionID string `json:"sessionId"`
	// Mount is the mount to attach. Kind defaults to local and Mode to rw;
	// the host fills in Path for scratch mounts.
	Mount event.Mount `json:"mount"`
	// Replace allows replacing a mount with the same ID, which keeps that
	// mount's default flags. Without it an existing ID is AlreadyExists.
	Replace bool `json:"replace,omitempty"`
	// ExpectedBindingVersion, if set, must be the session's current
	// binding version (else RunConflict).
	ExpectedBindingVersion *int64 `json:"expectedBindingVersion,omitempty"`
	// InjectContext steers the active run with an <environment-context/>
	// line describing the change.
	InjectContext  bool   `json:"injectContext,omitempty"`
	IdempotencyKey string `json:"idempotencyKey,omitempty"`
}

// UnmountParams are the params of env/unmount.
type UnmountParams struct {
	SessionID string `json:"sessionId"`
	MountID   string `json:"mountId"`
	// NewDefaultMountID names the new default mount; required when MountID
	// is the default.
	NewDefaultMountID string `json:"newDefaultMountId,omitempty"`
	// NewDefaultShellMountID names a read-write mount to become the shell
	// default. When MountID is the shell default and this is empty, no
	// mount is flagged and the default mount takes it if it is read-write.
	NewDefaultShellMountID string `json:"newDefaultShellMountId,omitempty"`
	ExpectedBindingVersion *int64 `json:"expectedBindingVersion,omitempty"`
	InjectContext          bool   `json:"injectContext,omitempty"`
	IdempotencyKey         string `json:"idempotencyKey,omitempty"`
}

// Warning is a part of a mount change that did not happen, such as the
// steering of injectContext. It is safe to display.
type Warning struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// MountResult is the result of env/mount (with Mount) and env/unmount
// (with RemovedMount).
type MountResult struct {
	OperationID string `json:"operationId"`
	MountID     string `json:"mountId"`
	// Applied is false when the result is the replay of an earlier
	// request with the same idempotency key.
	Applied                     bool   `json:"applied"`
	PreviousBindingVersion      int64  `json:"previousBindingVersion"`
	BindingVersion              int64  `json:"bindingVersion"`
	PreviousDefaultMountID      string `json:"previousDefaultMountId,omitempty"`
	CurrentDefaultMountID       string `json:"currentDefaultMountId,omitempty"`
	PreviousDefaultShellMountID string `json:"previousDefaultShellMountId,omitempty"`
	CurrentDefaultShellMountID  string `json:"currentDefaultShellMountId,omitempty"`
	// Mount is the mount as attached, flags normalised (env/mount).
	Mount *event.Mount `json:"mount,omitempty"`
	// RemovedMount is the mount as it was before env/unmount.
	RemovedMount *event.Mount `json:"removedMount,omitempty"`
	// Environment is the binding after the change.
	Environment Environment `json:"environment"`
	// EventCursor is the seq of the mount.added or mount.removed event.
	EventCursor int64 `json:"eventCursor"`
	// SteeringCursor is the seq of the steer.accepted event of injectContext.
	SteeringCursor int64     `json:"steeringCursor,omitempty"`
	Warnings       []Warning `json:"warnings,omitempty"`
}

// environment describes mounts whose flags are normalised.
func environment(version int64, mounts []event.Mount) Environment {
	e := Environment{BindingVersion: version, Mounts: slices.Clone(mounts)}
	if e.Mounts == nil {
		e.Mounts = []event.Mount{}
	}
	e.DefaultMountID, e.DefaultShellMountID = defaults(mounts)
	return e
}

func defaults(mounts []event.Mount) (def, shell string) {
	for _, m := range mounts {
		if m.Default {
			def = m.ID
		}
		if m.DefaultForShell {
			shell = m.ID
		}
	}
	return def, shell
}

// ListEnv returns a session's current binding. The binding belongs to the
// session: it is what the next run (and the active run's next tool call)
// sees.
func (h *Host) ListEnv(ctx context.Context, p ListEnvParams) (*ListEnvResult, error) {
	if p.SessionID == "" {
		return nil, errf(ErrInvalidParams, nil, "sessionId is required")
	}
	s, err := h.GetSession(ctx, p.SessionID)
	if err != nil {
		return nil, err
	}
	cur, err := h.envCursor(ctx, p.SessionID)
	if err != nil {
		return nil, err
	}
	return &ListEnvResult{Environment: environment(s.Binding.BindingVersion, s.Binding.Mounts), LatestEnvironmentCursor: cur}, nil
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
func (h *Host) replayMount(ctx context.Context, sessionID string, ref receiptRef) (*MountResult, error) {
	b, err := json.Marshal(ref.Result)
	if err != nil {
		return nil, err
	}
	var res MountResult
	if err := json.Unmarshal(b, &res); err != nil {
		return nil, fmt.Errorf("mount receipt %s: %w", ref.ID, err)
	}
	res.Applied = false
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
// p.ExpectedBindingVersion is stale, IdempotencyConflict for a reused key.
func (h *Host) Mount(ctx context.Context, p MountParams) (*MountResult, error) {
	if p.SessionID == "" {
		return nil, errf(ErrInvalidParams, nil, "sessionId is required")
	}
	if p.Mount.ID == "" {
		return nil, errf(ErrInvalidParams, nil, "mount.id is required")
	}
	key := p.IdempotencyKey
	p.IdempotencyKey = ""
	fp := fingerprint(p)
	ref, ok, release, err := h.claim(ctx, key, MethodEnvMount, fp)
	if err != nil {
		return nil, err
	}
	defer release()
	if ok {
		return h.replayMount(ctx, p.SessionID, ref)
	}
	m := p.Mount
	if m.Kind == "" {
		m.Kind = event.KindLocal
	}
	if m.Mode == "" {
		m.Mode = event.ModeReadWrite
	}
	if m.DefaultForShell && m.Mode != event.ModeReadWrite {
		return nil, errf(ErrInvalidParams, map[string]any{"mountId": m.ID}, "mount %s: defaultForShell needs a read-write mount", m.ID)
	}
	s, err := h.lockedSession(ctx, p.SessionID)
	if err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	cur := s.j.Session().Binding
	if err := checkVersion(s.id, p.ExpectedBindingVersion, cur.BindingVersion); err != nil {
		return nil, err
	}
	var warnings []Warning
	mounts := slices.Clone(cur.Mounts)
	i := slices.IndexFunc(mounts, func(x event.Mount) bool { return x.ID == m.ID })
	if i >= 0 {
		if !p.Replace {
			return nil, errf(ErrAlreadyExists, map[string]any{"sessionId": s.id, "mountId": m.ID},
				"session %s already has mount %s (pass replace to replace it)", s.id, m.ID)
		}
		old := mounts[i]
		m.Default = m.Default || old.Default
		if old.DefaultForShell {
			if m.Mode == event.ModeReadWrite {
				m.DefaultForShell = true
			} else {
				warnings = append(warnings, Warning{Code: WarnShellDefaultDropped,
					Message: fmt.Sprintf("mount %s was the shell default and is now read-only", m.ID)})
			}
		}
	}
	if m.Kind == event.KindScratch {
		if h.cfg.ScratchDir == "" {
			return nil, errf(ErrInvalidParams, map[string]any{"mountId": m.ID}, "mount %s: scratch mounts need a host scratch directory", m.ID)
		}
		m.Path = filepath.Join(h.cfg.ScratchDir, s.id, m.ID)
		if err := os.MkdirAll(m.Path, 0o700); err != nil {
			return nil, err
		}
	}
	for j := range mounts {
		if m.Default {
			mounts[j].Default = false
		}
		if m.DefaultForShell {
			mounts[j].DefaultForShell = false
		}
	}
	if i >= 0 {
		mounts[i] = m
	} else {
		mounts = append(mounts, m)
	}
	nb, err := env.Open(event.Binding{BindingVersion: cur.BindingVersion + 1, Mounts: mounts, Network: cur.Network})
	if err != nil {
		return nil, errf(ErrInvalidParams, map[string]any{"mountId": m.ID}, "mounts: %v", strings.TrimPrefix(err.Error(), "env: "))
	}
	mounted, _ := nb.Mount(m.ID)
	res := newResult(h.cfg.NewID("envop"), m.ID, cur, nb)
	res.Mount = &mounted
	res.Warnings = warnings
	e, err := event.New("", event.MountAdded, event.MountChangeData{OperationID: res.OperationID, Mount: mounted, BindingVersion: nb.Version(), Mounts: nb.Mounts()})
	if err != nil {
		nb.Close()
		return nil, err
	}
	var inject string
	if p.InjectContext {
		inject = contextLine("mounted", mounted)
	}
	if err := s.changeEnv(ctx, nb, e, res, inject, key, MethodEnvMount, fp); err != nil {
		return nil, err
	}
	return res, nil
}

// Unmount detaches a mount from a session. The binding keeps at least one
// mount; unmounting the default needs p.NewDefaultMountID. A mount that
// owns a running process (Config.LiveProcesses) is refused with
// RunConflict naming "<mountId>:<processId>", and the binding is left as
// it was. Other errors are as for [Host.Mount]; an unknown mount is
// InvalidParams.
func (h *Host) Unmount(ctx context.Context, p UnmountParams) (*MountResult, error) {
	if p.SessionID == "" {
		return nil, errf(ErrInvalidParams, nil, "sessionId is required")
	}
	if p.MountID == "" {
		return nil, errf(ErrInvalidParams, nil, "mountId is required")
	}
	key := p.IdempotencyKey
	p.IdempotencyKey = ""
	fp := fingerprint(p)
	ref, ok, release, err := h.claim(ctx, key, MethodEnvUnmount, fp)
	if err != nil {
		return nil, err
	}
	defer release()
	if ok {
		return h.replayMount(ctx, p.SessionID, ref)
	}
	s, err := h.lockedSession(ctx, p.SessionID)
	if err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	cur := s.j.Session().Binding
	if err := checkVersion(s.id, p.ExpectedBindingVersion, cur.BindingVersion); err != nil {
		return nil, err
	}
	i := slices.IndexFunc(cur.Mounts, func(x event.Mount) bool { return x.ID == p.MountID })
	if i < 0 {
		return nil, errf(ErrInvalidParams, map[string]any{"sessionId": s.id, "mountId": p.MountID}, "session %s has no mount %s", s.id, p.MountID)
	}
	if len(cur.Mounts) == 1 {
		return nil, errf(ErrInvalidParams, map[string]any{"sessionId": s.id, "mountId": p.MountID}, "mount %s is the session's last mount; a binding keeps at least one", p.MountID)
	}
	removed := cur.Mounts[i]
	mounts := slices.Delete(slices.Clone(cur.Mounts), i, i+1)
	find := func(id string) int {
		return slices.IndexFunc(mounts, func(x event.Mount) bool { return x.ID == id })
	}
	if removed.Default && p.NewDefaultMountID == "" {
		return nil, errf(ErrInvalidParams, map[string]any{"mountId": p.MountID}, "mount %s is the default mount: name newDefaultMountId", p.MountID)
	}
	if p.NewDefaultMountID != "" {
		j := find(p.NewDefaultMountID)
		if j < 0 {
			return nil, errf(ErrInvalidParams, map[string]any{"newDefaultMountId": p.NewDefaultMountID},
				"newDefaultMountId %s is not a remaining mount", p.NewDefaultMountID)
		}
		for k := range mounts {
			mounts[k].Default = k == j
		}
	}
	if p.NewDefaultShellMountID != "" {
		j := find(p.NewDefaultShellMountID)
		if j < 0 {
			return nil, errf(ErrInvalidParams, map[string]any{"newDefaultShellMountId": p.NewDefaultShellMountID},
				"newDefaultShellMountId %s is not a remaining mount", p.NewDefaultShellMountID)
		}
		if mounts[j].Mode != event.ModeReadWrite {
			return nil, errf(ErrInvalidParams, map[string]any{"newDefaultShellMountId": p.NewDefaultShellMountID},
				"newDefaultShellMountId %s is read-only; the shell default must be read-write", p.NewDefaultShellMountID)
		}
		for k := range mounts {
			mounts[k].DefaultForShell = k == j
		}
	}
	if h.cfg.LiveProcesses != nil {
		procs, err := h.cfg.LiveProcesses(ctx, s.id, p.MountID)
		if err != nil {
			return nil, fmt.Errorf("session %s: processes of mount %s: %w", s.id, p.MountID, err)
		}
		if len(procs) > 0 {
			owned := make([]string, len(procs))
			for k, id := range procs {
				owned[k] = p.MountID + ":" + id
			}
			return nil, errf(ErrRunConflict, map[string]any{"sessionId": s.id, "mountId": p.MountID, "processIds": procs},
				"mount %s owns running processes (%s); stop them before unmounting", p.MountID, strings.Join(owned, ", "))
		}
	}
	nb, err := env.Open(event.Binding{BindingVersion: cur.BindingVersion + 1, Mounts: mounts, Network: cur.Network})
	if err != nil {
		return nil, errf(ErrInvalidParams, map[string]any{"mountId": p.MountID}, "mounts: %v", strings.TrimPrefix(err.Error(), "env: "))
	}
	res := newResult(h.cfg.NewID("envop"), p.MountID, cur, nb)
	res.RemovedMount = &removed
	e, err := event.New("", event.MountRemoved, event.MountChangeData{OperationID: res.OperationID, Mount: removed, BindingVersion: nb.Version(), Mounts: nb.Mounts()})
	if err != nil {
		nb.Close()
		return nil, err
	}
	var inject string
	if p.InjectContext {
		inject = contextLine("unmounted", removed)
	}
	if err := s.changeEnv(ctx, nb, e, res, inject, key, MethodEnvUnmount, fp); err != nil {
		return nil, err
	}
	return res, nil
}

func checkVersion(sessionID string, expected *int64, current int64) error {
	if expected == nil || *expected == current {
		return nil
	}
	return errf(ErrRunConflict, map[string]any{"sessionId": sessionID, "expectedBindingVersion": *expected, "bindingVersion": current},
		"session %s: expected binding version %d, but it is %d", sessionID, *expected, current)
}

func newResult(opID, mountID string, prev event.Binding, nb *env.Binding) *MountResult {
	res := &MountResult{
		OperationID: opID, MountID: mountID, Applied: true,
		PreviousBindingVersion: prev.BindingVersion, BindingVersion: nb.Version(),
		Environment: environment(nb.Version(), nb.Mounts()),
	}
	res.PreviousDefaultMountID, res.PreviousDefaultShellMountID = defaults(prev.Mounts)
	res.CurrentDefaultMountID = res.Environment.DefaultMountID
	res.CurrentDefaultShellMountID = res.Environment.DefaultShellMountID
	return res
}

// contextLine is the steering text of injectContext. Mount IDs are slugs
// and modes are "ro" or "rw", so nothing needs escaping.
func contextLine(action string, m event.Mount) string {
	return fmt.Sprintf(`<environment-context action=%q mount=%q root=%q mode=%q/>`, action, m.ID, env.Prefix+"/"+m.ID, m.Mode)
}

// changeEnv commits a mount change: the event e (with the receipt of key,
// if any, in the same transaction), then the switch to nb. With inject
// set and a run active, the steer.accepted of inject joins the same
// transaction, and the switch happens before the run can consume it.
// changeEnv fills in res's cursors and warnings, and closes nb on
// failure. Called with s.mu held.
func (s *session) changeEnv(ctx context.Context, nb *env.Binding, e event.Event, res *MountResult, inject, key, method, fp string) error {
	apply := func(ref receiptRef, evs ...event.Event) ([]event.Event, error) {
		ref.ID, ref.Result = res.OperationID, res
		out, err := s.j.AppendReceipts(ctx, receipts(key, method, fp, s.id, ref), evs...)
		if err != nil {
			return nil, err
		}
		s.switchBinding(nb)
		return out, nil
	}
	if inject != "" && s.active != nil {
		a := s.active
		steerID := s.h.cfg.NewID("steer")
		input := event.TextParts(inject)
		var evs []event.Event
		err := a.inbox.Add(func() error {
			se, err := event.New(a.id, event.SteerAccepted, event.SteerData{SteerID: steerID, Input: input})
			if err != nil {
				return err
			}
			evs, err = apply(receiptRef{Steer: &SteerReceipt{SteerID: steerID, RunID: a.id, Status: "accepted"}}, e, se)
			return err
		}, agent.Steer{ID: steerID, Input: input})
		if err == nil {
			res.EventCursor, res.SteeringCursor = evs[0].Seq, evs[1].Seq
			return nil
		}
		if !errors.Is(err, agent.ErrSteersClosed) {
			nb.Close()
			return err
		}
		res.Warnings = append(res.Warnings, Warning{Code: WarnSteerFailed,
			Message: fmt.Sprintf("run %s is finishing and takes no more steering; the change applies to its next tool call and to later runs", a.id)})
	} else if inject != "" {
		res.Warnings = append(res.Warnings, Warning{Code: WarnNoActiveRun,
			Message: "no run is active to steer; the change applies to the next run"})
	}
	evs, err := apply(receiptRef{}, e)
	if err != nil {
		nb.Close()
		return err
	}
	res.EventCursor = evs[0].Seq
	return nil
}

// switchBinding makes nb the session's binding. The binding it replaces
// is closed now if no run can hold it, else when the active run ends.
// Called with s.mu held.
func (s *session) switchBinding(nb *env.Binding) {
	old := s.bind.Swap(nb)
	if old == nil {
		return
	}
	if s.active != nil {
		s.retired = append(s.retired, old)
	} else {
		old.Close()
	}
}

// envBinding returns the session's binding, opening it from the projection
// on first use. Called with s.mu held.
func (s *session) envBinding() (*env.Binding, error) {
	if b := s.bind.Load(); b != nil {
		return b, nil
	}
	b, err := binding(s.j.Session())
	if err != nil {
		return nil, err
	}
	s.bind.Store(b)
	return b, nil
}

// closeRetired closes the bindings that were replaced while a run was
// active, once no run can use them. Called with s.mu held.
func (s *session) closeRetired() {
	for _, b := range s.retired {
		b.Close()
	}
	s.retired = nil
}
