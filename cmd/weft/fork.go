package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"weft.dev/weft/api"
)

// forkCmd is `weft fork SESSION [--at SEQ]`: session/fork through the
// host, or a host in this process.
type forkCmd struct {
	ID    string  `arg:"" name:"session" help:"The session to fork."`
	At    int64   `name:"at" placeholder:"SEQ" help:"The last event of the session the fork keeps (default: its last; a seq inside a step moves back to the step's start)."`
	Title *string `help:"The fork's title (default: the session's)."`
	JSON  bool    `name:"json" help:"Print the result as JSON."`
}

func (c *forkCmd) Run(ctx context.Context, a *app) error {
	const name = "weft fork"
	conn, ctx, err := a.connectAny(ctx, name)
	if err != nil {
		return err
	}
	defer conn.Close()
	f, err := conn.h.ForkSession(ctx, api.ForkSessionParams{SessionID: c.ID, AtSeq: c.At, Title: c.Title})
	var ae *api.Error
	if errors.As(err, &ae) && ae.Kind == api.KindCursorInvalid {
		return fmt.Errorf("session %s has no event %d: its last is %v (see weft events %s)", c.ID, c.At, ae.Data["lastSeq"], c.ID)
	}
	if err != nil {
		return sessionErr(c.ID, err)
	}
	if c.JSON {
		return printJSON(a, f)
	}
	fmt.Fprintf(a.stdout, "%s  a fork of %s at event %d\n", f.Session.ID, c.ID, f.AtSeq)
	if len(f.SharedMounts) > 0 {
		fmt.Fprintf(a.stderr, "weft: the fork shares the read-write mounts %s with %s: a write or a rewind of files in one changes the other's\n",
			strings.Join(f.SharedMounts, ", "), c.ID)
	}
	return nil
}

// rewindCmd is `weft rewind SESSION --to SEQ [--files]`: session/rewind
// through the host, or a host in this process.
type rewindCmd struct {
	ID    string `arg:"" name:"session" help:"The session to rewind."`
	To    int64  `name:"to" required:"" placeholder:"SEQ" help:"The event to go back to: later runs see the conversation as it was after it (a seq inside a step moves back to the step's start)."`
	Files bool   `help:"Put the read-write mounts' files back as they were then too (what file tools and shell commands changed)."`
	JSON  bool   `name:"json" help:"Print the result as JSON."`
}

func (c *rewindCmd) Run(ctx context.Context, a *app) error {
	const name = "weft rewind"
	conn, ctx, err := a.connectAny(ctx, name)
	if err != nil {
		return err
	}
	defer conn.Close()
	r, err := conn.h.RewindSession(ctx, api.RewindParams{SessionID: c.ID, ToSeq: c.To, Files: c.Files})
	if err != nil {
		return rewindErr(c.ID, err)
	}
	if c.JSON {
		return printJSON(a, r)
	}
	what := "the conversation"
	if c.Files {
		what = fmt.Sprintf("the conversation and %d paths of the mounts", r.RestoredCount)
	}
	fmt.Fprintf(a.stdout, "rewound %s of %s to event %d\n", what, c.ID, r.ToSeq)
	for _, p := range r.Restored {
		fmt.Fprintf(a.stdout, "  %s\n", p)
	}
	return nil
}

// rewindErr says what a refused rewind means for the user.
func rewindErr(id string, err error) error {
	var ae *api.Error
	if errors.As(err, &ae) && ae.Kind == api.KindRunConflict {
		return fmt.Errorf("session %s has a run going: cancel it or wait for it first", id)
	}
	if errors.As(err, &ae) && (ae.Kind == api.KindCursorInvalid || ae.Kind == api.KindEnvironmentUnavailable) {
		return fmt.Errorf("cannot rewind session %s: %s", id, ae.Message)
	}
	return sessionErr(id, err)
}
