package process

import (
	"context"
	"fmt"
	"time"

	"weft.dev/weft/env/sandbox"
	"weft.dev/weft/store"
	"weft.dev/weft/store/record"
)

// RecoverReport says what [Manager.Recover] did, by process ID.
type RecoverReport struct {
	// Abandoned are the owner_bound (and rerunnable shell) processes
	// marked abandoned.
	Abandoned []string `json:"abandoned,omitempty"`
	// Rerun are the rerunnable tool processes started again.
	Rerun []string `json:"rerun,omitempty"`
	// Left are the externally_owned processes left alone.
	Left []string `json:"left,omitempty"`
	// Killed counts the OS processes of recorded shells that were still
	// alive and were killed.
	Killed int `json:"killed"`
	// TempDirs counts the private temporary directories of commands that
	// dead weft processes left in Config.Sandbox.TempRoot, removed (see
	// sandbox.RemoveStale).
	TempDirs int `json:"tempDirs,omitempty"`
}

// Recover reconciles the processes a previous host left running. Call it
// once at host start, before any Start, with no other host using the
// store. For every process recorded as running that is not live under this
// Manager:
//
//   - a shell's leftovers are swept first: every process that carries the
//     process's [MarkerEnv] is killed with SIGKILL, in its recorded group
//     or not (externally_owned processes excepted). Under the sandbox
//     helper nothing should be left: the tree died with the host;
//   - owner_bound processes, and rerunnable shells, become abandoned with
//     evidence (writer "recovery", the group and the pids killed);
//   - rerunnable tool processes run again through Config.Tools, with a
//     process.restarted event (abandoned if no ToolRunner is configured);
//   - externally_owned processes are left alone.
//
// With Config.Sandbox set, it also removes the commands' temporary
// directories that dead weft processes left (sandbox.RemoveStale; those of
// live ones stay); a failure there is logged, not returned.
//
// The Notifier hears of each abandoned process. Errors are store errors;
// the processes settled before the error stay settled.
func (m *Manager) Recover(ctx context.Context) (RecoverReport, error) {
	var rep RecoverReport
	if m.cfg.Sandbox != nil {
		n, err := sandbox.RemoveStale(m.cfg.Sandbox.TempRoot)
		rep.TempDirs = n
		if err != nil {
			m.log.Warn("removing stale temporary directories", "err", err)
		}
	}
	ps, err := m.st.Processes(ctx, store.ListProcessesParams{Statuses: []string{record.ProcessRunning}, Limit: 1 << 30})
	if err != nil {
		return rep, fmt.Errorf("recover processes: %w", err)
	}
	for _, rec := range ps {
		if m.liveProc(rec.ID) != nil {
			continue
		}
		if rec.Kind == record.ProcessAgent {
			// A subagent follows its child run, which the runs' recovery
			// has settled (interrupted if it was running, queued if it was
			// queued): follow it again, whatever the disposition.
			if _, err := m.startTool(ctx, rec, "the host restarted; following the subagent's run again"); err != nil {
				return rep, fmt.Errorf("recover process %s: follow subagent: %w", rec.ID, err)
			}
			rep.Rerun = append(rep.Rerun, rec.ID)
			continue
		}
		if rec.Disposition == record.ExternallyOwned {
			rep.Left = append(rep.Left, rec.ID)
			continue
		}
		var killed []int
		if rec.Pgid > 0 {
			killed = sweep(rec.Pgid, rec.ID)
			rep.Killed += len(killed)
		}
		if rec.Disposition == record.Rerunnable && rec.Kind == record.ProcessTool && m.hooks.Load().tools != nil {
			if _, err := m.startTool(ctx, rec, "the host restarted; rerunnable process started again"); err != nil {
				return rep, fmt.Errorf("recover process %s: rerun: %w", rec.ID, err)
			}
			rep.Rerun = append(rep.Rerun, rec.ID)
			continue
		}
		reason := "the host that ran it died; what was left of it was swept"
		if rec.Kind == record.ProcessTool {
			reason = "the host that ran the tool call died"
		}
		var ended bool
		final, err := m.update(ctx, rec.ID, Caller{}, func(r *record.Process) ([]record.ProcessEvent, error) {
			if r.Status != record.ProcessRunning {
				return nil, nil
			}
			ended = true
			now := time.Now().UTC()
			r.Status, r.EndedAt = record.ProcessAbandoned, &now
			return []record.ProcessEvent{newEvent(EventAbandoned, EndedData{Status: record.ProcessAbandoned,
				Evidence: &Evidence{Writer: "recovery", Reason: reason, Pgid: r.Pgid, Killed: killed}})}, nil
		})
		if err != nil {
			return rep, fmt.Errorf("recover process %s: %w", rec.ID, err)
		}
		if ended {
			rep.Abandoned = append(rep.Abandoned, rec.ID)
			if m.hooks.Load().notify != nil {
				m.hooks.Load().notify.ProcessEnded(final)
			}
		}
	}
	return rep, nil
}
