package agent

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"weft.dev/weft/event"
	"weft.dev/weft/llm"
)

// KindContextOverflow is the kind of a run whose conversation does not
// fit its model's context window even after a compaction; the message
// names both sizes.
const KindContextOverflow = "context_overflow"

// DefaultCompactAt is the share of the context window a request may fill
// before the loop compacts the conversation, when [Config.CompactAt] is
// zero.
const DefaultCompactAt = 0.8

// Basis is what is known of a conversation's size: the context size in
// tokens the provider last reported for it ([ContextTokens]) and the
// bytes of text added since. With no report, Tokens is zero and Bytes
// the text of the whole conversation.
type Basis struct {
	Tokens int64
	Bytes  int64
}

// ContextTokens returns the size of the context a step's usage reports:
// its input and output tokens, plus the cached input when the provider
// counts it apart from the input (Anthropic does: its cache reads and
// writes are not in input_tokens; OpenAI and Gemini count cached tokens
// inside the input, so there the cache read never exceeds the input and
// no cache write is reported).
func ContextTokens(u event.TokenUsage) int64 {
	n := u.InputTokens + u.OutputTokens
	if u.CacheWriteTokens > 0 || u.CacheReadTokens > u.InputTokens {
		n += u.CacheReadTokens + u.CacheWriteTokens
	}
	return n
}

// estimateBytes is the text of m a model reads, in bytes, with a small
// allowance per message and call for the provider's framing. A token is
// taken to be 4 bytes of it.
func estimateBytes(m llm.Message) int64 {
	n := 16 + len(m.Content) + len(m.Reasoning)
	for _, c := range m.ToolCalls {
		n += 16 + len(c.Name) + len(c.Arguments)
	}
	return int64(n)
}

// compactedPrefix begins the message that replaces a compacted
// conversation.
const compactedPrefix = "[The conversation before this point was compacted to save context. Summary of it:]\n\n"

// CompactedMessages returns the conversation that a compaction leaves: one
// user message with the summary and the re-injected state. The loop and
// [TranscriptBuilder] both build it from d, so that a request built after
// a restart is the request the loop would have sent.
func CompactedMessages(d event.ContextCompactedData) []llm.Message {
	text := compactedPrefix + d.Summary
	if d.State != "" {
		text += "\n\n" + d.State
	}
	return []llm.Message{{Role: llm.RoleUser, Content: text}}
}

// summarySystem is the system prompt of a summary request.
const summarySystem = "You compact the conversation of a software agent with its user, so that the agent can go on from your summary alone. " +
	"Answer with the summary only, in plain text; call no tools."

// summaryInstruction ends a summary request.
const summaryInstruction = "Summarise the whole conversation above for the agent that will continue it from your summary alone. Keep: " +
	"the user's goals, constraints and preferences; the current task, how far it got and what remains to do; decisions made and why; " +
	"files read or changed (their paths); commands run and what they showed; errors met and how they were handled. " +
	"Copy every identifier the agent may still need verbatim: process ids and handles, request ids, mount paths."

// CompactParams are the inputs of [Compact].
type CompactParams struct {
	// Model writes the summary. Required.
	Model *Model
	// History is the conversation to compact.
	History []llm.Message
	// Tools are offered alongside (some providers refuse tool calls in a
	// conversation without the tools' definitions); the model is told
	// not to call them.
	Tools []llm.ToolSpec
	// State describes what must stay reachable (see [Run.State]); it is
	// given to the model and re-injected after the summary.
	State string
	// ContextWindow, if positive, trims the oldest history from the
	// summary request so that it fits.
	ContextWindow int
	// Retry governs retries of the summary request.
	Retry RetryPolicy
}

// Compact asks p.Model to summarise p.History and returns the data of the
// context.compacted event that records it, without UpToSeq, Reason and
// Step, which the caller knows. History too long for the model is cut
// from its oldest end, so that the summary covers what fits (the earlier
// summary, if any, comes first). Errors are the provider's (*llm.Error)
// or ctx's.
func Compact(ctx context.Context, p CompactParams) (event.ContextCompactedData, error) {
	if p.Model == nil || p.Model.Provider == nil {
		return event.ContextCompactedData{}, errors.New("agent: compact: no model")
	}
	p.Retry.defaults()
	hist := p.History
	if p.ContextWindow > 0 {
		hist = trimHistory(hist, int64(p.ContextWindow)*3) // three quarters of the window, at 4 bytes a token
	}
	for {
		prompt := summaryInstruction
		if p.State != "" {
			prompt += "\n\n" + p.State
		}
		msgs := append(append([]llm.Message(nil), hist...), llm.Message{Role: llm.RoleUser, Content: prompt})
		req := &llm.Request{Model: p.Model.Model, System: summarySystem, Messages: msgs, Tools: p.Tools,
			MaxTokens: p.Model.MaxTokens, Purpose: llm.PurposeSummary}
		text, usage, err := collect(ctx, p.Model.Provider, req, p.Retry)
		if le, ok := llm.AsError(err); ok && le.Kind == llm.KindContextOverflow && len(hist) > 1 {
			// Too long for the summariser too: keep the newer half.
			hist = trimHistory(hist, historyBytes(hist)/2)
			continue
		}
		if err != nil {
			return event.ContextCompactedData{}, err
		}
		if strings.TrimSpace(text) == "" && p.Tools != nil {
			// The model called a tool instead of answering: ask again
			// with the conversation as text and no tools to call.
			hist, p.Tools = []llm.Message{{Role: llm.RoleUser, Content: flatten(hist)}}, nil
			continue
		}
		if strings.TrimSpace(text) == "" {
			return event.ContextCompactedData{}, &llm.Error{Provider: "agent", Kind: llm.KindMalformed, Err: errors.New("the summary is empty")}
		}
		if pr := p.Model.Price; pr != nil {
			usage.CostUSD = pr.Cost(usage)
		}
		return event.ContextCompactedData{Summary: text, State: p.State, Model: p.Model.Name, Usage: usage}, nil
	}
}

// flatten renders hist as one text, for a summary request that offers no
// tools.
func flatten(hist []llm.Message) string {
	var b strings.Builder
	b.WriteString("The conversation so far:\n")
	for _, m := range hist {
		switch m.Role {
		case llm.RoleTool:
			fmt.Fprintf(&b, "\n[result of %s (%s)]\n%s\n", m.ToolName, m.ToolCallID, m.Content)
		default:
			fmt.Fprintf(&b, "\n%s: %s\n", m.Role, m.Content)
			for _, c := range m.ToolCalls {
				fmt.Fprintf(&b, "[call %s (%s): %s]\n", c.Name, c.ID, c.Arguments)
			}
		}
	}
	return b.String()
}

// historyBytes is the text hist sends, in bytes.
func historyBytes(hist []llm.Message) int64 {
	var n int64
	for _, m := range hist {
		n += estimateBytes(m)
	}
	return n
}

// trimHistory returns the newest messages of hist whose text fits in
// budget bytes, starting at a user or assistant message (never at a tool
// result, whose call would be gone) and behind a note that says the
// older ones were left out. The first message, when it is the summary of
// an earlier compaction, is kept.
func trimHistory(hist []llm.Message, budget int64) []llm.Message {
	if historyBytes(hist) <= budget || len(hist) < 2 {
		return hist
	}
	var head []llm.Message
	if strings.HasPrefix(hist[0].Content, compactedPrefix) && hist[0].Role == llm.RoleUser {
		head = hist[:1]
		budget -= estimateBytes(hist[0])
	}
	start := len(hist)
	var used int64
	for i := len(hist) - 1; i >= len(head); i-- {
		used += estimateBytes(hist[i])
		if used > budget {
			break
		}
		start = i
	}
	for start < len(hist) && hist[start].Role == llm.RoleTool {
		start++
	}
	if start == len(hist) {
		// Not even the last message fits: give the model its end.
		m := hist[len(hist)-1]
		if keep := int(max(budget, 1024)); len(m.Content) > keep {
			m.Content = "[…]" + m.Content[len(m.Content)-keep:]
		}
		if m.Role == llm.RoleTool {
			m = llm.Message{Role: llm.RoleUser, Content: m.Content}
		}
		return append(append(head[:len(head):len(head)], omitted()), m)
	}
	out := append(head[:len(head):len(head)], omitted())
	return append(out, hist[start:]...)
}

func omitted() llm.Message {
	return llm.Message{Role: llm.RoleUser, Content: "[Older messages were left out of this request: they did not fit the model's context window.]"}
}

// collect makes req without streaming its text to the log, retrying
// failures before output as the loop's steps do, and returns its text and
// usage.
func collect(ctx context.Context, p llm.Provider, req *llm.Request, retry RetryPolicy) (string, event.TokenUsage, error) {
	for attempt := 1; ; attempt++ {
		var text strings.Builder
		var usage event.TokenUsage
		finished := false
		var err error
		for ev, serr := range p.Stream(ctx, req) {
			if serr != nil {
				err = serr
				break
			}
			switch {
			case ev.Text != "":
				text.WriteString(ev.Text)
			case ev.Usage != nil:
				mergeUsage(&usage, *ev.Usage)
			case ev.Finish != nil:
				finished = true
			}
		}
		if err == nil && !finished {
			err = &llm.Error{Provider: "agent", Kind: llm.KindStreamCut, Retryable: true, Err: errors.New("the model stream ended without a finish")}
		}
		if err == nil {
			return text.String(), usage, nil
		}
		if ctx.Err() != nil {
			return "", usage, ctx.Err()
		}
		le, ok := llm.AsError(err)
		if !ok || !le.Retryable || attempt >= retry.MaxAttempts {
			return "", usage, err
		}
		t := time.NewTimer(retry.backoff(attempt, le.RetryAfter))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return "", usage, ctx.Err()
		}
	}
}

// window is the loop's view of the context window: the estimate of the
// next request's size and when to compact. The zero value (no window)
// never compacts before a step.
type window struct {
	size    int64 // tokens; zero: unknown
	compact int64 // compact before a request estimated above this
	// basis and added are the loop's Basis; fixed is the text of the
	// system prompt and tools, counted while basis is unknown.
	basis, added, fixed int64
	// fresh is set by a compaction and cleared by the next step, so
	// that a conversation still above the threshold after one is not
	// compacted again before a step runs.
	fresh bool
}

func (w *window) grow(msgs ...llm.Message) {
	for _, m := range msgs {
		w.added += estimateBytes(m)
	}
}

// reported takes a step's usage as the new basis; a step without usage
// adds its message's text instead.
func (w *window) reported(u event.TokenUsage, m llm.Message) {
	if n := ContextTokens(u); n > 0 {
		w.basis, w.added = n, 0
		return
	}
	w.grow(m)
}

// reset starts over from msgs, as after a compaction.
func (w *window) reset(msgs []llm.Message) {
	w.basis, w.added = 0, 0
	w.grow(msgs...)
}

// estimate is the next request's size in tokens.
func (w *window) estimate() int64 {
	if w.basis > 0 {
		return w.basis + w.added/4
	}
	return (w.fixed + w.added + 3) / 4
}

// needs reports whether the loop compacts before the next step.
func (w *window) needs() bool {
	return w.compact > 0 && !w.fresh && w.estimate() > w.compact
}

// compact compacts msgs before step l.steps (the step about to run, or
// for an overflow the step to retry) and returns what the conversation becomes; it writes
// context.compacted. It fails the run with KindContextOverflow when the
// result still exceeds the window.
func (l *loop) compact(ctx context.Context, msgs []llm.Message, tools []llm.ToolSpec, reason string) ([]llm.Message, error) {
	var state string
	if l.run.State != nil {
		state = l.run.State(ctx)
	}
	m := l.cfg.CompactModel
	if m == nil {
		m = &Model{Name: l.run.ModelName, Provider: l.cfg.Provider, Model: l.cfg.Model, MaxTokens: l.cfg.MaxTokens, Price: l.cfg.Price}
	}
	before := l.win.estimate()
	d, err := Compact(ctx, CompactParams{Model: m, History: msgs, Tools: tools, State: state,
		ContextWindow: l.cfg.ContextWindow, Retry: l.cfg.Retry})
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if le, ok := llm.AsError(err); ok {
			return nil, &runError{kind: modelErrorKind(le), retryable: le.Retryable, msg: fmt.Sprintf("compaction before step %d: %v", l.steps, le)}
		}
		return nil, err
	}
	out := CompactedMessages(d)
	l.win.reset(out)
	l.win.fresh = true
	d.UpToSeq, d.Reason, d.Step = l.lastSeq, reason, l.steps
	d.TokensBefore, d.TokensAfter = before, l.win.estimate()
	l.usage.Add(d.Usage)
	if err := l.emit(ctx, event.ContextCompacted, d); err != nil {
		return nil, err
	}
	if w := l.win.size; w > 0 && d.TokensAfter > w {
		return nil, &runError{kind: KindContextOverflow, msg: fmt.Sprintf(
			"the conversation needs about %d tokens after compaction (%d before), more than the model's context window of %d", d.TokensAfter, before, w)}
	}
	return out, nil
}

// windowText names the context window for messages.
func (l *loop) windowText() string {
	if l.win.size > 0 {
		return fmt.Sprintf("; the model's context window is %d", l.win.size)
	}
	return "; the model's context window is not configured"
}

// overflowed reports whether err is a provider's refusal of a request
// longer than its context window.
func overflowed(err error) bool {
	le, ok := llm.AsError(err)
	return ok && le.Kind == llm.KindContextOverflow
}
