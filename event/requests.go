package event

import (
	"encoding/json"
	"time"
)

// Requests to people and clients. A run that needs an answer opens a
// request in its log; while any is open the run is waiting. Each request
// has its own ID and gates one tool call of the run's current step.
const (
	// ApprovalRequested asks whether a tool call may run. Data: [ApprovalRequestedData].
	ApprovalRequested Type = "approval.requested"
	// ApprovalResolved records the first answer to an approval (or its
	// cancellation with the run). Data: [ApprovalResolvedData].
	ApprovalResolved Type = "approval.resolved"
	// ApprovalExpired records an approval whose deadline passed; its
	// decision is the policy's default. Data: [ApprovalResolvedData].
	ApprovalExpired Type = "approval.expired"
	// InputRequested is a question the model asks the user (the ask_user
	// tool). Data: [InputRequestedData].
	InputRequested Type = "input.requested"
	// InputResolved records the answer to a question, or that it expired
	// or was cancelled; the ask_user call's result follows in the same
	// batch. Data: [InputResolvedData].
	InputResolved Type = "input.resolved"
	// RunResumed records that a run that waited for answers goes on: its
	// requests are answered and its loop settles the waiting step. Until
	// then the run stays waiting, so that a crash between the last answer
	// and the resume resumes it rather than interrupting it. Data:
	// [RunResumedData].
	RunResumed Type = "run.resumed"
	// RunSuspended records that a host stopping gracefully (a drain)
	// stopped a run at a step boundary to hand it over: the run is not
	// ended; its status is waiting, and the host that next owns the
	// session continues it from its log (run.resumed). Data:
	// [RunSuspendedData].
	RunSuspended Type = "run.suspended"
	// ToolCallRequested hands a call of a tool the client declared to the
	// client, which executes it and answers with its result; the result is
	// the call's tool.call.completed. Data: [ToolCallRequestedData].
	ToolCallRequested Type = "tool.call.requested"
)

// Request kinds, in the request records.
const (
	RequestApproval = "approval"
	RequestInput    = "input"
	RequestTool     = "tool"
)

// Approval decisions. [DecisionExpired] is the status of an approval that
// expired; its decision is then the policy's default.
const (
	DecisionAllowOnce    = "allow_once"
	DecisionAllowSession = "allow_session"
	DecisionDeny         = "deny"
	DecisionCancelled    = "cancelled"
)

// Rule is the policy rule that matched a tool call, as recorded.
type Rule struct {
	// Tool is the rule's tool name or glob.
	Tool string `json:"tool"`
	// Match is the rule's argument conditions, as given.
	Match json.RawMessage `json:"match,omitempty"`
	// Action is allow, ask or deny.
	Action string `json:"action"`
	// Reason is the rule's reason, shown to the person and, on a deny, to
	// the model.
	Reason string `json:"reason,omitempty"`
	// Source says where the rule came from: "config", "session", "run",
	// a preset ("preset:ask-writes") or "default".
	Source string `json:"source,omitempty"`
	// Final is set for a final rule of the config file, which no
	// session rule lifts: an approval it asks for has no
	// allow_session.
	Final bool `json:"final,omitempty"`
}

// ApprovalRequestedData is the data of [ApprovalRequested].
type ApprovalRequestedData struct {
	ApprovalID string `json:"approvalId"`
	Step       int    `json:"step"`
	// ToolCall is the call that waits for the decision.
	ToolCall ToolCall `json:"toolCall"`
	// Rule is the policy rule that asked.
	Rule Rule `json:"rule"`
	// Options are the decisions a client may give.
	Options []string `json:"options"`
	// Deadline, if set, is when the approval expires with Default.
	Deadline *time.Time `json:"deadline,omitempty"`
	// Default is the decision taken at the deadline ("deny" unless the
	// rule says otherwise).
	Default string `json:"default,omitempty"`
	// SessionRule is the rule allow_session would add, when it is an
	// option: the scope a person approves with "always for this
	// session" (a shell command exactly, a file tool's mount, a tool).
	SessionRule *Rule `json:"sessionRule,omitempty"`
}

// By says who answered a request: the client the answer came from, as
// it named itself in initialize, and the connection's transport.
type By struct {
	Client    string `json:"client,omitempty"`
	Transport string `json:"transport,omitempty"`
	// Policy is set when no one answered: "deadline" or "cancel".
	Policy string `json:"policy,omitempty"`
}

// ApprovalResolvedData is the data of [ApprovalResolved] and
// [ApprovalExpired].
type ApprovalResolvedData struct {
	ApprovalID string `json:"approvalId"`
	// Decision is allow_once, allow_session, deny, or cancelled.
	Decision string `json:"decision"`
	// Message is the answerer's message; a deny's reaches the model.
	Message string `json:"message,omitempty"`
	By      By     `json:"by"`
}

// InputRequestedData is the data of [InputRequested].
type InputRequestedData struct {
	RequestID string   `json:"requestId"`
	Step      int      `json:"step"`
	ToolCall  ToolCall `json:"toolCall"`
	Question  string   `json:"question"`
	// Choices, if any, are the answers to pick from; an answer may still
	// be free text.
	Choices  []string   `json:"choices,omitempty"`
	Deadline *time.Time `json:"deadline,omitempty"`
	// Budget, if set, makes this the host's question whether to raise a
	// budget the run reached (its policy is ask), not the model's: it
	// gates no tool call (ToolCall is empty), the run waits at a step
	// boundary, and an answer "raise to X" (or a number, or the first
	// choice) raises the limit and resumes the run, while "no" (or the
	// last choice) ends it as budget_exceeded.
	Budget *BudgetExceeded `json:"budget,omitempty"`
}

// Input resolution statuses.
const (
	InputAnswered  = "answered"
	InputExpired   = "expired"
	InputCancelled = "cancelled"
)

// InputResolvedData is the data of [InputResolved].
type InputResolvedData struct {
	RequestID string `json:"requestId"`
	// Status is answered, expired or cancelled.
	Status string `json:"status"`
	Text   string `json:"text,omitempty"`
	// Choice is the index of the picked choice, if the answer picked one.
	Choice *int `json:"choice,omitempty"`
	By     By   `json:"by"`
}

// ToolCallRequestedData is the data of [ToolCallRequested].
type ToolCallRequestedData struct {
	RequestID string   `json:"requestId"`
	Step      int      `json:"step"`
	ToolCall  ToolCall `json:"toolCall"`
}

// RunResumedData is the data of [RunResumed].
type RunResumedData struct {
	Step int `json:"step"`
}

// RunSuspendedData is the data of [RunSuspended].
type RunSuspendedData struct {
	// Host names the host that handed the run over (its lease holder).
	Host string `json:"host,omitempty"`
	// Reason says why ("the host is draining").
	Reason string `json:"reason"`
	// Step is the run's last step; the run goes on with step Step+1.
	Step int `json:"step"`
	// CutStep, if set, is a step whose model call the suspension cut
	// before its message completed: its deltas are not part of the
	// transcript (no message.completed follows them), and the model is
	// asked again in the next step, under a new number.
	CutStep int `json:"cutStep,omitempty"`
}

// ClientTool is a tool a client declares (at session/create or
// run/start) and executes itself: the model sees it like any tool, and
// its calls become tool.call.requested.
type ClientTool struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"inputSchema"`
}
