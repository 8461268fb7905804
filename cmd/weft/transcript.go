package main

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/charmbracelet/x/ansi"

	"weft.dev/weft/event"
)

// Bounds of what the terminal UI keeps of a session, in bytes: older
// items are dropped whole (the log keeps them: `weft events` prints
// them), a tool's output is kept to its head, a long text to its tail.
const (
	transcriptBytes = 8 << 20
	itemBytes       = 1 << 20
	outputBytes     = 64 << 10
	// collapsedLines are the lines of a tool's output shown collapsed.
	collapsedLines = 3
)

// itemKind says what a transcript item shows.
type itemKind int

const (
	itemUser      itemKind = iota // a prompt (message.user)
	itemText                      // assistant text, streamed
	itemReasoning                 // reasoning, streamed; collapsed by default
	itemCall                      // a tool call: its approval, its output
	itemQuestion                  // a question the model asked
	itemSteer                     // a steer the model saw
	itemNotice                    // something weft says (a reconnect, an error)
	itemInfo                      // an answer to a command (/help, /history)
	itemRunEnd                    // the end of a run
)

// item is one block of the transcript. Its lines are rendered once per
// width and expansion and kept until it changes.
type item struct {
	kind  itemKind
	runID string
	step  int
	text  string
	// warn marks a notice that reports a problem.
	warn bool
	// open: a text or reasoning item still takes deltas.
	open bool

	// A call's or a question's.
	call       event.ToolCall
	requestID  string
	approval   string // "waiting", or what the answer was
	running    bool
	done       bool
	output     string
	isError    bool
	truncated  bool
	durationMs int64
	choices    []string
	// expanded shows this call's whole output or reasoning whatever the
	// UI's setting (a click toggles it).
	expanded bool

	version int // bumped on every change
	cache   struct {
		width, version int
		expanded       bool
		lines          []string
	}
}

// changed marks it for rendering again.
func (it *item) changed() { it.version++ }

// size is roughly the bytes it holds.
func (it *item) size() int { return len(it.text) + len(it.output) + len(it.call.Arguments) + 64 }

// transcript is the items of the session the UI shows, bounded in
// bytes. It is owned by the UI's model.
type transcript struct {
	items   []*item
	bytes   int
	dropped int // items dropped to keep the bound
}

// add appends it, closing the open text item before it (so that what
// follows is never glued to streamed text).
func (t *transcript) add(it *item) *item {
	if last := t.last(); last != nil && last.open {
		last.open = false
		last.changed()
	}
	t.items = append(t.items, it)
	t.bytes += it.size()
	t.trim()
	return it
}

// last is the last item, or nil.
func (t *transcript) last() *item {
	if len(t.items) == 0 {
		return nil
	}
	return t.items[len(t.items)-1]
}

// appendText adds streamed text to the open item of kind k for run and
// step, or to a new one.
func (t *transcript) appendText(k itemKind, runID string, step int, s string) {
	it := t.last()
	if it == nil || !it.open || it.kind != k || it.runID != runID || it.step != step {
		it = t.add(&item{kind: k, runID: runID, step: step, open: true})
	}
	before := it.size()
	it.text += s
	if len(it.text) > itemBytes {
		// Keep the tail; cut at a character boundary.
		cut := len(it.text) - itemBytes
		for cut < len(it.text) && !utf8.RuneStart(it.text[cut]) {
			cut++
		}
		it.text = "…" + it.text[cut:]
	}
	t.bytes += it.size() - before
	it.changed()
	t.trim()
}

// findCall is the call item of tool call id, or nil.
func (t *transcript) findCall(id string) *item {
	for i := len(t.items) - 1; i >= 0; i-- {
		if it := t.items[i]; it.kind == itemCall && it.call.ID == id {
			return it
		}
	}
	return nil
}

// findQuestion is the question item asked by tool call id, or nil.
func (t *transcript) findQuestion(id string) *item {
	if id == "" {
		return nil
	}
	for i := len(t.items) - 1; i >= 0; i-- {
		if it := t.items[i]; it.kind == itemQuestion && it.call.ID == id {
			return it
		}
	}
	return nil
}

// findRequest is the item of request id (a call's approval or a
// question), or nil.
func (t *transcript) findRequest(id string) *item {
	for i := len(t.items) - 1; i >= 0; i-- {
		if it := t.items[i]; it.requestID == id {
			return it
		}
	}
	return nil
}

// setOutput records a call's output, keeping its head.
func (t *transcript) setOutput(it *item, out string) {
	before := it.size()
	if len(out) > outputBytes {
		cut := outputBytes
		for cut > 0 && !utf8.RuneStart(out[cut]) {
			cut--
		}
		out = out[:cut] + "\n… (cut here: the log has it whole)"
	}
	it.output = out
	t.bytes += it.size() - before
	it.changed()
	t.trim()
}

// trim drops the oldest items while the transcript holds more than its
// bound.
func (t *transcript) trim() {
	n := 0
	for t.bytes > transcriptBytes && n < len(t.items)-1 {
		t.bytes -= t.items[n].size()
		n++
	}
	if n > 0 {
		t.items = append([]*item(nil), t.items[n:]...)
		t.dropped += n
	}
}

// lines renders it at width; expanded shows reasoning and outputs whole.
func (it *item) lines(th theme, width int, expanded bool) []string {
	expanded = expanded || it.expanded
	c := &it.cache
	if c.lines != nil && c.width == width && c.expanded == expanded && c.version == it.version {
		return c.lines
	}
	c.width, c.expanded, c.version = width, expanded, it.version
	c.lines = it.render(th, width, expanded)
	return c.lines
}

// render draws it: a few styled lines, none wider than width.
func (it *item) render(th theme, width int, expanded bool) []string {
	var out []string
	add := func(style styleFunc, indent, s string) {
		for _, l := range wrapLines(s, width-ansi.StringWidth(indent)) {
			out = append(out, indent+style(l))
		}
	}
	switch it.kind {
	case itemUser:
		out = append(out, "")
		ls := wrapLines(it.text, width-2)
		for i, l := range ls {
			p := "› "
			if i > 0 {
				p = "  "
			}
			out = append(out, th.user.Render(p+l))
		}
	case itemText:
		add(th.plain.Render, "", it.text)
	case itemReasoning:
		words := len(strings.Fields(it.text))
		if !expanded {
			what := "thinking"
			if !it.open {
				what = "thought"
			}
			out = append(out, th.dim.Render(clipWidth(fmt.Sprintf("∴ %s · %d words · ctrl+o shows it", what, words), width)))
			break
		}
		add(th.dim.Render, "∴ ", it.text)
	case itemCall:
		out = append(out, it.callLines(th, width, expanded)...)
	case itemQuestion:
		add(th.ask.Render, "", "? "+it.text)
		if it.approval == "waiting" {
			// Its choices are in the panel that asks it.
			add(th.ask.Render, "  ", "? waits for your answer")
			break
		}
		for i, c := range it.choices {
			add(th.plain.Render, "  ", fmt.Sprintf("%d) %s", i+1, c))
		}
		if it.approval != "" {
			add(th.ok.Render, "  ", "→ "+it.approval)
		}
	case itemSteer:
		add(th.notice.Render, "⇢ ", "steer: "+it.text)
	case itemNotice:
		st := th.notice
		if it.warn {
			st = th.warn
		}
		add(st.Render, "", it.text)
	case itemInfo:
		add(th.plain.Render, "", it.text)
	case itemRunEnd:
		add(th.dim.Render, "", it.text)
	}
	return out
}

// styleFunc renders a string in a style.
type styleFunc func(...string) string

// callLines draws a tool call: what it is, its approval, its output.
func (it *item) callLines(th theme, width int, expanded bool) []string {
	var out []string
	add := func(style styleFunc, indent, s string) {
		for _, l := range wrapLines(s, width-ansi.StringWidth(indent)) {
			out = append(out, indent+style(l))
		}
	}
	// The call's head: whole when expanded, else on at most two rows.
	heads := wrapLines(it.call.Name+" "+callSummary(it.call), width-2)
	if len(heads) > 2 && !expanded {
		heads = []string{heads[0], clipWidth(heads[1]+" "+heads[2], width-2)}
	}
	for i, h := range heads {
		mark := "→ "
		if i > 0 {
			mark = "  "
		}
		out = append(out, th.bold.Render(mark+h))
	}
	switch {
	case it.approval == "waiting":
		add(th.ask.Render, "  ", "? waits for your answer")
	case strings.HasPrefix(it.approval, "denied"), strings.HasPrefix(it.approval, "expired"), strings.HasPrefix(it.approval, "cancelled"):
		add(th.warn.Render, "  ", "✗ "+it.approval)
	case it.approval != "":
		add(th.ok.Render, "  ", "✓ "+it.approval)
	}
	if !it.done {
		if it.running {
			add(th.dim.Render, "  ", "… running")
		}
		return out
	}
	mark, st := "ok", th.ok
	if it.isError {
		mark, st = "error", th.warn
	}
	lines := strings.Split(strings.TrimRight(it.output, "\n"), "\n")
	if strings.TrimSpace(it.output) == "" {
		lines = nil
	}
	head := fmt.Sprintf("← %s · %d ms", mark, it.durationMs)
	switch {
	case len(lines) == 0:
		head += " · no output"
	case len(lines) > collapsedLines && !expanded:
		head += fmt.Sprintf(" · %d lines · ctrl+o shows them all", len(lines))
	}
	out = append(out, "  "+st.Render(clipWidth(head, width-2)))
	if !expanded && len(lines) > collapsedLines {
		for _, l := range lines[:collapsedLines] {
			out = append(out, "    "+th.dim.Render(clipWidth(l, width-4)))
		}
		out = append(out, "    "+th.dim.Render(clipWidth(fmt.Sprintf("… %d more lines", len(lines)-collapsedLines), width-4)))
		return out
	}
	for _, l := range lines {
		add(th.dim.Render, "    ", l)
	}
	return out
}

// wrapLines wraps s at width columns (at spaces where it can, inside a
// word where it must) and returns its lines; tabs become spaces and
// other control characters are dropped, so nothing moves the cursor.
//
// A line that starts with blanks keeps them on the rows it wraps to (a
// list's items, an indented block stay indented), unless they take half
// the width.
func wrapLines(s string, width int) []string {
	width = max(width, 1)
	var out []string
	for line := range strings.SplitSeq(sanitize(s), "\n") {
		body := strings.TrimLeft(line, " ")
		indent := line[:len(line)-len(body)]
		if indent == "" || len(indent) > width/2 || ansi.StringWidth(line) <= width {
			out = append(out, strings.Split(ansi.Wrap(line, width, ""), "\n")...)
			continue
		}
		for row := range strings.SplitSeq(ansi.Wrap(body, width-len(indent), ""), "\n") {
			out = append(out, indent+row)
		}
	}
	return out
}

// clipWidth cuts s to one line of at most width columns.
func clipWidth(s string, width int) string {
	s = sanitize(strings.ReplaceAll(s, "\n", " "))
	return ansi.Truncate(s, max(width, 1), "…")
}

// sanitize makes text safe to draw: no escape sequences or control
// characters but newlines; a tab is four spaces.
func sanitize(s string) string {
	clean := true
	for _, r := range s {
		if r < 0x20 && r != '\n' || r == 0x7f || r >= 0x80 && r < 0xa0 {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '\t':
			b.WriteString("    ")
		case r < 0x20 && r != '\n' || r == 0x7f || r >= 0x80 && r < 0xa0:
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}
