package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	tea "charm.land/bubbletea/v2"

	"weft.dev/weft/api"
)

// fork forks the current session at seq arg (its last event if empty)
// and continues in the fork.
func (t *tui) fork(arg string) tea.Cmd {
	if t.sessionID == "" {
		t.notice("weft: /fork: no session yet (your first prompt starts one)", true)
		return nil
	}
	var at int64
	if arg != "" {
		n, err := strconv.ParseInt(arg, 10, 64)
		if err != nil || n < 1 {
			t.notice("weft: /fork [SEQ]: SEQ is an event's number (weft events lists them)", true)
			return nil
		}
		at = n
	}
	sid := t.sessionID
	fail := func(err error) tea.Msg { return sessionMsg{err: sessionErr(sid, err)} }
	return t.call(func(ctx context.Context, h api.Host) tea.Msg {
		f, err := h.ForkSession(ctx, api.ForkSessionParams{SessionID: sid, AtSeq: at})
		if err != nil {
			return fail(err)
		}
		s := &api.SessionResult{Session: f.Session}
		return sessionMsg{s: s, open: map[string]bool{}, announce: true, note: forkNote(sid, f)}
	}, fail)
}

// forkNote says where a fork comes from and what it shares.
func forkNote(src string, f *api.ForkResult) string {
	note := fmt.Sprintf("forked %s at event %d: this is the fork", src, f.AtSeq)
	if len(f.SharedMounts) > 0 {
		note += fmt.Sprintf("; it shares the read-write mounts %s with %s (a write or a rewind of files in one changes the other's)",
			strings.Join(f.SharedMounts, ", "), src)
	}
	return note
}
