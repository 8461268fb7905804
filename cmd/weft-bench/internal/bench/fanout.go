package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"weft.dev/weft/api"
	"weft.dev/weft/event"
	"weft.dev/weft/host"
)

// subscribers follow one session and record, for every event, the time
// from its commit stamp (event.Time) to its arrival. Wait for them with
// drain, then stop them with stop.
type subscribers struct {
	lat     hist
	lagged  atomic.Int64
	wg      sync.WaitGroup
	cancel  context.CancelFunc
	ctx     context.Context
	failed  atomic.Pointer[error]
	started int
}

func newSubscribers(ctx context.Context) *subscribers {
	s := &subscribers{}
	s.ctx, s.cancel = context.WithCancel(ctx)
	return s
}

// follow consumes seq in a goroutine of s.
func (s *subscribers) follow(seq iter.Seq2[event.Event, error]) {
	s.started++
	s.wg.Go(func() {
		for e, err := range seq {
			if err != nil {
				if s.ctx.Err() == nil {
					s.lagged.Add(1)
					s.failed.CompareAndSwap(nil, &err)
				}
				return
			}
			s.lat.add(time.Since(e.Time))
		}
	})
}

// drain waits up to a minute until every subscriber has received want
// events, or one has failed.
func (s *subscribers) drain(want int64) {
	deadline := time.Now().Add(time.Minute)
	for s.lat.count() < want*int64(s.started) && s.lagged.Load() == 0 && time.Now().Before(deadline) && s.ctx.Err() == nil {
		time.Sleep(5 * time.Millisecond)
	}
}

// stop ends the subscriptions and waits for their goroutines.
func (s *subscribers) stop() {
	s.cancel()
	s.wg.Wait()
}

// delivered is the share of the events every subscriber should have
// received that arrived.
func (s *subscribers) delivered(want int64) float64 {
	if want == 0 || s.started == 0 {
		return 1
	}
	return float64(s.lat.count()) / float64(want*int64(s.started))
}

// timedRun runs the fanout script once on session id and returns the
// events it committed and their rate.
func timedRun(ctx context.Context, ih *inprocHost, id string) (int64, float64, error) {
	before, err := ih.h.GetSession(ctx, api.SessionGetParams{SessionID: id})
	if err != nil {
		return 0, 0, err
	}
	t0 := time.Now()
	if err := ih.runToEnd(ctx, id, "go"); err != nil {
		return 0, 0, err
	}
	d := time.Since(t0)
	after, err := ih.h.GetSession(ctx, api.SessionGetParams{SessionID: id})
	if err != nil {
		return 0, 0, err
	}
	n := after.Session.LastSeq - before.Session.LastSeq
	return n, float64(n) / d.Seconds(), nil
}

// fanoutResult is what a fan-out measurement found.
type fanoutResult struct {
	subs      int
	lat       *hist   // commit → arrival, every event and subscriber
	aloneRate float64 // the median run's events/s, nobody following
	withRate  float64 // the median run's events/s, followed
	lagged    int64   // subscribers that fell behind
	delivered float64 // the share of the events that arrived
	perRun    int64   // events of a followed run
}

// medianRate returns the median of rates.
func medianRate(v []float64) float64 {
	s := make(samples, len(v))
	for i, x := range v {
		s[i] = time.Duration(x)
	}
	return float64(s.median())
}

// measureFanoutInProcess has subs in-process subscribers (host.Subscribe)
// follow one session while runs of the fanout script (about 950 events,
// as fast as the host commits them) go on in it; each such run alternates
// with one in a session nobody follows, for the rate without fan-out.
func measureFanoutInProcess(ctx context.Context, dir string, subs, runs, steps int) (*fanoutResult, error) {
	ih, err := openHost(ctx, dir, host.Config{}, steps)
	if err != nil {
		return nil, err
	}
	defer ih.Close()
	alone, err := ih.h.CreateSession(ctx, api.CreateSessionParams{Title: "alone", Model: "scripted:fanout"})
	if err != nil {
		return nil, err
	}
	followed, err := ih.h.CreateSession(ctx, api.CreateSessionParams{Title: "followed", Model: "scripted:fanout"})
	if err != nil {
		return nil, err
	}
	sub := newSubscribers(ctx)
	defer sub.stop()
	for range subs {
		seq, err := ih.h.Subscribe(sub.ctx, api.SubscribeParams{SessionID: followed.Session.ID, After: followed.Session.LastSeq})
		if err != nil {
			return nil, err
		}
		sub.follow(seq)
	}
	var aloneRates, withRates []float64
	var events int64
	for range runs {
		_, rate, err := timedRun(ctx, ih, alone.Session.ID)
		if err != nil {
			return nil, err
		}
		aloneRates = append(aloneRates, rate)
		n, rate, err := timedRun(ctx, ih, followed.Session.ID)
		if err != nil {
			return nil, err
		}
		withRates = append(withRates, rate)
		events += n
	}
	sub.drain(events)
	sub.stop()
	return &fanoutResult{subs: subs, lat: &sub.lat, aloneRate: medianRate(aloneRates), withRate: medianRate(withRates),
		lagged: sub.lagged.Load(), delivered: sub.delivered(events), perRun: events / int64(runs)}, nil
}

func runFanoutInProcess(ctx context.Context, r *runner) error {
	n := fmtInt(float64(r.sz.fanoutSubs))
	dir, err := r.tempDir("fanout")
	if err != nil {
		return err
	}
	res, err := measureFanoutInProcess(ctx, dir, r.sz.fanoutSubs, r.sz.fanoutRuns, r.sz.fanoutSteps)
	if err != nil {
		return err
	}
	p99 := res.lat.quantile(0.99)
	note := fmt.Sprintf("host.Subscribe in this process, SQLite; commit stamp → arrival over every event and subscriber; %d runs of %s events, each alternating with one nobody follows; lagged %d, delivered %.1f %%",
		r.sz.fanoutRuns, fmtInt(float64(res.perRun)), res.lagged, res.delivered*100)
	r.add(Result{
		Name:    "fan-out, " + n + " in-process subscribers: p99",
		Result:  fmt.Sprintf("p99 %s (p50 %s)", fmtDur(p99), fmtDur(res.lat.quantile(0.5))),
		Target:  "≤ 50 ms",
		Verdict: verdict(p99 <= 50*time.Millisecond && res.lagged == 0),
		Note:    note,
		Values:  map[string]float64{"p50_ms": ms(res.lat.quantile(0.5)), "p99_ms": ms(p99), "lagged": float64(res.lagged), "delivered": res.delivered},
	})
	drop := 1 - res.withRate/res.aloneRate
	r.add(Result{
		Name:    "fan-out, " + n + " in-process subscribers: run rate",
		Result:  fmt.Sprintf("%s vs %s events/s alone (%+.0f %%)", fmtInt(res.withRate), fmtInt(res.aloneRate), -drop*100),
		Target:  "drop ≤ 10 %",
		Verdict: verdict(drop <= 0.10),
		Values:  map[string]float64{"events_per_s": res.withRate, "alone_events_per_s": res.aloneRate, "drop": drop},
	})
	r.addPlot("fanout-inproc", "Fan-out: commit to arrival, "+n+" in-process subscribers", series{"in process", res.lat})
	return nil
}

// sseEvents opens an SSE stream of a session's events after cursor and
// returns them as a single-use iterator; ctx ends it.
func sseEvents(ctx context.Context, hc *http.Client, url string, after int64) (iter.Seq2[event.Event, error], error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s?after=%d", url, after), nil)
	if err != nil {
		return nil, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return func(yield func(event.Event, error) bool) {
		defer resp.Body.Close()
		br := bufio.NewReaderSize(resp.Body, 1<<16)
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				yield(event.Event{}, fmt.Errorf("SSE stream: %w", err))
				return
			}
			data, ok := strings.CutPrefix(line, "data: ")
			if !ok {
				continue
			}
			var e event.Event
			if err := json.Unmarshal([]byte(data), &e); err != nil {
				yield(event.Event{}, fmt.Errorf("SSE event: %w", err))
				return
			}
			if !yield(e, nil) {
				return
			}
		}
	}, nil
}
