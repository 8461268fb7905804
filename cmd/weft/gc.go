package main

import (
	"context"
	"fmt"
	"time"

	"weft.dev/weft/api"
)

// gcCmd is weft gc: one retention pass (session/prune) through the host,
// or a host in this process over the store.
type gcCmd struct {
	DryRun bool `name:"dry-run" help:"List what the pass would purge and remove; remove nothing."`
	JSON   bool `name:"json" help:"Print the result as JSON."`
}

func (c *gcCmd) Run(ctx context.Context, a *app) error {
	conn, ctx, err := a.connectAny(ctx, "weft gc")
	if err != nil {
		return err
	}
	defer conn.Close()
	res, err := conn.h.PruneSessions(ctx, api.PruneParams{DryRun: c.DryRun})
	if err != nil {
		return fmt.Errorf("weft gc: %w", err)
	}
	if c.JSON {
		return printJSON(a, res)
	}
	printPrune(a, res)
	return nil
}

// printPrune prints a retention pass's result, a line per session, then
// the totals.
func printPrune(a *app, res *api.PruneResult) {
	verb, blobVerb := "purged", "removed"
	if res.DryRun {
		verb, blobVerb = "would purge", "would remove"
	}
	pol := res.Policy
	if pol == (api.RetentionPolicy{}) {
		fmt.Fprintln(a.stdout, "no retention policy (the config file's retention): no session is purged")
	}
	for _, s := range res.Purged {
		title := ""
		if s.Title != "" {
			title = fmt.Sprintf("  %q", s.Title)
		}
		fmt.Fprintf(a.stdout, "%s %s  %s  last event %s%s\n", verb, s.SessionID, s.Reason, s.LastAt.Local().Format(time.DateTime), title)
	}
	for _, s := range res.Skipped {
		fmt.Fprintf(a.stdout, "left %s  %s: %s\n", s.SessionID, s.Reason, s.Error)
	}
	if more := res.PurgedCount - len(res.Purged); more > 0 {
		fmt.Fprintf(a.stdout, "… and %d more\n", more)
	}
	fmt.Fprintf(a.stdout, "%s %d %s", verb, res.PurgedCount, sessionsWord(res.PurgedCount))
	if res.SkippedCount > 0 {
		fmt.Fprintf(a.stdout, ", left %d in use", res.SkippedCount)
	}
	if pol != (api.RetentionPolicy{}) {
		fmt.Fprintf(a.stdout, " (policy:%s)", policyText(pol))
	}
	fmt.Fprintln(a.stdout)
	if b := res.Blobs; b != nil {
		fmt.Fprintf(a.stdout, "checkpoint blobs: %s %d (%s), kept %d\n", blobVerb, b.Removed, byteSize(b.RemovedBytes), b.Kept)
		if b.Error != "" {
			fmt.Fprintf(a.stderr, "weft gc: the sweep of checkpoint blobs stopped: %s\n", b.Error)
		}
	}
}

func policyText(p api.RetentionPolicy) string {
	s := ""
	if p.MaxAge != "" {
		s += " maxAge " + p.MaxAge
	}
	if p.MaxSessions > 0 {
		s += fmt.Sprintf(" maxSessions %d", p.MaxSessions)
	}
	if p.DeletedAfter != "" {
		s += " deletedAfter " + p.DeletedAfter
	}
	return s
}

// byteSize writes n bytes as B, KiB, MiB or GiB.
func byteSize(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

func sessionsWord(n int) string {
	if n == 1 {
		return "session"
	}
	return "sessions"
}
