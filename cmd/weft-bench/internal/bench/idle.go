package bench

import (
	"context"
	"fmt"
	"runtime"
	"runtime/debug"
	"time"

	"weft.dev/weft/api"
	"weft.dev/weft/host"
)

// idleResult is what measureIdleSessions measured.
type idleResult struct {
	sessions      int
	before, after memStat // this process, after a GC that returns free memory
	goroutines    int     // added by the sessions
	create        time.Duration
}

// measureIdleSessions creates n sessions in a host in this process
// (SQLite in dir, leases under it, the host's defaults: it keeps the 512
// it used last loaded and unloads the others once idle) and reads this
// process's memory before and after, each time after a garbage
// collection that returns free memory to the system.
func measureIdleSessions(ctx context.Context, dir string, n int) (*idleResult, error) {
	settle := func() (memStat, error) {
		runtime.GC()
		debug.FreeOSMemory()
		return readMem(0)
	}
	ih, err := openHost(ctx, dir, host.Config{}, 1)
	if err != nil {
		return nil, err
	}
	defer ih.Close()
	res := &idleResult{sessions: n}
	if res.before, err = settle(); err != nil {
		return nil, err
	}
	g0 := runtime.NumGoroutine()
	t0 := time.Now()
	for i := range n {
		if _, err := ih.h.CreateSession(ctx, api.CreateSessionParams{Title: fmt.Sprintf("idle %d", i), Model: "scripted:hello"}); err != nil {
			return nil, fmt.Errorf("session %d: %w", i, err)
		}
	}
	res.create = time.Since(t0)
	res.goroutines = runtime.NumGoroutine() - g0
	if res.after, err = settle(); err != nil {
		return nil, err
	}
	return res, nil
}

func runIdleSessions(ctx context.Context, r *runner) error {
	name := fmt.Sprintf("%s idle sessions, RSS", fmtInt(float64(r.sz.idleSessions)))
	const target = "≤ 200 MB"
	dir, err := r.tempDir("idle")
	if err != nil {
		return err
	}
	res, err := measureIdleSessions(ctx, dir, r.sz.idleSessions)
	if err != nil {
		return err
	}
	grow := float64(res.after.RSS - res.before.RSS)
	r.add(Result{
		Name: name,
		Result: fmt.Sprintf("%s (+%s: %s a session, %.1f goroutines a session)", fmtMB(float64(res.after.RSS)), fmtMB(grow),
			sig3(grow/float64(res.sessions)/1e3)+" kB", float64(res.goroutines)/float64(res.sessions)),
		Target:  target,
		Verdict: verdict(res.after.RSS <= 200e6),
		Note: fmt.Sprintf("in this process: a host on SQLite with its default MaxLoadedSessions (512 stay loaded, the least recently used idle ones unload), RSS after a GC; before the sessions %s (the bench's own); created at %s sessions/s",
			fmtMB(float64(res.before.RSS)), fmtInt(float64(res.sessions)/res.create.Seconds())),
		Values: map[string]float64{"rss_bytes": float64(res.after.RSS), "rss_before_bytes": float64(res.before.RSS),
			"bytes_per_session": grow / float64(res.sessions), "goroutines_per_session": float64(res.goroutines) / float64(res.sessions)},
	})
	return nil
}
