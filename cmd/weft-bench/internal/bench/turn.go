package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"weft.dev/weft/api"
	"weft.dev/weft/event"
	"weft.dev/weft/rpc"
)

// turnStats is what one side measured in a shape of warm turns.
type turnStats struct {
	lat   samples       // every timed turn's latency
	cpu   time.Duration // the server's CPU over the timed turns
	wall  time.Duration // the timed rounds' wall time
	turns int
}

func (t *turnStats) addRound(o turnStats) {
	t.lat = append(t.lat, o.lat...)
	t.cpu += o.cpu
	t.wall += o.wall
	t.turns += o.turns
}

func (t *turnStats) cpuPerTurn() time.Duration { return t.cpu / time.Duration(max(t.turns, 1)) }
func (t *turnStats) perSecond() float64        { return float64(t.turns) / t.wall.Seconds() }

// turnServer is one side of the comparison: a server child and how to run
// a turn on one of its sessions.
type turnServer interface {
	pid() int
	// open makes n sessions (threads) and warms each with a turn.
	open(ctx context.Context, n int) ([]func(context.Context) (time.Duration, error), error)
	Close()
}

// round runs turns turns on each session concurrently and measures the
// latencies, the wall time and the server's CPU (its process tree's).
func round(ctx context.Context, srv turnServer, sessions []func(context.Context) (time.Duration, error), turns int) (turnStats, error) {
	cpu0, err := treeCPU(srv.pid())
	if err != nil {
		return turnStats{}, err
	}
	var (
		mu   sync.Mutex
		st   turnStats
		errs = make([]error, len(sessions))
		wg   sync.WaitGroup
	)
	t0 := time.Now()
	for i, turn := range sessions {
		wg.Go(func() {
			for range turns {
				d, err := turn(ctx)
				if err != nil {
					errs[i] = err
					return
				}
				mu.Lock()
				st.lat = append(st.lat, d)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	st.wall = time.Since(t0)
	if err := errors.Join(errs...); err != nil {
		return turnStats{}, err
	}
	cpu1, err := treeCPU(srv.pid())
	if err != nil {
		return turnStats{}, err
	}
	st.cpu, st.turns = cpu1-cpu0, len(st.lat)
	return st, nil
}

// weftRPC is a `weft rpc` child driven over stdio by a [stdioServer],
// as codexServer drives `codex app-server`: a turn is run/start written
// to the events/event line of its run.completed read, on a session the
// connection subscribed to.
type weftRPC struct {
	*stdioServer

	mu   sync.Mutex
	ends map[string]chan runEnd // by session: its runs' terminal events
}

// runEnd is a run's terminal event and when its notification was read.
type runEnd struct {
	run, typ string
	data     json.RawMessage
	at       time.Time
}

func (r *runner) startWeftRPC(ctx context.Context, dir string) (*weftRPC, error) {
	env, err := r.weftEnv(dir)
	if err != nil {
		return nil, err
	}
	w := &weftRPC{ends: map[string]chan runEnd{}}
	c := command(ctx, env, filepath.Join(dir, "work"), r.cfg.Weft, "rpc")
	if w.stdioServer, err = startStdioServer(c, "weft rpc", w.notified); err != nil {
		return nil, err
	}
	p := api.InitializeParams{ClientInfo: api.Info{Name: "weft-bench", Version: "1"}, ProtocolVersion: rpc.DefaultProtocolVersion}
	if err := w.call(ctx, api.MethodInitialize, p, nil); err != nil {
		w.Close()
		return nil, w.ch.errorf("weft rpc: initialize: %v", err)
	}
	return w, nil
}

// notified hands the terminal events of runs to their session's waiter.
func (w *weftRPC) notified(method string, params json.RawMessage, at time.Time) {
	if method != api.NotifyEvent {
		return
	}
	var p struct {
		Event struct {
			SessionID string          `json:"sessionId"`
			RunID     string          `json:"runId"`
			Type      event.Type      `json:"type"`
			Data      json.RawMessage `json:"data"`
		} `json:"event"`
	}
	if json.Unmarshal(params, &p) != nil || !event.IsTerminalRun(p.Event.Type) {
		return
	}
	w.mu.Lock()
	c := w.ends[p.Event.SessionID]
	w.mu.Unlock()
	if c != nil {
		select {
		case c <- runEnd{run: p.Event.RunID, typ: string(p.Event.Type), data: p.Event.Data, at: at}:
		default:
		}
	}
}

// session creates a session and subscribes to it.
func (w *weftRPC) session(ctx context.Context) (string, error) {
	var s api.SessionResult
	if err := w.call(ctx, api.MethodSessionCreate, api.CreateSessionParams{Title: "bench", Model: weftModel}, &s); err != nil {
		return "", err
	}
	w.mu.Lock()
	w.ends[s.Session.ID] = make(chan runEnd, 4)
	w.mu.Unlock()
	if err := w.call(ctx, api.MethodEventsSubscribe, api.SubscribeParams{SessionID: s.Session.ID, After: s.Session.LastSeq}, nil); err != nil {
		return "", err
	}
	return s.Session.ID, nil
}

// turn runs one turn on a session and returns its latency: from writing
// run/start to reading the events/event notification of its run.completed.
func (w *weftRPC) turn(ctx context.Context, session string) (time.Duration, error) {
	w.mu.Lock()
	ends := w.ends[session]
	w.mu.Unlock()
	t0 := time.Now()
	var r api.RunResult
	// busy=queue: run.completed can arrive a moment before the session is
	// idle again, when the default (reject) would refuse the next turn.
	p := api.StartRunParams{SessionID: session, Input: api.Input(event.TextParts(prompt)), Busy: api.BusyQueue}
	if err := w.call(ctx, api.MethodRunStart, p, &r); err != nil {
		return 0, err
	}
	for {
		select {
		case end := <-ends:
			if end.run != r.ID {
				continue
			}
			if end.typ != string(event.RunCompleted) {
				return 0, fmt.Errorf("run %s ended with %s: %s", r.ID, end.typ, end.data)
			}
			return end.at.Sub(t0), nil
		case <-w.done:
			return 0, w.ch.errorf("weft rpc exited during a turn")
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
}

func (w *weftRPC) open(ctx context.Context, n int) ([]func(context.Context) (time.Duration, error), error) {
	var out []func(context.Context) (time.Duration, error)
	for range n {
		id, err := w.session(ctx)
		if err != nil {
			return nil, w.ch.errorf("weft rpc: %v", err)
		}
		turn := func(ctx context.Context) (time.Duration, error) { return w.turn(ctx, id) }
		if _, err := turn(ctx); err != nil {
			return nil, w.ch.errorf("weft rpc: warm-up turn: %v", err)
		}
		out = append(out, turn)
	}
	return out, nil
}

// codexTurns adapts a codexServer to turnServer.
type codexTurns struct {
	*codexServer
	cwd string
}

func (c codexTurns) pid() int { return c.ch.pid() }

func (c codexTurns) open(ctx context.Context, n int) ([]func(context.Context) (time.Duration, error), error) {
	var out []func(context.Context) (time.Duration, error)
	for range n {
		th, err := c.startThread(ctx, c.cwd)
		if err != nil {
			return nil, c.ch.errorf("codex app-server: %v", err)
		}
		turn := func(ctx context.Context) (time.Duration, error) { return c.turn(ctx, th) }
		if _, err := turn(ctx); err != nil {
			return nil, c.ch.errorf("codex app-server: warm-up turn: %v", err)
		}
		out = append(out, turn)
	}
	return out, nil
}

// warmShape is one shape of the comparison: sessions × turns per round.
type warmShape struct {
	sessions            int
	weftTurns, cxTurns  int // per session and round
	rounds              int
	weft, codex         turnStats
	weftOpen, codexOpen []func(context.Context) (time.Duration, error)
}

// runWarmTurns measures warm turns — the input in over JSON-RPC on stdio,
// the run's completion out, persisted, against the zero-latency mock — of
// a `weft rpc` child and, when installed, a `codex app-server` child:
// one session, then ten at once. Each side runs its turns in rounds, the
// two sides alternating, so that a change in the machine's load falls on
// both.
func runWarmTurns(ctx context.Context, r *runner) error {
	const (
		nameP50  = "warm turn p50, 1 session"
		nameCPU  = "warm turn CPU, 1 session"
		nameRate = "warm turns/s, 10 sessions"
	)
	if why := r.needWeft(); why != "" {
		r.skip(nameP50, "≤ 1/20 of codex app-server", why)
		r.skip(nameCPU, "≤ 1/20 of codex app-server", why)
		r.skip(nameRate, "≥ 20× codex app-server", why)
		return nil
	}
	dir, err := r.tempDir("warm")
	if err != nil {
		return err
	}
	wd, err := r.startWeftRPC(ctx, filepath.Join(dir, "weft"))
	if err != nil {
		return err
	}
	defer wd.Close()
	var cx *codexTurns
	var codexErr error
	if r.cfg.Codex != "" {
		cdir := filepath.Join(dir, "codex")
		s, err := r.startCodexServer(ctx, cdir)
		if err != nil {
			codexErr = err
		} else {
			cx = &codexTurns{codexServer: s, cwd: filepath.Join(cdir, "work")}
			defer cx.Close()
		}
	}
	rounds := 3
	if r.cfg.Quick {
		rounds = 1
	}
	shapes := []*warmShape{
		{sessions: 1, weftTurns: r.sz.turns1 / rounds, cxTurns: max(r.sz.codex1/rounds, 1), rounds: rounds},
		{sessions: 10, weftTurns: max(r.sz.turns10/rounds, 1), cxTurns: max(r.sz.codex10/rounds, 1), rounds: rounds},
	}
	for _, sh := range shapes {
		if sh.weftOpen, err = wd.open(ctx, sh.sessions); err != nil {
			return err
		}
		if cx != nil && codexErr == nil {
			sh.codexOpen, codexErr = cx.open(ctx, sh.sessions)
		}
		for range sh.rounds {
			st, err := round(ctx, wd, sh.weftOpen, sh.weftTurns)
			if err != nil {
				return wd.ch.errorf("weft rpc: %v", err)
			}
			sh.weft.addRound(st)
			if cx != nil && codexErr == nil {
				tctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
				st, err := round(tctx, cx, sh.codexOpen, sh.cxTurns)
				cancel()
				if err != nil {
					codexErr = cx.ch.errorf("codex app-server: %v", err)
				}
				sh.codex.addRound(st)
			}
		}
	}
	one, ten := shapes[0], shapes[1]
	note := fmt.Sprintf("`weft rpc` and `codex app-server` children driven alike over stdio, every line decoded; latency = turn request written → its completion notification read; CPU = the server's process tree (/proc) ÷ turns; weft %d+%d×10 turns, codex %d+%d×10, in %d alternating rounds",
		one.weft.turns, ten.weft.turns/10, one.codex.turns, ten.codex.turns/10, rounds)
	cxNote := ""
	switch {
	case r.cfg.Codex == "":
		cxNote = codexMissing
	case codexErr != nil:
		cxNote = "codex failed: " + codexErr.Error()
	}
	add := func(name, target, weftText, codexText string, weft, codex float64, better func(w, c float64) bool, key string) {
		res := Result{Name: name, Target: target, Values: map[string]float64{"weft_" + key: weft}}
		if cxNote != "" {
			res.Result, res.Verdict, res.Note = "weft "+weftText, Skipped, joinNotes(cxNote, note)
		} else {
			res.Result = fmt.Sprintf("weft %s · codex %s (%s)", weftText, codexText, ratio(weft, codex))
			res.Verdict, res.Note = verdict(better(weft, codex)), note
			res.Values["codex_"+key] = codex
		}
		r.add(res)
		note, cxNote = "", strings.TrimSuffix(strings.SplitAfter(cxNote, ":")[0], ":") // said once
	}
	lower := func(w, c float64) bool { return w*20 <= c }
	add(nameP50, "≤ 1/20 of codex app-server", fmtDur(one.weft.lat.median()), fmtDur(one.codex.lat.median()),
		ms(one.weft.lat.median()), ms(one.codex.lat.median()), lower, "p50_ms")
	add(nameCPU, "≤ 1/20 of codex app-server", fmtDur(one.weft.cpuPerTurn()), fmtDur(one.codex.cpuPerTurn()),
		ms(one.weft.cpuPerTurn()), ms(one.codex.cpuPerTurn()), lower, "cpu_ms_per_turn")
	add(nameRate, "≥ 20× codex app-server", fmtInt(ten.weft.perSecond())+"/s", sig3(ten.codex.perSecond())+"/s",
		ten.weft.perSecond(), ten.codex.perSecond(), func(w, c float64) bool { return w >= 20*c }, "turns_per_s")
	r.addPlot("warm-turn", "Warm turn: request in, completion out (1 session)",
		series{"weft rpc", one.weft.lat}, series{"codex app-server", one.codex.lat})
	r.addPlot("warm-turn-10", "Warm turns, 10 sessions at once",
		series{"weft rpc", ten.weft.lat}, series{"codex app-server", ten.codex.lat})
	return nil
}
