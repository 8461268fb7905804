package agent

import (
	"context"
	"fmt"

	"weft.dev/weft/event"
	"weft.dev/weft/llm"
	"weft.dev/weft/store"
)

// TranscriptTypes returns the event types [Transcript] reads; a caller that
// loads a session's history from a store may filter its read to them.
func TranscriptTypes() []event.Type {
	return []event.Type{event.MessageUser, event.MessageCompleted, event.ToolCallCompleted, event.SteerConsumed}
}

// eventReader is the part of a store LoadTranscript reads through.
type eventReader interface {
	Read(ctx context.Context, p store.ReadParams) ([]event.Event, error)
}

// LoadTranscript reads a session's transcript events from st (only the
// [TranscriptTypes], page by page) and rebuilds its conversation with
// [Transcript].
func LoadTranscript(ctx context.Context, st eventReader, sessionID string) ([]llm.Message, error) {
	const page = 1000
	var evs []event.Event
	var after int64
	for {
		got, err := st.Read(ctx, store.ReadParams{SessionID: sessionID, After: after, Limit: page, Types: TranscriptTypes()})
		if err != nil {
			return nil, fmt.Errorf("load transcript of session %s: %w", sessionID, err)
		}
		evs = append(evs, got...)
		if len(got) < page {
			return Transcript(evs)
		}
		after = got[len(got)-1].Seq
	}
}

// Transcript rebuilds the model-visible conversation from a session's log:
// user input, steering the model saw, assistant messages with their tool
// calls, and tool results placed right after the assistant message that
// asked for them, in the model's order. Events of other types are ignored.
//
// A tool call without a result (which recovery prevents) is answered with
// an error result, so that the transcript is always a valid model request.
func Transcript(events []event.Event) ([]llm.Message, error) {
	var (
		msgs    []llm.Message
		results = map[string]llm.Message{}
		open    []event.ToolCall // calls of the last assistant message awaiting results
	)
	closeOpen := func() {
		for _, c := range open {
			r, ok := results[c.ID]
			if !ok {
				r = llm.Message{Role: llm.RoleTool, ToolCallID: c.ID, ToolName: c.Name, IsError: true,
					Content: "error: this tool call never finished (the run ended before its result)"}
			}
			msgs = append(msgs, r)
		}
		open = nil
		clear(results)
	}
	for _, e := range events {
		switch e.Type {
		case event.MessageUser:
			var d event.MessageUserData
			if err := e.Decode(&d); err != nil {
				return nil, err
			}
			closeOpen()
			msgs = append(msgs, llm.Message{Role: llm.RoleUser, Content: event.Text(d.Content)})
		case event.SteerConsumed:
			var d event.SteerData
			if err := e.Decode(&d); err != nil {
				return nil, err
			}
			closeOpen()
			msgs = append(msgs, llm.Message{Role: llm.RoleUser, Content: event.Text(d.Input)})
		case event.MessageCompleted:
			var d event.MessageCompletedData
			if err := e.Decode(&d); err != nil {
				return nil, err
			}
			closeOpen()
			msgs = append(msgs, llm.Message{
				Role: llm.RoleAssistant, Content: d.Text, Reasoning: d.Reasoning,
				ToolCalls: d.ToolCalls, ProviderState: d.ProviderState,
			})
			open = d.ToolCalls
		case event.ToolCallCompleted:
			var d event.ToolCallCompletedData
			if err := e.Decode(&d); err != nil {
				return nil, err
			}
			results[d.ID] = llm.Message{Role: llm.RoleTool, ToolCallID: d.ID, ToolName: d.Name, Content: d.Output, IsError: d.IsError}
		}
	}
	closeOpen()
	return msgs, nil
}
