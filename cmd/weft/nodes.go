package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"weft.dev/weft/store/postgres"
)

// nodesCmd lists the hosts that hold session leases in a PostgreSQL
// store, read from its leases table, with each host's queued runs and
// the state of River's wake-up jobs.
type nodesCmd struct {
	Sessions bool `name:"sessions" short:"s" help:"List each host's sessions too."`
	Expired  bool `name:"expired" help:"Include expired and released leases."`
	JSON     bool `name:"json" help:"Print each lease as one JSON line."`
}

// leaseJSON is one lease as --json prints it.
type leaseJSON struct {
	SessionID   string  `json:"sessionId"`
	Holder      string  `json:"holder"`
	Epoch       int64   `json:"epoch"`
	AgeSeconds  float64 `json:"ageSeconds"`
	ExpiresInMs int64   `json:"expiresInMs"`
}

func (c *nodesCmd) Run(ctx context.Context, a *app) error {
	cfg, _, err := a.loadConfig()
	if err != nil {
		return err
	}
	loc, err := a.storeLocation(cfg)
	if err != nil {
		return err
	}
	if loc.url == "" {
		return fmt.Errorf("%s is a SQLite store, served by one host on one machine; weft nodes lists the hosts of a PostgreSQL store (--store postgres://…)", loc.name)
	}
	st, err := postgres.Open(ctx, postgres.Config{URL: loc.url})
	if err != nil {
		return err
	}
	defer st.Close()
	leases, err := st.ListLeases(ctx, postgres.ListLeasesParams{Expired: c.Expired})
	if err != nil {
		return err
	}
	if c.JSON {
		enc := json.NewEncoder(a.stdout)
		for _, l := range leases {
			enc.Encode(leaseJSON{SessionID: l.SessionID, Holder: l.Holder, Epoch: l.Epoch,
				AgeSeconds: l.Age.Round(time.Millisecond).Seconds(), ExpiresInMs: l.ExpiresIn.Milliseconds()})
		}
		return nil
	}
	ds, err := st.DispatchState(ctx)
	if err != nil {
		return err
	}
	defer printDispatch(a, ds)
	if len(leases) == 0 {
		fmt.Fprintf(a.stdout, "%s: no host holds a session lease\n", loc.name)
		return nil
	}
	tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "HOLDER\tSESSIONS\tQUEUED\tOLDEST LEASE\tNEWEST LEASE")
	for i := 0; i < len(leases); {
		j := i
		for j < len(leases) && leases[j].Holder == leases[i].Holder {
			j++
		}
		group := leases[i:j] // oldest first
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\n", group[0].Holder, len(group), ds.Queued[group[0].Holder], leaseAge(group[0].Age), leaseAge(group[len(group)-1].Age))
		if c.Sessions {
			for _, l := range group {
				left := "expires in " + leaseAge(l.ExpiresIn)
				if l.ExpiresIn <= 0 {
					left = "expired " + leaseAge(-l.ExpiresIn) + " ago"
				}
				fmt.Fprintf(tw, "  %s\tepoch %d\t\t%s\t%s\n", l.SessionID, l.Epoch, leaseAge(l.Age), left)
			}
		}
		i = j
	}
	return tw.Flush()
}

// leaseAge prints a duration to the tenth of a second below a minute, to the
// second above.
func leaseAge(d time.Duration) string {
	if d < time.Minute {
		return d.Round(100 * time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}

// printDispatch prints the queued runs no live host holds and the state
// of River's wake-up jobs.
func printDispatch(a *app, ds postgres.DispatchState) {
	if n := ds.Queued[""]; n > 0 {
		fmt.Fprintf(a.stdout, "queued runs of sessions no live host holds: %d (their jobs wake a host)\n", n)
	}
	leader := ds.Leader
	if leader == "" {
		leader = "none"
	}
	var states []string
	for _, s := range []string{"available", "running", "scheduled", "retryable", "completed", "discarded", "cancelled", "pending"} {
		if n := ds.Jobs[s]; n > 0 {
			states = append(states, fmt.Sprintf("%s %d", s, n))
		}
	}
	if len(states) == 0 {
		states = []string{"none"}
	}
	fmt.Fprintf(a.stdout, "River: leader %s; wake-up jobs: %s\n", leader, strings.Join(states, ", "))
}
