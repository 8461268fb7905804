package torture

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"weft.dev/weft/api"
	"weft.dev/weft/client"
	"weft.dev/weft/event"
	"weft.dev/weft/store/record"
)

// sessionsUnderLoad is how many sessions the load drives at a time.
const sessionsUnderLoad = 4

// sess is one session under load and what the torture knows of it. During
// a load its runner is the only writer of starts, steers and acks; the
// followers only read id and log. Between loads only the test's goroutine
// uses it.
type sess struct {
	id   string
	n    int // ordinal, part of its idempotency keys
	born int // the kill before whose load it was created
	life int // how many kills it stays under load
	log  []logged

	starts []*startOp
	steers []*steerOp
	acks   []termAck
	got    []received // what the followers received since the last check of the store
}

// logged is one event of a log as checked, with json.Marshal of it: the
// bytes the SSE endpoint sends for it.
type logged struct {
	ev  event.Event
	raw []byte
}

// key returns an idempotency key of s, unique over the whole torture.
func (s *sess) key(tag string) string { return fmt.Sprintf("s%d.%s", s.n, tag) }

// lost reports whether a kill swallowed the reply to one of s's requests,
// which the next load sends again.
func (s *sess) lost() bool {
	for _, op := range s.starts {
		if op.lost {
			return true
		}
	}
	for _, op := range s.steers {
		if op.lost {
			return true
		}
	}
	return false
}

// startOp is a run/start and every reply it got. The key is also in the
// input ("key=K"), so the log tells which run a key made.
type startOp struct {
	key     string
	params  api.StartRunParams
	replies []startReply
	rounds  int
	lost    bool   // the last round got no reply
	lostIn  int    // the kill whose load sent the last round
	logged  string // the run whose run.queued carries the key, as of the last check; "" for none
}

type startReply struct {
	run      string
	replayed bool
	kill     int
	// round counts the sends of the op (one or two attempts at once);
	// lost is set when an attempt of the round got no reply.
	round int
	lost  bool
	// retry is set for a round after a restart whose first reply was
	// lost; expect is then the key's run in the log before the retry.
	retry  bool
	expect string
	// unsure is set for a retry in the load that lost the reply (with
	// several hosts, through another host): the log was not checked
	// since, so expect says nothing.
	unsure bool
}

// steerOp is a run/steer and its outcome; the key is in the input
// ("steer=K").
type steerOp struct {
	key     string
	params  api.SteerParams
	replies []steerReply
	lost    bool
	lostIn  int    // the kill whose load sent it last
	logged  string // the steerId of the steer.accepted carrying the key, as of the last check
}

type steerReply struct {
	steer    string
	replayed bool
	refused  api.Kind // the error kind when the host refused the steer
	kill     int
	retry    bool
	expect   string
	unsure   bool // as startReply.unsure
}

// termAck is a reply that said a run is terminal: its terminal event must
// be in the log.
type termAck struct {
	run, status, via string
}

// received is an event a follower received.
type received struct {
	via string // "SSE" or "WebSocket"
	ev  event.Event
	raw []byte // the SSE data line, or the WebSocket event re-encoded
}

// loadEnv is what the load's goroutines read of the rig.
type loadEnv struct {
	addrs []string // the hosts' addresses
	token string
	model models
	kill  int
}

// multi reports whether several hosts serve the store: a client whose
// host goes connects to another and goes on.
func (e loadEnv) multi() bool { return len(e.addrs) > 1 }

// pick returns the address of a host picked with rng (the only one's,
// without using rng, when there is one).
func (e loadEnv) pick(rng *rand.Rand) string {
	if !e.multi() {
		return e.addrs[0]
	}
	return e.addrs[rng.IntN(len(e.addrs))]
}

// gone reports whether err says the host is gone: no reply (the
// connection broke) or, with several hosts, a retryable error (the owner
// of the session, to which the host forwarded the command, is gone),
// after which the command may or may not have been done.
func (e loadEnv) gone(p *probe, err error) bool {
	var ae *api.Error
	if !errors.As(err, &ae) {
		return true
	}
	if e.multi() && ae.Retryable {
		p.retryable++
		return true
	}
	return false
}

// probe collects what one goroutine of the load saw; the test merges the
// probes once the load is over.
type probe struct {
	env                   loadEnv
	got                   []received
	bad                   []violation
	starts, retries, dups int
	steers, cancels       int
	retryable             int // retryable errors, taken as no reply
}

func (p *probe) violate(s *sess, seq int64, format string, args ...any) {
	p.bad = append(p.bad, violation{kill: p.env.kill, session: s.id, seq: seq, what: fmt.Sprintf(format, args...)})
}

// rotate retires the sessions that have been under load long enough (and
// have no lost request to retry) and creates new ones, up to
// sessionsUnderLoad.
func (r *rig) rotate(srv *server) {
	keep := r.sessions[:0]
	for _, s := range r.sessions {
		if r.kill-s.born >= s.life && !s.lost() {
			r.tally(s)
			continue
		}
		keep = append(keep, s)
	}
	r.sessions = keep
	if len(r.sessions) >= sessionsUnderLoad {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := r.dial(ctx, srv)
	if err != nil {
		r.fatalf("dial the host: %v", err)
	}
	defer c.Close()
	for len(r.sessions) < sessionsUnderLoad {
		r.created++
		cs, err := c.CreateSession(ctx, api.CreateSessionParams{
			Title: fmt.Sprintf("torture %d", r.created), Model: r.model.slow,
			Mounts:         []event.Mount{{ID: "work", Kind: event.KindScratch, Mode: event.ModeReadWrite, Default: true, DefaultForShell: true}},
			IdempotencyKey: fmt.Sprintf("session.%d", r.created),
		})
		if err != nil {
			r.fatalf("session/create: %v", err)
		}
		r.sessions = append(r.sessions, &sess{id: cs.ID, n: r.created, born: r.kill, life: 2 + r.rng.IntN(9)})
		r.stats.sessions++
	}
}

// load drives every session for d, then kills host victim. With one host
// it ends there; with several, the load goes on against the others for
// pause, the victim is restarted at its address, and the load goes on
// against all of them for another 50–300 ms. It waits for the load's
// goroutines, and returns the subscribers it holds on hosts other than
// the victim (none with one host), which go on until checked.
func (r *rig) load(victim int, d, pause time.Duration) *holds {
	env := loadEnv{addrs: r.addrs, token: r.token, model: r.model, kill: r.kill}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var probes []*probe
	h := &holds{}
	hctx, hcancel := context.WithCancel(context.Background())
	h.cancel = hcancel
	for i, s := range r.sessions {
		rng := func(role uint64) *rand.Rand {
			return rand.New(rand.NewPCG(r.seed, uint64(r.kill)<<16|uint64(i)<<4|role))
		}
		last := int64(len(s.log))
		cursor := func(rng *rand.Rand) int64 {
			switch rng.IntN(4) {
			case 0:
				return 0
			case 1:
				return rng.Int64N(last + 1)
			}
			return last
		}
		run := &runner{p: &probe{env: env}, s: s, rng: rng(1)}
		sse := &follower{p: &probe{env: env}, s: s, rng: rng(2)}
		ws := &follower{p: &probe{env: env}, s: s, rng: rng(3)}
		sse.after, ws.after = cursor(sse.rng), cursor(ws.rng)
		probes = append(probes, run.p, sse.p, ws.p)
		wg.Go(func() { run.run(ctx) })
		wg.Go(func() { sse.sse(ctx) })
		wg.Go(func() { ws.ws(ctx) })
		if env.multi() {
			// A subscriber on a host that stays up: it must get every
			// event of the session once, whoever owns it.
			slot := r.rng.IntN(len(r.srvs) - 1)
			if slot >= victim {
				slot++
			}
			f := &follower{p: &probe{env: env}, s: s, rng: rng(4), after: last, held: r.addrs[slot], slot: slot}
			h.followers = append(h.followers, f)
			h.wg.Go(func() { f.ws(hctx) })
		}
	}
	srv := r.srvs[victim]
	t := time.NewTimer(d)
	select {
	case <-t.C:
	case <-srv.done:
		t.Stop()
	}
	r.killHost(srv)
	if env.multi() {
		time.Sleep(pause)
		r.restart(victim)
		time.Sleep(time.Duration(50+r.rng.IntN(251)) * time.Millisecond)
	}
	cancel()
	wg.Wait()
	for i, s := range r.srvs {
		if i != victim && !s.alive() {
			r.violate(nil, 0, "weft serve (host %d) exited by itself during the load (%v); its log: %s", i, s.err, r.tail())
			r.restart(i)
		}
	}
	byID := map[string]*sess{}
	for _, s := range r.sessions {
		byID[s.id] = s
	}
	for _, p := range probes {
		r.merge(p, byID)
	}
	if !env.multi() {
		hcancel()
		return nil
	}
	return h
}

// merge adds what probe p collected to the sessions and the tallies.
func (r *rig) merge(p *probe, byID map[string]*sess) {
	for _, g := range p.got {
		s := byID[g.ev.SessionID]
		s.got = append(s.got, g)
	}
	for _, v := range p.bad {
		r.add(v)
	}
	r.stats.starts += p.starts
	r.stats.retries += p.retries
	r.stats.duplicates += p.dups
	r.stats.steers += p.steers
	r.stats.cancels += p.cancels
	r.stats.retryable += p.retryable
}

// holds are the subscribers a load holds on the hosts it did not kill,
// one per session, until the check after it.
type holds struct {
	followers []*follower
	cancel    context.CancelFunc
	wg        sync.WaitGroup
}

// runner starts, steers, cancels and waits for the runs of one session.
type runner struct {
	p   *probe
	s   *sess
	rng *rand.Rand
	n   int // runs started in this load: the tags of their keys
}

// run drives the session until the host goes. With several hosts it
// then connects to another, picked at random, and goes on until the load
// ends.
func (u *runner) run(ctx context.Context) {
	for ctx.Err() == nil {
		c, err := client.Dial(ctx, u.p.env.pick(u.rng), client.Options{Token: u.p.env.token})
		if err == nil {
			u.drive(ctx, c)
			c.Close()
		}
		if !u.p.env.multi() {
			return
		}
		sleep(ctx, 10*time.Millisecond)
	}
}

// sleep waits for d or for ctx to be done.
func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// drive drives the session through c until c's host goes: first it sends
// again the requests whose replies were lost (to a kill, or with several
// hosts to a retryable error), then new runs.
func (u *runner) drive(ctx context.Context, c *client.Client) {
	for _, op := range u.s.starts {
		if op.lost {
			u.p.retries++
			if !u.send(ctx, c, op, true) {
				return
			}
		}
	}
	for _, op := range u.s.steers {
		if op.lost && !u.steerOnce(ctx, c, op, true) {
			return
		}
	}
	var open []string // runs started and not known to be over
	for ctx.Err() == nil {
		if len(open) >= 3 {
			if !u.wait(ctx, c, open[0]) {
				return
			}
			open = open[1:]
		}
		tag := fmt.Sprintf("k%d.%d", u.p.env.kill, u.n)
		u.n++
		op := u.newStart(tag)
		if !u.send(ctx, c, op, false) || len(op.replies) == 0 {
			return
		}
		run := op.replies[0].run
		ok := true
		switch x := u.rng.IntN(100); {
		case x < 35:
			ok = u.wait(ctx, c, run)
		case x < 50:
			ok = u.steer(ctx, c, run, tag) && u.wait(ctx, c, run)
		case x < 62:
			ok = u.cancel(ctx, c, run, tag)
		default:
			open = append(open, run)
		}
		if !ok {
			return
		}
	}
}

// newStart makes a run/start of a random kind: slow text, a burst of
// text, or tool calls.
func (u *runner) newStart(tag string) *startOp {
	key := u.s.key(tag)
	model := u.p.env.model.tools
	switch x := u.rng.IntN(100); {
	case x < 45:
		model = u.p.env.model.slow
	case x < 60:
		model = u.p.env.model.burst
	case x < 70 && u.p.env.model.bg != "":
		model = u.p.env.model.bg
	}
	return &startOp{key: key, params: api.StartRunParams{
		SessionID: u.s.id, Model: model, Busy: api.BusyQueue, IdempotencyKey: key,
		Input: api.Input(event.TextParts("key=" + key + " <please> & \"thanks\"")),
	}}
}

// send sends op (now and then twice at once) and records the replies. It
// reports false when the host is gone.
func (u *runner) send(ctx context.Context, c *client.Client, op *startOp, retry bool) bool {
	if !retry {
		u.s.starts = append(u.s.starts, op)
		u.p.starts++
	}
	unsure := retry && op.lostIn == u.p.env.kill
	op.lost, op.lostIn = true, u.p.env.kill
	n := 1
	if u.rng.IntN(8) == 0 {
		n = 2
		u.p.dups++
	}
	type result struct {
		res *api.RunResult
		err error
	}
	results := make([]result, n)
	var wg sync.WaitGroup
	for i := range results {
		wg.Go(func() {
			res, err := c.StartRun(ctx, op.params)
			results[i] = result{res, err}
		})
	}
	wg.Wait()
	op.rounds++
	alive, someLost := true, false
	gone := make([]bool, n)
	for i, res := range results {
		if res.err != nil && u.p.env.gone(u.p, res.err) {
			gone[i], someLost = true, true
		}
	}
	for i, res := range results {
		switch {
		case res.err == nil:
			op.lost = false
			op.replies = append(op.replies, startReply{run: res.res.ID, replayed: res.res.Replayed, kill: u.p.env.kill,
				round: op.rounds, lost: someLost, retry: retry, expect: op.logged, unsure: unsure})
		case !gone[i]:
			op.lost = false
			u.p.violate(u.s, 0, "run/start %s was refused: %v", op.key, res.err)
		default:
			alive = false
		}
	}
	return alive || !op.lost
}

// steer steers run with a new key.
func (u *runner) steer(ctx context.Context, c *client.Client, run, tag string) bool {
	key := u.s.key(tag + ".steer")
	op := &steerOp{key: key, params: api.SteerParams{RunID: run, IdempotencyKey: key,
		Input: api.Input(event.TextParts("steer=" + key))}}
	u.s.steers = append(u.s.steers, op)
	return u.steerOnce(ctx, c, op, false)
}

// steerOnce sends op and records the outcome; it reports false when the
// host is gone.
func (u *runner) steerOnce(ctx context.Context, c *client.Client, op *steerOp, retry bool) bool {
	unsure := retry && op.lostIn == u.p.env.kill
	op.lost, op.lostIn = true, u.p.env.kill
	u.p.steers++
	res, err := c.SteerRun(ctx, op.params)
	var ae *api.Error
	switch {
	case err == nil:
		op.replies = append(op.replies, steerReply{steer: res.SteerID, replayed: res.Replayed, kill: u.p.env.kill, retry: retry, expect: op.logged, unsure: unsure})
	case u.p.env.gone(u.p, err):
		return false
	case errors.As(err, &ae):
		op.replies = append(op.replies, steerReply{refused: ae.Kind, kill: u.p.env.kill, retry: retry, expect: op.logged, unsure: unsure})
		if ae.Kind != api.KindRunConflict {
			u.p.violate(u.s, 0, "run/steer %s was refused: %v", op.key, err)
		}
	}
	op.lost = false
	return true
}

// cancel cancels run after up to 150 ms or, half the time, on a cue
// from the run's own events.
func (u *runner) cancel(ctx context.Context, c *client.Client, run, tag string) bool {
	if u.rng.IntN(2) == 0 {
		if !u.cue(ctx, c, run) {
			return false
		}
	} else {
		t := time.NewTimer(time.Duration(u.rng.IntN(150)) * time.Millisecond)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return false
		}
	}
	u.p.cancels++
	res, err := c.CancelRun(ctx, api.CancelParams{RunID: run, Reason: "torture", IdempotencyKey: u.s.key(tag + ".cancel")})
	switch {
	case err == nil:
		if !record.IsTerminal(res.Status) {
			u.p.violate(u.s, 0, "run/cancel of %s returned it %s", run, res.Status)
		} else {
			u.s.acks = append(u.s.acks, termAck{run: run, status: res.Status, via: "run/cancel"})
		}
	case u.p.env.gone(u.p, err):
		return false
	default:
		u.p.violate(u.s, 0, "run/cancel of %s was refused: %v", run, err)
	}
	return true
}

// cue returns 0–60 ms after run's first step.started is visible (or at
// its end, or after a second): a tool step streams for about 40 ms and
// then writes its calls, so a cancel sent then lands anywhere in the step,
// the boundary included, where the run writes its tool calls or its
// terminal event. It reports false when the host is gone.
func (u *runner) cue(ctx context.Context, c *client.Client, run string) bool {
	cctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	seq, err := c.Subscribe(cctx, api.SubscribeParams{SessionID: u.s.id, RunID: run})
	var ae *api.Error
	switch {
	case err != nil && cctx.Err() != nil:
		return ctx.Err() == nil
	case err != nil && u.p.env.gone(u.p, err):
		return false
	case errors.As(err, &ae):
		u.p.violate(u.s, 0, "events/subscribe to run %s was refused: %v", run, err)
		return true
	case err != nil:
		return false
	}
	started := false
	for ev, err := range seq {
		if err != nil || event.IsTerminalRun(ev.Type) {
			break
		}
		if ev.Type == event.StepStarted {
			started = true
			break
		}
	}
	if started {
		t := time.NewTimer(time.Duration(u.rng.IntN(60)) * time.Millisecond)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
		}
	}
	return ctx.Err() == nil
}

// wait waits up to a second for run to end.
func (u *runner) wait(ctx context.Context, c *client.Client, run string) bool {
	w, err := c.WaitRun(ctx, api.WaitRunParams{RunID: run, TimeoutMs: 50 + u.rng.Int64N(1000)})
	switch {
	case err == nil:
		if record.IsTerminal(w.Run.Status) {
			u.s.acks = append(u.s.acks, termAck{run: run, status: w.Run.Status, via: "run/wait"})
		} else if !w.TimedOut {
			u.p.violate(u.s, 0, "run/wait of %s returned it %s before the timeout", run, w.Run.Status)
		}
	case u.p.env.gone(u.p, err):
		return false
	default:
		u.p.violate(u.s, 0, "run/wait of %s was refused: %v", run, err)
	}
	return true
}

// follower records the events of one session as a client receives them.
type follower struct {
	p     *probe
	s     *sess
	rng   *rand.Rand
	after int64
	// held, if set, is the address of the one host the follower
	// subscribes through (slot is its index), which the load does not
	// kill: it never drops the subscription nor moves to another host.
	held    string
	slot    int
	reached atomic.Int64 // the seq of the last event received
	ended   error        // why the subscription ended before the follower was stopped; set when ws returns
}

// errStop ends a follower that has nothing more to learn.
var errStop = errors.New("stop following")

// sse follows the session's SSE endpoint from f.after until the host
// goes, dropping the connection now and then and resuming with
// Last-Event-ID as an EventSource does.
func (f *follower) sse(ctx context.Context) {
	cursor, resume := f.after, false
	for ctx.Err() == nil {
		var err error
		cursor, err = f.sseOnce(ctx, cursor, resume)
		if errors.Is(err, errStop) {
			return
		}
		resume = true
		if err != nil {
			// The host is going; wait for the load to end.
			t := time.NewTimer(10 * time.Millisecond)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
			}
		}
	}
}

// sseOnce reads one SSE connection and returns the cursor it reached. A
// nil error means the follower dropped the connection on purpose.
func (f *follower) sseOnce(ctx context.Context, cursor int64, resume bool) (int64, error) {
	url := "http://" + f.p.env.pick(f.rng) + "/v1/sessions/" + f.s.id + "/events"
	if !resume {
		url += "?after=" + strconv.FormatInt(cursor, 10)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return cursor, err
	}
	req.Header.Set("Authorization", "Bearer "+f.p.env.token)
	req.Header.Set("Accept", "text/event-stream")
	if resume {
		req.Header.Set("Last-Event-ID", strconv.FormatInt(cursor, 10))
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return cursor, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		var b bytes.Buffer
		b.ReadFrom(resp.Body)
		f.p.violate(f.s, 0, "SSE after %d answered %s: %s", cursor, resp.Status, b.Bytes())
		return cursor, errStop
	}
	drop := -1
	if f.rng.IntN(3) == 0 {
		drop = 1 + f.rng.IntN(40)
	}
	br := bufio.NewReaderSize(resp.Body, 64<<10)
	var id string
	var data []byte
	for n := 0; ; {
		line, err := br.ReadBytes('\n')
		if err != nil {
			return cursor, err // a line cut short is no event
		}
		line = bytes.TrimSuffix(line, []byte("\n"))
		switch {
		case len(line) == 0 && data != nil:
			if !f.take("SSE", cursor, id, data) {
				return cursor, errStop
			}
			cursor++
			id, data = "", nil
			if n++; n == drop {
				return cursor, nil
			}
		case bytes.HasPrefix(line, []byte("id: ")):
			id = string(line[len("id: "):])
		case bytes.HasPrefix(line, []byte("data: ")):
			data = bytes.Clone(line[len("data: "):])
		}
	}
}

// take checks and records one event a follower received after cursor;
// id is the SSE id ("" for WebSocket). It reports false when the stream
// broke an invariant, which ends the follower.
func (f *follower) take(via string, cursor int64, id string, raw []byte) bool {
	var ev event.Event
	if err := json.Unmarshal(raw, &ev); err != nil {
		f.p.violate(f.s, cursor+1, "%s sent an event that does not decode (%v): %s", via, err, raw)
		return false
	}
	if via == "SSE" && id != strconv.FormatInt(ev.Seq, 10) {
		f.p.violate(f.s, ev.Seq, "SSE sent id %q for the event with seq %d", id, ev.Seq)
		return false
	}
	if ev.SessionID != f.s.id {
		f.p.violate(f.s, ev.Seq, "%s sent an event of session %s", via, ev.SessionID)
		return false
	}
	if ev.Seq != cursor+1 {
		f.p.violate(f.s, ev.Seq, "%s sent seq %d after seq %d: the stream has a gap or a duplicate", via, ev.Seq, cursor)
		return false
	}
	f.p.got = append(f.p.got, received{via: via, ev: ev, raw: raw})
	return true
}

// ws subscribes to the session over WebSocket from f.after until the host
// goes. With several hosts it then subscribes again from where it got,
// through another host, until the load ends; a held follower stays on its
// host and records why its subscription ended, if it did before ctx.
func (f *follower) ws(ctx context.Context) {
	f.reached.Store(f.after)
	cursor := f.after
	for ctx.Err() == nil {
		var err error
		if cursor, err = f.wsOnce(ctx, cursor); errors.Is(err, errStop) {
			return
		}
		if f.held != "" {
			if ctx.Err() == nil {
				f.ended = err
			}
			return
		}
		if !f.p.env.multi() {
			return
		}
		sleep(ctx, 10*time.Millisecond)
	}
}

// wsOnce follows one WebSocket subscription from cursor, and returns the
// cursor it reached and why it ended (errStop: the stream broke an
// invariant).
func (f *follower) wsOnce(ctx context.Context, cursor int64) (int64, error) {
	addr := f.held
	if addr == "" {
		addr = f.p.env.pick(f.rng)
	}
	c, err := client.Dial(ctx, addr, client.Options{Token: f.p.env.token})
	if err != nil {
		return cursor, err
	}
	defer c.Close()
	seq, err := c.Subscribe(ctx, api.SubscribeParams{SessionID: f.s.id, After: cursor})
	if err != nil {
		if ctx.Err() == nil && !f.p.env.gone(f.p, err) {
			f.p.violate(f.s, 0, "events/subscribe after %d was refused: %v", cursor, err)
			return cursor, errStop
		}
		return cursor, err
	}
	for ev, err := range seq {
		if err != nil {
			return cursor, err
		}
		raw, err := json.Marshal(ev)
		if err != nil {
			f.p.violate(f.s, ev.Seq, "WebSocket event does not encode: %v", err)
			return cursor, errStop
		}
		if !f.take("WebSocket", cursor, "", raw) {
			return cursor, errStop
		}
		cursor = ev.Seq
		f.reached.Store(cursor)
	}
	return cursor, errors.New("the subscription ended")
}
