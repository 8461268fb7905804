package bench

import (
	"context"
	"fmt"
	"time"

	"weft.dev/weft/api"
	"weft.dev/weft/event"
	"weft.dev/weft/host"
	"weft.dev/weft/store/record"
)

// runStartResult is what measureRunStart measured.
type runStartResult struct {
	events int64 // events in the long session
	// cold is the first run after a host loaded the long session, which
	// had been run before: its log has the transcript snapshot weft keeps
	// and the events after it. coldLog is the first run of all, which
	// loads a log written to the store directly: no snapshot, the whole
	// log to read.
	cold, coldLog time.Duration
	long, empty   samples // later runs: the long session, a new one
}

// measureRunStart measures how long a run takes to reach its model: from
// the StartRun call to the model's Stream call, in a warm host on SQLite
// (dir), in a session of about n events (prefill) and, alternately, in a
// new session. Every run completes before the next starts. The first run
// of the long session loads a log that weft did not write (no snapshot):
// coldLog. Then come the runs measured warm; then the host closes and a
// new host on the same store runs the long session once more: cold, the
// first run after a load as a session weft has run sees it.
func measureRunStart(ctx context.Context, dir string, n, runs int) (*runStartResult, error) {
	ih, err := openHost(ctx, dir, host.Config{}, 1)
	if err != nil {
		return nil, err
	}
	defer func() { ih.Close() }()
	const longID = "ses_long"
	if err := prefill(ctx, ih.st, longID, n); err != nil {
		return nil, err
	}
	s, err := ih.h.CreateSession(ctx, api.CreateSessionParams{Title: "empty", Model: "scripted:hello"})
	if err != nil {
		return nil, err
	}
	res := &runStartResult{}
	start := func(id string) (time.Duration, error) {
		select {
		case <-ih.hello.called: // a stale stamp
		default:
		}
		t0 := time.Now()
		r, err := ih.h.StartRun(ctx, api.StartRunParams{SessionID: id, Input: api.Input(event.TextParts("Say hello.")), Busy: api.BusyQueue})
		if err != nil {
			return 0, err
		}
		var d time.Duration
		select {
		case t := <-ih.hello.called:
			d = t.Sub(t0)
		case <-time.After(time.Minute):
			return 0, fmt.Errorf("run %s did not call its model in a minute", r.ID)
		case <-ctx.Done():
			return 0, ctx.Err()
		}
		w, err := ih.h.WaitRun(ctx, api.WaitRunParams{RunID: r.ID, TimeoutMs: 60_000})
		if err != nil {
			return 0, err
		}
		if w.Run.Status != record.RunCompleted {
			return 0, fmt.Errorf("run %s ended %s", r.ID, w.Run.Status)
		}
		return d, nil
	}
	if res.coldLog, err = start(longID); err != nil {
		return nil, err
	}
	if _, err := start(s.Session.ID); err != nil { // warm the empty session too
		return nil, err
	}
	for range runs {
		d, err := start(longID)
		if err != nil {
			return nil, err
		}
		res.long = append(res.long, d)
		if d, err = start(s.Session.ID); err != nil {
			return nil, err
		}
		res.empty = append(res.empty, d)
	}
	// A new host on the same store (closing the old one stores the
	// snapshots that are due), which has run the empty session once.
	if err := ih.h.Close(); err != nil {
		return nil, err
	}
	fresh, err := newHost(ctx, ih.st, dir, host.Config{}, 1)
	if err != nil {
		return nil, err
	}
	ih = fresh
	if _, err := start(s.Session.ID); err != nil {
		return nil, err
	}
	if res.cold, err = start(longID); err != nil {
		return nil, err
	}
	got, err := ih.h.GetSession(ctx, api.SessionGetParams{SessionID: longID})
	if err != nil {
		return nil, err
	}
	res.events = got.Session.LastSeq
	return res, nil
}

func runRunStart(ctx context.Context, r *runner) error {
	name := fmt.Sprintf("run start, %s-event session", fmtInt(float64(r.sz.historyEvents)))
	dir, err := r.tempDir("run-start")
	if err != nil {
		return err
	}
	res, err := measureRunStart(ctx, dir, r.sz.historyEvents, r.sz.runStarts)
	if err != nil {
		return err
	}
	p50, p99 := res.long.median(), res.long.quantile(0.99)
	r.add(Result{
		Name:    name,
		Result:  fmt.Sprintf("p50 %s, p99 %s (new session p50 %s, p99 %s)", fmtDur(p50), fmtDur(p99), fmtDur(res.empty.median()), fmtDur(res.empty.quantile(0.99))),
		Target:  "≤ 5 ms p99",
		Verdict: verdict(p99 <= 5*time.Millisecond),
		Note:    fmt.Sprintf("run/start call → model called, in process on SQLite; %d runs of the loaded %d-event session alternating with runs of a new session", len(res.long), res.events),
		Values: map[string]float64{"p50_ms": ms(p50), "p99_ms": ms(p99), "empty_p50_ms": ms(res.empty.median()),
			"empty_p99_ms": ms(res.empty.quantile(0.99)), "events": float64(res.events)},
	})
	r.add(Result{
		Name:    "first run after loading it",
		Result:  fmt.Sprintf("%s (a log with no snapshot: %s)", fmtDur(res.cold), fmtDur(res.coldLog)),
		Target:  "≤ 20 ms",
		Verdict: verdict(res.cold <= 20*time.Millisecond),
		Note: "run/start call → model called in the long session on a new host over the same store: its transcript from the snapshot weft " +
			"keeps and the log after it; in brackets the first run of all, of a log written to the store directly (no snapshot: the whole log is read)",
		Values: map[string]float64{"cold_ms": ms(res.cold), "cold_no_snapshot_ms": ms(res.coldLog)},
	})
	r.addPlot("run-start", "Run start: run/start to the model call", series{"long session", res.long}, series{"new session", res.empty})
	return nil
}
