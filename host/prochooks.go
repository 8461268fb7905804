package host

import (
	"context"

	"weft.dev/weft/event"
	"weft.dev/weft/process"
	"weft.dev/weft/store/record"
	"weft.dev/weft/tool"
)

// processHooks is the host as the process manager sees it: the
// [process.ToolRunner] that runs a tool process's call in its session, and
// the [process.Notifier] that records a process's end. New attaches it to
// the manager; being unexported, these callbacks are not part of the
// host's API, which is api.Host's methods. Its methods are safe for
// concurrent use, as the manager calls them from its goroutines.
type processHooks struct{ h *Host }

var (
	_ process.ToolRunner  = processHooks{}
	_ process.AgentRunner = processHooks{}
	_ process.Notifier    = processHooks{}
)

// RunAgent runs a subagent process: it starts (or, after a restart,
// finds) the child session's run, streams its text into the process's
// output and returns its final answer or the typed reason it failed.
func (p processHooks) RunAgent(ctx context.Context, run process.AgentRun) process.AgentResult {
	return p.h.runAgent(ctx, run)
}

// SteerAgent steers a subagent's child run with text written to its
// process.
func (p processHooks) SteerAgent(ctx context.Context, rec record.Process, text string) error {
	return p.h.steerAgent(ctx, rec, text)
}

// RunTool runs a tool process's call: it sees the session's current
// mounts and guard, and starts what it starts in the background through
// the session's owner. A host with no tools, or a session that cannot be
// loaded, gives an error result.
func (p processHooks) RunTool(ctx context.Context, run process.ToolRun) tool.Result {
	return p.h.runTool(ctx, run)
}

// ProcessEnded records the end of a process in its session's log, tells
// the session's active run at its next step boundary, or starts a
// follow-up run for a process started with wakeOnExit. It returns at once:
// the write happens in a goroutine of the host's, retried through a
// storage outage, so the manager never waits on a session.
func (p processHooks) ProcessEnded(rec record.Process) {
	p.h.recordProcess(rec, event.ProcessExited)
}
