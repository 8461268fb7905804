package event

// ContextCompacted records a compaction of a session's conversation: from
// this event on, the model sees the summary (and the state the loop
// re-injected) in place of the transcript through UpToSeq, followed by
// what comes after. The log keeps every earlier event. Data:
// [ContextCompactedData].
const ContextCompacted Type = "context.compacted"

// Reasons of a compaction ([ContextCompactedData.Reason]).
const (
	// CompactThreshold: the next request would have filled more than the
	// threshold of the model's context window.
	CompactThreshold = "threshold"
	// CompactOverflow: the provider refused a request as longer than its
	// context window; the step is retried once after the compaction.
	CompactOverflow = "overflow"
	// CompactRequested: a client asked for it (session/compact).
	CompactRequested = "requested"
)

// ContextCompactedData is the data of [ContextCompacted].
type ContextCompactedData struct {
	// Summary is the model's summary of the conversation through UpToSeq.
	Summary string `json:"summary"`
	// UpToSeq is the seq of the last event the summary covers: the
	// transcript events after it follow the summary.
	UpToSeq int64 `json:"upToSeq"`
	// TokensBefore and TokensAfter estimate the request's size, in
	// tokens, before and after the compaction.
	TokensBefore int64 `json:"tokensBefore"`
	TokensAfter  int64 `json:"tokensAfter"`
	// State is what the loop re-injected after the summary, so that live
	// processes, pending requests and mounts stay reachable by their
	// handles: the model sees it as part of the summary's message.
	State string `json:"state,omitempty"`
	// Reason is one of threshold, overflow or requested.
	Reason string `json:"reason"`
	// Model is the "provider:model" that wrote the summary.
	Model string `json:"model,omitempty"`
	// Step is the run's step the compaction came before (zero outside a run).
	Step int `json:"step,omitempty"`
	// Usage is the tokens of the summary request.
	Usage TokenUsage `json:"usage"`
}
