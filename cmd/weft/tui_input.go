package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	tea "charm.land/bubbletea/v2"

	"weft.dev/weft/api"
	"weft.dev/weft/event"
)

// key handles a key press.
func (t *tui) key(msg tea.KeyPressMsg) tea.Cmd {
	s := msg.String()
	if s != "ctrl+c" {
		t.armed = false
	}
	switch s {
	case "ctrl+c":
		return t.interrupt()
	case "ctrl+o":
		t.expanded = !t.expanded
		return nil
	case "pgup":
		t.scrollBy(max(1, t.transcriptHeight()-2))
		return nil
	case "pgdown":
		t.scrollBy(-max(1, t.transcriptHeight()-2))
		return nil
	case "ctrl+l":
		return tea.ClearScreen
	}
	if t.picker != nil {
		return t.pickerKey(msg)
	}
	if t.ask != nil {
		ans, cmd := t.ask.key(msg)
		if ans != nil {
			return t.answer(t.ask.p, *ans)
		}
		return cmd
	}
	switch s {
	case "ctrl+d":
		if t.in.Value() == "" {
			t.quitting = true
			return tea.Quit
		}
	case "enter":
		return t.submit("")
	case "tab":
		return t.submit(api.BusyQueue)
	case "up":
		if t.in.Line() == 0 && t.browse(-1) {
			return nil
		}
	case "down":
		if t.in.Line() == t.in.LineCount()-1 && t.browse(1) {
			return nil
		}
	case "esc":
		t.scroll = 0
		return nil
	}
	var cmd tea.Cmd
	t.in, cmd = t.in.Update(msg)
	if msg.Text != "" {
		t.typedAt = time.Now()
	}
	return cmd
}

// browse moves through the history of prompts: dir -1 back, 1 forward.
// It reports whether it moved.
func (t *tui) browse(dir int) bool {
	next := t.hpos + dir
	if next < 0 || next > len(t.history) {
		return false
	}
	if t.hpos == len(t.history) {
		t.draft = t.in.Value()
	}
	t.hpos = next
	if next == len(t.history) {
		t.in.SetValue(t.draft)
	} else {
		t.in.SetValue(t.history[next])
	}
	return true
}

// remember adds a prompt to the history (not twice in a row).
func (t *tui) remember(s string) {
	if strings.TrimSpace(s) != "" && (len(t.history) == 0 || t.history[len(t.history)-1] != s) {
		t.history = append(t.history, s)
	}
	t.hpos = len(t.history)
}

// interrupt handles Ctrl-C: it cancels the run that goes (in `weft
// attach`, it detaches), else clears the prompt, else (twice) exits.
func (t *tui) interrupt() tea.Cmd {
	if t.picker != nil {
		t.picker = nil
		return nil
	}
	if t.run != nil && t.opt.chat == nil {
		t.detached = true
		t.quitting = true
		return tea.Quit
	}
	if t.run != nil {
		if t.run.cancelling {
			t.notice("weft: cancelling…", false)
			return nil
		}
		t.run.cancelling = true
		t.ask = nil
		t.notice("weft: cancelling the run…", false)
		id := t.run.id
		return t.call(func(ctx context.Context, h api.Host) tea.Msg {
			_, err := h.CancelRun(ctx, api.CancelParams{RunID: id, Reason: "interrupted by the user"})
			if err != nil {
				return infoMsg{err: fmt.Errorf("cancel: %w", err)}
			}
			return nil
		}, func(err error) tea.Msg { return infoMsg{err: fmt.Errorf("cancel: %w", err)} })
	}
	if t.in.Value() != "" {
		t.in.Reset()
		t.hpos = len(t.history)
		return nil
	}
	if t.armed {
		t.quitting = true
		return tea.Quit
	}
	t.armed = true
	t.notice("(Ctrl-C again, or Ctrl-D, exits)", false)
	return nil
}

// submit sends what the prompt holds: a /command, or a prompt. busy is
// how a prompt goes while a run is active: "" steers it (Enter), queue
// makes it the next run (Tab).
func (t *tui) submit(busy string) tea.Cmd {
	text := strings.TrimSpace(t.in.Value())
	if text == "" {
		return nil
	}
	t.in.Reset()
	t.typedAt = time.Time{}
	t.scroll = 0
	if strings.HasPrefix(text, "/") && !strings.Contains(text, "\n") {
		t.remember(text)
		return t.command(text)
	}
	t.remember(text)
	how := "run"
	switch {
	case t.run != nil && busy == api.BusyQueue:
		how = "queue"
	case t.run != nil:
		how = "steer"
	}
	in := &sentInput{text: text, how: how}
	t.sent = append(t.sent, in)
	if t.sessionID == "" {
		if t.creating {
			// The session is on its way: the prompt follows it.
			in.how = "queue"
			return nil
		}
		t.creating = true
		return t.createSession(in)
	}
	return t.start(in)
}

// createSession creates the session a first prompt starts.
func (t *tui) createSession(in *sentInput) tea.Cmd {
	mounts, err := parseMounts(t.mounts)
	if err != nil {
		t.creating = false
		t.sent = t.sent[:0]
		t.notice("weft: "+err.Error(), true)
		return nil
	}
	title := t.newTitle
	if title == "" {
		title = clip(in.text, 60)
	}
	p := api.CreateSessionParams{Title: title, Model: t.model, Mounts: mounts}
	if t.opt.chat != nil {
		p.Network = t.opt.chat.Network
	}
	fail := func(err error) tea.Msg { return createdMsg{err: err} }
	return t.call(func(ctx context.Context, h api.Host) tea.Msg {
		s, err := h.CreateSession(ctx, p)
		return createdMsg{s: s, err: err}
	}, fail)
}

// created follows the new session and starts the prompts that waited
// for it.
func (t *tui) created(msg createdMsg) tea.Cmd {
	t.creating = false
	if msg.err != nil {
		t.notice("weft: "+t.a.hostModelError(t.conn, withFlags("run", msg.err)).Error(), true)
		t.restoreSent()
		return nil
	}
	t.sessionID, t.title, t.replayTo, t.open = msg.s.ID, msg.s.Title, 0, nil
	t.fresh = &freshSession{id: msg.s.ID, mounts: t.mounts, newTitle: t.newTitle}
	t.mounts, t.newTitle = nil, ""
	if t.opt.chat != nil {
		t.mounts = t.opt.chat.Mount
	}
	t.follow(0)
	var cmds []tea.Cmd
	for i, in := range t.sent {
		if i > 0 {
			in.how = "queue"
		}
		cmds = append(cmds, t.start(in))
	}
	return tea.Sequence(cmds...)
}

// restoreSent puts the prompts that could not be sent back in the
// input.
func (t *tui) restoreSent() {
	var texts []string
	for _, in := range t.sent {
		texts = append(texts, in.text)
	}
	t.sent = nil
	if v := t.in.Value(); v != "" {
		texts = append(texts, v)
	}
	t.in.SetValue(strings.Join(texts, "\n"))
}

// start sends a prompt to the session: a run, the next run, or a steer
// of the active run.
func (t *tui) start(in *sentInput) tea.Cmd {
	busy := api.BusyQueue
	if in.how == "steer" {
		busy = api.BusySteer
	}
	p := api.StartRunParams{SessionID: t.sessionID, Input: api.Input(event.TextParts(in.text)), Model: t.model,
		Busy: busy, DefaultPreset: t.ap.defaultPreset()}
	if t.opt.chat != nil {
		p.MaxSteps = t.opt.chat.MaxSteps
	}
	fail := func(err error) tea.Msg { return startedMsg{in: in, err: err} }
	return t.call(func(ctx context.Context, h api.Host) tea.Msg {
		r, err := h.StartRun(ctx, p)
		return startedMsg{in: in, r: r, err: err}
	}, fail)
}

// started records the receipt of a prompt.
func (t *tui) started(msg startedMsg) tea.Cmd {
	in := msg.in
	if msg.err != nil {
		if !t.dropSent(in) {
			return nil // the session it was for is gone, its text restored
		}
		t.notice("weft: "+t.a.hostModelError(t.conn, withFlags("run", msg.err)).Error(), true)
		// Back in the input, before what was typed since.
		t.in.SetValue(strings.TrimSpace(in.text + "\n" + t.in.Value()))
		return t.discardFresh()
	}
	if f := t.fresh; f != nil && f.id == t.sessionID {
		t.fresh = nil
	}
	if msg.r.Steer != nil {
		in.how, in.steerID = "steer", msg.r.Steer.SteerID
		if t.steersSeen[in.steerID] {
			t.dropSent(in)
		}
		return nil
	}
	in.runID = msg.r.ID
	if in.how == "steer" {
		in.how = "run" // the run ended first: the input is a run of its own
	}
	if t.runsSeen[in.runID] {
		t.dropSent(in)
	}
	return nil
}

// discardFresh deletes the session shown if this UI created it and the
// host refused its first run, so that no empty session is left behind;
// the next prompt creates one again, with the mounts and title that
// were set for it.
func (t *tui) discardFresh() tea.Cmd {
	f := t.fresh
	// A prompt sent before it that started a run made it a session.
	if f == nil || f.id != t.sessionID || slices.ContainsFunc(t.sent, func(in *sentInput) bool { return in.runID != "" }) {
		return nil
	}
	t.fresh = nil
	if t.stopFollow != nil {
		t.stopFollow()
		t.stopFollow = nil
	}
	t.gen++
	t.sessionID, t.title = "", ""
	t.mounts, t.newTitle = f.mounts, f.newTitle
	t.restoreSent()
	return t.call(func(ctx context.Context, h api.Host) tea.Msg {
		discardSession(ctx, h, f.id)
		return nil
	}, func(error) tea.Msg { return nil })
}

// dropSent forgets in, sent and now seen (or refused); it reports
// whether in was still waiting.
func (t *tui) dropSent(in *sentInput) bool {
	for i, s := range t.sent {
		if s == in {
			t.sent = append(t.sent[:i], t.sent[i+1:]...)
			return true
		}
	}
	return false
}
