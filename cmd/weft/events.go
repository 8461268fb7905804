package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"weft.dev/weft/api"
	"weft.dev/weft/store"
	"weft.dev/weft/store/record"
)

type eventsCmd struct {
	Session string `arg:"" help:"The session ID."`
	After   int64  `help:"Print events after this seq (a cursor)." placeholder:"N"`
	Follow  bool   `short:"f" help:"Keep printing events as other processes write them, until interrupted."`
	JSON    bool   `name:"json" help:"Print every event as one JSON line, exactly as stored."`
	RunID   string `name:"run" help:"Print only this run's events." placeholder:"RUN"`
}

func (c *eventsCmd) Run(ctx context.Context, a *app) error {
	cfg, _, err := a.loadConfig()
	if err != nil {
		return err
	}
	st, path, err := a.openStore(ctx, cfg)
	if err != nil {
		return err
	}
	defer st.Close()
	last, err := st.LastSeq(ctx, c.Session)
	if errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("session %s not found in %s (see `weft sessions`)", c.Session, path)
	} else if err != nil {
		return err
	}
	if c.After < 0 || c.After > last {
		return usageErr("--after %d: the session's last seq is %d", c.After, last)
	}
	ctx, cancel := a.interruptible(ctx)
	defer cancel()
	cursor := c.After
	// Polling the WAL database is cheap: a read that finds nothing new
	// touches one index page.
	const idle = 50 * time.Millisecond
	for {
		page, err := st.Read(ctx, store.ReadParams{SessionID: c.Session, After: cursor, Limit: 1000, RunID: c.RunID})
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		for _, e := range page {
			if c.JSON {
				b, _ := json.Marshal(e)
				fmt.Fprintf(a.stdout, "%s\n", b)
			} else {
				fmt.Fprintf(a.stdout, "%6d %s %-20s %s\n", e.Seq, e.Time.Local().Format("15:04:05.000"), e.Type, summary(e))
			}
			cursor = e.Seq
		}
		if len(page) == 1000 {
			continue
		}
		if !c.Follow {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(idle):
		}
	}
}

type sessionsCmd struct {
	List   sessionsListCmd   `cmd:"" default:"withargs" help:"List sessions, newest first (the default)."`
	Rm     sessionsRmCmd     `cmd:"" name:"rm" help:"Delete sessions: their logs, runs and scratch mounts (through the host, or a host in this process)."`
	Rename sessionsRenameCmd `cmd:"" help:"Give a session a new title (through the host, or a host in this process)."`
}

type sessionsListCmd struct {
	JSON  bool `name:"json" help:"Print each session as one JSON line."`
	Limit int  `default:"50" help:"Most sessions to list."`
}

type sessionsRmCmd struct {
	IDs []string `arg:"" name:"id" help:"The sessions to delete."`
}

func (c *sessionsRmCmd) Run(ctx context.Context, a *app) error {
	const name = "weft sessions rm"
	conn, ctx, err := a.connectAny(ctx, name)
	if err != nil {
		return err
	}
	defer conn.Close()
	var failed error
	for _, id := range c.IDs {
		_, err := conn.h.DeleteSession(ctx, api.SessionIDParams{SessionID: id})
		var ae *api.Error
		switch {
		case errors.As(err, &ae) && ae.Kind == api.KindRunConflict:
			run, _ := ae.Data["activeRunId"].(string)
			if run == "" {
				run = "RUN"
			}
			err = fmt.Errorf("session %s has a run going: cancel it first (weft cancel %s)", id, run)
		default:
			err = sessionErr(id, err)
		}
		if err != nil {
			fmt.Fprintln(a.stderr, "weft:", err)
			failed = &exitError{code: exitFailed}
			continue
		}
		fmt.Fprintf(a.stdout, "deleted %s\n", id)
	}
	return failed
}

type sessionsRenameCmd struct {
	ID    string `arg:"" name:"session" help:"The session."`
	Title string `arg:"" help:"The new title (empty clears it)."`
}

func (c *sessionsRenameCmd) Run(ctx context.Context, a *app) error {
	const name = "weft sessions rename"
	conn, ctx, err := a.connectAny(ctx, name)
	if err != nil {
		return err
	}
	defer conn.Close()
	s, err := conn.h.UpdateSession(ctx, api.UpdateSessionParams{SessionID: c.ID, Title: &c.Title})
	if err != nil {
		return sessionErr(c.ID, err)
	}
	fmt.Fprintf(a.stdout, "%s  %s\n", s.ID, s.Title)
	return nil
}

// sessionErr says what a refusal of a command on session id means for
// the user: an unknown session, a title over the limit.
func sessionErr(id string, err error) error {
	var ae *api.Error
	switch {
	case errors.As(err, &ae) && ae.Kind == api.KindNotFound:
		return fmt.Errorf("no session %s (see weft sessions)", id)
	case errors.As(err, &ae) && ae.Kind == api.KindInvalidParams && ae.Data["field"] == "title":
		return fmt.Errorf("the title is too long: at most %d bytes", api.MaxTitleBytes)
	}
	return err
}

func (c *sessionsListCmd) Run(ctx context.Context, a *app) error {
	cfg, _, err := a.loadConfig()
	if err != nil {
		return err
	}
	st, _, err := a.openStore(ctx, cfg)
	if err != nil {
		return err
	}
	defer st.Close()
	ss, err := st.Sessions(ctx, store.ListSessionsParams{Limit: c.Limit})
	if err != nil {
		return err
	}
	if c.JSON {
		for _, s := range ss {
			b, _ := json.Marshal(s)
			fmt.Fprintf(a.stdout, "%s\n", b)
		}
		return nil
	}
	for _, row := range sessionTree(ss) {
		s := row.s
		active := ""
		if s.ActiveRunID != "" {
			active = " active:" + s.ActiveRunID
		}
		fmt.Fprintf(a.stdout, "%s%s  %s  %5d events  %-22s %-28s %s%s\n", row.indent, s.ID, s.UpdatedAt.Local().Format("2006-01-02 15:04"), s.LastSeq,
			sessionSpend(s), s.Model, clip(s.Title, 50), active)
	}
	return nil
}

type sessionRow struct {
	s      record.Session
	indent string
}

// sessionTree orders ss (newest first) as a tree: a subagent's session
// follows its parent's, indented; one whose parent is not listed stands
// on its own.
func sessionTree(ss []record.Session) []sessionRow {
	listed := map[string]bool{}
	for _, s := range ss {
		listed[s.ID] = true
	}
	kids := map[string][]record.Session{}
	var top []record.Session
	for _, s := range ss {
		if s.Parent != nil && listed[s.Parent.SessionID] && s.Parent.SessionID != s.ID {
			kids[s.Parent.SessionID] = append(kids[s.Parent.SessionID], s)
		} else {
			top = append(top, s)
		}
	}
	var out []sessionRow
	var walk func(ss []record.Session, prefix string, depth int)
	walk = func(ss []record.Session, prefix string, depth int) {
		for i, s := range ss {
			indent, next := "", ""
			if depth > 0 {
				indent, next = prefix+"├─ ", prefix+"│  "
				if i == len(ss)-1 {
					indent, next = prefix+"└─ ", prefix+"   "
				}
			}
			out = append(out, sessionRow{s, indent})
			if depth < 8 {
				walk(kids[s.ID], next, depth+1)
			}
		}
	}
	walk(top, "", 0)
	return out
}
