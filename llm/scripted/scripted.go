package scripted

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"weft.dev/weft/event"
	"weft.dev/weft/llm"
)

// providerName is the Provider field of every *llm.Error this package yields.
const providerName = "scripted"

// Provider plays a script. Create one with [Load] or [Parse]. It is safe
// for concurrent use.
type Provider struct {
	name   string
	script script

	mu sync.Mutex
	// attempts counts, per step index, the requests that step answered.
	attempts map[int]int
}

// Name returns the name the script was parsed under (its path, for Load).
func (p *Provider) Name() string { return p.name }

// ContextWindow returns the context window the script declares for its
// model (its "contextWindow"), or zero.
func (p *Provider) ContextWindow() int { return p.script.contextWindow }

// Steps returns the number of steps in the script.
func (p *Provider) Steps() int { return len(p.script.steps) }

// Stream plays the step that answers req; see the package documentation
// for which step that is and what it yields. Scripted failures and running
// out of steps are *llm.Error values; a cancelled or expired ctx yields
// ctx.Err() wrapped. The iterator is single-use.
func (p *Provider) Stream(ctx context.Context, req *llm.Request) iter.Seq2[llm.StreamEvent, error] {
	return func(yield func(llm.StreamEvent, error) bool) {
		if err := ctx.Err(); err != nil {
			yield(llm.StreamEvent{}, fmt.Errorf("scripted: %w", err))
			return
		}
		if req == nil {
			req = &llm.Request{}
		}
		msgs := req.Messages
		summary := req.Purpose == llm.PurposeSummary
		if summary && len(msgs) > 0 {
			msgs = msgs[:len(msgs)-1] // the request's own instruction
		}
		turn := 0
		input := ""
		var images []string // the attachments since the last assistant message
		for _, m := range msgs {
			switch m.Role {
			case llm.RoleAssistant:
				turn++
				images = images[:0]
			case llm.RoleUser:
				input = m.Content
				if t, ok := summaryTurns(m.Content); ok {
					// The summary of a compaction: the script goes on
					// from the turn it covered.
					turn = t
				}
			}
			for _, a := range m.Attachments {
				images = append(images, fmt.Sprintf("%s %d bytes", a.MediaType, len(a.Data)))
			}
		}
		seen := strings.Join(images, ", ")
		if seen == "" {
			seen = "no images"
		}
		if summary {
			p.summarize(req, turn, input, yield)
			return
		}
		n := len(p.script.steps)
		idx := turn
		if p.script.loop {
			idx %= n
		} else if idx >= n {
			yield(llm.StreamEvent{}, &llm.Error{Provider: providerName, Kind: llm.KindScript, Err: fmt.Errorf(
				"%s: ran out of steps: the request has %d assistant messages, so it needs steps[%d], but the script has only %d steps (set \"loop\": true to repeat them)",
				p.name, turn, idx, n)})
			return
		}
		st := &p.script.steps[idx]
		fail := p.failure(st, idx)

		vars := strings.NewReplacer("{{input}}", input, "{{step}}", strconv.Itoa(idx), "{{turn}}", strconv.Itoa(turn), "{{images}}", seen)
		jsonVars := strings.NewReplacer("{{input}}", jsonEscape(input), "{{step}}", strconv.Itoa(idx), "{{turn}}", strconv.Itoa(turn), "{{images}}", seen)
		out, outChars := render(st, vars, jsonVars, turn)

		var timer *time.Timer
		if st.delayMs > 0 {
			timer = time.NewTimer(time.Hour)
			timer.Stop()
			defer timer.Stop()
		}
		for i, ev := range out {
			if fail != nil && i == fail.afterTokens {
				yield(llm.StreamEvent{}, fail.err)
				return
			}
			if ctx.Err() != nil {
				yield(llm.StreamEvent{}, fmt.Errorf("scripted: %w", ctx.Err()))
				return
			}
			if timer != nil {
				timer.Reset(time.Duration(st.delayMs) * time.Millisecond)
				select {
				case <-ctx.Done():
					yield(llm.StreamEvent{}, fmt.Errorf("scripted: %w", ctx.Err()))
					return
				case <-timer.C:
				}
			}
			if !yield(ev, nil) {
				return
			}
		}
		if fail != nil {
			yield(llm.StreamEvent{}, fail.err)
			return
		}
		if p.script.usage || st.usage != nil {
			u := event.TokenUsage{
				InputTokens:     quarter(requestChars(req)),
				OutputTokens:    quarter(outChars),
				ReasoningTokens: quarter(utf8.RuneCountInString(vars.Replace(st.reasoning))),
			}
			if st.usage != nil {
				u = event.TokenUsage{InputTokens: int64(st.usage.input), OutputTokens: int64(st.usage.output)}
			}
			if !yield(llm.StreamEvent{Usage: &u}, nil) {
				return
			}
		}
		// The state is cloned so that a consumer cannot change the script.
		f := &llm.Finish{Reason: st.finish, ProviderState: bytes.Clone(st.providerState)}
		if f.Reason == "" {
			f.Reason = llm.FinishStop
			if len(st.toolCalls) > 0 {
				f.Reason = llm.FinishToolCalls
			}
		}
		yield(llm.StreamEvent{Finish: f}, nil)
	}
}

// summaryMark ends every summary the provider writes, with the number of
// turns (assistant messages) it covers, so that a compacted request
// goes on with the step after them.
const summaryMark = "[scripted summary of %d turns]"

// summaryTurns returns the turns a summary of the provider's covers, if
// text holds one.
func summaryTurns(text string) (int, bool) {
	i := strings.LastIndex(text, "[scripted summary of ")
	if i < 0 {
		return 0, false
	}
	var n int
	if _, err := fmt.Sscanf(text[i:], summaryMark, &n); err != nil {
		return 0, false
	}
	return n, true
}

// summarize answers a summary request (llm.PurposeSummary): the script's
// summary template, or a default naming the latest input, then the mark
// of the turns it covers. It reports synthetic usage unless the script
// turned usage off.
func (p *Provider) summarize(req *llm.Request, turn int, input string, yield func(llm.StreamEvent, error) bool) {
	tmpl := p.script.summary
	if tmpl == "" {
		tmpl = "Summary: {{turn}} turns so far; the latest input was: {{input}}"
	}
	if strings.HasPrefix(input, "[") {
		// An earlier summary is not an input of the user's.
		if i := strings.Index(input, "]"); i >= 0 && strings.Contains(input[:i], "compacted") {
			input = "(compacted)"
		}
	}
	text := strings.NewReplacer("{{input}}", input, "{{turn}}", strconv.Itoa(turn), "{{step}}", strconv.Itoa(turn)).Replace(tmpl) +
		"\n" + fmt.Sprintf(summaryMark, turn)
	for _, w := range words(text) {
		if !yield(llm.StreamEvent{Text: w}, nil) {
			return
		}
	}
	if p.script.usage {
		u := event.TokenUsage{InputTokens: quarter(requestChars(req)), OutputTokens: quarter(utf8.RuneCountInString(text))}
		if !yield(llm.StreamEvent{Usage: &u}, nil) {
			return
		}
	}
	yield(llm.StreamEvent{Finish: &llm.Finish{Reason: llm.FinishStop}}, nil)
}

// failure is a scripted failure of one request.
type failure struct {
	err         *llm.Error
	afterTokens int
}

// failure counts this request against step idx and returns the failure it
// must produce, if any.
func (p *Provider) failure(st *step, idx int) *failure {
	e := st.err
	if e == nil {
		return nil
	}
	p.mu.Lock()
	p.attempts[idx]++
	attempt := p.attempts[idx]
	p.mu.Unlock()
	if e.times > 0 && attempt > e.times {
		return nil
	}
	msg := e.message
	if msg == "" {
		msg = fmt.Sprintf("scripted %s error", e.kind)
	}
	of := "every attempt fails"
	if e.times > 0 {
		of = fmt.Sprintf("failing %d of %d", attempt, e.times)
	}
	return &failure{
		afterTokens: e.afterTokens,
		err: &llm.Error{
			Provider:   providerName,
			Kind:       e.kind,
			StatusCode: e.status,
			RetryAfter: time.Duration(e.retryAfterMs) * time.Millisecond,
			Retryable:  e.retryable,
			Err:        fmt.Errorf("%s (%s steps[%d], attempt %d, %s)", msg, p.name, idx, attempt, of),
		},
	}
}

// render returns the stream events of st's output, without usage and
// finish, and the number of characters of that output.
func render(st *step, vars, jsonVars *strings.Replacer, turn int) ([]llm.StreamEvent, int) {
	var out []llm.StreamEvent
	chars := 0
	reasoning := vars.Replace(st.reasoning)
	chars += utf8.RuneCountInString(reasoning)
	for _, w := range words(reasoning) {
		out = append(out, llm.StreamEvent{Reasoning: w})
	}
	text := vars.Replace(st.text)
	chars += utf8.RuneCountInString(text)
	for _, w := range words(text) {
		out = append(out, llm.StreamEvent{Text: w})
	}
	for i, c := range st.toolCalls {
		id := c.id
		if id == "" {
			id = fmt.Sprintf("call_%d_%d", turn, i)
		}
		args := c.args
		if c.raw {
			args = vars.Replace(args)
		} else {
			// {{…}} can only occur inside JSON strings, so the substitute
			// is escaped for a JSON string.
			args = jsonVars.Replace(args)
		}
		chars += utf8.RuneCountInString(c.name) + utf8.RuneCountInString(args)
		out = append(out, llm.StreamEvent{ToolCall: &llm.ToolCallDelta{Index: i, ID: id, Name: c.name}})
		for _, frag := range thirds(args) {
			out = append(out, llm.StreamEvent{ToolCall: &llm.ToolCallDelta{Index: i, Arguments: frag}})
		}
	}
	return out, chars
}

// words splits s into words, each with the whitespace before it, so that
// the words concatenate to s. Whitespace at the end is a word of its own.
func words(s string) []string {
	var out []string
	start := 0
	for i := 1; i < len(s); i++ {
		if isSpace(s[i]) && !isSpace(s[i-1]) {
			out = append(out, s[start:i])
			start = i
		}
	}
	if start < len(s) {
		out = append(out, s[start:])
	}
	return out
}

func isSpace(b byte) bool { return b == ' ' || b == '\t' || b == '\n' || b == '\r' }

// thirds splits s into up to three fragments at rune boundaries.
func thirds(s string) []string {
	n := utf8.RuneCountInString(s)
	if n < 3 {
		if s == "" {
			return nil
		}
		return []string{s}
	}
	var out []string
	start, r := 0, 0
	for i := range s {
		if r == n/3 || r == 2*n/3 {
			if i > start {
				out = append(out, s[start:i])
				start = i
			}
		}
		r++
	}
	return append(out, s[start:])
}

// jsonEscape returns s escaped for use inside a JSON string.
func jsonEscape(s string) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(s); err != nil {
		return ""
	}
	q := strings.TrimSuffix(b.String(), "\n")
	return q[1 : len(q)-1]
}

// requestChars counts the characters of everything req sends to a model.
func requestChars(req *llm.Request) int {
	n := utf8.RuneCountInString(req.System)
	for _, m := range req.Messages {
		n += utf8.RuneCountInString(m.Content) + utf8.RuneCountInString(m.Reasoning)
		for _, c := range m.ToolCalls {
			n += utf8.RuneCountInString(c.Name) + utf8.RuneCountInString(c.Arguments)
		}
	}
	for _, t := range req.Tools {
		n += utf8.RuneCountInString(t.Name) + utf8.RuneCountInString(t.Description) + utf8.RuneCount(t.InputSchema)
	}
	return n
}

// quarter is n/4 rounded up.
func quarter(n int) int64 { return int64(n+3) / 4 }
