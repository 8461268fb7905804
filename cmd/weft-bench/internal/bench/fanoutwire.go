package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"weft.dev/weft/api"
	"weft.dev/weft/client"
	"weft.dev/weft/host"
	"weft.dev/weft/rpc"
)

// ClientsArg, as the first argument, makes weft-bench the subscribers of
// the wire fan-out figures rather than the bench: the figure runs the
// host and re-executes itself with this argument, so that the clients'
// CPU is not the host's and the host's CPU time is its own. See
// [IsFanoutClients] and [FanoutClientsMain].
const ClientsArg = "__weft-bench-fanout-clients"

// IsFanoutClients reports whether args, the program's os.Args, ask it to
// be the fan-out figures' clients. A program that runs [Run] must call
// [FanoutClientsMain] when it does, before anything else.
func IsFanoutClients(args []string) bool {
	return len(args) > 2 && args[1] == ClientsArg
}

// FanoutClientsMain is the clients' process: it follows the session args[2]
// describes, says "ready" on standard output, reads from standard input
// how many events each subscriber must receive, waits for them (a minute
// at most) and writes the commit-to-arrival latencies as one line of
// JSON. It exits 0, or 1 with the error on standard error.
func FanoutClientsMain(args []string) {
	if err := fanoutClients(context.Background(), args[2], os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "weft-bench fan-out clients:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// wireSpec is what the clients' process follows.
type wireSpec struct {
	Addr    string `json:"addr"` // the host's HTTP address, host:port
	Session string `json:"session"`
	After   int64  `json:"after"`
	Subs    int    `json:"subs"`
	SSE     bool   `json:"sse"` // SSE streams, else WebSocket subscriptions
}

// wireReport is what the clients' process found.
type wireReport struct {
	// Latency is the histogram of commit stamp → arrival over every
	// event and subscriber (hist.counts).
	Latency map[int]int64 `json:"latency"`
	// Lagged is how many subscriptions ended early, Err the first one's
	// error.
	Lagged int64  `json:"lagged"`
	Err    string `json:"err,omitempty"`
	// CPUNs is the clients' process's CPU time.
	CPUNs int64 `json:"cpuNs"`
}

// fanoutClients is FanoutClientsMain with its input and output.
func fanoutClients(ctx context.Context, specJSON string, in io.Reader, out io.Writer) error {
	var spec wireSpec
	if err := json.Unmarshal([]byte(specJSON), &spec); err != nil {
		return fmt.Errorf("spec: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sub := newSubscribers(ctx)
	defer sub.stop()
	var clients []*client.Client
	defer func() {
		for _, c := range clients {
			c.Close()
		}
	}()
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: spec.Subs}}
	defer hc.CloseIdleConnections()
	for range spec.Subs {
		if spec.SSE {
			seq, err := sseEvents(sub.ctx, hc, "http://"+spec.Addr+"/v1/sessions/"+spec.Session+"/events", spec.After)
			if err != nil {
				return err
			}
			sub.follow(seq)
			continue
		}
		c, err := client.Dial(ctx, spec.Addr, client.Options{})
		if err != nil {
			return err
		}
		clients = append(clients, c)
		seq, err := c.Subscribe(sub.ctx, api.SubscribeParams{SessionID: spec.Session, After: spec.After})
		if err != nil {
			return err
		}
		sub.follow(seq)
	}
	if _, err := fmt.Fprintln(out, "ready"); err != nil {
		return err
	}
	var want int64
	if _, err := fmt.Fscan(in, &want); err != nil {
		return fmt.Errorf("read the number of events: %w", err)
	}
	sub.drain(want)
	sub.stop()
	cpu, _ := selfCPU()
	rep := wireReport{Latency: sub.lat.counts(), Lagged: sub.lagged.Load(), CPUNs: int64(cpu)}
	if p := sub.failed.Load(); p != nil {
		rep.Err = (*p).Error()
	}
	return json.NewEncoder(out).Encode(rep)
}

// wireChild is the clients' process of one measurement.
type wireChild struct {
	ch  *child
	in  io.WriteCloser
	out *bufio.Reader
}

// startClients starts the clients' process (this program again, with
// ClientsArg) and returns once its subscriptions are registered.
func startClients(ctx context.Context, spec wireSpec) (*wireChild, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find this program to run the clients: %w", err)
	}
	specJSON, err := json.Marshal(spec)
	if err != nil {
		return nil, err
	}
	c := command(ctx, os.Environ(), "", self, ClientsArg, string(specJSON))
	in, err := c.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := c.StdoutPipe()
	if err != nil {
		return nil, err
	}
	ch, err := startChild(c)
	if err != nil {
		return nil, err
	}
	w := &wireChild{ch: ch, in: in, out: bufio.NewReader(out)}
	line, err := w.out.ReadString('\n')
	if err != nil || strings.TrimSpace(line) != "ready" {
		ch.Stop()
		return nil, ch.errorf("fan-out clients did not start (%q, %v)", line, err)
	}
	return w, nil
}

// finish tells the clients that want events are due to each subscriber
// and returns their report; the process is gone when it returns.
func (w *wireChild) finish(want int64) (*wireReport, error) {
	defer w.ch.Stop()
	if _, err := fmt.Fprintln(w.in, want); err != nil {
		return nil, w.ch.errorf("fan-out clients: %w", err)
	}
	w.in.Close()
	line, err := w.out.ReadString('\n')
	if err != nil {
		return nil, w.ch.errorf("fan-out clients: no report: %w", err)
	}
	var rep wireReport
	if err := json.Unmarshal([]byte(line), &rep); err != nil {
		return nil, fmt.Errorf("fan-out clients' report: %w", err)
	}
	return &rep, nil
}

// wireResult is what a wire fan-out measurement found.
type wireResult struct {
	subs      int
	lat       *hist // commit → arrival, every event and subscriber
	events    int64 // committed by the followed runs
	rate      float64
	hostCPU   time.Duration // this process's CPU during the followed runs
	aloneCPU  time.Duration // per event of the same runs, nobody following (burst only)
	clientCPU time.Duration // the clients' process, all of it
	lagged    int64
	failure   string
	delivered int64 // events × subscribers that arrived
}

// perDelivered returns d divided by the deliveries.
func (w *wireResult) perDelivered(d time.Duration) time.Duration {
	return d / time.Duration(max(w.delivered, 1))
}

// measureFanoutWire serves the host over loopback HTTP (rpc.HTTPHandler,
// no auth) and has subs subscribers in another process (see
// [FanoutClientsMain]) follow one session while runs of the fanout
// script go on in it: over WebSocket (client.Subscribe, a connection
// each) when sse is false, else over SSE (GET /v1/sessions/{id}/events).
// The runs commit as fast as the host goes, or, when paced, at a model's
// pace (pacedScript). A burst's runs are first made in a session nobody
// follows too, for the host's CPU per event without fan-out.
func measureFanoutWire(ctx context.Context, dir string, subs, runs, steps int, sse, paced bool) (*wireResult, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	ih, err := openHost(ctx, dir, host.Config{}, steps)
	if err != nil {
		return nil, err
	}
	defer ih.Close()
	srv := rpc.NewHostServer(ih.h, rpc.HostConfig{Config: rpc.Config{MaxConns: 4096, NoAuth: true}})
	defer srv.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	hs := &http.Server{Handler: rpc.HTTPHandler(srv, ih.h, rpc.SSEOptions{}), ReadHeaderTimeout: 10 * time.Second}
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = hs.Serve(ln)
	}()
	defer func() {
		hs.Close()
		<-served
	}()
	model := "scripted:fanout"
	if paced {
		model = "scripted:paced"
	}
	res := &wireResult{subs: subs, lat: &hist{}}
	if !paced {
		alone, err := ih.h.CreateSession(ctx, api.CreateSessionParams{Title: "alone", Model: model})
		if err != nil {
			return nil, err
		}
		var n int64
		var cpu time.Duration
		for range runs {
			c0, err := selfCPU()
			if err != nil {
				return nil, err
			}
			k, _, err := timedRun(ctx, ih, alone.Session.ID)
			if err != nil {
				return nil, err
			}
			c1, _ := selfCPU()
			n, cpu = n+k, cpu+c1-c0
		}
		res.aloneCPU = cpu / time.Duration(max(n, 1))
	}
	s, err := ih.h.CreateSession(ctx, api.CreateSessionParams{Title: "followed", Model: model})
	if err != nil {
		return nil, err
	}
	w, err := startClients(ctx, wireSpec{Addr: ln.Addr().String(), Session: s.Session.ID, After: s.Session.LastSeq, Subs: subs, SSE: sse})
	if err != nil {
		return nil, err
	}
	defer w.ch.Stop()
	var rates []float64
	for range runs {
		c0, err := selfCPU()
		if err != nil {
			return nil, err
		}
		n, rate, err := timedRun(ctx, ih, s.Session.ID)
		if err != nil {
			return nil, err
		}
		c1, _ := selfCPU()
		res.hostCPU += c1 - c0
		res.events += n
		rates = append(rates, rate)
	}
	res.rate = medianRate(rates)
	rep, err := w.finish(res.events)
	if err != nil {
		return nil, err
	}
	res.lat.addCounts(rep.Latency)
	res.delivered = res.lat.count()
	res.lagged, res.failure = rep.Lagged, rep.Err
	res.clientCPU = time.Duration(rep.CPUNs)
	return res, nil
}

// fmtMicros formats d in microseconds with three significant digits.
func fmtMicros(d time.Duration) string { return sig3(float64(d)/float64(time.Microsecond)) + " µs" }

func runFanoutWire(ctx context.Context, r *runner) error {
	n := fmtInt(float64(r.sz.wireSubs))
	var plots []series
	for _, paced := range []bool{false, true} {
		for _, sse := range []bool{false, true} {
			kind := "WebSocket"
			if sse {
				kind = "SSE"
			}
			name := "fan-out burst, " + n + " " + kind + " subscribers: host CPU per delivered event"
			target := "≤ 3 µs"
			if paced {
				name, target = "fan-out paced, "+n+" "+kind+" subscribers: p99", "≤ 50 ms"
			} else if sse {
				target = "—" // the issue sets the target for WebSocket
			}
			dir, err := r.tempDir("fanout-" + strings.ToLower(kind))
			if err != nil {
				return err
			}
			runs := r.sz.wireRuns
			if paced {
				runs = 1
			}
			res, err := measureFanoutWire(ctx, dir, r.sz.wireSubs, runs, r.sz.fanoutSteps, sse, paced)
			if err != nil {
				if errors.Is(err, context.Canceled) {
					return err
				}
				r.add(Result{Name: name, Target: target, Verdict: Failed, Note: err.Error()})
				continue
			}
			want := res.events * int64(res.subs)
			complete := res.lagged == 0 && res.delivered >= want
			p50, p99 := res.lat.quantile(0.5), res.lat.quantile(0.99)
			values := map[string]float64{
				"p50_ms": ms(p50), "p99_ms": ms(p99), "events_per_s": res.rate, "events": float64(res.events),
				"lagged": float64(res.lagged), "delivered": float64(res.delivered) / float64(max(want, 1)),
				"host_cpu_us_per_delivered":   float64(res.perDelivered(res.hostCPU)) / 1e3,
				"client_cpu_us_per_delivered": float64(res.perDelivered(res.clientCPU)) / 1e3,
			}
			note := fmt.Sprintf("host in this process on loopback; the %s subscribers in another process (weft-bench %s), a connection each; "+
				"commit stamp → arrival over every event and subscriber; %d run(s), %s events; lagged %d, delivered %.1f %%; clients' CPU %s per delivered event",
				n, ClientsArg, runs, fmtInt(float64(res.events)), res.lagged, 100*values["delivered"], fmtMicros(res.perDelivered(res.clientCPU)))
			if res.failure != "" {
				note += "; first failure: " + res.failure
			}
			if paced {
				r.add(Result{
					Name:    name,
					Result:  fmt.Sprintf("p99 %s (p50 %s; run at %s events/s)", fmtDur(p99), fmtDur(p50), fmtInt(res.rate)),
					Target:  target,
					Verdict: verdict(p99 <= 50*time.Millisecond && complete),
					Note:    note,
					Values:  values,
				})
				plots = append(plots, series{kind, res.lat})
				continue
			}
			per := res.perDelivered(res.hostCPU)
			// The fan-out's own part: the host's CPU beyond what the same
			// runs cost with nobody following.
			fan := res.perDelivered(res.hostCPU - res.aloneCPU*time.Duration(res.events))
			values["alone_cpu_us_per_event"] = float64(res.aloneCPU) / 1e3
			values["fanout_cpu_us_per_delivered"] = float64(fan) / 1e3
			v := Info
			if !sse {
				v = verdict(per <= 3*time.Microsecond && complete)
			}
			r.add(Result{
				Name: name,
				Result: fmt.Sprintf("%s (fan-out %s beyond the run's own %s an event; run at %s events/s, p99 %s)",
					fmtMicros(per), fmtMicros(fan), fmtMicros(res.aloneCPU), fmtInt(res.rate), fmtDur(p99)),
				Target:  target,
				Verdict: v,
				Note:    "host CPU (getrusage of this process) during the followed runs ÷ events delivered (events × subscribers); " + note,
				Values:  values,
			})
		}
	}
	r.addPlot("fanout-wire", "Fan-out paced like a model: commit to arrival, "+n+" subscribers in another process", plots...)
	return nil
}
