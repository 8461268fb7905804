package main

import (
	"context"
	"fmt"
	"iter"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"weft.dev/weft/api"
	"weft.dev/weft/client"
	"weft.dev/weft/event"
	"weft.dev/weft/store/record"
)

// The benchmarks of this file measure issue 23's several-host figures
// with real `weft serve` processes on one throwaway PostgreSQL (as the
// cluster tests run them); they skip without PostgreSQL's binaries.
// Each runs its trials in one iteration: run them with -benchtime 1x.
//
//	go test ./cmd/weft -run '^$' -bench BenchmarkCluster -benchtime 1x

// restart starts host i again on a new address after it was killed,
// with the flags it was started with.
func (cl *cluster) restart(i int) {
	cl.t.Helper()
	addr := freeAddr(cl.t)
	srv := cl.envs[i].serve(addr, cl.flags[i]...)
	cl.addrs[i], cl.srvs[i] = addr, srv.Process
	cl.t.Cleanup(func() { srv.Process.Signal(os.Interrupt); srv.Wait() })
}

// seen is an event and when a subscriber received it.
type seen struct {
	ev event.Event
	at time.Time
}

// receive consumes sub in a goroutine and sends what it receives, with
// the time, on the returned channel, until sub ends.
func receive(sub iter.Seq2[event.Event, error]) <-chan seen {
	ch := make(chan seen, 4096)
	go func() {
		defer close(ch)
		for ev, err := range sub {
			if err != nil {
				return
			}
			ch <- seen{ev, time.Now()}
		}
	}()
	return ch
}

// await reads ch until an event of type typ of run runID and returns it.
func await(tb testing.TB, ch <-chan seen, typ event.Type, runID string, limit time.Duration) seen {
	tb.Helper()
	timeout := time.After(limit)
	var other []string
	for {
		select {
		case s, ok := <-ch:
			if !ok {
				tb.Fatalf("the subscription ended before %s of %s (after %v)", typ, runID, other)
			}
			if s.ev.Type == typ && s.ev.RunID == runID {
				return s
			}
			other = append(other, fmt.Sprintf("%d:%s:%s", s.ev.Seq, s.ev.Type, s.ev.RunID))
		case <-timeout:
			tb.Fatalf("no %s of %s within %v (after %v)", typ, runID, limit, other)
		}
	}
}

// quantile is the q-quantile of sorted durations (nearest rank).
func quantile(d []time.Duration, q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	i := int(q*float64(len(s))+0.5) - 1
	return s[min(max(i, 0), len(s)-1)]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// procCPU is the user and system CPU that process pid has used.
func procCPU(tb testing.TB, pid int) time.Duration {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		tb.Fatal(err)
	}
	// The fields after the command name, which is in parentheses.
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * 10 * time.Millisecond // USER_HZ is 100 on Linux
}

// hostsCPU is the CPU the cluster's serving hosts have used.
func (cl *cluster) hostsCPU() time.Duration {
	var d time.Duration
	for _, p := range cl.srvs {
		d += procCPU(cl.t, p.Pid)
	}
	return d
}

// BenchmarkClusterFailover: three hosts, lease TTL 2 s. In each of 20
// trials host A owns a session with a run mid-flight and one queued
// behind it, and a client follows the session through host B. A is
// SIGKILLed: the figure is the time from the kill to the next event B's
// subscriber receives (written by the host that took the session over:
// run.interrupted), its median and maximum (target: TTL + 1 s); and to
// the queued run's run.started. A is then started again for the next
// trial.
func BenchmarkClusterFailover(b *testing.B) {
	const (
		ttl    = 2 * time.Second
		trials = 20
	)
	cl := newCluster(b, 3, ttl)
	e := cl.envs[0]
	hang := e.script("hang.json", `{"steps":[{"text":"never","delayMs":3600000}]}`)
	echo := e.script("echo.json", `{"loop":true,"steps":[{"text":"echo {{input}}","delayMs":1}]}`)
	var next, queued []time.Duration
	for b.Loop() {
		for trial := range trials {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			a, err := client.Dial(ctx, cl.addrs[0], client.Options{Token: cl.token})
			if err != nil {
				b.Fatal(err)
			}
			obs := cl.dial(ctx, 1)
			s, err := a.CreateSession(ctx, api.CreateSessionParams{Model: "scripted:" + echo})
			if err != nil {
				b.Fatal(err)
			}
			sub, err := obs.Subscribe(ctx, api.SubscribeParams{SessionID: s.ID})
			if err != nil {
				b.Fatal(err)
			}
			ch := receive(sub)
			active, err := a.StartRun(ctx, api.StartRunParams{SessionID: s.ID, Input: api.Input(event.TextParts("first")), Model: "scripted:" + hang})
			if err != nil {
				b.Fatal(err)
			}
			q, err := a.StartRun(ctx, api.StartRunParams{SessionID: s.ID, Input: api.Input(event.TextParts("queued")), Busy: api.BusyQueue})
			if err != nil {
				b.Fatal(err)
			}
			await(b, ch, event.RunStarted, active.ID, 10*time.Second)
			// The owner's last event before the model hangs.
			last := await(b, ch, event.StepStarted, active.ID, 10*time.Second).ev.Seq
			a.Close()
			cl.srvs[0].Signal(syscall.SIGKILL)
			killed := time.Now()
			var first seen
			for first.ev.Seq <= last {
				select {
				case first = <-ch:
				case <-time.After(ttl + 30*time.Second):
					b.Fatalf("trial %d: no event through host B within %v of the kill", trial, ttl+30*time.Second)
				}
			}
			if first.ev.Type != event.RunInterrupted {
				b.Fatalf("trial %d: the first event after the kill is %s; want run.interrupted", trial, first.ev.Type)
			}
			started := await(b, ch, event.RunStarted, q.ID, ttl+30*time.Second)
			next = append(next, first.at.Sub(killed))
			queued = append(queued, started.at.Sub(killed))
			cancel()
			obs.Close()
			cl.srvs[0].Wait()
			cl.restart(0)
		}
	}
	b.ReportMetric(ms(quantile(next, 0.5)), "failover-p50-ms")
	b.ReportMetric(ms(slices.Max(next)), "failover-max-ms")
	b.ReportMetric(ms(quantile(queued, 0.5)), "queued-start-p50-ms")
	b.ReportMetric(ms(slices.Max(queued)), "queued-start-max-ms")
	b.Logf("lease TTL %v, %d trials: kill to next event p50 %v max %v (target ≤ %v); kill to the queued run's start p50 %v max %v",
		ttl, len(next), quantile(next, 0.5).Round(time.Millisecond), slices.Max(next).Round(time.Millisecond), ttl+time.Second,
		quantile(queued, 0.5).Round(time.Millisecond), slices.Max(queued).Round(time.Millisecond))
	b.Logf("all (ms): %v", fmtMs(next))
}

func fmtMs(d []time.Duration) string {
	var s []string
	for _, x := range d {
		s = append(s, strconv.FormatInt(x.Milliseconds(), 10))
	}
	return strings.Join(s, " ")
}

// BenchmarkClusterDispatch: two hosts; host A owns an idle session. Each
// of 200 run/start calls goes through host B, which forwards it to A;
// the figure is the time from the call to run.started, as the event's
// own time (when A appended it) and as B's subscriber received it. The
// same through A itself is the baseline.
func BenchmarkClusterDispatch(b *testing.B) {
	const runs = 200
	cl := newCluster(b, 2, 10*time.Second)
	e := cl.envs[0]
	echo := e.script("echo.json", `{"loop":true,"steps":[{"text":"echo {{input}}"}]}`)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	a, nb := cl.dial(ctx, 0), cl.dial(ctx, 1)
	s, err := a.CreateSession(ctx, api.CreateSessionParams{Model: "scripted:" + echo})
	if err != nil {
		b.Fatal(err)
	}
	r, err := a.StartRun(ctx, api.StartRunParams{SessionID: s.ID, Input: api.Input(event.TextParts("warm"))})
	if err != nil {
		b.Fatal(err)
	}
	if w, err := a.WaitRun(ctx, api.WaitRunParams{RunID: r.ID, TimeoutMs: 30_000}); err != nil || w.Run.Status != record.RunCompleted {
		b.Fatalf("warm run: %+v %v", w, err)
	}
	sub, err := nb.Subscribe(ctx, api.SubscribeParams{SessionID: s.ID})
	if err != nil {
		b.Fatal(err)
	}
	ch := receive(sub)
	type figures struct{ call, appended, received []time.Duration }
	measure := func(through *client.Client, n int) figures {
		var f figures
		for i := range n {
			t0 := time.Now()
			r, err := through.StartRun(ctx, api.StartRunParams{SessionID: s.ID, Input: api.Input(event.TextParts(fmt.Sprint(i)))})
			if err != nil {
				b.Fatal(err)
			}
			f.call = append(f.call, time.Since(t0))
			st := await(b, ch, event.RunStarted, r.ID, 30*time.Second)
			f.appended = append(f.appended, st.ev.Time.Sub(t0))
			f.received = append(f.received, st.at.Sub(t0))
			await(b, ch, event.RunCompleted, r.ID, 30*time.Second)
		}
		return f
	}
	var fwd, own figures
	cpu0 := cl.hostsCPU()
	for b.Loop() {
		fwd = measure(nb, runs)
	}
	cpuFwd := cl.hostsCPU() - cpu0
	cpu0 = cl.hostsCPU()
	own = measure(a, runs)
	cpuOwn := cl.hostsCPU() - cpu0
	b.ReportMetric(ms(quantile(fwd.appended, 0.5)), "fwd-started-p50-ms")
	b.ReportMetric(ms(quantile(fwd.appended, 0.99)), "fwd-started-p99-ms")
	b.ReportMetric(ms(quantile(fwd.received, 0.5)), "fwd-received-p50-ms")
	b.ReportMetric(ms(quantile(fwd.received, 0.99)), "fwd-received-p99-ms")
	b.ReportMetric(ms(quantile(own.appended, 0.5)), "owner-started-p50-ms")
	b.ReportMetric(ms(quantile(own.appended, 0.99)), "owner-started-p99-ms")
	for _, x := range []struct {
		name string
		f    figures
		cpu  time.Duration
	}{{"through B (forwarded to A)", fwd, cpuFwd}, {"through A (the owner)", own, cpuOwn}} {
		b.Logf("%s, %d runs: run/start answered p50 %v p99 %v; run.started appended p50 %v p99 %v; received through B p50 %v p99 %v; hosts' CPU per run %v",
			x.name, len(x.f.call), quantile(x.f.call, 0.5), quantile(x.f.call, 0.99), quantile(x.f.appended, 0.5), quantile(x.f.appended, 0.99),
			quantile(x.f.received, 0.5), quantile(x.f.received, 0.99), x.cpu/time.Duration(len(x.f.call)))
	}
}

// BenchmarkClusterWarmTurns: 12 clients, each with a session of its own,
// take warm turns (run/start, run/wait; the scripted model answers at
// once) on one host, then spread over three hosts of one PostgreSQL
// (client i on host i mod 3, its session owned there). The figures are
// turns per second, the per-turn latency p50/p99 and the hosts' CPU per
// turn.
func BenchmarkClusterWarmTurns(b *testing.B) {
	const (
		clients = 12
		turns   = 25
	)
	for _, hosts := range []int{1, 3} {
		b.Run(fmt.Sprintf("hosts=%d", hosts), func(b *testing.B) {
			cl := newCluster(b, hosts, 10*time.Second)
			echo := cl.envs[0].script("echo.json", `{"loop":true,"steps":[{"text":"echo {{input}}"}]}`)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			type sess struct {
				c  *client.Client
				id string
			}
			turn := func(s sess, input string) (time.Duration, error) {
				t0 := time.Now()
				r, err := s.c.StartRun(ctx, api.StartRunParams{SessionID: s.id, Input: api.Input(event.TextParts(input)), Busy: api.BusyQueue})
				if err != nil {
					return 0, err
				}
				w, err := s.c.WaitRun(ctx, api.WaitRunParams{RunID: r.ID, TimeoutMs: 60_000})
				if err != nil {
					return 0, err
				}
				if w.Run.Status != record.RunCompleted {
					return 0, fmt.Errorf("run %s: %s", r.ID, w.Run.Status)
				}
				return time.Since(t0), nil
			}
			var ss []sess
			for i := range clients {
				c := cl.dial(ctx, i%hosts)
				s, err := c.CreateSession(ctx, api.CreateSessionParams{Model: "scripted:" + echo})
				if err != nil {
					b.Fatal(err)
				}
				ss = append(ss, sess{c, s.ID})
				if _, err := turn(ss[i], "warm"); err != nil {
					b.Fatal(err)
				}
			}
			// What the hosts spend with no turn at all (lease renewal,
			// River, LISTEN), for the share of a turn's CPU that is
			// background.
			idle0, t0 := cl.hostsCPU(), time.Now()
			time.Sleep(3 * time.Second)
			idle := float64(cl.hostsCPU()-idle0) / time.Since(t0).Seconds()
			var (
				mu   sync.Mutex
				lat  []time.Duration
				wall time.Duration
				cpu  time.Duration
			)
			for b.Loop() {
				cpu0 := cl.hostsCPU()
				t0 := time.Now()
				var wg sync.WaitGroup
				errs := make(chan error, clients)
				for _, s := range ss {
					wg.Go(func() {
						for j := range turns {
							d, err := turn(s, strconv.Itoa(j))
							if err != nil {
								errs <- err
								return
							}
							mu.Lock()
							lat = append(lat, d)
							mu.Unlock()
						}
					})
				}
				wg.Wait()
				wall += time.Since(t0)
				cpu += cl.hostsCPU() - cpu0
				close(errs)
				for err := range errs {
					b.Fatal(err)
				}
			}
			n := len(lat)
			b.ReportMetric(float64(n)/wall.Seconds(), "turns/s")
			b.ReportMetric(ms(quantile(lat, 0.5)), "turn-p50-ms")
			b.ReportMetric(ms(quantile(lat, 0.99)), "turn-p99-ms")
			b.ReportMetric(ms(cpu/time.Duration(n)), "host-cpu-ms/turn")
			b.ReportMetric(idle/float64(time.Millisecond), "host-idle-cpu-ms/s")
			b.Logf("%d hosts, %d clients, %d turns in %v: %.1f turns/s, p50 %v p99 %v, hosts' CPU %v per turn; idle hosts use %.0f ms of CPU per second",
				hosts, clients, n, wall.Round(time.Millisecond), float64(n)/wall.Seconds(), quantile(lat, 0.5), quantile(lat, 0.99), cpu/time.Duration(n), idle/float64(time.Millisecond))
		})
	}
}
