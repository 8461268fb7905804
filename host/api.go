package host

import (
	"context"
	"encoding/json"
	"errors"
	"iter"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"weft.dev/weft/api"
	"weft.dev/weft/env"
	"weft.dev/weft/event"
	"weft.dev/weft/host/internal/idem"
	"weft.dev/weft/host/internal/journal"
	"weft.dev/weft/host/internal/session"
	"weft.dev/weft/process"
	"weft.dev/weft/store"
	"weft.dev/weft/store/record"
)

// The host's implementation of api.Host, beside processes.go, mounts.go
// and requests.go. Each method checks its params first (their Validate,
// through mutate for a mutating method), then what needs the host
// (admit.go), then acts; every mutating method is one call of mutate.

var _ api.Host = (*Host)(nil)

// CreateSession creates a session with its mounts ([api.SessionCreate]).
func (h *Host) CreateSession(ctx context.Context, p api.CreateSessionParams) (*api.SessionResult, error) {
	return mutate(ctx, h, api.SessionCreate, p, h.createSession, replaySession[api.CreateSessionParams](h))
}

func (h *Host) createSession(ctx context.Context, p api.CreateSessionParams, rc *idem.Claim) (*api.SessionResult, idem.Ref, error) {
	// The host's checks: the session's limits against the operator's
	// ceiling, the model, the policy over the host's, the MCP servers, the
	// mounts (each against what the client may reach).
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
		h.dropScratch(ctx, id)
		return nil, idem.Ref{}, err
	}
	var tools []event.ClientTool
	for _, t := range p.Tools {
		tools = append(tools, event.ClientTool{Name: t.Name, Description: t.Description, InputSchema: t.InputSchema})
	}
	s, err := session.Create(ctx, &h.scfg, id, event.SessionCreatedData{Title: p.Title, Model: p.Model, Metadata: p.Metadata,
		Mounts: mounts, Network: p.Network, Limits: p.Limits, Policy: pol, Tools: tools, MCPServers: p.MCPServers,
		Budget: h.cfg.Budgets.session(p.Budget)}, rc)
	if err != nil {
		h.dropScratch(ctx, id)
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
		s, err := h.sessionRecord(ctx, ref.ID)
		if err != nil {
			return nil, err
		}
		s.Replayed = true
		return s, nil
	}
}

// dropScratch removes the scratch directories made for session id when
// creating it failed. A store that reports a failed append may still
// have committed it (the connection dropped after the commit): a session
// the store knows keeps its directories, which its mounts name.
func (h *Host) dropScratch(ctx context.Context, id string) {
	if h.cfg.ScratchDir == "" {
		return
	}
	if _, err := h.cfg.Store.Session(context.WithoutCancel(ctx), id); !errors.Is(err, store.ErrNotFound) {
		return
	}
	if err := os.RemoveAll(filepath.Join(h.cfg.ScratchDir, id)); err != nil {
		h.cfg.Logger.Warn("remove the scratch directories of a session not created", "session", id, "err", err)
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
		// The directory is <ScratchDir>/<session>/<mount>: each one
		// element, so that no ID leads it elsewhere (the params'
		// Validate holds mount IDs to slugs; this holds whatever calls).
		if !pathElem(sessionID) || !pathElem(m.ID) {
			return invalid("mount", "mount %q of session %q: not a scratch directory's name", clip(m.ID, 64), clip(sessionID, 64)).With("mountId", m.ID)
		}
		m.Path = filepath.Join(h.cfg.ScratchDir, sessionID, m.ID)
		if err := os.MkdirAll(m.Path, 0o700); err != nil {
			return api.Wrap(api.KindEnvironmentUnavailable, err, "mount %s: %v", m.ID, err).With("mountId", m.ID)
		}
	}
	return nil
}

// pathElem reports whether s names one entry of a directory: not empty,
// no separator, not . or .. .
func pathElem(s string) bool {
	return s != "" && s != "." && s != ".." && !strings.ContainsAny(s, `/\`) && filepath.IsLocal(s)
}

// GetSession returns a session ([api.SessionGet]).
func (h *Host) GetSession(ctx context.Context, p api.SessionGetParams) (*api.SessionResult, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	res, err := h.sessionRecord(ctx, p.SessionID)
	if err != nil || p.Transcript == "" {
		return res, err
	}
	if res.Transcript, err = h.transcript(ctx, p.SessionID, p.Transcript); err != nil {
		return nil, err
	}
	return res, nil
}

// sessionRecord returns session id's record, loaded or not; an unknown or
// deleted session is api.ErrNotFound.
func (h *Host) sessionRecord(ctx context.Context, id string) (*api.SessionResult, error) {
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

// ListSessions pages through sessions, newest first ([api.SessionList]).
// A page holds at most p.Limit sessions and about a MiB of them.
func (h *Host) ListSessions(ctx context.Context, p api.ListSessionsParams) (*api.ListSessionsResult, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if p.Limit == 0 || p.Limit > 1000 {
		p.Limit = min(max(p.Limit, 100), 1000)
	}
	if p.Cursor != "" {
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
	res := &api.ListSessionsResult{Sessions: []record.Session{}}
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
// owner-bound processes are cancelled ([api.SessionDelete]).
func (h *Host) DeleteSession(ctx context.Context, p api.SessionIDParams) (*api.DeleteResult, error) {
	return mutate(ctx, h, api.SessionDelete, p, h.deleteSession, h.replayDelete)
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
	// Its subagents go with it (outside the session's lock: a subagent's
	// runner may be writing to the session as it ends).
	h.cancelSubagents(ctx, p.SessionID, "the parent session was deleted")
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
// deleted session is api.ErrNotFound ([api.SessionUpdate]).
func (h *Host) UpdateSession(ctx context.Context, p api.UpdateSessionParams) (*api.SessionResult, error) {
	return mutate(ctx, h, api.SessionUpdate, p, h.updateSession, replaySession[api.UpdateSessionParams](h))
}

func (h *Host) updateSession(ctx context.Context, p api.UpdateSessionParams, rc *idem.Claim) (*api.SessionResult, idem.Ref, error) {
	if p.Model != nil {
		if err := h.checkModel("model", *p.Model); err != nil {
			return nil, idem.Ref{}, err
		}
	}
	var rec record.Session
	err := h.with(ctx, p.SessionID, func(s *session.Session) (err error) {
		rec, err = s.Update(ctx, event.SessionUpdatedData{Title: p.Title, Model: p.Model, Budget: p.Budget}, rc)
		return err
	})
	if err != nil {
		return nil, idem.Ref{}, err
	}
	return &api.SessionResult{Session: rec}, idem.Ref{ID: p.SessionID}, nil
}

// StartRun admits a run under p.Busy ([api.RunStart]).
func (h *Host) StartRun(ctx context.Context, p api.StartRunParams) (*api.RunResult, error) {
	return mutate(ctx, h, api.RunStart, p, h.startRun, h.replayRun)
}

func (h *Host) startRun(ctx context.Context, p api.StartRunParams, rc *idem.Claim) (*api.RunResult, idem.Ref, error) {
	if p.Busy == "" {
		p.Busy = api.BusyReject
	}
	// The host's checks: the model, the policy over the host's, the
	// default preset; the model the run would use, under the session's
	// lock below.
	if err := h.checkModel("model", p.Model); err != nil {
		return nil, idem.Ref{}, err
	}
	if _, err := h.checkPolicy("policy", p.Policy); err != nil {
		return nil, idem.Ref{}, err
	}
	if err := checkPreset("defaultPreset", p.DefaultPreset); err != nil {
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
	r, err := h.run(ctx, ref.ID)
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

// SteerRun injects input into an active run ([api.RunSteer]).
func (h *Host) SteerRun(ctx context.Context, p api.SteerParams) (*api.SteerReceipt, error) {
	return mutate(ctx, h, api.RunSteer, p, h.steerRun, h.replaySteer)
}

func (h *Host) steerRun(ctx context.Context, p api.SteerParams, rc *idem.Claim) (*api.SteerReceipt, idem.Ref, error) {
	run, err := h.run(ctx, p.RunID)
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
	if run, err := h.run(ctx, r.RunID); err == nil {
		r.EventCursor = h.steerCursor(ctx, run.SessionID, r.RunID, r.SteerID)
	}
	return &r, nil
}

// GetRun returns a run ([api.RunGet]).
func (h *Host) GetRun(ctx context.Context, p api.RunIDParams) (*api.RunResult, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return h.run(ctx, p.RunID)
}

// run returns run id; an unknown one is api.ErrNotFound.
func (h *Host) run(ctx context.Context, id string) (*api.RunResult, error) {
	r, err := h.cfg.Store.Run(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, api.Errorf(api.KindNotFound, "run %s not found", id).With("runId", id)
	}
	if err != nil {
		return nil, apiError(err)
	}
	return &api.RunResult{Run: r}, nil
}

// ListRuns lists a session's runs, oldest first ([api.RunList]).
func (h *Host) ListRuns(ctx context.Context, p api.ListRunsParams) (*api.ListRunsResult, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if _, err := h.sessionRecord(ctx, p.SessionID); err != nil {
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
		runs = []record.Run{}
	}
	return &api.ListRunsResult{Runs: runs}, nil
}

// WaitRun waits until the run is terminal or the timeout passes
// ([api.RunWait]).
func (h *Host) WaitRun(ctx context.Context, p api.WaitRunParams) (*api.WaitRunResult, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	r, err := h.run(ctx, p.RunID)
	if err != nil {
		return nil, err
	}
	if record.IsTerminal(r.Status) {
		return &api.WaitRunResult{Run: r.Run}, nil
	}
	var cur record.Run
	err = h.with(ctx, r.SessionID, func(s *session.Session) (err error) {
		cur, err = s.Wait(ctx, p.RunID, millis(p.TimeoutMs))
		return err
	})
	if err != nil {
		return nil, err
	}
	return &api.WaitRunResult{Run: cur, TimedOut: !record.IsTerminal(cur.Status)}, nil
}

// millis is ms milliseconds as a Duration, saturated at the longest one:
// a timeout too long for a Duration (timeoutMs up to math.MaxInt64) waits
// without end rather than overflowing into a negative one that times out
// at once.
func millis(ms int64) time.Duration {
	return time.Duration(min(ms, int64(math.MaxInt64/time.Millisecond))) * time.Millisecond
}

// CancelRun cancels a run and returns once its terminal event is
// committed. Cancelling a terminal run returns it as it is
// ([api.RunCancel]).
func (h *Host) CancelRun(ctx context.Context, p api.CancelParams) (*api.RunResult, error) {
	return mutate(ctx, h, api.RunCancel, p, h.cancelRun, h.replayCancel)
}

func (h *Host) cancelRun(ctx context.Context, p api.CancelParams, rc *idem.Claim) (*api.RunResult, idem.Ref, error) {
	r, err := h.run(ctx, p.RunID)
	if err != nil {
		return nil, idem.Ref{}, err
	}
	ref := idem.Ref{ID: p.RunID}
	if record.IsTerminal(r.Status) {
		return r, ref, nil
	}
	reason := p.Reason
	if reason == "" {
		reason = "cancelled by a client"
	}
	var cur record.Run
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
	r, err := h.run(ctx, ref.ID)
	if err != nil {
		return nil, err
	}
	r.Replayed = true
	return r, nil
}

// ReadEvents returns a page of a session's events after a cursor: at
// most p.Limit events and about a MiB of them ([api.EventsRead]).
func (h *Host) ReadEvents(ctx context.Context, p api.ReadEventsParams) (*api.ReadEventsResult, error) {
	if err := p.Validate(); err != nil {
		return nil, err
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
// then the live tail, with no gap and no duplicate ([api.EventsSubscribe]).
// A session another host owns is followed through the store when the
// host has Config.Notices: its events are read from the log at each
// notice of a commit.
// The iterator ends with an error: api.ErrLagged when the consumer falls
// behind (by count or bytes), the store's failure when the session stops
// taking writes (resume after it recovers), an error of kind overloaded
// when the host or the session closes, or ctx's error. The replay's
// pages are read through ctx's api.PageGate, if any.
func (h *Host) Subscribe(ctx context.Context, p api.SubscribeParams) (iter.Seq2[event.Event, error], error) {
	if err := h.checkSubscribe(ctx, p); err != nil {
		return nil, err
	}
	var seq iter.Seq2[event.Event, error]
	err := h.with(ctx, p.SessionID, func(s *session.Session) (err error) {
		seq, err = s.Events(gated(ctx), p.After, p.RunID)
		return err
	})
	if h.followed(err) {
		return flatten(h.follow(ctx, p)), nil
	}
	if err != nil {
		return nil, err
	}
	return streamErrors(seq), nil
}

// SubscribeEncoded is [Host.Subscribe] for transports that write JSON:
// each event comes with its encoding (exactly json.Marshal of the
// event), and a live event is encoded once and the encoding shared by
// every subscriber of its session, however many there are. Events come
// in slices, each what the subscription read at once (a replay page, or
// everything committed since it last looked), so that a transport can
// write a slice and flush once; a slice is valid until the next
// iteration, and the encodings are read-only. A replayed event comes
// without its encoding (Encoded.JSON is nil), in a page ctx's
// api.PageGate admitted. Package rpc finds it by type assertion.
func (h *Host) SubscribeEncoded(ctx context.Context, p api.SubscribeParams) (iter.Seq2[[]event.Encoded, error], error) {
	if err := h.checkSubscribe(ctx, p); err != nil {
		return nil, err
	}
	var seq iter.Seq2[[]event.Encoded, error]
	err := h.with(ctx, p.SessionID, func(s *session.Session) (err error) {
		seq, err = s.EncodedEvents(gated(ctx), p.After, p.RunID)
		return err
	})
	if h.followed(err) {
		return encoded(h.follow(ctx, p)), nil
	}
	if err != nil {
		return nil, err
	}
	return streamErrors(seq), nil
}

// checkSubscribe checks a subscription's params and its cursor.
func (h *Host) checkSubscribe(ctx context.Context, p api.SubscribeParams) error {
	if err := p.Validate(); err != nil {
		return err
	}
	_, err := h.lastSeq(ctx, p.SessionID, p.After)
	return err
}

// gated returns ctx with its api.PageGate, if any, where the journal's
// subscriptions look for their replay gate.
func gated(ctx context.Context) context.Context {
	if g := api.PageGateFrom(ctx); g != nil {
		return journal.WithReplayGate(ctx, g)
	}
	return ctx
}

// streamErrors ends seq with an api error of kind overloaded where the
// engine ends it because it is closing (the journal, the session, the
// process manager), so that a consumer of any api.Host tells a shutdown
// from a failure, and with kind cursor_invalid where the cursor is beyond
// the log; the cause is kept. Other errors pass as they are.
func streamErrors[T any](seq iter.Seq2[T, error]) iter.Seq2[T, error] {
	return func(yield func(T, error) bool) {
		for v, err := range seq {
			if err != nil && (errors.Is(err, journal.ErrClosed) || errors.Is(err, session.ErrClosed) || errors.Is(err, process.ErrClosed)) {
				err = api.Wrap(api.KindOverloaded, err, "the host is shutting down")
			} else if errors.Is(err, journal.ErrCursor) {
				err = api.Wrap(api.KindCursorInvalid, err, "the cursor is beyond the end of the session's log")
			}
			if !yield(v, err) {
				return
			}
		}
	}
}

// CheckModel says which model a run would use and that the host can use
// it ([api.ModelCheck]): the one named, else the session's, else the
// host's default; an unusable one is the error run/start would return.
func (h *Host) CheckModel(ctx context.Context, p api.ModelCheckParams) (*api.ModelCheckResult, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if p.Model != "" {
		if err := h.checkModel("model", p.Model); err != nil {
			return nil, err
		}
		return &api.ModelCheckResult{Model: p.Model, Source: api.ModelFromParams}, nil
	}
	res := &api.ModelCheckResult{Model: h.cfg.DefaultModel, Source: api.ModelFromDefault}
	if p.SessionID != "" {
		s, err := h.sessionRecord(ctx, p.SessionID)
		if err != nil {
			return nil, err
		}
		if s.Model != "" {
			res.Model, res.Source = s.Model, api.ModelFromSession
		}
	}
	sessionModel := ""
	if res.Source == api.ModelFromSession {
		sessionModel = res.Model
	}
	if err := h.checkImplicitModel(sessionModel); err != nil {
		return nil, err
	}
	return res, nil
}

// ListTools lists the tools runs are offered ([api.ToolsList]): the
// host's own and those of the MCP servers of its configuration and, with
// a session, the session's (started if they are not running, as a step
// would); the servers that fail are named in Failed.
func (h *Host) ListTools(ctx context.Context, p api.ToolsListParams) (*api.ToolsListResult, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	reg, failed, err := h.toolsFor(ctx, p.SessionID)
	if err != nil {
		return nil, err
	}
	res := &api.ToolsListResult{Tools: []api.ToolSpec{}, Failed: failed}
	if reg != nil {
		for _, t := range reg.Specs() {
			res.Tools = append(res.Tools, api.ToolSpec{Name: t.Name, Description: t.Description, InputSchema: t.InputSchema})
		}
	}
	return res, nil
}
