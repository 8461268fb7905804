package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"weft.dev/weft/api"
	"weft.dev/weft/event"
	"weft.dev/weft/host/internal/idem"
	"weft.dev/weft/process"
	"weft.dev/weft/store"
	"weft.dev/weft/store/record"
	"weft.dev/weft/tool"
)

// ErrNoProcesses reports a process start on a host without a process
// manager.
var ErrNoProcesses = api.NewError(api.KindInvalidParams, "this host runs no background processes")

// StartProcess starts a background process of the session. Every start —
// process/start, the shell tool's background commands, start_tool — goes
// through here, under the session's lock, so an unmount's check for live
// processes can never race a start, and a shell resolves its directory in
// a binding that cannot be swapped meanwhile. sp.SessionID and sp.Binding
// are set here; an empty sp.ID becomes a fresh "proc_…" ID.
func (s *Session) StartProcess(ctx context.Context, sp process.StartParams) (record.Process, error) {
	return s.startProcess(ctx, sp, "")
}

// startProcess is StartProcess; a shell runs with only mount only
// writable when only is set (see agent.Verdict.OnlyWritable).
func (s *Session) startProcess(ctx context.Context, sp process.StartParams, only string) (record.Process, error) {
	pm := s.cfg.Processes
	if pm == nil {
		return record.Process{}, ErrNoProcesses
	}
	var rec record.Process
	err := s.command(func() error {
		sp.SessionID = s.id
		// The process runs under this host's lease of the session: its
		// writes are fenced with it.
		o := s.Owner()
		sp.Host, sp.Epoch = o.Host, o.Epoch
		if sp.ID == "" {
			sp.ID = s.cfg.NewID("proc")
		}
		if sp.Kind == record.ProcessShell {
			b, err := s.bindingLocked()
			if err != nil {
				return err
			}
			sp.Binding = b
			if only != "" {
				if sp.Binding, err = b.OnlyWritable(only); err != nil {
					return api.Wrap(api.KindDenied, err, "the policy allows this command only with mount %q as the one writable mount: %v", only, err)
				}
			}
		}
		var err error
		if rec, err = pm.Start(ctx, sp); err != nil {
			return err
		}
		// Recorded here, under the lock, so that the process's end (which
		// its supervisor may report at once) comes after it in the log.
		if err := s.recordProcess(ctx, rec, event.ProcessStarted, ""); err != nil {
			s.cfg.Logger.Warn("record a process start", "session", s.id, "process", rec.ID, "err", err)
		}
		return nil
	})
	return rec, err
}

// background is the session as the tools' starter of background
// processes (tool.Background).
type background struct{ s *Session }

func (b background) StartProcess(ctx context.Context, call *tool.Call, req tool.BackgroundRequest) (record.Process, error) {
	disp := req.Disposition
	if disp == "" {
		disp = record.OwnerBound
	}
	sp := process.StartParams{
		RunID: call.RunID, ToolCallID: call.ID, Kind: req.Kind, Command: req.Command, Cwd: req.Cwd,
		Tool: req.Tool, Args: req.Args, Disposition: disp, WakeOnExit: req.WakeOnExit, CreatedBy: req.CreatedBy,
		Agent: req.Agent, ID: req.ID,
	}
	// A policy may have left the call only one writable mount
	// (agent.Verdict.OnlyWritable): so has its shell.
	only, _ := call.Env.Narrowed()
	return b.s.startProcess(ctx, sp, only)
}

// Background returns the session as a starter of background processes,
// for tool processes that the host runs outside a run.
func (s *Session) Background() tool.Background { return background{s} }

// Note appends e, an event that changes no state of the session (a
// subagent's request mirrored in its parent's log), as one command.
func (s *Session) Note(ctx context.Context, e event.Event) error {
	return s.command(func() error {
		_, err := s.append(ctx, nil, idem.Ref{}, e)
		return err
	})
}

// RecordProcess writes a process's end (process.exited, with the tail of
// its output) to the session's log (a start is recorded by StartProcess
// itself). An end is also told to the active run at its next step boundary (unless
// the run is awaiting that process), or, for a process started with
// WakeOnExit, starts a follow-up run when the session is idle.
func (s *Session) RecordProcess(ctx context.Context, p record.Process, t event.Type, tail string) error {
	return s.command(func() error { return s.recordProcess(ctx, p, t, tail) })
}

// recordProcess is RecordProcess for commands.
func (s *Session) recordProcess(ctx context.Context, p record.Process, t event.Type, tail string) error {
	d := event.ProcessData{ProcessID: p.ID, RunID: p.RunID, Kind: p.Kind, Command: p.Spec.Command, Tool: p.Spec.Tool,
		MountID: p.MountID, Disposition: p.Disposition, Status: p.Status, ExitCode: p.ExitCode, Tail: tail}
	e, err := event.New("", t, d)
	if err != nil {
		return err
	}
	if _, err := s.append(ctx, nil, idem.Ref{}, e); err != nil {
		return err
	}
	if t != event.ProcessExited {
		return nil
	}
	note := processNote(d)
	activeID := s.activeID()
	if activeID != "" && s.awaitedByRun(ctx, activeID, p.ID) {
		return nil // the run's process_await already tells the model
	}
	if activeID != "" {
		// The agent learns of it at the next step boundary.
		if _, err := s.steer(ctx, s.active, s.cfg.NewID("steer"), note, nil, idem.Ref{}); err == nil {
			return nil
		}
	}
	if p.WakeOnExit && activeID == "" && len(s.queue) == 0 && s.ctx.Err() == nil {
		q := queuedRun{id: s.cfg.NewID("run"), input: note}
		if _, err := s.admit(ctx, q, nil, idem.Ref{}, false); err != nil {
			s.cfg.Logger.Warn("wake on exit", "session", s.id, "process", p.ID, "err", err)
		}
	}
	return nil
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
func (s *Session) awaitedByRun(ctx context.Context, runID, id string) bool {
	r, ok := s.j.Run(runID) // the active run: the projection has it
	if !ok {
		return false
	}
	evs, err := s.cfg.Store.Read(ctx, store.ReadParams{SessionID: s.id, After: r.FirstSeq - 1, RunID: runID,
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
			if hd, err := api.ParseHandle(args.Handle); err == nil && hd.ID == id {
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
			if json.Unmarshal([]byte(d.Output), &out) == nil && record.IsProcessTerminal(out.Status) {
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

// Delete deletes the session: it refuses while a run is active or
// queued, cancels the session's owner-bound processes, commits
// session.deleted with rc's receipt, and closes the session.
func (s *Session) Delete(ctx context.Context, rc *idem.Claim) error {
	err := s.command(func() error {
		if id := s.activeID(); id != "" || len(s.queue) > 0 {
			return api.Errorf(api.KindRunConflict, "session %s has an active run %s", s.id, id).With("sessionId", s.id).With("activeRunId", id)
		}
		if pm := s.cfg.Processes; pm != nil {
			live, err := pm.List(ctx, process.ListParams{Statuses: []string{record.ProcessRunning}}, process.Caller{SessionID: s.id})
			if err != nil {
				return err
			}
			for _, p := range live {
				if p.SessionID == s.id && p.Disposition == record.OwnerBound {
					if _, err := pm.Cancel(ctx, p.ID, "session deleted", process.Caller{Host: true}); err != nil && !errors.Is(err, process.ErrEnded) {
						return err
					}
				}
			}
		}
		e, err := event.New("", event.SessionDeleted, struct{}{})
		if err != nil {
			return err
		}
		if _, err := s.append(ctx, rc, idem.Ref{ID: s.id}, e); err != nil {
			return err
		}
		s.state = stateClosed
		s.cancel(ErrClosed)
		return nil
	})
	if err != nil {
		return err
	}
	s.finish()
	return nil
}

// jsonRaw encodes v for a receipt.
func jsonRaw(v any) (json.RawMessage, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encode receipt: %w", err)
	}
	return b, nil
}
