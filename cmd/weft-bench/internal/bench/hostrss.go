package bench

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"weft.dev/weft/client"
)

// benchToken is the bearer token of the `weft serve` children.
const benchToken = "weft-bench-token"

// weftServe is a `weft serve` child on a loopback port, and a WebSocket
// client connected to it.
type weftServe struct {
	ch *child
	c  *client.Client
}

// startWeftServe starts `weft serve` in dir and connects to it, waiting up
// to 30 s for it to listen.
func (r *runner) startWeftServe(ctx context.Context, dir string) (*weftServe, error) {
	env, err := r.weftEnv(dir)
	if err != nil {
		return nil, err
	}
	addr, err := freePort()
	if err != nil {
		return nil, err
	}
	env = append(env, "WEFT_TOKEN="+benchToken)
	ch, err := startChild(command(ctx, env, filepath.Join(dir, "work"), r.cfg.Weft, "serve", "--listen", addr))
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := client.Dial(ctx, addr, client.Options{Token: benchToken})
		if err == nil {
			return &weftServe{ch: ch, c: c}, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			ch.Stop()
			return nil, ch.errorf("weft serve did not listen on %s in 30 s: %v", addr, err)
		}
		if _, merr := readMem(ch.pid()); merr != nil { // gone, or a zombie
			ch.Stop()
			return nil, ch.errorf("weft serve exited: %v", err)
		}
		select {
		case <-time.After(20 * time.Millisecond):
		case <-ctx.Done():
		}
	}
}

func (s *weftServe) Close() {
	s.c.Close()
	s.ch.Stop()
}

// hostRSSResult is what measureHostRSS measured.
type hostRSSResult struct {
	first, last memStat // after rssFirst and after rssLast turns, at once
	// firstIdle and lastIdle are the same readings after an idle pause:
	// what a user sees of a host that has done nothing for a while.
	firstIdle, lastIdle memStat
	firstN, lastN       int
	cpu                 time.Duration // the host's CPU over the turns after the first reading
	lat                 samples
	sessions            float64
}

// measureHostRSS drives turns through a `weft serve` child, one session
// per perSession turns, each turn run/start and the session's events up
// to run.completed over one WebSocket connection, and reads the host's
// memory (/proc/PID/status) after first and after last turns: at once,
// then after idle with no request (its CPU figure leaves the pause out).
func (r *runner) measureHostRSS(ctx context.Context, dir string, first, last, perSession int, idle time.Duration) (*hostRSSResult, error) {
	srv, err := r.startWeftServe(ctx, dir)
	if err != nil {
		return nil, err
	}
	defer srv.Close()
	res := &hostRSSResult{firstN: first, lastN: last}
	var s *weftSession
	defer func() {
		if s != nil {
			s.close()
		}
	}()
	var cpu0 time.Duration
	for i := range last {
		if i%perSession == 0 {
			if s != nil {
				s.close()
			}
			if s, err = openSession(ctx, srv.c); err != nil {
				return nil, srv.ch.errorf("weft serve: %v", err)
			}
			res.sessions++
		}
		d, err := s.turn(ctx)
		if err != nil {
			return nil, srv.ch.errorf("weft serve: turn %d: %v", i+1, err)
		}
		res.lat = append(res.lat, d)
		if i+1 == first {
			if res.first, err = readMem(srv.ch.pid()); err != nil {
				return nil, err
			}
			if res.firstIdle, err = idleMem(ctx, srv.ch.pid(), idle); err != nil {
				return nil, err
			}
			if cpu0, err = treeCPU(srv.ch.pid()); err != nil {
				return nil, err
			}
		}
	}
	if res.last, err = readMem(srv.ch.pid()); err != nil {
		return nil, err
	}
	cpu1, err := treeCPU(srv.ch.pid())
	if err != nil {
		return nil, err
	}
	res.cpu = cpu1 - cpu0
	if res.lastIdle, err = idleMem(ctx, srv.ch.pid(), idle); err != nil {
		return nil, err
	}
	return res, nil
}

// idleMem reads the memory of process pid after d with no request.
func idleMem(ctx context.Context, pid int, d time.Duration) (memStat, error) {
	select {
	case <-time.After(d):
	case <-ctx.Done():
		return memStat{}, ctx.Err()
	}
	return readMem(pid)
}

func runHostRSS(ctx context.Context, r *runner) error {
	name := fmt.Sprintf("host RSS after %s turns vs %s", fmtInt(float64(r.sz.rssLast)), fmtInt(float64(r.sz.rssFirst)))
	const target = "≤ +10 %"
	if why := r.needWeft(); why != "" {
		r.skip(name, target, why)
		return nil
	}
	dir, err := r.tempDir("host-rss")
	if err != nil {
		return err
	}
	res, err := r.measureHostRSS(ctx, dir, r.sz.rssFirst, r.sz.rssLast, r.sz.rssPerSession, r.sz.rssIdle)
	if err != nil {
		return err
	}
	growth := float64(res.last.RSS)/float64(res.first.RSS) - 1
	idleGrowth := float64(res.lastIdle.RSS)/float64(res.firstIdle.RSS) - 1
	r.add(Result{
		Name: name,
		Result: fmt.Sprintf("%s → %s (%+.1f %%); anon %s → %s, file-backed %s → %s", fmtMB(float64(res.first.RSS)), fmtMB(float64(res.last.RSS)), growth*100,
			fmtMB(float64(res.first.Anon)), fmtMB(float64(res.last.Anon)), fmtMB(float64(res.first.File)), fmtMB(float64(res.last.File))),
		Target:  target,
		Verdict: verdict(growth <= 0.10),
		Note: fmt.Sprintf("`weft serve` child, turns over one WebSocket, a new session every %d turns (%.0f sessions), read at once after the turns; at the end anon %s, file-backed %s, peak %s; idle for %s before each reading: %s → %s (%+.1f %%), anon %s → %s; host CPU %s a turn, turn p50 %s",
			r.sz.rssPerSession, res.sessions, fmtMB(float64(res.last.Anon)), fmtMB(float64(res.last.File)), fmtMB(float64(res.last.HWM)),
			r.sz.rssIdle, fmtMB(float64(res.firstIdle.RSS)), fmtMB(float64(res.lastIdle.RSS)), idleGrowth*100,
			fmtMB(float64(res.firstIdle.Anon)), fmtMB(float64(res.lastIdle.Anon)),
			fmtDur(res.cpu/time.Duration(max(res.lastN-res.firstN, 1))), fmtDur(res.lat.median())),
		Values: map[string]float64{"rss_first_bytes": float64(res.first.RSS), "rss_last_bytes": float64(res.last.RSS),
			"growth": growth, "anon_first_bytes": float64(res.first.Anon), "anon_last_bytes": float64(res.last.Anon),
			"file_first_bytes": float64(res.first.File), "file_last_bytes": float64(res.last.File), "hwm_bytes": float64(res.last.HWM),
			"idle_rss_first_bytes": float64(res.firstIdle.RSS), "idle_rss_last_bytes": float64(res.lastIdle.RSS), "idle_growth": idleGrowth,
			"cpu_ms_per_turn": ms(res.cpu) / float64(max(res.lastN-res.firstN, 1))},
	})
	return nil
}
