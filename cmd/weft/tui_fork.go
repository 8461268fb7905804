package main

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	tea "charm.land/bubbletea/v2"

	"weft.dev/weft/api"
	"weft.dev/weft/event"
	"weft.dev/weft/store/record"
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

// rewound is one rewind of the session: it undid the events in (to, at).
type rewound struct{ to, at int64 }

// sawRewind remembers a session.rewound and, unless it is replayed,
// says what it did.
func (t *tui) sawRewind(e event.Event, replay bool) {
	var d event.SessionRewoundData
	if e.Decode(&d) != nil {
		return
	}
	t.rewinds = append(t.rewinds, rewound{to: d.ToSeq, at: e.Seq})
	if replay {
		return
	}
	what := "the conversation"
	if d.Files {
		what = "the conversation and the files"
	}
	t.info(fmt.Sprintf("rewound %s to event %d: the next run goes on from there (the transcript above still shows what came after)", what, d.ToSeq))
}

// undo rewinds the session's last run that no rewind undid yet, files
// included.
func (t *tui) undo() tea.Cmd {
	if t.sessionID == "" {
		t.notice("weft: /undo: no session yet", true)
		return nil
	}
	if t.run != nil {
		t.notice("weft: /undo: a run goes; cancel it first (/cancel)", true)
		return nil
	}
	sid, rewinds := t.sessionID, slices.Clone(t.rewinds)
	fail := func(err error) tea.Msg { return infoMsg{err: rewindErr(sid, err)} }
	return t.call(func(ctx context.Context, h api.Host) tea.Msg {
		runs, err := h.ListRuns(ctx, api.ListRunsParams{SessionID: sid})
		if err != nil {
			return fail(err)
		}
		var last *record.Run
		for i := range runs.Runs {
			r := &runs.Runs[i]
			if undoneRun(r.FirstSeq, rewinds) || last != nil && r.FirstSeq < last.FirstSeq {
				continue
			}
			last = r
		}
		if last == nil {
			return infoMsg{text: "nothing to undo: no run in this session (or all undone)"}
		}
		res, err := h.RewindSession(ctx, api.RewindParams{SessionID: sid, ToSeq: last.FirstSeq - 1, Files: true})
		if err != nil {
			return fail(err)
		}
		return infoMsg{text: fmt.Sprintf("undid run %s: %d paths of the mounts put back", last.ID, res.RestoredCount)}
	}, fail)
}

// undoneRun reports whether a run that started at first was undone.
func undoneRun(first int64, rewinds []rewound) bool {
	for _, r := range rewinds {
		if r.to < first && first < r.at {
			return true
		}
	}
	return false
}
