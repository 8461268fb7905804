package host

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"weft.dev/weft/api"
	"weft.dev/weft/event"
	"weft.dev/weft/host/internal/session"
	"weft.dev/weft/process"
	"weft.dev/weft/store"
	"weft.dev/weft/store/record"
	"weft.dev/weft/tool"
)

// Subagents bounds the spawn_agent tool, which the host offers every run
// when it has a process manager. The zero value means the defaults noted.
type Subagents struct {
	// Off leaves the spawn_agent tool out.
	Off bool
	// MaxDepth is how deep subagents nest: a top-level session's child
	// is at depth 1. Zero means 2.
	MaxDepth int
	// MaxChildren is the most subagents one run may have running at
	// once. Zero means 4.
	MaxChildren int
}

// SpawnAgentTool is the name of the tool that starts a subagent.
const SpawnAgentTool = "spawn_agent"

// maxAnswerBytes bounds the final answer a subagent's process record
// keeps (the whole answer is in the child's log and the process output).
const maxAnswerBytes = 64 << 10

// spawnArgs are spawn_agent's arguments.
type spawnArgs struct {
	Prompt     string       `json:"prompt" jsonschema:"the subagent's task: everything it needs to know, since it does not see this conversation"`
	Title      string       `json:"title,omitempty" jsonschema:"a short title for the subagent's session"`
	Model      string       `json:"model,omitempty" jsonschema:"the subagent's model (provider:model); empty means this run's"`
	Tools      []string     `json:"tools,omitempty" jsonschema:"the names of the tools the subagent may use, a subset of yours; omitted means all of yours"`
	Mounts     []spawnMount `json:"mounts,omitempty" jsonschema:"the mounts the subagent sees and how; omitted means all of yours, read-only"`
	WakeOnExit bool         `json:"wakeOnExit,omitempty" jsonschema:"start a new run of this session when the subagent ends"`
}

type spawnMount struct {
	ID   string `json:"id" jsonschema:"the ID of one of your mounts"`
	Mode string `json:"mode,omitempty" jsonschema:"ro (the default) or rw; rw only where your mount is read-write"`
}

// spawnTool returns the spawn_agent tool of h.
func (h *Host) spawnTool() (tool.Tool, error) {
	return tool.Func(SpawnAgentTool, "Start a subagent: a new agent with its own session, working on prompt in the background with a subset of your tools and mounts. "+
		"Returns its process handle at once: process_await with the handle returns its final answer (the result field) or why it failed; "+
		"process_output reads what it has written so far; process_cancel stops it. Start several to work in parallel, then await each.", h.spawn)
}

// limitResult is the typed error result of a spawn past a limit.
func limitResult(limit, msg string) tool.Result {
	return tool.Result{Output: "error: " + msg, IsError: true,
		Failure: &event.ToolFailure{Kind: event.FailureSubagentLimit, Limit: limit, Scope: "run", Message: msg}}
}

// spawn is spawn_agent: it checks the limits and what the child may
// have (tools, mounts, model), creates the child session, linked to the
// parent, and starts the subagent process that runs and follows it.
func (h *Host) spawn(ctx context.Context, c *tool.Call, in spawnArgs) (tool.Result, error) {
	m, err := h.procs()
	if err != nil {
		return tool.Result{}, err
	}
	if strings.TrimSpace(in.Prompt) == "" {
		return tool.Result{}, errors.New("prompt is empty")
	}
	if len(in.Prompt) > api.MaxInputBytes {
		return tool.Result{}, fmt.Errorf("prompt: %d bytes, more than %d", len(in.Prompt), api.MaxInputBytes)
	}
	if c.Background == nil || c.SessionID == "" {
		return tool.Result{}, errors.New("spawn_agent runs only in a session's run")
	}
	parent, err := h.sessionRecord(ctx, c.SessionID)
	if err != nil {
		return tool.Result{}, err
	}
	depth := 1
	if pp := parent.Parent; pp != nil {
		depth = pp.Depth + 1
	}
	if depth > h.cfg.Subagents.MaxDepth {
		return limitResult("depth", fmt.Sprintf("a subagent at depth %d would pass the depth limit of %d", depth, h.cfg.Subagents.MaxDepth)), nil
	}
	if c.RunID != "" {
		// Calls of one step run in parallel: the count and the start are
		// one reservation, so that they cannot all pass the limit.
		release, n, err := h.spawns.reserve(c.RunID, h.cfg.Subagents.MaxChildren, func() (int, error) {
			return liveChildren(ctx, m, c.SessionID, c.RunID)
		})
		if err != nil {
			return tool.Result{}, err
		}
		if release == nil {
			return limitResult("children", fmt.Sprintf("this run has %d subagents running, the most it may have at once; await or cancel one first", n)), nil
		}
		defer release()
	}
	tools, err := h.childTools(ctx, parent, in.Tools, depth)
	var de *depthError
	if errors.As(err, &de) {
		return limitResult("depth", de.Error()), nil
	}
	if err != nil {
		return tool.Result{}, err
	}
	mounts, err := childMounts(parent.Binding.Mounts, in.Mounts)
	if err != nil {
		return tool.Result{}, err
	}
	model := in.Model
	var layer event.RunQueuedData // the parent run's own policy layer
	var budget json.RawMessage    // what the parent has left, the child's cap
	if c.RunID != "" {
		r, err := h.cfg.Store.Run(ctx, c.RunID)
		if err != nil {
			return tool.Result{}, apiError(err)
		}
		if rem := RemainingBudget(r, parent.Session, time.Now()); rem.Limits() {
			if budget, err = json.Marshal(rem); err != nil {
				return tool.Result{}, err
			}
		}
		if model == "" {
			model = r.Model
		}
		evs, err := h.cfg.Store.Read(ctx, store.ReadParams{SessionID: c.SessionID, After: r.FirstSeq - 1, RunID: c.RunID,
			Types: []event.Type{event.RunQueued}, Limit: 1})
		if err != nil {
			return tool.Result{}, apiError(err)
		}
		if len(evs) == 1 {
			if err := evs[0].Decode(&layer); err != nil {
				return tool.Result{}, fmt.Errorf("the parent run's policy: %w", err)
			}
		}
	}
	if err := h.checkModel("model", in.Model); err != nil { // the parent run's is known to work
		return tool.Result{}, err
	}
	procID, childID := h.cfg.NewID("proc"), h.cfg.NewID("ses")
	title := in.Title
	if title == "" {
		title = "subagent: " + excerpt(in.Prompt, 60)
	}
	title = excerpt(title, api.MaxTitleBytes)
	s, err := session.Create(ctx, &h.scfg, childID, event.SessionCreatedData{
		Title: title, Model: model, Mounts: mounts, Network: parent.Binding.Network, Limits: parent.Binding.Limits,
		Policy: parent.Policy, MCPServers: parent.MCPServers,
		Parent: &event.SessionParent{SessionID: c.SessionID, RunID: c.RunID, ToolCallID: c.ID, ProcessID: procID, Depth: depth, Tools: tools},
	}, nil)
	if err != nil {
		return tool.Result{}, err
	}
	if err := h.add(s); err != nil {
		return tool.Result{}, err
	}
	spec := &record.AgentSpec{SessionID: childID, ParentSessionID: c.SessionID, ParentRunID: c.RunID, ParentCallID: c.ID,
		Depth: depth, Prompt: in.Prompt, Model: model, Tools: tools, Policy: layer.Policy, DefaultPreset: layer.DefaultPreset,
		Budget: budget}
	rec, err := c.Background.StartProcess(ctx, c, tool.BackgroundRequest{Kind: record.ProcessAgent, Agent: spec, ID: procID,
		Disposition: record.Rerunnable, WakeOnExit: in.WakeOnExit, CreatedBy: "tool:" + SpawnAgentTool})
	if err != nil {
		// The child never ran: it goes (best effort; an empty session is
		// harmless if it stays).
		if _, derr := h.DeleteSession(context.WithoutCancel(ctx), api.SessionIDParams{SessionID: childID}); derr != nil {
			h.cfg.Logger.Warn("delete the session of a subagent that did not start", "session", childID, "err", derr)
		}
		return tool.Result{}, err
	}
	out, err := json.Marshal(struct {
		Handle  api.Handle `json:"handle"`
		Session string     `json:"childSessionId"`
		Tools   []string   `json:"tools"`
		Note    string     `json:"note"`
	}{api.Handle{ID: rec.ID}, childID, tools, "the subagent is running; process_await with the handle returns its answer"})
	if err != nil {
		return tool.Result{}, err
	}
	return tool.Result{Output: string(out)}, nil
}

// liveChildren counts the running subagents of run runID.
func liveChildren(ctx context.Context, m *process.Manager, sid, runID string) (int, error) {
	live, err := m.List(ctx, process.ListParams{Statuses: []string{record.ProcessRunning}}, process.Caller{SessionID: sid})
	if err != nil {
		return 0, err
	}
	n := 0
	for _, p := range live {
		if p.Kind == record.ProcessAgent && p.RunID == runID {
			n++
		}
	}
	return n, nil
}

// spawnSlots holds the spawns in flight of each run, between the count
// of its live children and the start of the new one. Its lock is taken
// only by spawns (and held across the count, a read of the process
// registry), never with another lock. Safe for concurrent use.
type spawnSlots struct {
	mu      sync.Mutex
	pending map[string]int
}

// reserve counts run runID's children (live() plus the spawns in flight)
// and, below limit, reserves a slot: release gives it back. At the limit
// release is nil and n is the count.
func (s *spawnSlots) reserve(runID string, limit int, live func() (int, error)) (release func(), n int, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if n, err = live(); err != nil {
		return nil, 0, err
	}
	n += s.pending[runID]
	if n >= limit {
		return nil, n, nil
	}
	if s.pending == nil {
		s.pending = map[string]int{}
	}
	s.pending[runID]++
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.pending[runID]--; s.pending[runID] <= 0 {
			delete(s.pending, runID)
		}
	}, n, nil
}

// childTools returns the tools a child at depth may use: want, each of
// which the parent must have, or all of the parent's. spawn_agent is left
// out where the child could not use it (at the depth limit).
func (h *Host) childTools(ctx context.Context, parent *api.SessionResult, want []string, depth int) ([]string, error) {
	reg, _, err := h.toolsFor(ctx, parent.ID)
	if err != nil {
		return nil, err
	}
	var have []string
	if reg != nil {
		for _, sp := range reg.Specs() {
			have = append(have, sp.Name)
		}
	}
	if pp := parent.Parent; pp != nil {
		have = slices.DeleteFunc(have, func(n string) bool { return !slices.Contains(pp.Tools, n) })
	}
	if depth >= h.cfg.Subagents.MaxDepth {
		have = slices.DeleteFunc(have, func(n string) bool { return n == SpawnAgentTool })
	}
	if want == nil {
		slices.Sort(have)
		return have, nil
	}
	out := []string{}
	for _, n := range want {
		if n == SpawnAgentTool && depth >= h.cfg.Subagents.MaxDepth {
			return nil, &depthError{depth, h.cfg.Subagents.MaxDepth}
		}
		if !slices.Contains(have, n) {
			return nil, fmt.Errorf("tool %q is not one of yours: a subagent gets a subset of your tools", n)
		}
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out, nil
}

// depthError refuses spawn_agent to a child that would be at the depth
// limit.
type depthError struct{ depth, limit int }

func (e *depthError) Error() string {
	return fmt.Sprintf("a subagent at depth %d may not spawn others: the depth limit is %d", e.depth, e.limit)
}

// childMounts returns the child's mounts: those of want, each one of the
// parent's and never wider (read-write only where the parent's is), or
// all of the parent's read-only. A child's mount is the parent's
// directory (a scratch mount's too), under the same ID.
func childMounts(parent []event.Mount, want []spawnMount) ([]event.Mount, error) {
	child := func(m event.Mount, mode string) event.Mount {
		m.Kind, m.Mode, m.DefaultForShell = event.KindLocal, mode, m.DefaultForShell && mode == event.ModeReadWrite
		m.Metadata = nil
		return m
	}
	if want == nil {
		out := make([]event.Mount, 0, len(parent))
		for _, m := range parent {
			out = append(out, child(m, event.ModeReadOnly))
		}
		return out, nil
	}
	out := []event.Mount{}
	for _, w := range want {
		i := slices.IndexFunc(parent, func(m event.Mount) bool { return m.ID == w.ID })
		if i < 0 {
			return nil, fmt.Errorf("mount %q is not one of yours", w.ID)
		}
		mode := event.ModeReadOnly
		switch w.Mode {
		case "", event.ModeReadOnly:
		case event.ModeReadWrite:
			if parent[i].Mode != event.ModeReadWrite {
				return nil, fmt.Errorf("mount %q: yours is read-only, so the subagent's cannot be read-write", w.ID)
			}
			mode = event.ModeReadWrite
		default:
			return nil, fmt.Errorf("mount %q: mode %q: want ro or rw", w.ID, w.Mode)
		}
		if slices.ContainsFunc(out, func(m event.Mount) bool { return m.ID == w.ID }) {
			return nil, fmt.Errorf("mount %q named twice", w.ID)
		}
		out = append(out, child(parent[i], mode))
	}
	// Relative paths resolve in the first mount unless the parent's
	// default is among them.
	if len(out) > 0 && !slices.ContainsFunc(out, func(m event.Mount) bool { return m.Default }) {
		out[0].Default = true
	}
	return out, nil
}

// excerpt returns s cut to at most n bytes at a rune boundary, on one line.
func excerpt(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// runAgent runs a subagent process for the process manager: it starts
// the child session's run (once: a rerun finds it), streams the child's
// text into the process output, watches the parent run (a cancelled
// parent cancels the child), and returns the child's final answer or
// the typed reason it did not complete.
func (h *Host) runAgent(ctx context.Context, run process.AgentRun) process.AgentResult {
	spec := run.Process.Spec.Agent
	fail := func(kind, msg string) process.AgentResult {
		return process.AgentResult{Failure: &event.ToolFailure{Kind: kind, Message: msg}}
	}
	runID, err := h.childRun(ctx, run)
	if err != nil {
		if ctx.Err() != nil {
			return h.agentStopped(ctx, spec, "")
		}
		return fail(event.FailureSubagentFailed, "start the subagent's run: "+err.Error())
	}
	var wg sync.WaitGroup
	wctx, stopWatch := context.WithCancel(ctx)
	defer func() {
		stopWatch()
		wg.Wait()
	}()
	if spec.ParentRunID != "" {
		wg.Go(func() { h.watchParent(wctx, spec.ParentRunID, run.Process.ID) })
	}
	after := int64(0)
	if run.Restarted {
		// What the child wrote before the restart is in the output
		// already; follow from here on.
		if r, err := h.cfg.Store.Run(ctx, runID); err == nil && !record.IsTerminal(r.Status) {
			if s, err := h.sessionRecord(ctx, spec.SessionID); err == nil {
				after = s.LastSeq
			}
		}
	}
	mirror := func(e event.Event) { h.mirrorRequest(ctx, run.Process, e) }
	res, done, err := h.followChild(ctx, spec.SessionID, runID, after, run.Output, mirror)
	if done {
		return res
	}
	if ctx.Err() != nil {
		return h.agentStopped(ctx, spec, runID)
	}
	return fail(event.FailureSubagentFailed, "follow the subagent's run: "+err.Error())
}

// childRun returns the child's run, starting it unless it was.
func (h *Host) childRun(ctx context.Context, run process.AgentRun) (string, error) {
	spec := run.Process.Spec.Agent
	if spec.RunID != "" {
		return spec.RunID, nil
	}
	// Started before a crash that came before its ID was recorded? The
	// child's first run is the subagent's.
	runs, err := h.cfg.Store.Runs(ctx, store.ListRunsParams{SessionID: spec.SessionID})
	if err != nil {
		return "", apiError(err)
	}
	var runID string
	if len(runs) > 0 {
		first := slices.MinFunc(runs, func(a, b record.Run) int { return int(a.FirstSeq - b.FirstSeq) })
		runID = first.ID
	} else {
		p := api.StartRunParams{SessionID: spec.SessionID, Input: api.Input(event.TextParts(spec.Prompt)),
			Model: spec.Model, Busy: api.BusyQueue, DefaultPreset: spec.DefaultPreset, IdempotencyKey: "spawn-" + run.Process.ID}
		if len(spec.Policy) > 0 {
			p.Policy = new(api.Policy)
			if err := json.Unmarshal(spec.Policy, p.Policy); err != nil {
				return "", fmt.Errorf("the parent run's policy: %w", err)
			}
		}
		if len(spec.Budget) > 0 {
			p.Budget = new(event.Budget)
			if err := json.Unmarshal(spec.Budget, p.Budget); err != nil {
				return "", fmt.Errorf("the budget the parent left: %w", err)
			}
		}
		r, err := h.StartRun(ctx, p)
		if err != nil {
			return "", err
		}
		runID = r.ID
	}
	if err := run.Started(ctx, runID); err != nil {
		return "", err
	}
	return runID, nil
}

// followChild reads the child run's events after cursor after until the
// run ends: its text goes to out, its end becomes the result (done). It
// resubscribes from its cursor when a subscription lags. An error (done
// false) is ctx's or the store's.
func (h *Host) followChild(ctx context.Context, sid, runID string, after int64, out func(string), mirror func(event.Event)) (process.AgentResult, bool, error) {
	var answer string
	sep := false
	for {
		evs, err := h.Subscribe(ctx, api.SubscribeParams{SessionID: sid, After: after, RunID: runID})
		if err != nil {
			return process.AgentResult{}, false, err
		}
		for e, err := range evs {
			if err != nil {
				if errors.Is(err, api.ErrLagged) {
					break
				}
				return process.AgentResult{}, false, err
			}
			after = e.Seq
			switch e.Type {
			case event.MessageDelta:
				var d event.DeltaData
				if e.Decode(&d) == nil && d.Text != "" {
					if sep {
						out("\n\n")
						sep = false
					}
					out(d.Text)
				}
			case event.ApprovalRequested, event.InputRequested, event.ApprovalResolved, event.ApprovalExpired, event.InputResolved:
				mirror(e)
			case event.MessageCompleted:
				var d event.MessageCompletedData
				if e.Decode(&d) == nil && d.Text != "" {
					answer, sep = d.Text, true
				}
			case event.RunCompleted, event.RunFailed, event.RunCancelled, event.RunInterrupted:
				if answer == "" {
					answer = h.lastAnswer(ctx, sid, runID)
				}
				return agentResult(e, answer), true, nil
			}
		}
		if ctx.Err() != nil {
			return process.AgentResult{}, false, ctx.Err()
		}
	}
}

// mirrorRequest writes a request of subagent p's child (or its end) to
// the parent session's log as subagent.request, under the parent's run
// while it is active, so that the parent's clients see it.
func (h *Host) mirrorRequest(ctx context.Context, p record.Process, e event.Event) {
	parent := p.Spec.Agent.ParentSessionID
	me, err := event.New("", event.SubagentRequest, event.SubagentRequestData{ProcessID: p.ID, SessionID: e.SessionID, Event: e.Type, Data: e.Data})
	if err != nil {
		return
	}
	if r, err := h.cfg.Store.Run(ctx, p.RunID); err == nil && !record.IsTerminal(r.Status) {
		me.RunID = p.RunID
	}
	if err := h.with(ctx, parent, func(s *session.Session) error { return s.Note(ctx, me) }); err != nil && ctx.Err() == nil {
		h.cfg.Logger.Warn("mirror a subagent's request in its parent's log", "session", parent, "process", p.ID, "err", err)
	}
}

// lastAnswer is the text of the last message.completed of the run, read
// from the log (for a follow that began after it).
func (h *Host) lastAnswer(ctx context.Context, sid, runID string) string {
	r, err := h.cfg.Store.Run(ctx, runID)
	if err != nil {
		return ""
	}
	evs, err := h.cfg.Store.Read(ctx, store.ReadParams{SessionID: sid, After: r.FirstSeq - 1, RunID: runID,
		Types: []event.Type{event.MessageCompleted}, Limit: 1000})
	if err != nil {
		return ""
	}
	for i := len(evs) - 1; i >= 0; i-- {
		var d event.MessageCompletedData
		if evs[i].Decode(&d) == nil && d.Text != "" {
			return d.Text
		}
	}
	return ""
}

// agentResult is the result of a child run that ended with e.
func agentResult(e event.Event, answer string) process.AgentResult {
	if len(answer) > maxAnswerBytes {
		answer = excerptTail(answer, maxAnswerBytes)
	}
	res := process.AgentResult{Answer: answer}
	var d event.RunEndedData
	_ = e.Decode(&d)
	msg := d.Reason
	if d.Error != nil {
		msg = d.Error.Kind + ": " + d.Error.Message
	}
	switch e.Type {
	case event.RunFailed:
		res.Failure = &event.ToolFailure{Kind: event.FailureSubagentFailed, Message: msg}
	case event.RunCancelled:
		res.Failure = &event.ToolFailure{Kind: event.FailureSubagentCancelled, Message: msg}
	case event.RunInterrupted:
		res.Failure = &event.ToolFailure{Kind: event.FailureSubagentInterrupted,
			Message: "the host restarted while the subagent's run was running; spawn it again to retry"}
	}
	return res
}

// excerptTail keeps the last n bytes of s (at a rune boundary) with a
// note that the beginning was cut.
func excerptTail(s string, n int) string {
	i := len(s) - n
	for i < len(s) && !utf8.RuneStart(s[i]) {
		i++
	}
	return fmt.Sprintf("[the first %d bytes of the answer are in the subagent's session log]\n", i) + s[i:]
}

// agentStopped ends a subagent whose process was stopped: a cancel
// cancels the child's run (and the result says so); a closing host
// leaves the child to the next host (the result is not recorded).
func (h *Host) agentStopped(ctx context.Context, spec *record.AgentSpec, runID string) process.AgentResult {
	if !errors.Is(context.Cause(ctx), process.ErrCancelled) {
		return process.AgentResult{}
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if runID == "" {
		// Cancelled while its run was being started: the run may have
		// been admitted all the same.
		if runs, err := h.cfg.Store.Runs(cctx, store.ListRunsParams{SessionID: spec.SessionID}); err == nil && len(runs) > 0 {
			runID = slices.MinFunc(runs, func(a, b record.Run) int { return int(a.FirstSeq - b.FirstSeq) }).ID
		}
	}
	if runID != "" {
		if _, err := h.CancelRun(cctx, api.CancelParams{RunID: runID, Reason: "the subagent was cancelled"}); err != nil && !errors.Is(err, api.ErrRunConflict) {
			h.cfg.Logger.Warn("cancel a subagent's run", "session", spec.SessionID, "run", runID, "err", err)
		}
	}
	return process.AgentResult{Failure: &event.ToolFailure{Kind: event.FailureSubagentCancelled, Message: "the subagent was cancelled"}}
}

// watchParent cancels subagent process procID when the parent run ends
// cancelled, until ctx ends.
func (h *Host) watchParent(ctx context.Context, runID, procID string) {
	for ctx.Err() == nil {
		r, err := h.WaitRun(ctx, api.WaitRunParams{RunID: runID, TimeoutMs: 60_000})
		if err != nil {
			if ctx.Err() == nil {
				h.cfg.Logger.Debug("watch a subagent's parent run", "run", runID, "process", procID, "err", err)
				timer := time.NewTimer(time.Second)
				select {
				case <-ctx.Done():
				case <-timer.C:
				}
				timer.Stop()
			}
			continue
		}
		if r.TimedOut {
			continue
		}
		if r.Run.Status == record.RunCancelled {
			if _, err := h.cfg.Processes.Cancel(ctx, procID, "the parent run was cancelled", process.Caller{Host: true}); err != nil && ctx.Err() == nil {
				h.cfg.Logger.Warn("cancel a subagent with its parent run", "run", runID, "process", procID, "err", err)
			}
		}
		return
	}
}

// cancelSubagents cancels the running subagents of session sid (each
// cancels its own in turn), logging what it cannot cancel.
func (h *Host) cancelSubagents(ctx context.Context, sid, reason string) {
	m := h.cfg.Processes
	if m == nil {
		return
	}
	ctx = context.WithoutCancel(ctx)
	live, err := m.List(ctx, process.ListParams{Statuses: []string{record.ProcessRunning}}, process.Caller{SessionID: sid})
	if err != nil {
		h.cfg.Logger.Warn("list the subagents of a deleted session", "session", sid, "err", err)
		return
	}
	for _, p := range live {
		if p.Kind != record.ProcessAgent || p.SessionID != sid {
			continue
		}
		if _, err := m.Cancel(ctx, p.ID, reason, process.Caller{Host: true}); err != nil {
			h.cfg.Logger.Warn("cancel a subagent of a deleted session", "session", sid, "process", p.ID, "err", err)
		}
	}
}

// steerAgent hands text written to a subagent process to its child's run.
func (h *Host) steerAgent(ctx context.Context, p record.Process, text string) error {
	a := p.Spec.Agent
	if a == nil || a.RunID == "" {
		return fmt.Errorf("%w: %s: the subagent's run has not started", process.ErrEnded, p.ID)
	}
	_, err := h.SteerRun(ctx, api.SteerParams{RunID: a.RunID, Input: api.Input(event.TextParts(text))})
	return err
}

// descendants returns the sessions spawned, directly or not, by the
// subagents of session id (at most the depth limit deep).
func (h *Host) descendants(ctx context.Context, id string) ([]string, error) {
	m := h.cfg.Processes
	if m == nil {
		return nil, nil
	}
	var out []string
	level := []string{id}
	for d := 0; d < h.cfg.Subagents.MaxDepth && len(level) > 0; d++ {
		var next []string
		for _, sid := range level {
			ps, err := m.List(ctx, process.ListParams{}, process.Caller{SessionID: sid})
			if err != nil {
				return nil, apiError(err)
			}
			for _, p := range ps {
				if p.Kind == record.ProcessAgent && p.SessionID == sid && p.Spec.Agent != nil {
					next = append(next, p.Spec.Agent.SessionID)
				}
			}
		}
		out = append(out, next...)
		level = next
	}
	return out, nil
}

// isDescendant reports whether session child was spawned, directly or
// not, from session ancestor.
func (h *Host) isDescendant(ctx context.Context, child, ancestor string) bool {
	for range h.cfg.Subagents.MaxDepth + 1 {
		s, err := h.cfg.Store.Session(ctx, child)
		if err != nil || s.Parent == nil {
			return false
		}
		if s.Parent.SessionID == ancestor {
			return true
		}
		child = s.Parent.SessionID
	}
	return false
}
