package acpagent

import (
	"encoding/json"
	"errors"
	"strings"
	"unicode/utf8"

	acp "github.com/coder/acp-go-sdk"

	"weft.dev/weft/api"
	"weft.dev/weft/event"
	"weft.dev/weft/llm"
)

// modes are weft's approval presets as ACP session modes.
func modes() []acp.SessionMode {
	m := func(id, name, desc string) acp.SessionMode {
		return acp.SessionMode{Id: acp.SessionModeId(id), Name: name, Description: acp.Ptr(desc)}
	}
	return []acp.SessionMode{
		m(api.PresetAskWrites, "Ask before writes", "Reads run at once; writes, edits and shell commands ask first."),
		m(api.PresetAskAll, "Ask for everything", "Every tool call asks first."),
		m(api.PresetReadOnly, "Read only", "Reads run; writes, edits and shell commands are refused."),
		m(api.PresetNeverAsk, "Never ask", "Every tool call runs without asking (the host's final rules still hold)."),
	}
}

func validMode(m string) bool {
	switch m {
	case api.PresetAskWrites, api.PresetAskAll, api.PresetReadOnly, api.PresetNeverAsk:
		return true
	}
	return false
}

// maxPromptBytes bounds a prompt's text, as run/start does.
const maxPromptBytes = api.MaxInputBytes

// promptInput is a prompt's content as a run's input: text as it is, a
// resource link as a Markdown link, an embedded text resource inside a
// <context> element naming its URI. Images, audio and binary resources
// are refused (the prompt capabilities do not offer them), as is an
// empty prompt.
func promptInput(blocks []acp.ContentBlock) (api.Input, error) {
	var b strings.Builder
	for i, c := range blocks {
		switch {
		case c.Text != nil:
			b.WriteString(c.Text.Text)
		case c.ResourceLink != nil:
			b.WriteString("[" + c.ResourceLink.Name + "](" + c.ResourceLink.Uri + ")")
		case c.Resource != nil && c.Resource.Resource.TextResourceContents != nil:
			r := c.Resource.Resource.TextResourceContents
			b.WriteString("\n<context uri=\"" + r.Uri + "\">\n" + r.Text + "\n</context>\n")
		default:
			return nil, acp.NewInvalidParams(map[string]any{"prompt": i, "error": "weft takes text, resource links and embedded text resources in a prompt; this block is none of them"})
		}
	}
	text := b.String()
	switch {
	case strings.TrimSpace(text) == "":
		return nil, acp.NewInvalidParams(map[string]any{"error": "the prompt is empty"})
	case len(text) > maxPromptBytes:
		return nil, acp.NewInvalidParams(map[string]any{"error": "the prompt is larger than weft's input limit", "limit": maxPromptBytes})
	}
	return api.Input(event.TextParts(text)), nil
}

// wireError is err as the client is told it: a weft error keeps its
// JSON-RPC code, kind and retryability.
func wireError(err error) error {
	var re *acp.RequestError
	if errors.As(err, &re) {
		return re
	}
	var ae *api.Error
	if errors.As(err, &ae) {
		ae = ae.Normalize()
		return &acp.RequestError{Code: ae.Code, Message: ae.Message, Data: map[string]any{"kind": ae.Kind, "retryable": ae.Retryable}}
	}
	return acp.NewInternalError(map[string]any{"error": err.Error()})
}

// response is the answer of a prompt whose run ended with r.
func (r runEnd) response() (acp.PromptResponse, error) {
	var stop acp.StopReason
	switch r.typ {
	case event.RunCompleted:
		stop = acp.StopReasonEndTurn
		if r.finish == llm.FinishLength {
			stop = acp.StopReasonMaxTokens
		}
	case event.RunCancelled:
		stop = acp.StopReasonCancelled
	case event.InputRequested:
		// The run waits for the user's answer: the turn ends with the
		// question, and the next prompt answers it.
		return acp.PromptResponse{StopReason: acp.StopReasonEndTurn}, nil
	case event.RunFailed:
		if r.data.Error != nil && r.data.Error.Kind == "max_steps" {
			stop = acp.StopReasonMaxTurnRequests
			break
		}
		fallthrough
	default:
		data := map[string]any{"runId": r.runID, "status": strings.TrimPrefix(string(r.typ), "run.")}
		if r.data.Error != nil {
			data["kind"] = r.data.Error.Kind
			data["retryable"] = r.data.Error.Retryable
		}
		return acp.PromptResponse{}, &acp.RequestError{Code: -32603, Message: runFailure(r.typ, r.data), Data: data}
	}
	u := r.data.Usage
	return acp.PromptResponse{StopReason: stop, Usage: &acp.Usage{
		InputTokens: int(u.InputTokens), OutputTokens: int(u.OutputTokens), TotalTokens: int(u.InputTokens + u.OutputTokens),
	}}, nil
}

// runFailure says how a run that did not complete ended.
func runFailure(t event.Type, d event.RunEndedData) string {
	what := "the run failed"
	if t == event.RunInterrupted {
		what = "the run was interrupted (its host stopped while it ran)"
	}
	if d.Error != nil && d.Error.Message != "" {
		return what + ": " + d.Error.Message
	}
	return what
}

// clip is s on one line, at most n runes, with an ellipsis when cut.
func clip(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n]) + "…"
}

// userChunks are a user's input as user_message_chunk updates.
func userChunks(parts []event.Part) []acp.SessionUpdate {
	var ups []acp.SessionUpdate
	for _, p := range parts {
		if p.Text != "" {
			ups = append(ups, acp.UpdateUserMessageText(p.Text))
		}
	}
	return ups
}

// toolKind is the ACP kind of a weft tool, for the client's icon.
func toolKind(name string) acp.ToolKind {
	switch name {
	case "read_file", "list_dir":
		return acp.ToolKindRead
	case "glob", "grep":
		return acp.ToolKindSearch
	case "write_file", "edit_file":
		return acp.ToolKindEdit
	case "shell":
		return acp.ToolKindExecute
	case "ask_user":
		return acp.ToolKindThink
	}
	return acp.ToolKindOther
}

// toolInput is a call's arguments as JSON, or nil when the model's text
// is not JSON.
func toolInput(tc event.ToolCall) any {
	var v any
	if json.Unmarshal([]byte(tc.Arguments), &v) != nil {
		return nil
	}
	return v
}

// toolTitle is a call's title: the tool and what it acts on.
func toolTitle(tc event.ToolCall) string {
	var args map[string]any
	json.Unmarshal([]byte(tc.Arguments), &args)
	for _, k := range []string{"command", "path", "pattern", "url", "question"} {
		if s, ok := args[k].(string); ok && s != "" {
			if len(s) > 120 {
				s = s[:120] + "…"
			}
			return tc.Name + ": " + s
		}
	}
	return tc.Name
}

// toolCallStart is the tool_call update of a started call.
func toolCallStart(tc event.ToolCall) acp.SessionUpdate {
	return acp.StartToolCall(acp.ToolCallId(tc.ID), toolTitle(tc), acp.WithStartKind(toolKind(tc.Name)),
		acp.WithStartStatus(acp.ToolCallStatusInProgress), acp.WithStartRawInput(toolInput(tc)))
}

// toolCallDone is the tool_call_update of a completed call: its status
// and output.
func toolCallDone(d event.ToolCallCompletedData) acp.SessionUpdate {
	status := acp.ToolCallStatusCompleted
	if d.IsError {
		status = acp.ToolCallStatusFailed
	}
	out := map[string]any{"output": d.Output, "isError": d.IsError, "durationMs": d.DurationMs}
	if d.Truncated {
		out["truncated"] = true
	}
	return acp.UpdateToolCall(acp.ToolCallId(d.ID), acp.WithUpdateStatus(status),
		acp.WithUpdateContent([]acp.ToolCallContent{acp.ToolContent(acp.TextBlock(d.Output))}), acp.WithUpdateRawOutput(out))
}

// permissionRequest is approval d as a session/request_permission: its
// options are the approval's (allow once, allow for the session, deny).
func permissionRequest(sessionID string, d event.ApprovalRequestedData) acp.RequestPermissionRequest {
	var opts []acp.PermissionOption
	for _, o := range d.Options {
		switch o {
		case event.DecisionAllowOnce:
			opts = append(opts, acp.PermissionOption{OptionId: acp.PermissionOptionId(o), Kind: acp.PermissionOptionKindAllowOnce, Name: "Allow once"})
		case event.DecisionAllowSession:
			opts = append(opts, acp.PermissionOption{OptionId: acp.PermissionOptionId(o), Kind: acp.PermissionOptionKindAllowAlways, Name: alwaysName(d)})
		case event.DecisionDeny:
			opts = append(opts, acp.PermissionOption{OptionId: acp.PermissionOptionId(o), Kind: acp.PermissionOptionKindRejectOnce, Name: "Reject"})
		}
	}
	title, kind, status := toolTitle(d.ToolCall), toolKind(d.ToolCall.Name), acp.ToolCallStatusPending
	return acp.RequestPermissionRequest{
		SessionId: acp.SessionId(sessionID),
		Options:   opts,
		ToolCall: acp.ToolCallUpdate{ToolCallId: acp.ToolCallId(d.ToolCall.ID), Title: &title, Kind: &kind, Status: &status,
			RawInput: toolInput(d.ToolCall), Meta: map[string]any{"weft": map[string]any{"approvalId": d.ApprovalID, "rule": d.Rule}}},
	}
}

// alwaysName is the "allow always" option's name: the scope of the
// session rule it adds (this exact command, this tool in this mount,
// this tool).
func alwaysName(d event.ApprovalRequestedData) string {
	r := d.SessionRule
	if r == nil {
		return "Always allow in this session"
	}
	var m struct {
		CommandExact string `json:"commandExact"`
		Mount        string `json:"mount"`
	}
	json.Unmarshal(r.Match, &m)
	switch {
	case m.CommandExact != "":
		c := m.CommandExact
		if len(c) > 80 {
			c = c[:80] + "…"
		}
		return "Always allow `" + c + "` in this session"
	case m.Mount != "":
		return "Always allow " + r.Tool + " in mount " + m.Mount + " for this session"
	case r.Tool != "" && r.Tool != "*":
		return "Always allow " + r.Tool + " in this session"
	}
	return "Always allow in this session"
}
