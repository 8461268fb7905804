package host

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"sync/atomic"
	"time"

	"weft.dev/weft/api"
	"weft.dev/weft/env"
	"weft.dev/weft/event"
	"weft.dev/weft/host/internal/idem"
	"weft.dev/weft/host/internal/session"
	"weft.dev/weft/process"
	"weft.dev/weft/store/record"
	"weft.dev/weft/tool"
)

func (h *Host) procs() (*process.Manager, error) {
	if h.cfg.Processes == nil {
		return nil, session.ErrNoProcesses
	}
	return h.cfg.Processes, nil
}

// receiptCaller is caller(sessionID) carrying rc's receipt for process
// id, which the manager stores in the transaction of the event the
// request appends; stored reports, once the request succeeded, whether it
// did (a request that appends nothing leaves the receipt to the wrapper).
// With withSeq the receipt's result is the event's seq (process/signal).
func receiptCaller(sessionID, id string, rc *idem.Claim, withSeq bool) (c process.Caller, stored func()) {
	c = caller(sessionID)
	if rc == nil {
		return c, func() {}
	}
	var used atomic.Bool
	c.Receipt = func(seq int64) record.Receipt {
		used.Store(true)
		ref := idem.Ref{ID: id}
		if withSeq {
			ref.Result, _ = json.Marshal(api.ProcessSignalResult{Seq: seq})
		}
		return rc.Receipt(sessionID, ref)
	}
	return c, func() {
		if used.Load() {
			rc.Stored()
		}
	}
}

func caller(sessionID string) process.Caller {
	if sessionID == "" {
		return process.Caller{Host: true}
	}
	return process.Caller{SessionID: sessionID}
}

func processResult(p record.Process) *api.ProcessResult {
	return &api.ProcessResult{Process: p, Handle: api.Handle{ID: p.ID}}
}

// StartProcess starts a shell command or a tool in the background,
// through the session's owner. With an idempotency key, the receipt names
// the process before it starts, so a retry after a crash finds it, or
// starts it if it never started ([api.ProcessStart]).
func (h *Host) StartProcess(ctx context.Context, p api.ProcessStartParams) (*api.ProcessResult, error) {
	return mutate(ctx, h, api.ProcessStart, p, h.startProcess, h.replayStartProcess)
}

func (h *Host) startProcess(ctx context.Context, p api.ProcessStartParams, rc *idem.Claim) (*api.ProcessResult, idem.Ref, error) {
	if _, err := h.procs(); err != nil {
		return nil, idem.Ref{}, err
	}
	id := h.cfg.NewID("proc")
	ref := idem.Ref{ID: id}
	if rc != nil {
		if _, err := h.cfg.Store.PutReceipt(ctx, rc.Receipt(p.SessionID, ref)); err != nil {
			return nil, idem.Ref{}, apiError(err)
		}
		rc.Stored()
	}
	res, err := h.launch(ctx, p, id)
	return res, ref, err
}

func (h *Host) replayStartProcess(ctx context.Context, p api.ProcessStartParams, ref idem.Ref) (*api.ProcessResult, error) {
	m, err := h.procs()
	if err != nil {
		return nil, err
	}
	rec, err := m.Get(ctx, ref.ID, process.Caller{Host: true})
	if errors.Is(err, process.ErrNotFound) {
		// Receipted, but a crash came before the start: start it now.
		return h.launch(ctx, p, ref.ID)
	}
	if err != nil {
		return nil, apiError(err)
	}
	r := processResult(rec)
	r.Replayed = true
	return r, nil
}

// launch starts process id of p through its session's owner.
func (h *Host) launch(ctx context.Context, p api.ProcessStartParams, id string) (*api.ProcessResult, error) {
	disp := p.Disposition
	if disp == "" {
		disp = record.OwnerBound
	}
	sp := process.StartParams{
		ID: id, MountID: p.MountID, Cwd: p.Cwd, Env: p.Env, Disposition: disp,
		WakeOnExit: p.WakeOnExit, PTY: p.PTY, CreatedBy: "client",
	}
	if p.Command != "" {
		sp.Kind, sp.Command = record.ProcessShell, p.Command
	} else {
		reg := h.cfg.Tools
		if isMCPTool(p.Tool) && h.cfg.MCP != nil {
			var err error
			if reg, _, err = h.toolsFor(ctx, p.SessionID); err != nil {
				return nil, err
			}
		}
		if reg == nil {
			return nil, invalid("tool", "this host has no tools")
		}
		args, err := reg.Validate(p.Tool, p.Args)
		if err != nil {
			return nil, invalid("args", "%v", err)
		}
		sp.Kind, sp.Tool, sp.Args = record.ProcessTool, p.Tool, args
	}
	var rec record.Process
	err := h.with(ctx, p.SessionID, func(s *session.Session) (err error) {
		rec, err = s.StartProcess(ctx, sp)
		return err
	})
	if err != nil {
		return nil, apiError(err)
	}
	return processResult(rec), nil
}

// GetProcess returns a process ([api.ProcessGet]).
func (h *Host) GetProcess(ctx context.Context, p api.ProcessIDParams) (*api.ProcessResult, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	m, err := h.procs()
	if err != nil {
		return nil, err
	}
	rec, err := m.Get(ctx, p.ID, caller(p.SessionID))
	if err != nil {
		return nil, apiError(err)
	}
	return processResult(rec), nil
}

// ListProcesses lists the processes a session owns or was granted, or,
// without a session, all of them ([api.ProcessList]).
func (h *Host) ListProcesses(ctx context.Context, p api.ProcessListParams) (*api.ProcessListResult, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	m, err := h.procs()
	if err != nil {
		return nil, err
	}
	lp := process.ListParams{}
	if p.Status != "" {
		lp.Statuses = []string{p.Status}
	}
	ps, err := m.List(ctx, lp, caller(p.SessionID))
	if err != nil {
		return nil, apiError(err)
	}
	if ps == nil {
		ps = []record.Process{}
	}
	return &api.ProcessListResult{Processes: ps}, nil
}

// AwaitProcess waits for a process to end or the timeout
// ([api.ProcessAwait]).
func (h *Host) AwaitProcess(ctx context.Context, p api.ProcessAwaitParams) (*api.AwaitResult, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	m, err := h.procs()
	if err != nil {
		return nil, err
	}
	r, err := m.Await(ctx, p.ID, millis(p.TimeoutMs), caller(p.SessionID))
	if err != nil {
		return nil, apiError(err)
	}
	return &r, nil
}

// ProcessOutput reads a process's output from an offset
// ([api.ProcessOutput]).
func (h *Host) ProcessOutput(ctx context.Context, p api.ProcessOutputParams) (*api.Output, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	m, err := h.procs()
	if err != nil {
		return nil, err
	}
	if p.Limit == 0 {
		p.Limit = 64 << 10
	}
	out, err := m.Output(ctx, p.ID, p.Offset, min(p.Limit, 1<<20), caller(p.SessionID))
	if err != nil {
		return nil, apiError(err)
	}
	return &out, nil
}

// replayProcess answers a retry of a process mutation with the process as
// it is now.
func replayProcess[P any](h *Host) replayer[P, api.ProcessResult] {
	return func(ctx context.Context, _ P, ref idem.Ref) (*api.ProcessResult, error) {
		m, err := h.procs()
		if err != nil {
			return nil, err
		}
		rec, err := m.Get(ctx, ref.ID, process.Caller{Host: true})
		if err != nil {
			return nil, apiError(err)
		}
		r := processResult(rec)
		r.Replayed = true
		return r, nil
	}
}

// WriteProcess writes to a process's stdin ([api.ProcessWrite]).
func (h *Host) WriteProcess(ctx context.Context, p api.ProcessWriteParams) (*api.ProcessResult, error) {
	return mutate(ctx, h, api.ProcessWrite, p, h.writeProcess, replayProcess[api.ProcessWriteParams](h))
}

func (h *Host) writeProcess(ctx context.Context, p api.ProcessWriteParams, rc *idem.Claim) (*api.ProcessResult, idem.Ref, error) {
	m, err := h.procs()
	if err != nil {
		return nil, idem.Ref{}, err
	}
	c := caller(p.SessionID)
	if p.Data != "" {
		wc, stored := receiptCaller(p.SessionID, p.ID, rc, false)
		if err := m.Write(ctx, p.ID, []byte(p.Data), wc); err != nil {
			return nil, idem.Ref{}, apiError(err)
		}
		stored()
	}
	if p.Close {
		if err := m.CloseInput(ctx, p.ID, c); err != nil {
			return nil, idem.Ref{}, apiError(err)
		}
	}
	rec, err := m.Get(ctx, p.ID, c)
	if err != nil {
		return nil, idem.Ref{}, apiError(err)
	}
	return processResult(rec), idem.Ref{ID: p.ID}, nil
}

// SignalProcess appends signal.<name> to the process log; for shells the
// POSIX names also reach the process group ([api.ProcessSignal]).
func (h *Host) SignalProcess(ctx context.Context, p api.ProcessSignalParams) (*api.ProcessSignalResult, error) {
	return mutate(ctx, h, api.ProcessSignal, p, h.signalProcess, h.replaySignal)
}

func (h *Host) signalProcess(ctx context.Context, p api.ProcessSignalParams, rc *idem.Claim) (*api.ProcessSignalResult, idem.Ref, error) {
	m, err := h.procs()
	if err != nil {
		return nil, idem.Ref{}, err
	}
	c, stored := receiptCaller(p.SessionID, p.ID, rc, true)
	seq, err := m.Signal(ctx, p.ID, p.Name, p.Payload, c)
	if err != nil {
		return nil, idem.Ref{}, apiError(err)
	}
	stored()
	res := &api.ProcessSignalResult{Seq: seq}
	b, err := jsonRaw(res)
	return res, idem.Ref{ID: p.ID, Result: b}, err
}

func (h *Host) replaySignal(_ context.Context, _ api.ProcessSignalParams, ref idem.Ref) (*api.ProcessSignalResult, error) {
	var res api.ProcessSignalResult
	if err := json.Unmarshal(ref.Result, &res); err != nil {
		return nil, fmt.Errorf("signal receipt of process %s: %w", ref.ID, err)
	}
	res.Replayed = true
	return &res, nil
}

// CancelProcess cancels a process through the cancel policy
// ([api.ProcessCancel]).
func (h *Host) CancelProcess(ctx context.Context, p api.ProcessCancelParams) (*api.ProcessResult, error) {
	return mutate(ctx, h, api.ProcessCancel, p, h.cancelProcess, replayProcess[api.ProcessCancelParams](h))
}

func (h *Host) cancelProcess(ctx context.Context, p api.ProcessCancelParams, rc *idem.Claim) (*api.ProcessResult, idem.Ref, error) {
	m, err := h.procs()
	if err != nil {
		return nil, idem.Ref{}, err
	}
	c, stored := receiptCaller(p.SessionID, p.ID, rc, false)
	rec, err := m.Cancel(ctx, p.ID, p.Reason, c)
	if err != nil {
		return nil, idem.Ref{}, apiError(err)
	}
	stored()
	return processResult(rec), idem.Ref{ID: p.ID}, nil
}

// GrantProcess lets another session address a process
// ([api.ProcessGrant]).
func (h *Host) GrantProcess(ctx context.Context, p api.ProcessGrantParams) (*api.ProcessResult, error) {
	return mutate(ctx, h, api.ProcessGrant, p, h.grantProcess, replayProcess[api.ProcessGrantParams](h))
}

func (h *Host) grantProcess(ctx context.Context, p api.ProcessGrantParams, rc *idem.Claim) (*api.ProcessResult, idem.Ref, error) {
	m, err := h.procs()
	if err != nil {
		return nil, idem.Ref{}, err
	}
	c, stored := receiptCaller(p.SessionID, p.ID, rc, false)
	rec, err := m.Grant(ctx, p.ID, p.ToSessionID, c)
	if err != nil {
		return nil, idem.Ref{}, apiError(err)
	}
	stored()
	return processResult(rec), idem.Ref{ID: p.ID}, nil
}

// RevokeProcess withdraws a grant ([api.ProcessRevoke]).
func (h *Host) RevokeProcess(ctx context.Context, p api.ProcessGrantParams) (*api.ProcessResult, error) {
	return mutate(ctx, h, api.ProcessRevoke, p, h.revokeProcess, replayProcess[api.ProcessGrantParams](h))
}

// FollowProcess yields a process's output from p.Offset, then live as it
// is written, until the process ends and everything is yielded (the
// iterator then ends with nil), or an error ([api.ProcessFollow]).
// Visibility and grants apply as for GetProcess, checked before it
// returns. The output's pages are read through ctx's api.PageGate, if
// any.
func (h *Host) FollowProcess(ctx context.Context, p api.ProcessFollowParams) (iter.Seq2[api.Chunk, error], error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	m, err := h.procs()
	if err != nil {
		return nil, err
	}
	c := caller(p.SessionID)
	if _, err := m.Get(ctx, p.ID, c); err != nil {
		return nil, apiError(err)
	}
	if g := api.PageGateFrom(ctx); g != nil {
		ctx = process.WithPageGate(ctx, g)
	}
	return streamErrors(m.Follow(ctx, p.ID, p.Offset, c)), nil
}

func (h *Host) revokeProcess(ctx context.Context, p api.ProcessGrantParams, rc *idem.Claim) (*api.ProcessResult, idem.Ref, error) {
	m, err := h.procs()
	if err != nil {
		return nil, idem.Ref{}, err
	}
	c, stored := receiptCaller(p.SessionID, p.ID, rc, false)
	rec, err := m.Revoke(ctx, p.ID, p.ToSessionID, c)
	if err != nil {
		return nil, idem.Ref{}, apiError(err)
	}
	stored()
	return processResult(rec), idem.Ref{ID: p.ID}, nil
}

// runTool runs a tool process for the process manager (see
// [processHooks]): the call sees the session's current mounts, and starts
// what it starts in the background through the session's owner.
func (h *Host) runTool(ctx context.Context, run process.ToolRun) tool.Result {
	reg := h.cfg.Tools
	if isMCPTool(run.Process.Spec.Tool) && h.cfg.MCP != nil {
		// An MCP tool: its server is started (or found running) for the
		// session, as a step would; one that fails answers with its error.
		var err error
		if reg, _, err = h.toolsFor(ctx, run.Process.SessionID); err != nil {
			return tool.Result{Output: "error: " + err.Error(), IsError: true}
		}
	}
	if reg == nil {
		return tool.Result{Output: "error: this host has no tools", IsError: true}
	}
	var (
		b  *env.Binding
		bg tool.Background
		g  env.Guard
	)
	err := h.with(ctx, run.Process.SessionID, func(s *session.Session) error {
		var err error
		b, err = env.OpenSession(run.Process.SessionID, s.Record().Binding)
		bg = s.Background()
		g = s.ToolGuard(run.Process.RunID, run.Process.Spec.Tool, run.Process.Spec.Args)
		return err
	})
	if err != nil {
		return tool.Result{Output: "error: " + err.Error(), IsError: true}
	}
	defer b.Close()
	call := *run.Call
	call.Env, call.Background = b.WithGuard(g), bg
	return reg.Call(ctx, run.Process.Spec.Tool, &call, tool.CallOptions{Logger: h.cfg.Logger})
}

// recordProcess hands a process's end to its session's owner in a
// goroutine of the host's, so that the process manager never waits on a
// session. (Starts are not notified: every start goes through its
// session's owner, which records it under its lock, so an end, which
// waits for that lock, always comes after its start in the log.)
func (h *Host) recordProcess(p record.Process, t event.Type) {
	h.goBackground(func() {
		ctx := context.WithoutCancel(h.ctx)
		tail := ""
		if m := h.cfg.Processes; m != nil && t == event.ProcessExited {
			if r, err := m.Await(ctx, p.ID, 0, process.Caller{Host: true}); err == nil {
				tail = r.Tail
			}
		}
		// A session that refuses writes (the store is failing) is tried
		// again with backoff until it takes the event or the host closes:
		// a process's end is never dropped for an outage.
		for wait := h.cfg.StorageRetry; ; wait = min(2*wait, 5*time.Second) {
			err := h.with(ctx, p.SessionID, func(s *session.Session) error {
				return s.RecordProcess(ctx, p, t, tail)
			})
			if errors.Is(err, api.ErrStorageUnavailable) {
				timer := time.NewTimer(wait)
				select {
				case <-timer.C:
					continue
				case <-h.ctx.Done():
					timer.Stop()
				}
			}
			if err != nil && !errors.Is(err, api.ErrNotFound) && !errors.Is(err, ErrClosed) {
				h.cfg.Logger.Warn("record a process event", "session", p.SessionID, "process", p.ID, "type", t, "err", err)
			}
			return
		}
	})
}

func jsonRaw(v any) (json.RawMessage, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encode receipt: %w", err)
	}
	return b, nil
}
