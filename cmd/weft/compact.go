package main

import (
	"context"
	"errors"
	"fmt"

	"weft.dev/weft/api"
)

// compactCmd is weft compact SESSION: session/compact through the host
// (or a host in this process over the store).
type compactCmd struct {
	ID   string `arg:"" name:"session" help:"The session to compact."`
	JSON bool   `name:"json" help:"Print the result as JSON."`
}

func (c *compactCmd) Run(ctx context.Context, a *app) error {
	const name = "weft compact"
	conn, ctx, err := a.connectAny(ctx, name)
	if err != nil {
		return err
	}
	defer conn.Close()
	res, err := conn.h.CompactSession(ctx, api.CompactParams{SessionID: c.ID})
	if err != nil {
		return compactErr(c.ID, err)
	}
	if c.JSON {
		return printJSON(a, res)
	}
	fmt.Fprintf(a.stdout, "%s compacted through seq %d: about %d tokens → %d (context.compacted at seq %d)\n\n%s\n",
		res.SessionID, res.UpToSeq, res.TokensBefore, res.TokensAfter, res.Seq, res.Summary)
	return nil
}

// compactErr says what a refused compaction means for the user.
func compactErr(id string, err error) error {
	var ae *api.Error
	if errors.As(err, &ae) && ae.Kind == api.KindRunConflict {
		if run, _ := ae.Data["activeRunId"].(string); run != "" {
			return fmt.Errorf("session %s is busy with run %s, which compacts by itself when it needs to: compact once it has ended (or weft cancel %s)", id, run, run)
		}
	}
	return sessionErr(id, err)
}
