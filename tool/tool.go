// Package tool defines what the agent loop calls: the [Tool] interface, the
// [Registry] of tools offered to the model, and typed tools whose JSON
// Schema is derived from a Go argument struct.
//
// A failing tool produces a result with IsError set, which the model sees;
// only infrastructure failures end a run.
package tool

import (
	"context"
	"encoding/json"

	"weft.dev/weft/env"
	"weft.dev/weft/event"
	"weft.dev/weft/store/record"
)

// Spec describes a tool to the model.
type Spec struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"inputSchema"`
}

// Call is one invocation of a tool.
type Call struct {
	// ID is the model's tool call ID.
	ID string
	// SessionID and RunID identify who calls.
	SessionID string
	RunID     string
	// Arguments is the JSON object the model produced, already checked to be
	// valid JSON and to satisfy the tool's schema.
	Arguments json.RawMessage
	// Env is the session's mounts as of this call; all file and process
	// access goes through it.
	Env *env.Binding
	// Background starts background processes for the call through the
	// owner of the calling session; nil means the caller has none, and
	// tools that would start one refuse.
	Background Background
	// Progress receives the call's progress while it runs (an MCP
	// server's progress notifications); nil means nobody listens.
	Progress Progress
	// ResultBudget is the most bytes of Output the caller keeps
	// ([Registry.Call] sets it; zero means unknown). A tool whose output
	// may be longer shapes it to fit, keeping what matters (a command's
	// last lines and exit code) and saying what it left out, rather than
	// have the end cut off.
	ResultBudget int
}

// BackgroundRequest is a process a tool asks to start: a shell command or
// a tool call that goes on after the asking call returns.
type BackgroundRequest struct {
	// Kind is record.ProcessShell, record.ProcessTool or
	// record.ProcessAgent.
	Kind string
	// Command and Cwd are a shell process's command line and working
	// directory (a path in the call's mounts; empty means the shell
	// default mount's root).
	Command, Cwd string
	// Tool and Args are a tool process's tool and validated arguments.
	Tool string
	Args json.RawMessage
	// Disposition is record.OwnerBound, record.Rerunnable or
	// record.ExternallyOwned; empty means owner-bound.
	Disposition string
	// WakeOnExit starts a run of the session when the process ends.
	WakeOnExit bool
	// CreatedBy says which tool asked (e.g. "tool:shell").
	CreatedBy string
	// Agent is a subagent's child (kind record.ProcessAgent).
	Agent *record.AgentSpec
	// ID is the process's ID; empty means a fresh one.
	ID string
}

// Background starts the processes tools ask for. The session owner
// implements it, so that a start cannot race a change of the session's
// mounts; the process gets an ID of its own ("proc_…"), not the call's.
// Safe for concurrent use.
type Background interface {
	StartProcess(ctx context.Context, call *Call, req BackgroundRequest) (record.Process, error)
}

// Progress receives the progress of a running call: the agent loop
// records each report as a tool.progress event of the call. Report must
// not block for long (it may coalesce reports that come faster than it
// records them) and is safe for concurrent use.
type Progress interface {
	Report(ctx context.Context, p ProgressUpdate)
}

// ProgressUpdate is how far a running call is (see event.ToolProgressData).
type ProgressUpdate struct {
	// Progress grows with each report; Total is its end, zero if unknown.
	Progress, Total float64
	// Message says what the call is doing.
	Message string
}

// Result is what the model sees.
type Result struct {
	// Output is the text shown to the model.
	Output string `json:"output"`
	// IsError marks a failed call; the model sees Output as the error.
	IsError bool `json:"isError,omitempty"`
	// Truncated reports that [Registry.Call] cut Output to its result
	// budget; Output then ends with a note saying how to read the rest.
	Truncated bool `json:"truncated,omitempty"`
	// Failure is the typed reason of a failed call, for clients (the
	// model reads Output); nil when the tool gives none.
	Failure *event.ToolFailure `json:"failure,omitempty"`
	// Confinement says what held a command the call ran (see
	// [event.ToolCallCompletedData]); empty for other tools.
	Confinement string `json:"confinement,omitempty"`
	// Attachments are images the model sees after Output, as image parts
	// that pass event.CheckImages (an MCP tool's image content).
	Attachments []event.Part `json:"attachments,omitempty"`
}

// Tool is a capability offered to the model. Call must honour ctx: when it
// is cancelled the tool stops, killing any process it started, and returns.
// A returned error is shown to the model as an error result.
type Tool interface {
	Spec() Spec
	Call(ctx context.Context, call *Call) (Result, error)
}
