package record

import (
	"encoding/json"
	"time"

	"weft.dev/weft/event"
)

// Process statuses. Running is the only status that is not final.
const (
	ProcessRunning   = "running"
	ProcessCompleted = "completed"
	ProcessFailed    = "failed"
	ProcessCancelled = "cancelled"
	ProcessAbandoned = "abandoned"
)

// IsProcessTerminal reports whether a process status is final.
func IsProcessTerminal(status string) bool {
	switch status {
	case ProcessCompleted, ProcessFailed, ProcessCancelled, ProcessAbandoned:
		return true
	}
	return false
}

// Process kinds.
const (
	// ProcessShell is a shell command run by /bin/sh -c.
	ProcessShell = "shell"
	// ProcessTool is a tool call run in the background.
	ProcessTool = "tool"
	// ProcessAgent is a subagent: a run of a child session (see
	// [AgentSpec]), whose streamed answer is the process's output and
	// whose final answer is its result.
	ProcessAgent = "agent"
)

// Recovery dispositions: what a host that starts after a crash does with a
// process that was running.
const (
	// Rerunnable processes are started again (tool calls declared safe to
	// repeat).
	Rerunnable = "rerunnable"
	// OwnerBound processes die with their host; they become abandoned.
	OwnerBound = "owner_bound"
	// ExternallyOwned processes are left alone: someone else owns them.
	ExternallyOwned = "externally_owned"
)

// ProcessSpec is what a process runs: a shell command (Command, Cwd, Env,
// PTY) or a tool call (Tool, Args).
type ProcessSpec struct {
	// Command is the shell command line of a shell process.
	Command string `json:"command,omitempty"`
	// Mount is the mount the working directory lies in.
	Mount string `json:"mount,omitempty"`
	// Cwd is the working directory as the caller gave it (a mount path).
	Cwd string `json:"cwd,omitempty"`
	// Env holds the explicit environment variables, beyond the allow-list.
	Env map[string]string `json:"env,omitempty"`
	// PTY runs the command on a pseudo-terminal.
	PTY bool `json:"pty,omitempty"`
	// Tool is the tool name of a tool process.
	Tool string `json:"tool,omitempty"`
	// Args are the tool call's arguments, validated before registration.
	Args json.RawMessage `json:"args,omitempty"`
	// Agent is what a subagent process runs (kind ProcessAgent).
	Agent *AgentSpec `json:"agent,omitempty"`
}

// AgentSpec is a subagent: the child session it runs in, the parent that
// spawned it, and what its run is asked to do. The child session and its
// log are the subagent's own; the process follows the child's run.
type AgentSpec struct {
	// SessionID is the child session.
	SessionID string `json:"sessionId"`
	// RunID is the child's run once it is started (empty before).
	RunID string `json:"runId,omitempty"`
	// ParentSessionID, ParentRunID and ParentCallID are who spawned it:
	// the session, run and tool call of the spawn_agent call.
	ParentSessionID string `json:"parentSessionId"`
	ParentRunID     string `json:"parentRunId,omitempty"`
	ParentCallID    string `json:"parentCallId,omitempty"`
	// Depth is the child's depth: 1 for a child of a top-level session.
	Depth int `json:"depth"`
	// Prompt is the child run's input.
	Prompt string `json:"prompt"`
	// Model is the child run's model; empty means the parent's.
	Model string `json:"model,omitempty"`
	// Tools are the names of the tools the child may use, a subset of the
	// parent's.
	Tools []string `json:"tools"`
	// Policy and DefaultPreset are the parent run's own approval layer
	// (api.Policy, and api.StartRunParams.DefaultPreset), which the
	// child's run takes too: a child never asks less than its parent.
	// The child's session has the parent session's policy.
	Policy        json.RawMessage `json:"policy,omitempty"`
	DefaultPreset string          `json:"defaultPreset,omitempty"`
	// Budget is what the parent run had left of its own and its
	// session's budgets when it spawned the child (an event.Budget): the
	// child run's budget, so that a child never spends more than its
	// parent could have. Nil means no limit.
	Budget json.RawMessage `json:"budget,omitempty"`
}

// Process is the registry record of one background process. It is kept as
// JSON beside the columns queries filter on, like [Run].
type Process struct {
	ID        string `json:"id"`
	SessionID string `json:"sessionId"`
	// RunID is the run that started the process, if any.
	RunID string `json:"runId,omitempty"`
	// ToolCallID is the tool call that asked for the process, if any.
	ToolCallID string `json:"toolCallId,omitempty"`
	// Kind is ProcessShell or ProcessTool.
	Kind string      `json:"kind"`
	Spec ProcessSpec `json:"spec"`
	// Status is one of the Process* statuses.
	Status string `json:"status"`
	// ExitCode is the exit status of a shell process that exited (-1 when
	// a signal killed it); nil while running or for tool processes.
	ExitCode *int `json:"exitCode,omitempty"`
	// Disposition is Rerunnable, OwnerBound or ExternallyOwned.
	Disposition string `json:"disposition"`
	// CreatedBy says who started it (e.g. "tool:shell", "rpc").
	CreatedBy string     `json:"createdBy,omitempty"`
	StartedAt time.Time  `json:"startedAt"`
	EndedAt   *time.Time `json:"endedAt,omitempty"`
	// Pgid is the OS process group of a shell process (0 if none), swept
	// at recovery.
	Pgid int `json:"pgid,omitempty"`
	// MountID is the mount that owns the process (its working directory's
	// mount); a mount with a running process cannot be unmounted.
	MountID string `json:"mountId,omitempty"`
	// Grants are the other sessions that may address the process.
	Grants []string `json:"grants,omitempty"`
	// OutputBytes is the total output so far (the next output offset),
	// lost bytes included: offsets are never reused.
	OutputBytes int64 `json:"outputBytes"`
	// DroppedBytes counts the output bytes no reader can get: those before
	// TrimmedBefore, which the cap may have dropped, and the lost bytes
	// after it.
	DroppedBytes int64 `json:"droppedBytes"`
	// TrimmedBefore is the trim point: output chunks that end at or before
	// it may have been dropped to keep the log under its cap.
	TrimmedBefore int64 `json:"trimmedBefore,omitempty"`
	// LostBytes counts the output bytes that were never stored (the store
	// refused writes for longer than the writer could hold them), each
	// range marked in the log by an output-range event of its own (see
	// [ProcessEvent]).
	LostBytes int64 `json:"lostBytes,omitempty"`
	// WakeOnExit asks the host to start a run in the owning session when
	// the process ends.
	WakeOnExit bool `json:"wakeOnExit,omitempty"`
	// LastSeq is the seq of the last event of the process's log.
	LastSeq int64 `json:"lastSeq"`
	// Host names the host that runs the process, as the store's leases
	// name it (store.HostLeaseParams); empty where leases are not fenced
	// (SQLite, memory) and for processes recorded before hosts were.
	Host string `json:"host,omitempty"`
	// Epoch is the lease epoch of the owning session under which the
	// process runs: every batch of its log carries it
	// (store.ProcessBatch.Epoch), so that its host stops writing once
	// another host holds a later lease of the session, and that host, not
	// one that merely starts, reconciles the process. Zero where leases
	// are not fenced.
	Epoch int64 `json:"epoch,omitempty"`
	// Failure is the typed reason a process failed, where one is known:
	// a subagent whose child run failed, was cancelled or was interrupted
	// (event.FailureSubagent…), a shell that ran into a resource limit.
	Failure *event.ToolFailure `json:"failure,omitempty"`
	// Result is a subagent's final answer (at most 64 KiB: the end of a
	// longer one); its whole streamed text is the output.
	Result string `json:"result,omitempty"`
}

// ProcessEvent is one entry of a process's log. An event with a byte
// range (Size > 0) is an output chunk to a store whatever its type: the
// process manager marks the ranges of output it could not store
// (process.output_lost) this way too, so that they are read in offset
// order where the output was lost and trimmed like the chunks around
// them.
type ProcessEvent struct {
	// Seq is the position in the process's log, from 1, gap-free when
	// appended (dropped output chunks leave holes).
	Seq       int64           `json:"seq"`
	ProcessID string          `json:"processId"`
	Type      event.Type      `json:"type"`
	Time      time.Time       `json:"time"`
	Data      json.RawMessage `json:"data"`
	// Offset and Size are set on output chunks only: the chunk covers the
	// process's output bytes [Offset, Offset+Size). Size is zero for every
	// other event.
	Offset int64 `json:"offset,omitempty"`
	Size   int64 `json:"size,omitempty"`
}
