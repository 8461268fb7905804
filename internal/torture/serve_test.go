package torture

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"weft.dev/weft/api"
	"weft.dev/weft/client"
	"weft.dev/weft/event"
)

// server is one `weft serve` process on the rig's store.
type server struct {
	slot    int // which of the rig's hosts
	cmd     *exec.Cmd
	addr    string
	started time.Time
	done    chan struct{} // closed once the process has exited and err is set
	err     error
}

// httpClient serves the health checks and the SSE followers. Without
// keep-alives no connection outlives its request, so nothing is left to a
// killed host or to goleak.
var httpClient = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}

// start starts `weft serve` in slot i; it does not wait for it. With one
// host it listens on a free port; several hosts each keep the address of
// their first start, which is also the address they advertise to the
// others, as an operator restarts a host.
func (r *rig) start(i int) *server {
	r.t.Helper()
	addr := r.addrs[i]
	if addr == "" || !r.multi() {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			r.t.Fatal(err)
		}
		addr = ln.Addr().String()
		ln.Close()
		r.addrs[i] = addr
	}
	args := []string{"serve", "--listen", addr}
	if strings.HasPrefix(r.store, "postgres") {
		args = append(args, "--advertise", addr)
	}
	c := exec.Command(weftBin, args...)
	c.Dir = r.dir
	c.Env = r.envs[i]
	c.Stdout, c.Stderr = r.logf, r.logf
	fmt.Fprintf(r.logf, "=== kill %d: host %d: weft %s\n", r.kill, i, strings.Join(args, " "))
	if err := c.Start(); err != nil {
		r.t.Fatal(err)
	}
	s := &server{slot: i, cmd: c, addr: addr, started: time.Now(), done: make(chan struct{})}
	go func() {
		s.err = c.Wait()
		close(s.done)
	}()
	r.srvs[i] = s
	return s
}

// alive reports whether s has not exited.
func (s *server) alive() bool {
	select {
	case <-s.done:
		return false
	default:
		return true
	}
}

// waitHealthy polls /healthz until the host answers. A host that exits or
// does not answer within 30 s ends the test.
func (r *rig) waitHealthy(s *server) {
	r.t.Helper()
	deadline := time.NewTimer(30 * time.Second)
	defer deadline.Stop()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+s.addr+"/healthz", nil)
		resp, err := httpClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		cancel()
		if err == nil && resp.StatusCode == http.StatusOK {
			r.stats.startup = append(r.stats.startup, time.Since(s.started))
			if r.token == "" {
				r.readToken()
			}
			return
		}
		select {
		case <-tick.C:
		case <-s.done:
			r.fatalf("weft serve exited while starting: %v", s.err)
		case <-deadline.C:
			s.kill()
			r.fatalf("weft serve did not answer /healthz within 30 s")
		}
	}
}

func (r *rig) readToken() {
	b, err := os.ReadFile(filepath.Join(r.dir, "state", "weft", "token"))
	if err != nil {
		r.t.Fatal(err)
	}
	r.token = strings.TrimSpace(string(b))
}

// kill SIGKILLs the host and waits until it is gone. It reports whether
// the host was still running: a host that exited by itself crashed.
func (s *server) kill() bool {
	select {
	case <-s.done:
		return false
	default:
	}
	s.cmd.Process.Signal(syscall.SIGKILL)
	<-s.done
	var ee *exec.ExitError
	if errors.As(s.err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
			return true
		}
	}
	return false
}

// killHost kills s, reporting a host that had died by itself.
func (r *rig) killHost(s *server) {
	if !s.kill() {
		r.violate(nil, 0, "weft serve (host %d) exited by itself before the kill (%v); its log: %s", s.slot, s.err, r.tail())
	}
}

// dial connects a client to s.
func (r *rig) dial(ctx context.Context, s *server) (*client.Client, error) {
	return client.Dial(ctx, s.addr, client.Options{Token: r.token})
}

// iteration is one kill: start the host, and either kill it while it
// starts (about one kill in ten, at a random point of up to 1.5 times the
// last start's time to healthy: mostly while it recovers what the previous
// kill left open), or wait for it, check what the previous kill left, put
// it under load and kill it then. The store is checked after the kill.
func (r *rig) iteration() {
	if r.multi() {
		r.iterationMulti()
		return
	}
	r.stats.kills++
	srv := r.start(0)
	if r.kill > 1 && r.rng.IntN(10) == 0 {
		r.stats.startupKills++
		last := r.stats.startup[len(r.stats.startup)-1]
		t := time.NewTimer(time.Duration(r.rng.Int64N(int64(last)*3/2 + 1)))
		select {
		case <-t.C:
		case <-srv.done:
			t.Stop()
		}
		r.killHost(srv)
		r.checkStore()
		return
	}
	r.waitHealthy(srv)
	r.checkHost(srv, nil)
	if r.stopped() {
		srv.kill()
		return
	}
	r.rotate(srv)
	r.load(0, time.Duration(50+r.rng.IntN(451))*time.Millisecond, 0)
	r.checkStore()
}

// iterationMulti is one kill of one of several hosts on a PostgreSQL
// store (the first starts them all): the load runs on every host; a host
// picked at random is SIGKILLed after 50–500 ms of it and restarted at
// its address after a pause of up to 1.5 lease TTLs, while the load goes
// on against the others (so that, about one kill in three, a surviving
// host takes its sessions over within the load); about one restart in
// ten is killed again while it starts. The store is checked then, and
// through the hosts once every run is over, with the subscribers held on
// the hosts that were not killed.
func (r *rig) iterationMulti() {
	r.stats.kills++
	for i, s := range r.srvs {
		if s == nil {
			r.waitHealthy(r.start(i))
		}
	}
	r.rotate(r.srvs[r.rng.IntN(len(r.srvs))])
	victim := r.rng.IntN(len(r.srvs))
	d := time.Duration(50+r.rng.IntN(451)) * time.Millisecond
	pause := time.Duration(r.rng.Int64N(int64(leaseTTL) * 3 / 2))
	held := r.load(victim, d, pause)
	r.checkStore()
	r.checkHost(nil, held)
}

// restart starts host slot i again after a kill and waits for it; about
// one start in ten is killed first, at a random point of up to 1.5 times
// the last start's time to healthy, and started again.
func (r *rig) restart(i int) {
	srv := r.start(i)
	if r.rng.IntN(10) == 0 {
		r.stats.startupKills++
		last := r.stats.startup[len(r.stats.startup)-1]
		t := time.NewTimer(time.Duration(r.rng.Int64N(int64(last)*3/2 + 1)))
		select {
		case <-t.C:
		case <-srv.done:
			t.Stop()
		}
		r.killHost(srv)
		srv = r.start(i)
	}
	r.waitHealthy(srv)
}

// anyHost returns a host picked at random.
func (r *rig) anyHost() *server { return r.srvs[r.rng.IntN(len(r.srvs))] }

// finish restarts the host a last time, checks it, has one more run
// complete in every session, and stops the host with SIGINT, which must
// end it cleanly.
func (r *rig) finish() {
	if !r.multi() {
		srv := r.start(0)
		r.waitHealthy(srv)
	}
	r.checkHost(nil, nil)
	if !r.stopped() {
		r.finalRuns()
		r.checkHost(nil, nil)
	}
	for _, s := range r.sessions {
		r.tally(s)
	}
	for _, srv := range r.srvs {
		srv.cmd.Process.Signal(os.Interrupt)
	}
	t := time.NewTimer(30 * time.Second)
	defer t.Stop()
	for _, srv := range r.srvs {
		select {
		case <-srv.done:
			if srv.err != nil {
				r.violate(nil, 0, "weft serve (host %d) did not stop cleanly on SIGINT: %v; its log: %s", srv.slot, srv.err, r.tail())
			}
		case <-t.C:
			srv.kill()
			r.violate(nil, 0, "weft serve (host %d) did not stop within 30 s of SIGINT; its log: %s", srv.slot, r.tail())
		}
	}
	r.checkStore()
}

// finalRuns starts one run in every session, through a host picked at
// random, and waits for it: after all the kills, the sessions must go on.
func (r *rig) finalRuns() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, s := range r.sessions {
		c, err := r.dial(ctx, r.anyHost())
		if err != nil {
			r.fatalf("dial the host: %v", err)
		}
		defer c.Close()
		key := s.key("final")
		run, err := c.StartRun(ctx, api.StartRunParams{SessionID: s.id, Model: r.model.final,
			Input: api.Input(event.TextParts("key=" + key)), IdempotencyKey: key})
		if err != nil {
			r.violate(s, 0, "run/start after the last restart: %v", err)
			continue
		}
		w, err := c.WaitRun(ctx, api.WaitRunParams{RunID: run.ID, TimeoutMs: 30000})
		if err != nil || w.Run.Status != "completed" {
			r.violate(s, 0, "run %s after the last restart did not complete: %+v, %v", run.ID, w, err)
		}
	}
}

// fatalf ends the test on a failure that leaves nothing to check, with
// the end of the hosts' log.
func (r *rig) fatalf(format string, args ...any) {
	r.t.Helper()
	r.t.Errorf(format, args...)
	r.t.Errorf("the end of serve.log: %s", r.tail())
	r.close()
	r.t.FailNow()
}

// tail returns the last lines of the hosts' log.
func (r *rig) tail() string {
	b, err := os.ReadFile(r.logf.Name())
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return "\n" + strings.Join(lines[max(0, len(lines)-30):], "\n")
}
