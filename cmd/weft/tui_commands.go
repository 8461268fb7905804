package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"

	tea "charm.land/bubbletea/v2"

	"weft.dev/weft/api"
	"weft.dev/weft/env"
	"weft.dev/weft/store/record"
)

const chatHelp = `a line that does not start with / is a prompt: the agent answers it in this session
  /new              start a new session with the next prompt
  /sessions         pick a session to continue (↑↓, Enter)
  /switch ID        continue session ID
  /mount PATH[:ro]  mount a directory (in a new session: from its first prompt)
  /rename TITLE     give the session a new title
  /history          the prompts of this session
  /fork [SEQ]       continue in a fork of this session: its history up to event SEQ (default: all of it)
  /undo             take back the last run: the conversation and what it changed in the mounts' files
  /cancel           cancel the run that goes
  /compact          compact the session's conversation now (a summary replaces what the next run sends)
  /help             this list
  /quit             exit (also Ctrl-D; Ctrl-C twice at an empty prompt)
keys: Enter sends; while a run goes, Enter steers it (the model reads it at its next step) and Tab queues it as the next run;
  Alt+Enter or Ctrl+J insert a newline; ↑ and ↓ recall earlier prompts; PgUp and PgDn (or the wheel) scroll;
  Ctrl+O shows or hides tool outputs and reasoning whole (a click on a call toggles it); Ctrl+C cancels the run.
  An approval takes one key: y allows the call once, a allows such calls for the session, n refuses it (with a message).`

// command runs a /command.
func (t *tui) command(line string) tea.Cmd {
	cmd, arg, _ := strings.Cut(line, " ")
	arg = strings.TrimSpace(arg)
	switch cmd {
	case "/help", "/?":
		t.info(chatHelp)
	case "/quit", "/exit", "/q":
		t.quitting = true
		return tea.Quit
	case "/new":
		if t.stopFollow != nil {
			t.stopFollow()
			t.stopFollow = nil
		}
		t.gen++
		t.sessionID, t.title, t.run, t.requests, t.ask, t.sent, t.prompts, t.runModel, t.tokens = "", "", nil, nil, nil, nil, nil, "", 0
		t.cost = 0
		t.in.Focus()
		t.mounts = nil
		if t.opt.chat != nil {
			t.mounts = t.opt.chat.Mount
		}
		t.info("a new session starts with your next prompt")
	case "/sessions":
		fail := func(err error) tea.Msg { return sessionsMsg{err: err} }
		return t.call(func(ctx context.Context, h api.Host) tea.Msg {
			res, err := h.ListSessions(ctx, api.ListSessionsParams{Limit: 50})
			if err != nil {
				return fail(err)
			}
			return sessionsMsg{list: res.Sessions}
		}, fail)
	case "/switch":
		if arg == "" {
			t.notice("weft: /switch ID: name a session (/sessions lists them)", true)
			return nil
		}
		return t.loadSession(arg, 0, true)
	case "/mount":
		return t.mount(arg)
	case "/rename":
		return t.rename(arg)
	case "/fork":
		return t.fork(arg)
	case "/undo":
		return t.undo()
	case "/history":
		if len(t.prompts) == 0 {
			t.info("no prompts in this session yet")
			return nil
		}
		var b strings.Builder
		for i, p := range t.prompts {
			fmt.Fprintf(&b, "%3d  %s\n", i+1, clip(p, 200))
		}
		t.info(strings.TrimSuffix(b.String(), "\n"))
	case "/cancel":
		if t.run == nil {
			t.info("no run goes in this session")
			return nil
		}
		chat := t.opt.chat
		t.opt.chat = &chatCmd{} // interrupt cancels, as in the chat
		c := t.interrupt()
		t.opt.chat = chat
		return c
	case "/compact":
		return t.compact()
	default:
		t.notice(fmt.Sprintf("weft: unknown command %s (/help lists them)", cmd), true)
	}
	return nil
}

// compact compacts the current session through the host (session/compact).
func (t *tui) compact() tea.Cmd {
	if t.sessionID == "" {
		t.info("no session yet: nothing to compact")
		return nil
	}
	if t.run != nil {
		t.info("a run goes: it compacts by itself between its steps when it needs to; /compact once it has ended")
		return nil
	}
	sid := t.sessionID
	fail := func(err error) tea.Msg { return infoMsg{err: compactErr(sid, err)} }
	return t.call(func(ctx context.Context, h api.Host) tea.Msg {
		r, err := h.CompactSession(ctx, api.CompactParams{SessionID: sid})
		if err != nil {
			return fail(err)
		}
		return infoMsg{text: fmt.Sprintf("compacted: about %d tokens → %d; the next run starts from this summary:\n%s",
			r.TokensBefore, r.TokensAfter, clip(r.Summary, 2000))}
	}, fail)
}

// mount mounts a directory: in the current session through the host, or
// in the session the next prompt creates.
func (t *tui) mount(spec string) tea.Cmd {
	if spec == "" {
		t.notice("weft: /mount PATH[:ro]: name a directory", true)
		return nil
	}
	if t.sessionID == "" {
		if _, err := parseMounts(append(t.mounts, spec)); err != nil {
			t.notice("weft: "+err.Error(), true)
			return nil
		}
		t.mounts = append(t.mounts, spec)
		t.info(spec + " will be mounted in the session your next prompt starts")
		return nil
	}
	mounts, err := parseMounts([]string{spec})
	if err != nil {
		t.notice("weft: "+err.Error(), true)
		return nil
	}
	m := mounts[len(mounts)-1] // after the working directory
	sid := t.sessionID
	fail := func(err error) tea.Msg { return infoMsg{err: withFlags("mount", err)} }
	return t.call(func(ctx context.Context, h api.Host) tea.Msg {
		r, err := h.Mount(ctx, api.MountParams{SessionID: sid, Mount: m})
		if err != nil {
			return fail(err)
		}
		return infoMsg{text: fmt.Sprintf("mounted %s at %s (%s)", filepath.Base(m.Path), env.Prefix+"/"+r.MountID, r.Mount.Mode)}
	}, fail)
}

// rename gives the current session a new title, or the session the
// next prompt creates its title.
func (t *tui) rename(title string) tea.Cmd {
	if title == "" {
		t.notice("weft: /rename TITLE: give the new title", true)
		return nil
	}
	if t.sessionID == "" {
		t.newTitle = title
		t.info(fmt.Sprintf("the session your next prompt starts will be called %q", title))
		return nil
	}
	sid := t.sessionID
	fail := func(err error) tea.Msg { return infoMsg{err: sessionErr(sid, err)} }
	return t.call(func(ctx context.Context, h api.Host) tea.Msg {
		s, err := h.UpdateSession(ctx, api.UpdateSessionParams{SessionID: sid, Title: &title})
		if err != nil {
			return fail(err)
		}
		return infoMsg{text: fmt.Sprintf("session %s: %s", s.ID, s.Title)}
	}, fail)
}

// picker lists sessions to continue one.
type picker struct {
	list []record.Session
	at   int
}

// pickerKey moves through the picker, or picks.
func (t *tui) pickerKey(msg tea.KeyPressMsg) tea.Cmd {
	pk := t.picker
	switch msg.String() {
	case "up", "k":
		pk.at = max(0, pk.at-1)
	case "down", "j":
		pk.at = min(len(pk.list)-1, pk.at+1)
	case "esc", "q":
		t.picker = nil
	case "enter":
		t.picker = nil
		return t.loadSession(pk.list[pk.at].ID, 0, true)
	}
	return nil
}

// view draws the picker: the sessions around the one chosen.
func (pk *picker) view(th theme, w int, current string) string {
	const rows = 8
	start := max(0, min(pk.at-rows/2, len(pk.list)-rows))
	var b strings.Builder
	b.WriteString(th.ask.Render(clipWidth("sessions (↑↓, Enter switches, Esc closes)", w)) + "\n")
	for i := start; i < min(len(pk.list), start+rows); i++ {
		s := pk.list[i]
		mark := "  "
		if s.ID == current {
			mark = "* "
		}
		line := fmt.Sprintf("%s%s  %s  %s", mark, s.ID, s.UpdatedAt.Local().Format("2006-01-02 15:04"), s.Title)
		if i == pk.at {
			b.WriteString(th.bold.Render(clipWidth("› "+line, w)) + "\n")
		} else {
			b.WriteString(clipWidth("  "+line, w) + "\n")
		}
	}
	return strings.TrimSuffix(b.String(), "\n")
}
