package host

import (
	"context"
	"encoding/json"
	"errors"
	"iter"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"weft.dev/weft/api"
	"weft.dev/weft/env"
	"weft.dev/weft/event"
	"weft.dev/weft/internal/idem"
	"weft.dev/weft/internal/session"
	"weft.dev/weft/policy"
	"weft.dev/weft/store"
	"weft.dev/weft/tool/mcp"
)

// methods is the host's table of mutating methods, each wrapped once by
// [idempotent] when the host is made.
type methods struct {
	createSession func(context.Context, api.CreateSessionParams) (*api.SessionResult, error)
	deleteSession func(context.Context, api.SessionIDParams) (*api.DeleteResult, error)
	updateSession func(context.Context, api.UpdateSessionParams) (*api.SessionResult, error)
	startRun      func(context.Context, api.StartRunParams) (*api.RunResult, error)
	steerRun      func(context.Context, api.SteerParams) (*api.SteerReceipt, error)
	cancelRun     func(context.Context, api.CancelParams) (*api.RunResult, error)
	mount         func(context.Context, api.MountParams) (*api.MountResult, error)
	unmount       func(context.Context, api.UnmountParams) (*api.MountResult, error)
	startProcess  func(context.Context, api.ProcessStartParams) (*api.ProcessResult, error)
	writeProcess  func(context.Context, api.ProcessWriteParams) (*api.ProcessResult, error)
	signalProcess func(context.Context, api.ProcessSignalParams) (*api.ProcessSignalResult, error)
	cancelProcess func(context.Context, api.ProcessCancelParams) (*api.ProcessResult, error)
	grantProcess  func(context.Context, api.ProcessGrantParams) (*api.ProcessResult, error)
	revokeProcess func(context.Context, api.ProcessGrantParams) (*api.ProcessResult, error)
	decide        func(context.Context, api.DecideParams) (*api.RequestResult, error)
	answer        func(context.Context, api.AnswerParams) (*api.RequestResult, error)
	toolResult    func(context.Context, api.ToolResultParams) (*api.RequestResult, error)
}

func (h *Host) methodTable() methods {
	return methods{
		createSession: idempotent(h, api.MethodSessionCreate, h.createSession, replaySession[api.CreateSessionParams](h)),
		deleteSession: idempotent(h, api.MethodSessionDelete, h.deleteSession, h.replayDelete),
		updateSession: idempotent(h, api.MethodSessionUpdate, h.updateSession, replaySession[api.UpdateSessionParams](h)),
		startRun:      idempotent(h, api.MethodRunStart, h.startRun, h.replayRun),
		steerRun:      idempotent(h, api.MethodRunSteer, h.steerRun, h.replaySteer),
		cancelRun:     idempotent(h, api.MethodRunCancel, h.cancelRun, h.replayCancel),
		mount: idempotent(h, api.MethodEnvMount, h.mount, func(ctx context.Context, p api.MountParams, ref idem.Ref) (*api.MountResult, error) {
			return h.replayMount(ctx, p.SessionID, ref)
		}),
		unmount: idempotent(h, api.MethodEnvUnmount, h.unmount, func(ctx context.Context, p api.UnmountParams, ref idem.Ref) (*api.MountResult, error) {
			return h.replayMount(ctx, p.SessionID, ref)
		}),
		startProcess:  idempotent(h, api.MethodProcessStart, h.startProcess, h.replayStartProcess),
		writeProcess:  idempotent(h, api.MethodProcessWrite, h.writeProcess, replayProcess[api.ProcessWriteParams](h)),
		signalProcess: idempotent(h, api.MethodProcessSignal, h.signalProcess, h.replaySignal),
		cancelProcess: idempotent(h, api.MethodProcessCancel, h.cancelProcess, replayProcess[api.ProcessCancelParams](h)),
		grantProcess:  idempotent(h, api.MethodProcessGrant, h.grantProcess, replayProcess[api.ProcessGrantParams](h)),
		revokeProcess: idempotent(h, api.MethodProcessRevoke, h.revokeProcess, replayProcess[api.ProcessGrantParams](h)),
		decide:        idempotent(h, api.MethodApprovalDecide, h.decide, replayRequest[api.DecideParams](h)),
		answer:        idempotent(h, api.MethodInputAnswer, h.answer, replayRequest[api.AnswerParams](h)),
		toolResult:    idempotent(h, api.MethodToolResult, h.toolResult, replayRequest[api.ToolResultParams](h)),
	}
}

func invalid(field string, format string, args ...any) *api.Error {
	return api.Errorf(api.KindInvalidParams, format, args...).With("field", field)
}

// checkMCPServers validates a session's MCP servers: this host must have
// an MCP client, and each must pass mcp.Manager.CheckSession.
func (h *Host) checkMCPServers(servers map[string]event.MCPServer) error {
	if len(servers) == 0 {
		return nil
	}
	if h.cfg.MCP == nil {
		return invalid("mcpServers", "this host has no MCP client")
	}
	if len(servers) > api.MaxMCPServers {
		return invalid("mcpServers", "%d MCP servers; the limit is %d", len(servers), api.MaxMCPServers).With("limit", api.MaxMCPServers)
	}
	b, err := json.Marshal(servers)
	if err != nil {
		return invalid("mcpServers", "mcpServers: %v", err)
	}
	if err := checkSize("mcpServers", len(b), api.MaxMCPServersBytes); err != nil {
		return err
	}
	if err := h.cfg.MCP.CheckSession(servers); err != nil {
		var fe *mcp.FieldError
		if errors.As(err, &fe) {
			field := "mcpServers." + fe.Server
			if fe.Field != "" {
				field += "." + fe.Field
			}
			return invalid(field, "%s", err)
		}
		return invalid("mcpServers", "%s", err)
	}
	return nil
}

// checkSize refuses a field longer than limit bytes.
func checkSize(field string, n, limit int) error {
	if n > limit {
		return invalid(field, "%s is %d bytes; the limit is %d", field, n, limit).With("limit", limit)
	}
	return nil
}

// checkModel refuses a model name over the limit or one the host cannot
// use; "" (the default) passes. An *api.Error of ResolveModel keeps its
// kind and data (such as env, the variable a missing API key is read
// from) and gains field.
func (h *Host) checkModel(field, name string) error {
	if name == "" {
		return nil
	}
	if err := checkSize(field, len(name), api.MaxModelBytes); err != nil {
		return err
	}
	_, err := h.cfg.ResolveModel(name)
	if err == nil {
		return nil
	}
	var ae *api.Error
	if errors.As(err, &ae) {
		e := ae.With("field", field)
		e.Message = field + ": " + ae.Message
		return e
	}
	return api.Wrap(api.KindInvalidParams, err, "%s: %v", field, err).With("field", field)
}

// checkImplicitModel refuses a run that names no model when the model it
// would use, the session's (sessionModel) or else the host's default, is
// one the host cannot use, so that the client hears why (a missing API
// key with its variable in data.env) instead of a run that fails at its
// start. The error names the field "model", which the client can set.
func (h *Host) checkImplicitModel(sessionModel string) error {
	name, whose := sessionModel, "the session's model"
	if name == "" {
		name, whose = h.cfg.DefaultModel, "the host's default model"
	}
	_, err := h.cfg.ResolveModel(name)
	if err == nil {
		return nil
	}
	var ae *api.Error
	if errors.As(err, &ae) {
		return ae.With("field", "model")
	}
	return api.Wrap(api.KindInvalidParams, err, "%s %q: %v", whose, name, err).With("field", "model")
}

// checkInput refuses empty or oversized input.
func checkInput(in api.Input) error {
	if strings.TrimSpace(event.Text(in)) == "" {
		return invalid("input", "input is empty")
	}
	b, _ := json.Marshal(in)
	return checkSize("input", len(b), api.MaxInputBytes)
}

// CreateSession creates a session with its mounts.
func (h *Host) CreateSession(ctx context.Context, p api.CreateSessionParams) (*api.SessionResult, error) {
	return h.m.createSession(ctx, p)
}

func (h *Host) createSession(ctx context.Context, p api.CreateSessionParams, rc *idem.Claim) (*api.SessionResult, idem.Ref, error) {
	if err := checkSize("title", len(p.Title), api.MaxTitleBytes); err != nil {
		return nil, idem.Ref{}, err
	}
	if len(p.Metadata) > api.MaxMetadataKeys {
		return nil, idem.Ref{}, invalid("metadata", "metadata has %d entries; the limit is %d", len(p.Metadata), api.MaxMetadataKeys).With("limit", api.MaxMetadataKeys)
	}
	n := 0
	for k, v := range p.Metadata {
		n += len(k) + len(v)
	}
	if err := checkSize("metadata", n, api.MaxMetadataBytes); err != nil {
		return nil, idem.Ref{}, err
	}
	if p.Network != "" && p.Network != "allow" && p.Network != "deny" {
		return nil, idem.Ref{}, invalid("network", "network %q: want allow or deny", p.Network)
	}
	if err := checkLimits("limits", p.Limits, h.cfg.MaxCommandLimits); err != nil {
		return nil, idem.Ref{}, err
	}
	if err := h.checkModel("model", p.Model); err != nil {
		return nil, idem.Ref{}, err
	}
	pol, err := h.checkPolicy("policy", p.Policy)
	if err != nil {
		return nil, idem.Ref{}, err
	}
	if err := checkClientTools("tools", p.Tools); err != nil {
		return nil, idem.Ref{}, err
	}
	if err := h.checkMCPServers(p.MCPServers); err != nil {
		return nil, idem.Ref{}, err
	}
	if err := h.protectServers(ctx, p.MCPServers); err != nil {
		return nil, idem.Ref{}, err
	}
	p.Mounts = slices.Clone(p.Mounts)
	if err := h.protectMounts(ctx, "mounts[%d]", p.Mounts); err != nil {
		return nil, idem.Ref{}, err
	}
	id := h.cfg.NewID("ses")
	mounts, err := h.prepareMounts(id, p.Mounts)
	if err != nil {
		return nil, idem.Ref{}, err
	}
	var tools []event.ClientTool
	for _, t := range p.Tools {
		tools = append(tools, event.ClientTool{Name: t.Name, Description: t.Description, InputSchema: t.InputSchema})
	}
	s, err := session.Create(ctx, &h.scfg, id, event.SessionCreatedData{Title: p.Title, Model: p.Model, Metadata: p.Metadata,
		Mounts: mounts, Network: p.Network, Limits: p.Limits, Policy: pol, Tools: tools, MCPServers: p.MCPServers}, rc)
	if err != nil {
		return nil, idem.Ref{}, err
	}
	if err := h.add(s); err != nil {
		return nil, idem.Ref{}, err
	}
	return &api.SessionResult{Session: s.Record()}, idem.Ref{ID: id}, nil
}

// replaySession answers a retry of a mutation of a session (its create
// or update) with the session as it is now.
func replaySession[P any](h *Host) replayer[P, api.SessionResult] {
	return func(ctx context.Context, _ P, ref idem.Ref) (*api.SessionResult, error) {
		s, err := h.GetSession(ctx, ref.ID)
		if err != nil {
			return nil, err
		}
		s.Replayed = true
		return s, nil
	}
}

// prepareMounts validates mounts (by opening them as a binding) and
// creates the directories of scratch mounts.
func (h *Host) prepareMounts(sessionID string, mounts []event.Mount) ([]event.Mount, error) {
	out := append([]event.Mount(nil), mounts...)
	for i := range out {
		if err := h.normalizeMount(sessionID, &out[i]); err != nil {
			return nil, err
		}
	}
	if len(out) == 0 {
		return out, nil
	}
	b, err := env.NewBinding(1, out)
	if err != nil {
		return nil, invalid("mounts", "mounts: %v", strings.TrimPrefix(err.Error(), "env: "))
	}
	defer b.Close()
	return b.Mounts(), nil
}

// normalizeMount fills in a mount's defaults and makes a scratch mount's
// directory.
func (h *Host) normalizeMount(sessionID string, m *event.Mount) error {
	if m.Kind == "" {
		m.Kind = event.KindLocal
	}
	if m.Mode == "" {
		m.Mode = event.ModeReadWrite
	}
	if m.DefaultForShell && m.Mode != event.ModeReadWrite {
		return invalid("mount", "mount %s: defaultForShell needs a read-write mount", m.ID).With("mountId", m.ID)
	}
	if m.Kind == event.KindScratch {
		if h.cfg.ScratchDir == "" {
			return invalid("mount", "mount %s: scratch mounts need a host scratch directory", m.ID).With("mountId", m.ID)
		}
		m.Path = filepath.Join(h.cfg.ScratchDir, sessionID, m.ID)
		if err := os.MkdirAll(m.Path, 0o700); err != nil {
			return api.Wrap(api.KindEnvironmentUnavailable, err, "mount %s: %v", m.ID, err).With("mountId", m.ID)
		}
	}
	return nil
}

// GetSession returns a session.
func (h *Host) GetSession(ctx context.Context, id string) (*api.SessionResult, error) {
	if s := h.loaded(id); s != nil {
		return &api.SessionResult{Session: s.Record()}, nil
	}
	rec, err := h.cfg.Store.Session(ctx, id)
	if errors.Is(err, store.ErrNotFound) || err == nil && rec.Deleted {
		return nil, notFound(id)
	}
	if err != nil {
		return nil, apiError(err)
	}
	return &api.SessionResult{Session: rec}, nil
}

// loaded returns the owner of session id if it is loaded, without loading it.
func (h *Host) loaded(id string) *session.Session {
	h.mu.Lock()
	defer h.mu.Unlock()
	if e, ok := h.sessions[id]; ok {
		select {
		case <-e.ready:
			return e.s
		default:
		}
	}
	return nil
}

// listPageBytes bounds the encoding of one page of session/list and
// events/read: a page stops before it would exceed it (but holds at
// least one item).
const listPageBytes = 1 << 20

// ListSessions pages through sessions, newest first. A page holds at
// most p.Limit sessions and about a MiB of them.
func (h *Host) ListSessions(ctx context.Context, p api.ListSessionsParams) (*api.ListSessionsResult, error) {
	if p.Limit < 0 {
		return nil, invalid("limit", "limit must not be negative")
	}
	if p.Limit == 0 || p.Limit > 1000 {
		p.Limit = min(max(p.Limit, 100), 1000)
	}
	if p.Cursor != "" {
		if len(p.Cursor) > api.MaxIDBytes {
			return nil, api.Errorf(api.KindCursorInvalid, "cursor %q is not a session/list cursor (pass the nextCursor of the previous page)", clip(p.Cursor, 64)).
				With("cursor", clip(p.Cursor, 64))
		}
		if _, err := h.cfg.Store.Session(ctx, p.Cursor); errors.Is(err, store.ErrNotFound) {
			return nil, api.Errorf(api.KindCursorInvalid, "cursor %q names no session (pass the nextCursor of the previous page)", p.Cursor).
				With("cursor", p.Cursor)
		} else if err != nil {
			return nil, apiError(err)
		}
	}
	ss, err := h.cfg.Store.Sessions(ctx, store.ListSessionsParams{Before: p.Cursor, Limit: p.Limit})
	if err != nil {
		return nil, apiError(err)
	}
	res := &api.ListSessionsResult{Sessions: []store.Session{}}
	size := 0
	for i, s := range ss {
		b, _ := json.Marshal(s)
		if i > 0 && size+len(b) > listPageBytes {
			res.NextCursor = res.Sessions[len(res.Sessions)-1].ID
			return res, nil
		}
		size += len(b)
		res.Sessions = append(res.Sessions, s)
	}
	if len(ss) == p.Limit {
		res.NextCursor = ss[len(ss)-1].ID
	}
	return res, nil
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// DeleteSession deletes a session that has no active or queued run; its
// owner-bound processes are cancelled.
func (h *Host) DeleteSession(ctx context.Context, p api.SessionIDParams) (*api.DeleteResult, error) {
	return h.m.deleteSession(ctx, p)
}

func (h *Host) deleteSession(ctx context.Context, p api.SessionIDParams, rc *idem.Claim) (*api.DeleteResult, idem.Ref, error) {
	err := h.with(ctx, p.SessionID, func(s *session.Session) error {
		if err := s.Delete(ctx, rc); err != nil {
			return err
		}
		h.forget(s)
		return nil
	})
	if err != nil {
		return nil, idem.Ref{}, err
	}
	if h.cfg.ScratchDir != "" {
		os.RemoveAll(filepath.Join(h.cfg.ScratchDir, p.SessionID))
	}
	return &api.DeleteResult{SessionID: p.SessionID, Deleted: true}, idem.Ref{ID: p.SessionID}, nil
}

func (h *Host) replayDelete(_ context.Context, p api.SessionIDParams, _ idem.Ref) (*api.DeleteResult, error) {
	return &api.DeleteResult{SessionID: p.SessionID, Deleted: true, Replayed: true}, nil
}

// UpdateSession changes a session's title or model (see
// [api.UpdateSessionParams]) and returns the session. An unknown or
// deleted session is api.ErrNotFound.
func (h *Host) UpdateSession(ctx context.Context, p api.UpdateSessionParams) (*api.SessionResult, error) {
	return h.m.updateSession(ctx, p)
}

func (h *Host) updateSession(ctx context.Context, p api.UpdateSessionParams, rc *idem.Claim) (*api.SessionResult, idem.Ref, error) {
	if p.SessionID == "" {
		return nil, idem.Ref{}, invalid("sessionId", "sessionId is required")
	}
	if p.Title == nil && p.Model == nil {
		return nil, idem.Ref{}, invalid("title", "nothing to change: give title, model or both")
	}
	if p.Title != nil {
		if err := checkSize("title", len(*p.Title), api.MaxTitleBytes); err != nil {
			return nil, idem.Ref{}, err
		}
	}
	if p.Model != nil {
		if err := h.checkModel("model", *p.Model); err != nil {
			return nil, idem.Ref{}, err
		}
	}
	var rec store.Session
	err := h.with(ctx, p.SessionID, func(s *session.Session) (err error) {
		rec, err = s.Update(ctx, event.SessionUpdatedData{Title: p.Title, Model: p.Model}, rc)
		return err
	})
	if err != nil {
		return nil, idem.Ref{}, err
	}
	return &api.SessionResult{Session: rec}, idem.Ref{ID: p.SessionID}, nil
}

// StartRun admits a run under p.Busy.
func (h *Host) StartRun(ctx context.Context, p api.StartRunParams) (*api.RunResult, error) {
	return h.m.startRun(ctx, p)
}

func (h *Host) startRun(ctx context.Context, p api.StartRunParams, rc *idem.Claim) (*api.RunResult, idem.Ref, error) {
	if p.SessionID == "" {
		return nil, idem.Ref{}, invalid("sessionId", "sessionId is required")
	}
	if err := checkInput(p.Input); err != nil {
		return nil, idem.Ref{}, err
	}
	switch p.Busy {
	case "":
		p.Busy = api.BusyReject
	case api.BusyReject, api.BusyQueue, api.BusyInterrupt, api.BusySteer:
	default:
		return nil, idem.Ref{}, invalid("busy", "busy %q: want reject, queue, interrupt or steer", p.Busy)
	}
	if p.MaxSteps < 0 {
		return nil, idem.Ref{}, invalid("maxSteps", "maxSteps must not be negative")
	}
	if err := h.checkModel("model", p.Model); err != nil {
		return nil, idem.Ref{}, err
	}
	if _, err := h.checkPolicy("policy", p.Policy); err != nil {
		return nil, idem.Ref{}, err
	}
	if _, ok := policy.PresetRules(p.DefaultPreset); p.DefaultPreset != "" && !ok {
		return nil, idem.Ref{}, invalid("defaultPreset", "defaultPreset %q: unknown preset; one of %s", clip(p.DefaultPreset, 64),
			strings.Join(policy.Presets(), ", "))
	}
	if err := checkClientTools("tools", p.Tools); err != nil {
		return nil, idem.Ref{}, err
	}
	var res *api.RunResult
	err := h.with(ctx, p.SessionID, func(s *session.Session) (err error) {
		if p.Model == "" {
			if err := h.checkImplicitModel(s.Record().Model); err != nil {
				return err
			}
		}
		res, err = s.Start(ctx, p, rc)
		return err
	})
	if err != nil {
		return nil, idem.Ref{}, err
	}
	ref := idem.Ref{ID: res.ID, Steer: res.Steer}
	return res, ref, nil
}

func (h *Host) replayRun(ctx context.Context, _ api.StartRunParams, ref idem.Ref) (*api.RunResult, error) {
	r, err := h.GetRun(ctx, api.RunIDParams{RunID: ref.ID})
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

// steerCursor finds the seq of a steer's steer.accepted event.
func (h *Host) steerCursor(ctx context.Context, sessionID, runID, steerID string) int64 {
	var after int64
	for {
		evs, err := h.cfg.Store.Read(ctx, store.ReadParams{SessionID: sessionID, RunID: runID, After: after, Types: []event.Type{event.SteerAccepted}, Limit: 1000})
		if err != nil || len(evs) == 0 {
			return 0
		}
		for _, e := range evs {
			var d event.SteerData
			if e.Decode(&d) == nil && d.SteerID == steerID {
				return e.Seq
			}
		}
		after = evs[len(evs)-1].Seq
	}
}

// SteerRun injects input into an active run.
func (h *Host) SteerRun(ctx context.Context, p api.SteerParams) (*api.SteerReceipt, error) {
	return h.m.steerRun(ctx, p)
}

func (h *Host) steerRun(ctx context.Context, p api.SteerParams, rc *idem.Claim) (*api.SteerReceipt, idem.Ref, error) {
	if err := checkInput(p.Input); err != nil {
		return nil, idem.Ref{}, err
	}
	run, err := h.GetRun(ctx, api.RunIDParams{RunID: p.RunID})
	if err != nil {
		return nil, idem.Ref{}, err
	}
	var res *api.SteerReceipt
	err = h.with(ctx, run.SessionID, func(s *session.Session) (err error) {
		res, err = s.Steer(ctx, p, rc)
		return err
	})
	if err != nil {
		return nil, idem.Ref{}, err
	}
	r := *res
	return res, idem.Ref{ID: p.RunID, Steer: &r}, nil
}

func (h *Host) replaySteer(ctx context.Context, _ api.SteerParams, ref idem.Ref) (*api.SteerReceipt, error) {
	if ref.Steer == nil {
		return nil, errors.New("steer receipt without its steer")
	}
	r := *ref.Steer
	r.Replayed = true
	if run, err := h.GetRun(ctx, api.RunIDParams{RunID: r.RunID}); err == nil {
		r.EventCursor = h.steerCursor(ctx, run.SessionID, r.RunID, r.SteerID)
	}
	return &r, nil
}

// GetRun returns a run.
func (h *Host) GetRun(ctx context.Context, p api.RunIDParams) (*api.RunResult, error) {
	if p.RunID == "" {
		return nil, invalid("runId", "runId is required")
	}
	r, err := h.cfg.Store.Run(ctx, p.RunID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, api.Errorf(api.KindNotFound, "run %s not found", p.RunID).With("runId", p.RunID)
	}
	if err != nil {
		return nil, apiError(err)
	}
	return &api.RunResult{Run: r}, nil
}

// ListRuns lists a session's runs, oldest first.
func (h *Host) ListRuns(ctx context.Context, p api.ListRunsParams) (*api.ListRunsResult, error) {
	if _, err := h.GetSession(ctx, p.SessionID); err != nil {
		return nil, err
	}
	lp := store.ListRunsParams{SessionID: p.SessionID}
	if p.Status != "" {
		lp.Statuses = []string{p.Status}
	}
	runs, err := h.cfg.Store.Runs(ctx, lp)
	if err != nil {
		return nil, apiError(err)
	}
	if runs == nil {
		runs = []store.Run{}
	}
	return &api.ListRunsResult{Runs: runs}, nil
}

// WaitRun waits until the run is terminal or the timeout passes.
func (h *Host) WaitRun(ctx context.Context, p api.WaitRunParams) (*api.WaitRunResult, error) {
	if p.TimeoutMs < 0 {
		return nil, invalid("timeoutMs", "timeoutMs must not be negative")
	}
	r, err := h.GetRun(ctx, api.RunIDParams{RunID: p.RunID})
	if err != nil {
		return nil, err
	}
	if store.IsTerminal(r.Status) {
		return &api.WaitRunResult{Run: r.Run}, nil
	}
	var cur store.Run
	err = h.with(ctx, r.SessionID, func(s *session.Session) (err error) {
		cur, err = s.Wait(ctx, p.RunID, time.Duration(p.TimeoutMs)*time.Millisecond)
		return err
	})
	if err != nil {
		return nil, err
	}
	return &api.WaitRunResult{Run: cur, TimedOut: !store.IsTerminal(cur.Status)}, nil
}

// CancelRun cancels a run and returns once its terminal event is
// committed. Cancelling a terminal run returns it as it is.
func (h *Host) CancelRun(ctx context.Context, p api.CancelParams) (*api.RunResult, error) {
	return h.m.cancelRun(ctx, p)
}

func (h *Host) cancelRun(ctx context.Context, p api.CancelParams, rc *idem.Claim) (*api.RunResult, idem.Ref, error) {
	if err := checkSize("reason", len(p.Reason), api.MaxReasonBytes); err != nil {
		return nil, idem.Ref{}, err
	}
	r, err := h.GetRun(ctx, api.RunIDParams{RunID: p.RunID})
	if err != nil {
		return nil, idem.Ref{}, err
	}
	ref := idem.Ref{ID: p.RunID}
	if store.IsTerminal(r.Status) {
		return r, ref, nil
	}
	reason := p.Reason
	if reason == "" {
		reason = "cancelled by a client"
	}
	var cur store.Run
	err = h.with(ctx, r.SessionID, func(s *session.Session) (err error) {
		cur, err = s.Cancel(ctx, p.RunID, reason, rc)
		return err
	})
	if err != nil {
		return nil, idem.Ref{}, err
	}
	return &api.RunResult{Run: cur}, ref, nil
}

func (h *Host) replayCancel(ctx context.Context, _ api.CancelParams, ref idem.Ref) (*api.RunResult, error) {
	r, err := h.GetRun(ctx, api.RunIDParams{RunID: ref.ID})
	if err != nil {
		return nil, err
	}
	r.Replayed = true
	return r, nil
}

// ReadEvents returns a page of a session's events after a cursor: at
// most p.Limit events and about a MiB of them.
func (h *Host) ReadEvents(ctx context.Context, p api.ReadEventsParams) (*api.ReadEventsResult, error) {
	if p.Limit < 0 {
		return nil, invalid("limit", "limit must not be negative")
	}
	if p.Limit == 0 {
		p.Limit = 200
	}
	p.Limit = min(p.Limit, 1000)
	last, err := h.lastSeq(ctx, p.SessionID, p.After)
	if err != nil {
		return nil, err
	}
	evs, err := h.cfg.Store.Read(ctx, store.ReadParams{SessionID: p.SessionID, After: p.After, Limit: p.Limit, RunID: p.RunID, MaxBytes: listPageBytes})
	if err != nil {
		return nil, apiError(err)
	}
	res := &api.ReadEventsResult{Events: evs, NextCursor: p.After}
	if len(evs) > 0 {
		res.NextCursor = evs[len(evs)-1].Seq
	}
	res.HasMore = len(evs) > 0 && res.NextCursor < last
	if res.Events == nil {
		res.Events = []event.Event{}
	}
	return res, nil
}

// lastSeq checks a cursor against a session's log.
func (h *Host) lastSeq(ctx context.Context, sessionID string, after int64) (int64, error) {
	if sessionID == "" {
		return 0, invalid("sessionId", "sessionId is required")
	}
	last, err := h.cfg.Store.LastSeq(ctx, sessionID)
	if errors.Is(err, store.ErrNotFound) {
		return 0, notFound(sessionID)
	}
	if err != nil {
		return 0, apiError(err)
	}
	if after < 0 || after > last {
		return 0, api.Errorf(api.KindCursorInvalid, "cursor %d is not in session %s (last seq %d)", after, sessionID, last).
			With("sessionId", sessionID).With("cursor", after).With("lastSeq", last)
	}
	return last, nil
}

// Subscribe returns the session's events after the cursor: the replay,
// then the live tail, with no gap and no duplicate. The iterator ends
// with an error: api.ErrLagged when the consumer falls behind (by count
// or bytes), the store's failure when the session stops taking writes
// (resume after it recovers), an error when the host or the session
// closes, or ctx's error.
func (h *Host) Subscribe(ctx context.Context, sessionID string, after int64, runID string) (iter.Seq2[event.Event, error], error) {
	if _, err := h.lastSeq(ctx, sessionID, after); err != nil {
		return nil, err
	}
	var seq iter.Seq2[event.Event, error]
	err := h.with(ctx, sessionID, func(s *session.Session) (err error) {
		seq, err = s.Events(ctx, after, runID)
		return err
	})
	return seq, err
}

// SubscribeEncoded is [Host.Subscribe] for transports that write JSON:
// each event comes with its encoding (exactly json.Marshal of the
// event), and a live event is encoded once and the encoding shared by
// every subscriber of its session, however many there are. Events come
// in slices, each what the subscription read at once (a replay page, or
// everything committed since it last looked), so that a transport can
// write a slice and flush once; a slice is valid until the next
// iteration, and the encodings are read-only.
func (h *Host) SubscribeEncoded(ctx context.Context, sessionID string, after int64, runID string) (iter.Seq2[[]event.Encoded, error], error) {
	if _, err := h.lastSeq(ctx, sessionID, after); err != nil {
		return nil, err
	}
	var seq iter.Seq2[[]event.Encoded, error]
	err := h.with(ctx, sessionID, func(s *session.Session) (err error) {
		seq, err = s.EncodedEvents(ctx, after, runID)
		return err
	})
	return seq, err
}
