package host

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"weft.dev/weft/env"
	"weft.dev/weft/env/sandbox"
	"weft.dev/weft/event"
	"weft.dev/weft/process"
	"weft.dev/weft/store"
	"weft.dev/weft/tool"
)

// Method names of the process mutations, for idempotency receipts.
const (
	MethodProcessStart = "process/start"
)

// ProcessStartParams are the params of process/start: a shell command or
// a tool with its arguments, started in the background.
type ProcessStartParams struct {
	SessionID string `json:"sessionId"`
	// Command is a shell command (sh -c); or set Tool and Args.
	Command string            `json:"command,omitempty"`
	Tool    string            `json:"tool,omitempty"`
	Args    json.RawMessage   `json:"args,omitempty"`
	MountID string            `json:"mountId,omitempty"`
	Cwd     string            `json:"cwd,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	// Disposition is owner_bound (default), rerunnable or externally_owned.
	Disposition string `json:"disposition,omitempty"`
	// WakeOnExit starts a follow-up run with the result when the process
	// ends while the session has no active run.
	WakeOnExit     bool   `json:"wakeOnExit,omitempty"`
	PTY            bool   `json:"pty,omitempty"`
	IdempotencyKey string `json:"idempotencyKey,omitempty"`
}

// ProcessResult is a process record.
type ProcessResult struct {
	store.Process
	Handle   process.Handle `json:"handle"`
	Replayed bool           `json:"replayed,omitempty"`
}

// ProcessIDParams name a process; SessionID, when set, is the session the
// caller acts as (visibility and grants apply), else the caller is an
// operator of the host.
type ProcessIDParams struct {
	ID        string `json:"id"`
	SessionID string `json:"sessionId,omitempty"`
}

// ProcessListParams are the params of process/list. Without SessionID an
// operator lists every session's processes.
type ProcessListParams struct {
	SessionID string `json:"sessionId,omitempty"`
	Status    string `json:"status,omitempty"`
}

// ProcessListResult lists processes.
type ProcessListResult struct {
	Processes []store.Process `json:"processes"`
}

// ProcessAwaitParams are the params of process/await.
type ProcessAwaitParams struct {
	ID        string `json:"id"`
	SessionID string `json:"sessionId,omitempty"`
	TimeoutMs int64  `json:"timeoutMs"`
}

// ProcessOutputParams are the params of process/output.
type ProcessOutputParams struct {
	ID        string `json:"id"`
	SessionID string `json:"sessionId,omitempty"`
	Offset    int64  `json:"offset,omitempty"`
	Limit     int    `json:"limit,omitempty"`
}

// ProcessWriteParams are the params of process/write (stdin).
type ProcessWriteParams struct {
	ID        string `json:"id"`
	SessionID string `json:"sessionId,omitempty"`
	Data      string `json:"data"`
	// Close closes stdin after writing Data.
	Close bool `json:"close,omitempty"`
}

// ProcessSignalParams are the params of process/signal.
type ProcessSignalParams struct {
	ID        string          `json:"id"`
	SessionID string          `json:"sessionId,omitempty"`
	Name      string          `json:"name"`
	Payload   json.RawMessage `json:"payload,omitempty"`
}

// ProcessSignalResult acknowledges a signal.
type ProcessSignalResult struct {
	// Seq is the seq of the signal.<name> event in the process log.
	Seq int64 `json:"seq"`
}

// ProcessCancelParams are the params of process/cancel.
type ProcessCancelParams struct {
	ID        string `json:"id"`
	SessionID string `json:"sessionId,omitempty"`
	Reason    string `json:"reason,omitempty"`
}

// ProcessGrantParams are the params of process/grant and process/revoke.
type ProcessGrantParams struct {
	ID          string `json:"id"`
	SessionID   string `json:"sessionId,omitempty"`
	ToSessionID string `json:"toSessionId"`
}

// Processes returns the process manager, or nil.
func (h *Host) Processes() *process.Manager { return h.cfg.Processes }

func (h *Host) procs() (*process.Manager, error) {
	if h.cfg.Processes == nil {
		return nil, errf(ErrInvalidParams, nil, "this host runs no background processes")
	}
	return h.cfg.Processes, nil
}

func caller(sessionID string) process.Caller {
	if sessionID == "" {
		return process.Caller{Host: true}
	}
	return process.Caller{SessionID: sessionID}
}

// procErr maps the process package's errors to the host's kinds.
func procErr(err error) error {
	if err == nil {
		return nil
	}
	var re *sandbox.RefusedError
	switch {
	case errors.Is(err, process.ErrNotFound):
		return &Error{Kind: ErrNotFound, Message: err.Error()}
	case errors.Is(err, process.ErrDenied):
		return &Error{Kind: ErrDenied, Message: err.Error()}
	case errors.Is(err, process.ErrBadHandle), errors.Is(err, process.ErrInvalid):
		return &Error{Kind: ErrInvalidParams, Message: err.Error()}
	case errors.Is(err, process.ErrExists):
		return &Error{Kind: ErrAlreadyExists, Message: err.Error()}
	case errors.Is(err, process.ErrEnded):
		return &Error{Kind: ErrRunConflict, Message: err.Error(), Data: map[string]any{"status": "ended"}}
	case errors.Is(err, env.ErrOutside), errors.Is(err, env.ErrNoMount), errors.Is(err, env.ErrReadOnly),
		errors.Is(err, env.ErrBadPath), errors.As(err, &re):
		return &Error{Kind: ErrEnvUnavailable, Message: err.Error()}
	}
	return err
}

func processResult(p store.Process) *ProcessResult {
	return &ProcessResult{Process: p, Handle: process.Handle{ID: p.ID}}
}

// StartProcess starts a shell command or a tool in the background.
func (h *Host) StartProcess(ctx context.Context, p ProcessStartParams) (*ProcessResult, error) {
	m, err := h.procs()
	if err != nil {
		return nil, err
	}
	if (p.Command == "") == (p.Tool == "") {
		return nil, errf(ErrInvalidParams, nil, "give either command or tool")
	}
	if p.Disposition == "" {
		p.Disposition = store.OwnerBound
	}
	key := p.IdempotencyKey
	p.IdempotencyKey = ""
	fp := fingerprint(p)
	id := ""
	ref, ok, release, err := h.claim(ctx, key, MethodProcessStart, fp)
	if err != nil {
		return nil, err
	}
	defer release()
	switch {
	case ok:
		rec, err := m.Get(ctx, ref.ID, process.Caller{Host: true})
		if err == nil {
			r := processResult(rec)
			r.Replayed = true
			return r, nil
		}
		if !errors.Is(err, process.ErrNotFound) {
			return nil, procErr(err)
		}
		id = ref.ID // receipted, but a crash came before the start: start it now
	case key != "":
		// The receipt names the process before it starts, so a retry after
		// a crash finds it, or starts it if it never started.
		id = h.cfg.NewID("proc")
		if _, err := h.cfg.Store.PutReceipt(ctx, receipts(key, MethodProcessStart, fp, p.SessionID, receiptRef{ID: id})[0]); err != nil {
			return nil, err
		}
	}
	// Under the session lock: the binding cannot be swapped (and closed)
	// while a shell resolves its directory, and an unmount cannot slip
	// between its live-process check and this start.
	s, err := h.lockedSession(ctx, p.SessionID)
	if err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	sp := process.StartParams{
		ID: id, SessionID: s.id, MountID: p.MountID, Cwd: p.Cwd, Env: p.Env, Disposition: p.Disposition,
		WakeOnExit: p.WakeOnExit, PTY: p.PTY, CreatedBy: "client",
	}
	if p.Command != "" {
		b, err := s.envBinding()
		if err != nil {
			return nil, err
		}
		sp.Kind, sp.Command, sp.Binding = store.ProcessShell, p.Command, b
	} else {
		if h.cfg.Tools == nil {
			return nil, errf(ErrInvalidParams, nil, "this host has no tools")
		}
		args, err := h.cfg.Tools.Validate(p.Tool, p.Args)
		if err != nil {
			return nil, errf(ErrInvalidParams, nil, "%v", err)
		}
		sp.Kind, sp.Tool, sp.Args = store.ProcessTool, p.Tool, args
	}
	rec, err := m.Start(ctx, sp)
	if err != nil {
		return nil, procErr(err)
	}
	return processResult(rec), nil
}

// GetProcess returns a process.
func (h *Host) GetProcess(ctx context.Context, p ProcessIDParams) (*ProcessResult, error) {
	m, err := h.procs()
	if err != nil {
		return nil, err
	}
	rec, err := m.Get(ctx, p.ID, caller(p.SessionID))
	if err != nil {
		return nil, procErr(err)
	}
	return processResult(rec), nil
}

// ListProcesses lists the processes a session owns or was granted, or,
// without a session, all of them.
func (h *Host) ListProcesses(ctx context.Context, p ProcessListParams) (*ProcessListResult, error) {
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
		return nil, procErr(err)
	}
	if ps == nil {
		ps = []store.Process{}
	}
	return &ProcessListResult{Processes: ps}, nil
}

// AwaitProcess waits for a process to end or the timeout.
func (h *Host) AwaitProcess(ctx context.Context, p ProcessAwaitParams) (*process.AwaitResult, error) {
	m, err := h.procs()
	if err != nil {
		return nil, err
	}
	if p.TimeoutMs < 0 {
		return nil, errf(ErrInvalidParams, nil, "timeoutMs must not be negative")
	}
	r, err := m.Await(ctx, p.ID, time.Duration(p.TimeoutMs)*time.Millisecond, caller(p.SessionID))
	if err != nil {
		return nil, procErr(err)
	}
	return &r, nil
}

// ProcessOutput reads a process's output from an offset.
func (h *Host) ProcessOutput(ctx context.Context, p ProcessOutputParams) (*process.Output, error) {
	m, err := h.procs()
	if err != nil {
		return nil, err
	}
	if p.Offset < 0 || p.Limit < 0 {
		return nil, errf(ErrInvalidParams, nil, "offset and limit must not be negative")
	}
	if p.Limit == 0 {
		p.Limit = 64 << 10
	}
	out, err := m.Output(ctx, p.ID, p.Offset, min(p.Limit, 1<<20), caller(p.SessionID))
	if err != nil {
		return nil, procErr(err)
	}
	return &out, nil
}

// WriteProcess writes to a process's stdin.
func (h *Host) WriteProcess(ctx context.Context, p ProcessWriteParams) (*ProcessResult, error) {
	m, err := h.procs()
	if err != nil {
		return nil, err
	}
	c := caller(p.SessionID)
	if p.Data != "" {
		if err := m.Write(ctx, p.ID, []byte(p.Data), c); err != nil {
			return nil, procErr(err)
		}
	}
	if p.Close {
		if err := m.CloseInput(ctx, p.ID, c); err != nil {
			return nil, procErr(err)
		}
	}
	return h.GetProcess(ctx, ProcessIDParams{ID: p.ID, SessionID: p.SessionID})
}

// SignalProcess appends signal.<name> to the process log; for shells the
// POSIX names also reach the process group.
func (h *Host) SignalProcess(ctx context.Context, p ProcessSignalParams) (*ProcessSignalResult, error) {
	m, err := h.procs()
	if err != nil {
		return nil, err
	}
	seq, err := m.Signal(ctx, p.ID, p.Name, p.Payload, caller(p.SessionID))
	if err != nil {
		return nil, procErr(err)
	}
	return &ProcessSignalResult{Seq: seq}, nil
}

// CancelProcess cancels a process through the cancel policy.
func (h *Host) CancelProcess(ctx context.Context, p ProcessCancelParams) (*ProcessResult, error) {
	m, err := h.procs()
	if err != nil {
		return nil, err
	}
	rec, err := m.Cancel(ctx, p.ID, p.Reason, caller(p.SessionID))
	if err != nil {
		return nil, procErr(err)
	}
	return processResult(rec), nil
}

// GrantProcess lets another session address a process.
func (h *Host) GrantProcess(ctx context.Context, p ProcessGrantParams) (*ProcessResult, error) {
	m, err := h.procs()
	if err != nil {
		return nil, err
	}
	rec, err := m.Grant(ctx, p.ID, p.ToSessionID, caller(p.SessionID))
	if err != nil {
		return nil, procErr(err)
	}
	return processResult(rec), nil
}

// RevokeProcess withdraws a grant.
func (h *Host) RevokeProcess(ctx context.Context, p ProcessGrantParams) (*ProcessResult, error) {
	m, err := h.procs()
	if err != nil {
		return nil, err
	}
	rec, err := m.Revoke(ctx, p.ID, p.ToSessionID, caller(p.SessionID))
	if err != nil {
		return nil, procErr(err)
	}
	return processResult(rec), nil
}

// RunTool runs a tool process for the process manager (process.ToolRunner):
// the call sees the session's current mounts.
func (h *Host) RunTool(ctx context.Context, run process.ToolRun) tool.Result {
	if h.cfg.Tools == nil {
		return tool.Result{Output: "error: this host has no tools", IsError: true}
	}
	rec, err := h.cfg.Store.Session(ctx, run.Process.SessionID)
	if err != nil {
		return tool.Result{Output: "error: " + err.Error(), IsError: true}
	}
	b, err := binding(rec)
	if err != nil {
		return tool.Result{Output: "error: " + err.Error(), IsError: true}
	}
	defer b.Close()
	call := *run.Call
	call.Env = b
	return h.cfg.Tools.Call(ctx, run.Process.Spec.Tool, &call, tool.CallOptions{Logger: h.cfg.Logger})
}

// ProcessStarted records a new process in its session's log
// (process.StartNotifier).
func (h *Host) ProcessStarted(p store.Process) {
	h.processEvent(p, event.ProcessStarted, "")
}

// ProcessEnded records the end of a process in its session's log, tells
// the session's active run at its next step boundary, or starts a
// follow-up run for a process started with wakeOnExit (process.Notifier).
func (h *Host) ProcessEnded(p store.Process) {
	tail := ""
	if m := h.cfg.Processes; m != nil {
		if r, err := m.Await(h.ctx, p.ID, 0, process.Caller{Host: true}); err == nil {
			tail = r.Tail
		}
	}
	h.processEvent(p, event.ProcessExited, tail)
}

// processEvent appends a process lifecycle event to the session log and,
// for an exit, tells the agent. It runs in a goroutine owned by the host
// so the process manager never waits on a session.
func (h *Host) processEvent(p store.Process, t event.Type, tail string) {
	h.mu.Lock()
	closed := h.closed
	if !closed {
		h.runs.Add(1)
	}
	h.mu.Unlock()
	if closed {
		return
	}
	go func() {
		defer h.runs.Done()
		ctx := h.ctx
		d := event.ProcessData{ProcessID: p.ID, RunID: p.RunID, Kind: p.Kind, Command: p.Spec.Command, Tool: p.Spec.Tool,
			MountID: p.MountID, Disposition: p.Disposition, Status: p.Status, ExitCode: p.ExitCode, Tail: tail}
		e, err := event.New("", t, d)
		if err != nil {
			return
		}
		s, err := h.lockedSession(ctx, p.SessionID)
		if err != nil {
			return // deleted, or the host is closing
		}
		defer s.mu.Unlock()
		if _, err := s.j.Append(context.WithoutCancel(ctx), e); err != nil {
			h.cfg.Logger.Warn("record process event", "session", s.id, "process", p.ID, "err", err)
			return
		}
		if t != event.ProcessExited {
			return
		}
		note := processNote(d)
		if s.active != nil && h.awaitedByRun(ctx, s.id, s.active.id, p.ID) {
			return // the run's process_await already tells the model
		}
		if s.active != nil {
			// The agent learns of it at the next step boundary.
			if _, err := s.steer(ctx, s.active, h.cfg.NewID("steer"), note, nil); err == nil {
				return
			}
		}
		if p.WakeOnExit && s.active == nil && len(s.queue) == 0 && ctx.Err() == nil {
			q := queuedRun{id: h.cfg.NewID("run"), input: note}
			if _, err := s.admit(context.WithoutCancel(ctx), q, nil, false); err != nil {
				h.cfg.Logger.Warn("wake on exit", "session", s.id, "process", p.ID, "err", err)
			}
		}
	}()
}

// processNote is what the model reads about an ended process.
func processNote(d event.ProcessData) []event.Part {
	code := ""
	if d.ExitCode != nil {
		code = fmt.Sprintf(" exitCode=%d", *d.ExitCode)
	}
	what := d.Command
	if what == "" {
		what = "tool " + d.Tool
	}
	text := fmt.Sprintf("<process-exited handle={\"__handle__\":\"process\",\"id\":%q} status=%q%s>\n%s\n", d.ProcessID, d.Status, code, what)
	if d.Tail != "" {
		text += "output tail:\n" + d.Tail + "\n"
	}
	return event.TextParts(text + "</process-exited>")
}

// awaitedByRun reports whether run runID has a process_await call for
// process id that is still waiting (it will return the end) or that
// already returned the end: then the model needs no separate notice.
func (h *Host) awaitedByRun(ctx context.Context, sessionID, runID, id string) bool {
	r, err := h.cfg.Store.Run(ctx, runID)
	if err != nil {
		return false
	}
	evs, err := h.cfg.Store.Read(ctx, store.ReadParams{SessionID: sessionID, After: r.FirstSeq - 1, RunID: runID,
		Types: []event.Type{event.ToolCallStarted, event.ToolCallCompleted}, Limit: 1000})
	if err != nil {
		return false
	}
	awaits := map[string]bool{} // call ID -> open
	for _, e := range evs {
		switch e.Type {
		case event.ToolCallStarted:
			var d event.ToolCallStartedData
			if e.Decode(&d) != nil || d.Name != "process_await" {
				continue
			}
			var args struct {
				Handle json.RawMessage `json:"handle"`
			}
			if json.Unmarshal([]byte(d.Arguments), &args) != nil {
				continue
			}
			if hd, err := process.ParseHandle(args.Handle); err == nil && hd.ID == id {
				awaits[d.ID] = true
			}
		case event.ToolCallCompleted:
			var d event.ToolCallCompletedData
			if e.Decode(&d) != nil || !awaits[d.ID] {
				continue
			}
			var out struct {
				Status string `json:"status"`
			}
			if json.Unmarshal([]byte(d.Output), &out) == nil && store.IsProcessTerminal(out.Status) {
				return true // it returned the end
			}
			awaits[d.ID] = false
		}
	}
	for _, open := range awaits {
		if open {
			return true
		}
	}
	return false
}
