package agent

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"weft.dev/weft/event"
	"weft.dev/weft/llm"
	"weft.dev/weft/store"
)

// TranscriptTypes returns the event types [Transcript] reads; a caller that
// loads a session's history from a store may filter its read to them.
func TranscriptTypes() []event.Type {
	return []event.Type{event.MessageUser, event.MessageCompleted, event.ToolCallCompleted, event.SteerConsumed,
		event.ContextCompacted, event.Usage, event.SessionRewound}
}

// IsTranscriptType reports whether t is one of the [TranscriptTypes].
func IsTranscriptType(t event.Type) bool {
	switch t {
	case event.MessageUser, event.MessageCompleted, event.ToolCallCompleted, event.SteerConsumed,
		event.ContextCompacted, event.Usage, event.SessionRewound:
		return true
	}
	return false
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
// asked for them, in the model's order. A context.compacted event
// replaces everything before it with its summary and re-injected state
// (see [FullTranscript] for the conversation without compactions). A
// session.rewound takes the conversation back to what it was after its
// toSeq: the messages of later events are dropped (the log keeps them; a
// rewind never crosses a compaction). Events of other types are ignored.
//
// A tool call without a result (which recovery prevents) is answered with
// an error result, so that the transcript is always a valid model request.
func Transcript(events []event.Event) ([]llm.Message, error) {
	var b TranscriptBuilder
	for _, e := range events {
		if err := b.Add(e); err != nil {
			return nil, err
		}
	}
	return b.Messages(), nil
}

// FullTranscript is [Transcript] as if the session had never been
// compacted: every message of the log, for people (session/get's full
// view), not for a model, whose window it may exceed.
func FullTranscript(events []event.Event) ([]llm.Message, error) {
	var b TranscriptBuilder
	for _, e := range events {
		if e.Type == event.ContextCompacted {
			continue
		}
		if err := b.Add(e); err != nil {
			return nil, err
		}
	}
	return b.Messages(), nil
}

// A TranscriptBuilder folds a session's events into its transcript one at
// a time, so that an owner that sees every committed event keeps the
// conversation current without reading the log again: [Transcript] is a
// builder fed a whole log. The zero value is an empty transcript. It is
// not safe for concurrent use.
type TranscriptBuilder struct {
	msgs []llm.Message
	// open are the calls of the last assistant message; results holds
	// those answered so far. They join msgs, in the model's order, once
	// the next message starts (or in Messages, without being kept).
	open    []event.ToolCall
	results map[string]llm.Message
	size    int64 // of msgs
	pending int64 // of results
	// basis is the context size the provider last reported (usage), and
	// basisAt the builder's Size when it did (see Basis).
	basis, basisAt int64
	// est and estPending estimate, in bytes of text, what msgs and
	// results send to a model (see estimateBytes).
	est, estPending int64
	// compactions counts the context.compacted events folded.
	compactions int
	// seqs are the seqs of the events msgs come from (a result that never
	// came has its assistant message's; a compaction's messages, its
	// own), so that a session.rewound can cut them; resultSeqs are those
	// of results.
	seqs       []int64
	resultSeqs map[string]int64
	// openSeq is the seq of the assistant message whose calls are open.
	openSeq int64
}

// Add folds e into the transcript; events of types other than
// [TranscriptTypes] are ignored.
func (b *TranscriptBuilder) Add(e event.Event) error {
	switch e.Type {
	case event.MessageUser:
		var d event.MessageUserData
		if err := e.Decode(&d); err != nil {
			return err
		}
		b.closeOpen()
		b.push(UserMessage(d.Content), e.Seq)
	case event.SteerConsumed:
		var d event.SteerData
		if err := e.Decode(&d); err != nil {
			return err
		}
		b.closeOpen()
		b.push(UserMessage(d.Input), e.Seq)
	case event.MessageCompleted:
		var d event.MessageCompletedData
		if err := e.Decode(&d); err != nil {
			return err
		}
		b.closeOpen()
		b.push(llm.Message{
			Role: llm.RoleAssistant, Content: d.Text, Reasoning: d.Reasoning,
			ToolCalls: d.ToolCalls, ProviderState: d.ProviderState,
		}, e.Seq)
		b.open, b.openSeq = d.ToolCalls, e.Seq
	case event.ToolCallCompleted:
		var d event.ToolCallCompletedData
		if err := e.Decode(&d); err != nil {
			return err
		}
		if b.results == nil {
			b.results = map[string]llm.Message{}
		}
		if old, ok := b.results[d.ID]; ok {
			b.pending -= messageSize(old)
			b.estPending -= estimateBytes(old)
		}
		r := llm.Message{Role: llm.RoleTool, ToolCallID: d.ID, ToolName: d.Name, Content: d.Output, IsError: d.IsError,
			Attachments: Attachments(d.Attachments)}
		b.results[d.ID] = r
		if b.resultSeqs == nil {
			b.resultSeqs = map[string]int64{}
		}
		b.resultSeqs[d.ID] = e.Seq
		b.pending += messageSize(r)
		b.estPending += estimateBytes(r)
	case event.Usage:
		var d event.UsageData
		if err := e.Decode(&d); err != nil {
			return err
		}
		if n := ContextTokens(d.Usage); n > 0 {
			b.basis, b.basisAt = n, b.est+b.estPending
		}
	case event.ContextCompacted:
		var d event.ContextCompactedData
		if err := e.Decode(&d); err != nil {
			return err
		}
		// A compaction comes between steps, when every call has its
		// result; the summary covers them all.
		b.open = nil
		clear(b.results)
		clear(b.resultSeqs)
		b.pending, b.estPending = 0, 0
		// New arrays: Messages shares the old ones.
		b.msgs, b.seqs, b.size, b.est = nil, nil, 0, 0
		for _, m := range CompactedMessages(d) {
			b.push(m, e.Seq)
		}
		b.basis, b.basisAt = 0, 0
		b.compactions++
	case event.SessionRewound:
		var d event.SessionRewoundData
		if err := e.Decode(&d); err != nil {
			return err
		}
		b.rewind(d.ToSeq)
	}
	return nil
}

// rewind drops the messages of events after seq: the messages from the
// first user or assistant message after it on, and the results after it
// of the calls of an assistant message before it, which become the
// error result of a call that never finished (as at seq). It builds new
// slices, so that nothing a clone or a caller of Messages holds changes.
// The provider's last report of the context size no longer holds.
func (b *TranscriptBuilder) rewind(seq int64) {
	b.closeOpen()
	msgs := make([]llm.Message, 0, len(b.msgs))
	seqs := make([]int64, 0, len(b.msgs))
	var asked int64
	for i, m := range b.msgs {
		at := b.seqs[i]
		if m.Role != llm.RoleTool {
			if at > seq {
				break
			}
			asked = at
		} else if at > seq {
			m, at = b.result(event.ToolCall{ID: m.ToolCallID, Name: m.ToolName}, true), asked
		}
		msgs, seqs = append(msgs, m), append(seqs, at)
	}
	b.msgs, b.seqs, b.size, b.est = slices.Clip(msgs), slices.Clip(seqs), 0, 0
	for _, m := range b.msgs {
		b.size += messageSize(m)
		b.est += estimateBytes(m)
	}
	b.basis, b.basisAt = 0, 0
}

// Basis returns what the builder knows of the transcript's size in
// tokens: the context size the provider reported for the last step
// ([ContextTokens] of its usage) and the bytes added since; with no
// report since the last compaction, Tokens is zero and Bytes the size of
// the whole transcript.
func (b *TranscriptBuilder) Basis() Basis {
	return Basis{Tokens: b.basis, Bytes: max(b.est+b.estPending-b.basisAt, 0)}
}

// Compactions returns the number of compactions the transcript folded.
func (b *TranscriptBuilder) Compactions() int { return b.compactions }

// Messages returns the transcript so far. The calls of the last assistant
// message that have no result yet are answered with an error result in
// the returned slice (not in the builder, where a later result still
// lands). The caller may append to the slice; it must not modify its
// elements, which the builder shares.
func (b *TranscriptBuilder) Messages() []llm.Message {
	if len(b.open) == 0 {
		return slices.Clip(b.msgs)
	}
	out := make([]llm.Message, len(b.msgs), len(b.msgs)+len(b.open))
	copy(out, b.msgs)
	for _, c := range b.open {
		out = append(out, b.result(c, false))
	}
	return out
}

// Clone returns a copy of the builder that later calls of Add on either
// leave the other alone, at the cost of copying the results of the open
// calls: the messages themselves are shared, since a builder never
// modifies one it holds. An owner clones under its lock and then encodes
// the clone (MarshalBinary) without holding it.
func (b *TranscriptBuilder) Clone() *TranscriptBuilder {
	return &TranscriptBuilder{
		msgs: slices.Clip(b.msgs), seqs: slices.Clip(b.seqs), openSeq: b.openSeq,
		open: slices.Clip(b.open), results: maps.Clone(b.results), resultSeqs: maps.Clone(b.resultSeqs),
		size: b.size, pending: b.pending, basis: b.basis, basisAt: b.basisAt, compactions: b.compactions,
		est: b.est, estPending: b.estPending,
	}
}

// Size returns an estimate of the bytes the transcript holds.
func (b *TranscriptBuilder) Size() int64 { return b.size + b.pending }

// Len returns the number of messages the transcript holds, counting the
// results of the last assistant message's calls.
func (b *TranscriptBuilder) Len() int { return len(b.msgs) + len(b.open) }

func (b *TranscriptBuilder) push(m llm.Message, seq int64) {
	b.msgs = append(b.msgs, m)
	b.seqs = append(b.seqs, seq)
	b.size += messageSize(m)
	b.est += estimateBytes(m)
}

// closeOpen moves the results of the open calls into the transcript, in
// the order the model asked for them.
func (b *TranscriptBuilder) closeOpen() {
	for _, c := range b.open {
		at, ok := b.resultSeqs[c.ID]
		if !ok {
			at = b.openSeq
		}
		b.push(b.result(c, false), at)
	}
	b.open = nil
	clear(b.results)
	clear(b.resultSeqs)
	b.pending, b.estPending = 0, 0
}

// result is call c's result, or the error result of a call that never
// finished.
func (b *TranscriptBuilder) result(c event.ToolCall, missing bool) llm.Message {
	if r, ok := b.results[c.ID]; ok && !missing {
		return r
	}
	return llm.Message{Role: llm.RoleTool, ToolCallID: c.ID, ToolName: c.Name, IsError: true,
		Content: "error: this tool call never finished (the run ended before its result)"}
}

// UserMessage is the user message of input parts: their text, and their
// images as attachments.
func UserMessage(parts []event.Part) llm.Message {
	return llm.Message{Role: llm.RoleUser, Content: event.Text(parts), Attachments: Attachments(parts)}
}

// Attachments returns the image parts of parts as attachments; nil if
// none. The attachments share the parts' bytes.
func Attachments(parts []event.Part) []llm.Attachment {
	var out []llm.Attachment
	for _, p := range parts {
		if p.Type == event.PartImage {
			out = append(out, llm.Attachment{MediaType: p.MediaType, Data: p.Data})
		}
	}
	return out
}

// messageSize estimates the memory m holds: its strings and attachments,
// and a fixed overhead for the struct and slice headers.
func messageSize(m llm.Message) int64 {
	n := 160 + len(m.Content) + len(m.Reasoning) + len(m.ToolCallID) + len(m.ToolName) + len(m.ProviderState)
	for _, a := range m.Attachments {
		n += 48 + len(a.MediaType) + len(a.Data)
	}
	for _, c := range m.ToolCalls {
		n += 48 + len(c.ID) + len(c.Name) + len(c.Arguments)
	}
	return int64(n)
}
