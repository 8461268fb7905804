package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"
)

// View draws the UI.
func (t *tui) View() tea.View {
	var v tea.View
	v.AltScreen = true
	v.MouseMode = tea.MouseModeCellMotion
	v.WindowTitle = "weft"
	if t.title != "" {
		v.WindowTitle = "weft · " + t.title
	}
	if t.width == 0 || t.height == 0 {
		return v
	}
	w := t.width
	var bottom []string
	// What was sent and not yet seen by the model.
	for _, in := range t.sent {
		what := "sending"
		switch {
		case in.how == "steer" && in.steerID != "":
			what = "steer (next step)"
		case in.how == "steer":
			what = "steering"
		case in.how == "queue":
			what = "queued as the next run"
		case in.runID != "":
			what = "starting"
		}
		bottom = append(bottom, t.th.notice.Render(clipWidth("⇢ "+what+": "+in.text, w)))
	}
	switch {
	case t.picker != nil:
		bottom = append(bottom, strings.Split(t.picker.view(t.th, w, t.sessionID), "\n")...)
	case t.ask != nil:
		bottom = append(bottom, strings.Split(t.ask.view(t.th, w), "\n")...)
	}
	bottom = append(bottom, t.statusLine(w))
	input := strings.Split(t.in.View(), "\n")
	if t.ask != nil || t.picker != nil {
		// The draft stays, dimmed, while a request or the picker has the keys.
		for i, l := range input {
			input[i] = t.th.dim.Render(ansi.Strip(l))
		}
	}
	bottom = append(bottom, input...)
	bottom = append(bottom, t.th.dim.Render(clipWidth(t.hints(), w)))
	h := max(0, t.height-len(bottom))
	if len(bottom) > t.height {
		bottom = bottom[len(bottom)-t.height:]
	}
	top := t.transcriptView(w, h)
	v.SetContent(strings.Join(append(top, bottom...), "\n"))
	return v
}

// transcriptHeight is the rows the transcript had at the last draw.
func (t *tui) transcriptHeight() int { return len(t.shown) }

// transcriptView is the transcript's last h rows (scrolled up by
// t.scroll), padded at the top.
func (t *tui) transcriptView(w, h int) []string {
	need := h + t.scroll
	var rows []string
	var owners []*item
	for i := len(t.tr.items) - 1; i >= 0 && len(rows) < need; i-- {
		it := t.tr.items[i]
		ls := it.lines(t.th, w, t.expanded)
		rows = append(append([]string(nil), ls...), rows...)
		own := make([]*item, len(ls))
		for j := range own {
			own[j] = it
		}
		owners = append(own, owners...)
	}
	if t.scroll > max(0, len(rows)-h) {
		t.scroll = max(0, len(rows)-h)
	}
	end := len(rows) - t.scroll
	start := max(0, end-h)
	rows, owners = rows[start:end], owners[start:end]
	if t.scroll > 0 && len(rows) > 0 {
		rows[len(rows)-1] = t.th.dim.Render(clipWidth(fmt.Sprintf("── %d lines below · PgDn or Esc returns ──", t.scroll), w))
	}
	for len(rows) < h {
		rows = append([]string{""}, rows...)
		owners = append([]*item{nil}, owners...)
	}
	t.shown = owners
	return rows
}

// statusLine says which model, what the run does, since when, the
// tokens used, and which session.
func (t *tui) statusLine(w int) string {
	model := t.model
	if t.runModel != "" {
		model = t.runModel
	}
	switch {
	case model == "":
		model = "default model"
	case strings.HasPrefix(model, "scripted:"):
		model = "scripted:" + filepath.Base(strings.TrimPrefix(model, "scripted:"))
	}
	parts := []string{model}
	if r := t.run; r != nil {
		phase := r.phase
		if r.step > 0 {
			phase = fmt.Sprintf("step %d: %s", r.step, phase)
		}
		if n := len(t.requests); n > 1 {
			phase = fmt.Sprintf("step %d: %d requests wait", r.step, n)
		}
		if r.cancelling {
			phase = "cancelling"
		}
		parts = append(parts, phase)
		if !r.started.IsZero() {
			parts = append(parts, time.Since(r.started).Truncate(time.Second).String())
		}
		parts = append(parts, compactCount(r.tokens)+" tokens")
		if r.cost > 0 {
			parts = append(parts, usd(r.cost))
		}
	} else if t.tokens > 0 {
		parts = append(parts, compactCount(t.tokens)+" tokens")
		if t.cost > 0 {
			parts = append(parts, usd(t.cost))
		}
	}
	switch {
	case t.sessionID == "":
		parts = append(parts, "new session")
	case t.title != "":
		parts = append(parts, clip(t.title, 40)+" ("+t.sessionID+")")
	default:
		parts = append(parts, t.sessionID)
	}
	return t.th.dim.Render(clipWidth("· "+strings.Join(parts, " · "), w))
}

// hints names the keys that do something now.
func (t *tui) hints() string {
	switch {
	case t.picker != nil:
		return "↑↓ choose · enter switches · esc closes"
	case t.ask != nil && t.ask.typing():
		return "enter answers · ctrl+c cancels the run"
	case t.ask != nil:
		return "one key answers · ctrl+c cancels the run · ctrl+o expands outputs"
	case t.run != nil && t.opt.chat == nil:
		return "enter steers · tab queues the next run · ctrl+c detaches · /cancel cancels the run · ctrl+o expands"
	case t.run != nil:
		return "enter steers the run · tab queues the next run · alt+enter newline · ctrl+c cancels · ctrl+o expands"
	}
	return "enter sends · alt+enter or ctrl+j newline · ↑ history · pgup scrolls · ctrl+o expands outputs · ctrl+d exits"
}
