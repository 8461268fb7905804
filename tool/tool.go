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
}

// Tool is a capability offered to the model. Call must honour ctx: when it
// is cancelled the tool stops, killing any process it started, and returns.
// A returned error is shown to the model as an error result.
type Tool interface {
	Spec() Spec
	Call(ctx context.Context, call *Call) (Result, error)
}
