package session

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"weft.dev/weft/agent"
	"weft.dev/weft/api"
	"weft.dev/weft/env"
	"weft.dev/weft/event"
	"weft.dev/weft/host/internal/idem"
)

// binding returns the session's current binding, opening it from the
// projection on first use.
func (s *Session) binding() (*env.Binding, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.bindingLocked()
}

// currentBinding is the active run's view of the mounts: each tool-call
// batch takes the binding current at its start. A binding the session
// replaces stays open until the run that may hold it ends.
func (s *Session) currentBinding() *env.Binding {
	b, _ := s.binding()
	return b
}

func (s *Session) bindingLocked() (*env.Binding, error) {
	if s.bind != nil {
		return s.bind, nil
	}
	rec := s.j.Session()
	b, err := s.openBinding(rec.Binding)
	if err != nil {
		return nil, api.Wrap(api.KindEnvironmentUnavailable, err, "session %s: mounts: %v", s.id, err).With("sessionId", s.id)
	}
	s.bind = b
	return b, nil
}

// switchBinding makes nb the session's binding. The binding it replaces
// is closed now if no run can hold it, else when the active run ends.
func (s *Session) switchBinding(nb *env.Binding) {
	old := s.bind
	s.bind = nb
	if old == nil {
		return
	}
	if s.active != nil {
		s.retired = append(s.retired, old)
	} else {
		old.Close()
	}
}

// closeRetired closes the bindings that were replaced while a run was
// active, once no run can use them.
func (s *Session) closeRetired() {
	for _, b := range s.retired {
		b.Close()
	}
	s.retired = nil
}

// Mount attaches p.Mount (its Kind and Mode set, a scratch mount's Path
// made by the host), or replaces a mount of the same ID with p.Replace.
// The new binding applies to the active run's next tool call and to every
// later run. mount.added is committed with rc's receipt (and, with
// p.InjectContext and an active run, its steer) before the switch.
func (s *Session) Mount(ctx context.Context, p api.MountParams, rc *idem.Claim) (*api.MountResult, error) {
	var res *api.MountResult
	err := s.command(func() error {
		m := p.Mount
		cur := s.j.Session().Binding
		if err := checkVersion(s.id, p.ExpectedBindingVersion, cur.BindingVersion); err != nil {
			return err
		}
		var warnings []api.Warning
		mounts := slices.Clone(cur.Mounts)
		i := slices.IndexFunc(mounts, func(x event.Mount) bool { return x.ID == m.ID })
		if i >= 0 {
			if !p.Replace {
				return api.Errorf(api.KindAlreadyExists, "session %s already has mount %s (replace it with --replace, or replace: true)", s.id, m.ID).
					With("sessionId", s.id).With("mountId", m.ID)
			}
			old := mounts[i]
			m.Default = m.Default || old.Default
			if old.DefaultForShell {
				if m.Mode == event.ModeReadWrite {
					m.DefaultForShell = true
				} else {
					warnings = append(warnings, api.Warning{Code: api.WarnShellDefaultDropped,
						Message: fmt.Sprintf("mount %s was the shell default and is now read-only", m.ID)})
				}
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
			if len(mounts) >= api.MaxMounts {
				// The host checked before it made a scratch directory;
				// this is the exact check, under the session's order.
				return api.InvalidParam("mount", "the session has %d mounts; the limit is %d", len(mounts), api.MaxMounts).With("limit", api.MaxMounts)
			}
			mounts = append(mounts, m)
		}
		nb, err := s.openBinding(event.Binding{BindingVersion: cur.BindingVersion + 1, Mounts: mounts, Network: cur.Network, Limits: cur.Limits})
		if err != nil {
			return api.Errorf(api.KindInvalidParams, "mounts: %v", strings.TrimPrefix(err.Error(), "env: ")).With("mountId", m.ID)
		}
		mounted, _ := nb.Mount(m.ID)
		r := newResult(s.cfg.NewID("envop"), m.ID, cur, nb)
		r.Mount = &mounted
		r.Warnings = warnings
		e, err := event.New("", event.MountAdded, event.MountChangeData{OperationID: r.OperationID, Mount: mounted, BindingVersion: nb.Version(), Mounts: nb.Mounts()})
		if err != nil {
			nb.Close()
			return err
		}
		var inject string
		if p.InjectContext {
			inject = contextLine("mounted", mounted)
		}
		if err := s.changeEnv(ctx, nb, e, r, inject, rc); err != nil {
			return err
		}
		res = r
		return nil
	})
	return res, err
}

// Unmount detaches a mount. The binding keeps at least one mount;
// unmounting the default needs p.NewDefaultMountID. A mount that owns a
// running process is refused with api.ErrRunConflict naming
// "<mountId>:<processId>": process starts go through the same lock, so no
// start can slip in between the check and the change.
func (s *Session) Unmount(ctx context.Context, p api.UnmountParams, rc *idem.Claim) (*api.MountResult, error) {
	var res *api.MountResult
	err := s.command(func() error {
		cur := s.j.Session().Binding
		if err := checkVersion(s.id, p.ExpectedBindingVersion, cur.BindingVersion); err != nil {
			return err
		}
		i := slices.IndexFunc(cur.Mounts, func(x event.Mount) bool { return x.ID == p.MountID })
		if i < 0 {
			return api.Errorf(api.KindInvalidParams, "session %s has no mount %s", s.id, p.MountID).With("sessionId", s.id).With("mountId", p.MountID)
		}
		if len(cur.Mounts) == 1 {
			return api.Errorf(api.KindInvalidParams, "mount %s is the session's last mount; a binding keeps at least one", p.MountID).
				With("sessionId", s.id).With("mountId", p.MountID)
		}
		removed := cur.Mounts[i]
		mounts := slices.Delete(slices.Clone(cur.Mounts), i, i+1)
		find := func(id string) int {
			return slices.IndexFunc(mounts, func(x event.Mount) bool { return x.ID == id })
		}
		if removed.Default && p.NewDefaultMountID == "" {
			return api.Errorf(api.KindInvalidParams, "mount %s is the default mount: name the new default (--new-default, or newDefaultMountId)", p.MountID).
				With("mountId", p.MountID)
		}
		if p.NewDefaultMountID != "" {
			j := find(p.NewDefaultMountID)
			if j < 0 {
				return api.Errorf(api.KindInvalidParams, "new default mount %s is not a remaining mount", p.NewDefaultMountID).
					With("newDefaultMountId", p.NewDefaultMountID)
			}
			for k := range mounts {
				mounts[k].Default = k == j
			}
		}
		if p.NewDefaultShellMountID != "" {
			j := find(p.NewDefaultShellMountID)
			if j < 0 {
				return api.Errorf(api.KindInvalidParams, "new shell default mount %s is not a remaining mount", p.NewDefaultShellMountID).
					With("newDefaultShellMountId", p.NewDefaultShellMountID)
			}
			if mounts[j].Mode != event.ModeReadWrite {
				return api.Errorf(api.KindInvalidParams, "new shell default mount %s is read-only; the shell default must be read-write", p.NewDefaultShellMountID).
					With("newDefaultShellMountId", p.NewDefaultShellMountID)
			}
			for k := range mounts {
				mounts[k].DefaultForShell = k == j
			}
		}
		if pm := s.cfg.Processes; pm != nil {
			procs, err := pm.LiveByMount(ctx, s.id, p.MountID)
			if err != nil {
				return fmt.Errorf("session %s: processes of mount %s: %w", s.id, p.MountID, err)
			}
			if len(procs) > 0 {
				owned := make([]string, len(procs))
				for k, id := range procs {
					owned[k] = p.MountID + ":" + id
				}
				return api.Errorf(api.KindRunConflict, "mount %s owns running processes (%s); stop them before unmounting", p.MountID, strings.Join(owned, ", ")).
					With("sessionId", s.id).With("mountId", p.MountID).With("processIds", procs)
			}
		}
		nb, err := s.openBinding(event.Binding{BindingVersion: cur.BindingVersion + 1, Mounts: mounts, Network: cur.Network, Limits: cur.Limits})
		if err != nil {
			return api.Errorf(api.KindInvalidParams, "mounts: %v", strings.TrimPrefix(err.Error(), "env: ")).With("mountId", p.MountID)
		}
		r := newResult(s.cfg.NewID("envop"), p.MountID, cur, nb)
		r.RemovedMount = &removed
		e, err := event.New("", event.MountRemoved, event.MountChangeData{OperationID: r.OperationID, Mount: removed, BindingVersion: nb.Version(), Mounts: nb.Mounts()})
		if err != nil {
			nb.Close()
			return err
		}
		var inject string
		if p.InjectContext {
			inject = contextLine("unmounted", removed)
		}
		if err := s.changeEnv(ctx, nb, e, r, inject, rc); err != nil {
			return err
		}
		res = r
		return nil
	})
	return res, err
}

func checkVersion(sessionID string, expected *int64, current int64) error {
	if expected == nil || *expected == current {
		return nil
	}
	return api.Errorf(api.KindRunConflict, "session %s: expected binding version %d, but it is %d", sessionID, *expected, current).
		With("sessionId", sessionID).With("expectedBindingVersion", *expected).With("bindingVersion", current)
}

func newResult(opID, mountID string, prev event.Binding, nb *env.Binding) *api.MountResult {
	res := &api.MountResult{
		OperationID: opID, MountID: mountID, Applied: true,
		PreviousBindingVersion: prev.BindingVersion, BindingVersion: nb.Version(),
		Environment: Environment(nb.Version(), nb.Mounts()),
	}
	res.PreviousDefaultMountID, res.PreviousDefaultShellMountID = defaults(prev.Mounts)
	res.CurrentDefaultMountID = res.Environment.DefaultMountID
	res.CurrentDefaultShellMountID = res.Environment.DefaultShellMountID
	return res
}

// Environment describes mounts whose flags are normalised.
func Environment(version int64, mounts []event.Mount) api.Environment {
	e := api.Environment{BindingVersion: version, Mounts: slices.Clone(mounts)}
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

// contextLine is the steering text of injectContext. Mount IDs are slugs
// and modes are "ro" or "rw", so nothing needs escaping.
func contextLine(action string, m event.Mount) string {
	return fmt.Sprintf(`<environment-context action=%q mount=%q root=%q mode=%q shell=%q var=%q/>`,
		action, m.ID, env.Prefix+"/"+m.ID, m.Mode, m.Path, env.MountVar(m.ID))
}

// maxInstructions caps the project instructions given to the model.
const maxInstructions = 32 << 10

// instructions reads AGENTS.md at the root of the default mount, if any,
// up to maxInstructions bytes, for run a: not if the run's policy denies
// read_file what it really is (a link to .env, say).
func (s *Session) instructions(a *activeRun) *event.Instructions {
	b, err := s.binding()
	if err != nil {
		return nil
	}
	b = b.WithGuard(s.instructionsGuard(a))
	m, ok := b.DefaultMount()
	if !ok {
		return nil
	}
	p, err := b.Resolve(env.Prefix+"/"+m.ID+"/AGENTS.md", env.Read)
	if err != nil {
		return nil
	}
	fi, err := p.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		return nil
	}
	f, err := p.Open()
	if err != nil {
		return nil
	}
	defer f.Close()
	buf := make([]byte, min(fi.Size(), maxInstructions))
	n, _ := io.ReadFull(f, buf)
	return &event.Instructions{Path: p.String(), Bytes: fi.Size(), Truncated: fi.Size() > maxInstructions, Text: strings.ToValidUTF8(string(buf[:n]), "")}
}

// changeEnv commits a mount change: the event e (with rc's receipt in the
// same transaction), then the switch to nb. With inject set and a run
// active, the steer.accepted of inject joins the same transaction, and
// the switch happens before the run can consume it. It fills in res's
// cursors and warnings, and closes nb on failure.
func (s *Session) changeEnv(ctx context.Context, nb *env.Binding, e event.Event, res *api.MountResult, inject string, rc *idem.Claim) error {
	apply := func(ref idem.Ref, evs ...event.Event) ([]event.Event, error) {
		ref.ID = res.OperationID
		b, err := jsonRaw(res)
		if err != nil {
			return nil, err
		}
		ref.Result = b
		out, err := s.append(ctx, rc, ref, evs...)
		if err != nil {
			return nil, err
		}
		s.switchBinding(nb)
		return out, nil
	}
	if inject != "" && s.activeID() != "" {
		a := s.active
		steerID := s.cfg.NewID("steer")
		input := event.TextParts(inject)
		var evs []event.Event
		err := a.inbox.Add(func() error {
			se, err := event.New(a.id, event.SteerAccepted, event.SteerData{SteerID: steerID, Input: input})
			if err != nil {
				return err
			}
			evs, err = apply(idem.Ref{Steer: &api.SteerReceipt{SteerID: steerID, RunID: a.id, Status: "accepted"}}, e, se)
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
		res.Warnings = append(res.Warnings, api.Warning{Code: api.WarnSteerFailed,
			Message: fmt.Sprintf("run %s is finishing and takes no more steering; the change applies to its next tool call and to later runs", a.id)})
	} else if inject != "" {
		res.Warnings = append(res.Warnings, api.Warning{Code: api.WarnNoActiveRun,
			Message: "no run is active to steer; the change applies to the next run"})
	}
	evs, err := apply(idem.Ref{}, e)
	if err != nil {
		nb.Close()
		return err
	}
	res.EventCursor = evs[0].Seq
	return nil
}

// MCPServers returns the session's own MCP servers and its current
// binding, which confines them and resolves their working directories:
// what an MCP request of the session's client (mcp/resources …) starts
// them with.
func (s *Session) MCPServers() (map[string]event.MCPServer, *env.Binding, error) {
	b, err := s.binding()
	if err != nil {
		return nil, nil, err
	}
	return s.Record().MCPServers, b, nil
}
