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
// store: a host whose leases are fenced (several live hosts share the
// store) calls [Manager.RecoverSession] for each session it takes
// instead. For every process recorded as running that is not live under this
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
	rep := RecoverReport{TempDirs: m.RemoveStaleTemp()}
	err := m.recover(ctx, store.ListProcessesParams{Statuses: []string{record.ProcessRunning}, Limit: 1 << 30}, Owner{}, &rep)
	return rep, err
}

// RemoveStaleTemp removes, with Config.Sandbox set, the commands'
// temporary directories that dead weft processes of this machine left in
// its TempRoot (sandbox.RemoveStale; those of live ones stay), and
// returns how many. [Manager.Recover] does it; a host that recovers
// processes per session ([Manager.RecoverSession]) calls it at start. A
// failure is logged, not returned.
func (m *Manager) RemoveStaleTemp() int {
	if m.cfg.Sandbox == nil {
		return 0
	}
	n, err := sandbox.RemoveStale(m.cfg.Sandbox.TempRoot)
	if err != nil {
		m.log.Warn("removing stale temporary directories", "err", err)
	}
	return n
}

// Owner is who reconciles a process: the host, and the lease epoch of
// the process's session that it holds (see [record.Process.Host]).
type Owner struct {
	Host  string
	Epoch int64
}

// RecoverSession reconciles the processes of session sessionID that a
// host which lost the session's lease left behind, for the host that now
// holds it (by): those recorded as running under an earlier epoch of the
// session's lease than by.Epoch, which do not run under this Manager. A
// host calls it when it takes a session's lease with a fencing epoch
// (store.HostLeases.Fenced), instead of reconciling every process at
// start ([Manager.Recover]): the host that left them may be alive,
// frozen or partitioned, but it has lost the session, its writes for
// them are fenced and it stops them itself. Each is treated as Recover
// treats the processes of a dead host (leftovers swept on this machine;
// abandoned, rerun or left by disposition), and its record then names
// by as its owner, so that the old host's writes stay refused. Errors
// are store errors; the processes settled before the error stay settled.
func (m *Manager) RecoverSession(ctx context.Context, sessionID string, by Owner) (RecoverReport, error) {
	var rep RecoverReport
	if by.Epoch <= 0 {
		return rep, fmt.Errorf("recover the processes of session %s: no lease epoch", sessionID)
	}
	m.adopt(sessionID, by)
	p := store.ListProcessesParams{SessionID: sessionID, Statuses: []string{record.ProcessRunning}, Limit: 1 << 30}
	err := m.recover(ctx, p, by, &rep)
	return rep, err
}

// adopt moves the live processes of session sessionID that this Manager
// runs under an earlier lease of the session (the host dropped the
// session, as after losing its lease to an outage, and took it again) to
// by's epoch, so that their next writes pass the new lease's fence.
func (m *Manager) adopt(sessionID string, by Owner) {
	for _, p := range m.liveProcs() {
		p.mu.Lock()
		if p.rec.SessionID == sessionID && p.fenced == nil && p.rec.Epoch < by.Epoch {
			p.rec.Host, p.rec.Epoch = by.Host, by.Epoch
		}
		p.mu.Unlock()
	}
}

// liveProcs returns the processes running under m now.
func (m *Manager) liveProcs() []*proc {
	m.mu.Lock()
	defer m.mu.Unlock()
	ps := make([]*proc, 0, len(m.live))
	for _, p := range m.live {
		ps = append(ps, p)
	}
	return ps
}

// Runs reports whether a process of session sessionID runs under this
// Manager (one that has not been fenced). A host keeps such a session
// loaded, and so its lease: its processes' writes are fenced with it.
func (m *Manager) Runs(sessionID string) bool {
	for _, p := range m.liveProcs() {
		p.mu.Lock()
		ok := p.rec.SessionID == sessionID && p.fenced == nil
		p.mu.Unlock()
		if ok {
			return true
		}
	}
	return false
}

// recover reconciles the running processes lp lists that do not run
// here, as [Manager.Recover] says, and adds what it did to rep; with
// by.Epoch set, only those of an earlier epoch, whose records then name
// by.
func (m *Manager) recover(ctx context.Context, lp store.ListProcessesParams, by Owner, rep *RecoverReport) error {
	ps, err := m.st.Processes(ctx, lp)
	if err != nil {
		return fmt.Errorf("recover processes: %w", err)
	}
	for _, rec := range ps {
		if m.liveProc(rec.ID) != nil {
			continue
		}
		if by.Epoch > 0 && rec.Epoch >= by.Epoch {
			continue
		}
		if rec.Kind == record.ProcessAgent {
			// A subagent follows its child run, which the runs' recovery
			// has settled (interrupted if it was running, queued if it was
			// queued): follow it again, whatever the disposition.
			if by.Epoch > 0 {
				rec.Host, rec.Epoch = by.Host, by.Epoch
			}
			if _, err := m.startTool(ctx, rec, "the host restarted; following the subagent's run again"); err != nil {
				return fmt.Errorf("recover process %s: follow subagent: %w", rec.ID, err)
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
			if by.Epoch > 0 {
				rec.Host, rec.Epoch = by.Host, by.Epoch
			}
			if _, err := m.startTool(ctx, rec, "the host restarted; rerunnable process started again"); err != nil {
				return fmt.Errorf("recover process %s: rerun: %w", rec.ID, err)
			}
			rep.Rerun = append(rep.Rerun, rec.ID)
			continue
		}
		reason := "the host that ran it died; what was left of it was swept"
		if rec.Kind == record.ProcessTool {
			reason = "the host that ran the tool call died"
		}
		if by.Epoch > 0 {
			reason = "the host that ran it lost its session's lease; what was left of it on this machine was swept"
		}
		var ended bool
		final, err := m.update(ctx, rec.ID, Caller{}, func(r *record.Process) ([]record.ProcessEvent, error) {
			if r.Status != record.ProcessRunning || by.Epoch > 0 && r.Epoch >= by.Epoch {
				return nil, nil
			}
			ended = true
			now := time.Now().UTC()
			r.Status, r.EndedAt = record.ProcessAbandoned, &now
			if by.Epoch > 0 {
				r.Host, r.Epoch = by.Host, by.Epoch
			}
			return []record.ProcessEvent{newEvent(EventAbandoned, EndedData{Status: record.ProcessAbandoned,
				Evidence: &Evidence{Writer: "recovery", Reason: reason, Pgid: r.Pgid, Killed: killed}})}, nil
		})
		if err != nil {
			return fmt.Errorf("recover process %s: %w", rec.ID, err)
		}
		if ended {
			rep.Abandoned = append(rep.Abandoned, rec.ID)
			if m.hooks.Load().notify != nil {
				m.hooks.Load().notify.ProcessEnded(final)
			}
		}
	}
	return nil
}
