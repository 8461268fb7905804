package torture

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-cmp/cmp"

	"weft.dev/weft/api"
	"weft.dev/weft/client"
	"weft.dev/weft/event"
	"weft.dev/weft/store"
	"weft.dev/weft/store/postgres"
	"weft.dev/weft/store/record"
	"weft.dev/weft/store/sqlite"
)

// logReader is what the checks read of a store.
type logReader interface {
	Read(ctx context.Context, p store.ReadParams) ([]event.Event, error)
	Close() error
}

// openStore opens the rig's store, SQLite or PostgreSQL.
func (r *rig) openStore(ctx context.Context) (logReader, error) {
	if strings.HasPrefix(r.store, "postgres") {
		return postgres.Open(ctx, postgres.Config{URL: r.store, MaxConns: 2})
	}
	return sqlite.Open(ctx, sqlite.Config{Path: r.store})
}

// checkStore opens the store and checks every session under load: its
// log, what the followers received, and (with one host, none of which
// runs now) what the replies acknowledged. With several hosts the others
// run on; the replies are checked through them once every run is over
// (checkHost), when nothing a client gave up on can still commit.
func (r *rig) checkStore() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, err := r.openStore(ctx)
	if err != nil {
		r.fatalf("open the store after the kill: %v", err)
	}
	defer st.Close()
	for _, s := range r.sessions {
		var evs []event.Event
		for after := int64(0); ; {
			page, err := st.Read(ctx, store.ReadParams{SessionID: s.id, After: after, Limit: 1000})
			if err != nil {
				r.violate(s, 0, "the store cannot read the log after seq %d: %v", after, err)
				break
			}
			evs = append(evs, page...)
			if len(page) < 1000 {
				break
			}
			after = page[len(page)-1].Seq
		}
		log, ok := r.checkLog(s, evs, "the store")
		if !ok {
			continue
		}
		s.log = log
		r.checkReceived(s)
		if !r.multi() {
			r.checkReplies(s)
		}
	}
}

// checkHost checks, through a restarted host (srv, or with several
// hosts one picked at random for each session) and once no run is active,
// that it serves the log as stored and that recovery closed every run,
// tool call and steer. With several hosts it also checks the replies
// against the log, and the subscribers held of a load (nil for none):
// each received every event of its session once, in order, identical to
// the log.
func (r *rig) checkHost(srv *server, held *holds) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	clients := map[*server]*client.Client{}
	defer func() {
		for _, c := range clients {
			c.Close()
		}
	}()
	for _, s := range r.sessions {
		via := srv
		if via == nil {
			via = r.anyHost()
		}
		c := clients[via]
		if c == nil {
			var err error
			if c, err = r.dial(ctx, via); err != nil {
				r.fatalf("dial the restarted host %d: %v", via.slot, err)
			}
			clients[via] = c
		}
		runs := r.waitIdle(ctx, c, s)
		r.waitProcesses(ctx, s)
		var evs []event.Event
		for after := int64(0); ; {
			page, err := c.ReadEvents(ctx, api.ReadEventsParams{SessionID: s.id, After: after, Limit: 1000})
			if err != nil {
				r.violate(s, 0, "the restarted host cannot read the log after seq %d: %v", after, err)
				break
			}
			evs = append(evs, page.Events...)
			if !page.HasMore {
				break
			}
			after = page.NextCursor
		}
		log, ok := r.checkLog(s, evs, "the restarted host")
		if !ok {
			continue
		}
		s.log = log
		if r.multi() {
			r.checkReplies(s)
		}
		r.checkRuns(s, runs)
		got, err := c.GetSession(ctx, api.SessionGetParams{SessionID: s.id})
		switch {
		case err != nil:
			r.violate(s, 0, "session/get after the restart: %v", err)
		case got.ActiveRunID != "":
			r.violate(s, 0, "session/get after the restart names active run %s", got.ActiveRunID)
		case got.LastSeq > int64(len(log)) && r.lateProcessEnds(ctx, c, s, int64(len(log))):
			// A background shell's end, recorded after its row (a
			// moment after the log was read): the next check's.
		case got.LastSeq != int64(len(log)):
			r.violate(s, 0, "session/get after the restart says lastSeq %d; the log ends at %d", got.LastSeq, len(log))
		}
	}
	if held != nil {
		r.checkHeld(held)
	}
}

// lateProcessEnds reports whether every event of s after seq after is a
// process.exited: a background shell's end, which its host records in the
// log a moment after the process's row, so after a check may read it.
func (r *rig) lateProcessEnds(ctx context.Context, c *client.Client, s *sess, after int64) bool {
	page, err := c.ReadEvents(ctx, api.ReadEventsParams{SessionID: s.id, After: after, Limit: 1000})
	if err != nil || len(page.Events) == 0 {
		return false
	}
	for _, ev := range page.Events {
		if ev.Type != event.ProcessExited {
			return false
		}
	}
	return true
}

// checkHeld checks the subscribers a load held on the hosts it did not
// kill, once their sessions are idle: each received every event of the
// log after its cursor (waiting up to 10 s for the last), once, in order,
// identical to the log; and its subscription did not end. It stops them.
func (r *rig) checkHeld(h *holds) {
	deadline := time.Now().Add(10 * time.Second)
	for _, f := range h.followers {
		for f.reached.Load() < int64(len(f.s.log)) && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
	}
	h.cancel()
	h.wg.Wait()
	byID := map[string]*sess{}
	for _, s := range r.sessions {
		byID[s.id] = s
	}
	for _, f := range h.followers {
		s := f.s
		if byID[s.id] == nil {
			continue
		}
		if got := f.reached.Load(); got < int64(len(s.log)) {
			r.violate(s, got+1, "the subscriber held on host %d, which was not killed, received up to seq %d from seq %d; the log ends at %d (its subscription: %v)",
				f.slot, got, f.after, len(s.log), f.ended)
		} else if f.ended != nil {
			r.violate(s, 0, "the subscription held on host %d, which was not killed, ended: %v", f.slot, f.ended)
		}
		var got []received
		for _, g := range f.p.got {
			// Events after the check (a background process's end) are
			// the next check's.
			if g.ev.Seq <= int64(len(s.log)) {
				got = append(got, g)
			}
		}
		r.stats.held += len(got)
		s.got = append(s.got, got...)
		r.checkReceived(s)
		for _, v := range f.p.bad {
			r.add(v)
		}
		r.stats.retryable += f.p.retryable
	}
}

// waitIdle polls run/list until no run of s is active, for up to 30 s
// (the runs queued at the kill run after the restart), and returns the
// runs.
func (r *rig) waitIdle(ctx context.Context, c *client.Client, s *sess) []record.Run {
	deadline := time.NewTimer(30 * time.Second)
	defer deadline.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		res, err := c.ListRuns(ctx, api.ListRunsParams{SessionID: s.id})
		if err != nil {
			r.violate(s, 0, "run/list after the restart: %v", err)
			return nil
		}
		var active []string
		for _, run := range res.Runs {
			if !record.IsTerminal(run.Status) {
				active = append(active, run.ID+" "+run.Status)
			}
		}
		if len(active) == 0 {
			return res.Runs
		}
		select {
		case <-tick.C:
		case <-deadline.C:
			r.violate(s, 0, "30 s after the restart, runs are still active: %s", strings.Join(active, ", "))
			return res.Runs
		}
	}
}

// waitProcesses waits, on PostgreSQL, until no process of s is running:
// the load's background processes end within a second, and those of a
// killed host must be reconciled (abandoned) by the host that takes the
// session over, within the lease TTL. A process still running after the
// TTL + 5 s is a violation, named with its host and epoch. It returns at
// once on SQLite, whose host reconciles every process as it starts.
func (r *rig) waitProcesses(ctx context.Context, s *sess) {
	if !strings.HasPrefix(r.store, "postgres") {
		return
	}
	st, err := postgres.Open(ctx, postgres.Config{URL: r.store, MaxConns: 1})
	if err != nil {
		r.fatalf("open the store: %v", err)
	}
	defer st.Close()
	deadline := time.Now().Add(leaseTTL + 5*time.Second)
	for {
		procs, err := st.Processes(ctx, store.ListProcessesParams{SessionID: s.id, Statuses: []string{record.ProcessRunning}})
		if err != nil {
			r.violate(s, 0, "list the session's processes: %v", err)
			return
		}
		if len(procs) == 0 {
			return
		}
		if time.Now().After(deadline) {
			for _, p := range procs {
				r.violate(s, 0, "process %s (%s) of host %q (%s), epoch %d, is still running %v after the session went idle",
					p.ID, p.Spec.Command, p.Host, r.holderState(p.Host), p.Epoch, leaseTTL+5*time.Second)
			}
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// holderState says whether a lease holder (HOSTNAME/PID/RANDOM (what)) is
// one of the hosts running now.
func (r *rig) holderState(holder string) string {
	parts := strings.SplitN(holder, "/", 3)
	if len(parts) == 3 {
		for _, s := range r.srvs {
			if s != nil && s.alive() && strconv.Itoa(s.cmd.Process.Pid) == parts[1] {
				return fmt.Sprintf("host %d, running", s.slot)
			}
		}
	}
	return "a host that is gone"
}

// checkLog checks that evs, s's log as read from where, is contiguous from
// seq 1, starts with session.created, and begins with every event of the
// previous check, byte for byte. It returns the log with the encoding of
// each event and whether it is sound enough to check further.
func (r *rig) checkLog(s *sess, evs []event.Event, where string) ([]logged, bool) {
	log := make([]logged, len(evs))
	for i, ev := range evs {
		if ev.Seq != int64(i+1) {
			r.violate(s, ev.Seq, "%s: position %d of the log holds seq %d: the log has a gap or a duplicate", where, i+1, ev.Seq)
			return nil, false
		}
		if ev.SessionID != s.id {
			r.violate(s, ev.Seq, "%s: the event belongs to session %s", where, ev.SessionID)
			return nil, false
		}
		raw, err := json.Marshal(ev)
		if err != nil {
			r.violate(s, ev.Seq, "%s: the event does not encode: %v", where, err)
			return nil, false
		}
		log[i] = logged{ev: ev, raw: raw}
	}
	r.stats.logEvents += len(log)
	if len(log) == 0 || log[0].ev.Type != event.SessionCreated {
		r.violate(s, 1, "%s: the log does not start with session.created (it has %d events)", where, len(log))
		return nil, false
	}
	if len(log) < len(s.log) {
		r.violate(s, int64(len(log)+1), "%s: the log shrank from %d to %d events", where, len(s.log), len(log))
		return nil, false
	}
	for i, old := range s.log {
		if !bytes.Equal(old.raw, log[i].raw) {
			r.violate(s, old.ev.Seq, "%s: the event changed since the last check:\nwas %s\nnow %s", where, old.raw, log[i].raw)
			return nil, false
		}
	}
	return log, true
}

// checkReceived checks that every event the followers received is in s's
// log at its seq, byte for byte.
func (r *rig) checkReceived(s *sess) {
	for _, g := range s.got {
		switch g.via {
		case "SSE":
			r.stats.sse++
		default:
			r.stats.ws++
		}
		if g.ev.Seq < 1 || g.ev.Seq > int64(len(s.log)) {
			r.violate(s, g.ev.Seq, "a %s follower received an event the store does not hold (the log ends at seq %d): %s", g.via, len(s.log), g.raw)
			continue
		}
		stored := s.log[g.ev.Seq-1]
		if !bytes.Equal(g.raw, stored.raw) {
			r.violate(s, g.ev.Seq, "a %s follower received\n%s\nbut the store holds\n%s\ndiff (-stored +received):\n%s",
				g.via, g.raw, stored.raw, cmp.Diff(stored.ev, g.ev))
		}
	}
	s.got = nil
}

// keyOf returns the key after prefix in the first word of a run's or a
// steer's input ("key=K …", "steer=K"), or "".
func keyOf(in []event.Part, prefix string) string {
	if len(in) == 0 {
		return ""
	}
	w, _, _ := strings.Cut(in[0].Text, " ")
	k, ok := strings.CutPrefix(w, prefix)
	if !ok {
		return ""
	}
	return k
}

// checkReplies checks what replies said against s's log: every
// acknowledged run/start, run/steer, run/wait and run/cancel is durable,
// and idempotency keys made one run (or steer) each.
func (r *rig) checkReplies(s *sess) {
	runs := map[string][]string{}   // key → runs whose run.queued carries it
	steers := map[string][]string{} // key → steers whose steer.accepted carries it
	terminal := map[string]event.Type{}
	for _, l := range s.log {
		switch ev := l.ev; ev.Type {
		case event.RunQueued:
			var d event.RunQueuedData
			if err := ev.Decode(&d); err != nil {
				r.violate(s, ev.Seq, "%v", err)
			} else if k := keyOf(d.Input, "key="); k != "" {
				runs[k] = append(runs[k], ev.RunID)
			}
		case event.SteerAccepted:
			var d event.SteerData
			if err := ev.Decode(&d); err != nil {
				r.violate(s, ev.Seq, "%v", err)
			} else if k := keyOf(d.Input, "steer="); k != "" {
				steers[k] = append(steers[k], d.SteerID)
			}
		case event.RunCompleted, event.RunFailed, event.RunCancelled, event.RunInterrupted:
			terminal[ev.RunID] = ev.Type
		}
	}
	for k, ids := range runs {
		if len(ids) > 1 {
			r.violate(s, 0, "idempotency key %s made %d runs: %s", k, len(ids), strings.Join(ids, ", "))
		}
	}
	for k, ids := range steers {
		if len(ids) > 1 {
			r.violate(s, 0, "idempotency key %s made %d steers: %s", k, len(ids), strings.Join(ids, ", "))
		}
	}
	for _, op := range s.starts {
		op.logged = ""
		if ids := runs[op.key]; len(ids) > 0 {
			op.logged = ids[0]
		}
		fresh := 0
		roundFresh := map[int]int{}
		for _, rep := range op.replies {
			if !rep.replayed {
				fresh++
				roundFresh[rep.round]++
			}
			if rep.run != op.logged {
				r.violate(s, 0, "run/start %s (kill %d) replied run %s, but the log's run for the key is %q", op.key, rep.kill, rep.run, op.logged)
			}
			if rep.unsure {
				continue
			}
			if rep.retry && rep.expect != "" && !rep.replayed {
				r.violate(s, 0, "run/start %s, sent again after a restart (kill %d), made run %s anew, but the key's run %s was in the log before", op.key, rep.kill, rep.run, rep.expect)
			}
		}
		if fresh > 1 {
			r.violate(s, 0, "run/start %s got %d replies that were not replays", op.key, fresh)
		}
		for _, rep := range op.replies {
			// A round sent while the log held no run for the key makes
			// the run: one of its replies says so, unless an attempt got
			// no reply (that one may have made it).
			if rep.expect == "" && !rep.lost && !rep.unsure && roundFresh[rep.round] == 0 {
				r.violate(s, 0, "run/start %s (kill %d, retry %v) replied run %s as a replay, but the log held no run for the key before", op.key, rep.kill, rep.retry, rep.run)
				break
			}
		}
	}
	for _, op := range s.steers {
		op.logged = ""
		if ids := steers[op.key]; len(ids) > 0 {
			op.logged = ids[0]
		}
		for _, rep := range op.replies {
			if rep.refused == "" && rep.steer != op.logged {
				r.violate(s, 0, "run/steer %s (kill %d) replied steer %s, but the log's steer for the key is %q", op.key, rep.kill, rep.steer, op.logged)
			}
			if !rep.retry || rep.unsure {
				continue
			}
			switch {
			case rep.expect != "" && (rep.refused != "" || !rep.replayed || rep.steer != rep.expect):
				r.violate(s, 0, "run/steer %s, sent again after a restart (kill %d), got %+v, but its steer %s was accepted before", op.key, rep.kill, rep, rep.expect)
			case rep.expect == "" && rep.refused != api.KindRunConflict:
				r.violate(s, 0, "run/steer %s, sent again after a restart (kill %d) for a run that is over, got %+v; want run_conflict", op.key, rep.kill, rep)
			}
		}
	}
	for _, a := range s.acks {
		t, ok := terminal[a.run]
		switch {
		case !ok:
			r.violate(s, 0, "%s said run %s is %s, but the log has no terminal event for it", a.via, a.run, a.status)
		case statusOf(t) != a.status:
			r.violate(s, 0, "%s said run %s is %s, but the log ends it with %s", a.via, a.run, a.status, t)
		}
	}
	s.acks = nil
}

// statusOf returns the run status a terminal event sets.
func statusOf(t event.Type) string { return strings.TrimPrefix(string(t), "run.") }

// checkRuns checks every run of s's log, once no run is active: it is
// terminal, its terminal event is its last and only one, run/list agrees,
// and every tool call and steer in it was closed. A run that never
// started (a queued run at a kill) is never interrupted: it runs after the
// restart. Runs start in the order they were queued.
func (r *rig) checkRuns(s *sess, listed []record.Run) {
	type trace struct {
		first, last event.Event
		started     int64 // seq of run.started, 0 for none
		starts      []int64
		interrupt   bool // admitted with busy interrupt: it goes before the runs queued earlier
		terminal    []int64
		calls       map[string]int64   // tool call id → seq of its start
		asked       map[string]int64   // tool call id → seq of the message.completed that asked for it
		done        map[string][]int64 // tool call id → seqs of its results
		steers      map[string]int64
		ended       map[string][]int64
	}
	runs := map[string]*trace{}
	var order, started []string
	for _, l := range s.log {
		ev := l.ev
		if ev.RunID == "" {
			continue
		}
		tr := runs[ev.RunID]
		if tr == nil {
			tr = &trace{first: ev, calls: map[string]int64{}, asked: map[string]int64{}, done: map[string][]int64{}, steers: map[string]int64{}, ended: map[string][]int64{}}
			runs[ev.RunID] = tr
			order = append(order, ev.RunID)
		}
		tr.last = ev
		switch ev.Type {
		case event.RunQueued:
			var d event.RunQueuedData
			if err := ev.Decode(&d); err != nil {
				r.violate(s, ev.Seq, "%v", err)
			}
			tr.interrupt = d.Busy == api.BusyInterrupt
		case event.RunStarted:
			tr.started = ev.Seq
			tr.starts = append(tr.starts, ev.Seq)
			started = append(started, ev.RunID)
		case event.RunCompleted, event.RunFailed, event.RunCancelled, event.RunInterrupted:
			tr.terminal = append(tr.terminal, ev.Seq)
		case event.ToolCallStarted:
			var d event.ToolCallStartedData
			if err := ev.Decode(&d); err != nil {
				r.violate(s, ev.Seq, "%v", err)
			} else {
				tr.calls[d.ID] = ev.Seq
			}
		case event.MessageCompleted:
			var d event.MessageCompletedData
			if err := ev.Decode(&d); err != nil {
				r.violate(s, ev.Seq, "%v", err)
			}
			for _, c := range d.ToolCalls {
				tr.asked[c.ID] = ev.Seq
			}
		case event.ToolCallCompleted:
			var d event.ToolCallCompletedData
			if err := ev.Decode(&d); err != nil {
				r.violate(s, ev.Seq, "%v", err)
			} else {
				// A call the model asked for that never started (the
				// host died between the step's message and the call's
				// start) is closed by recovery with an error result.
				_, started := tr.calls[d.ID]
				_, asked := tr.asked[d.ID]
				if !started && (!asked || !d.IsError) {
					r.violate(s, ev.Seq, "run %s: tool.call.completed %s without an earlier tool.call.started (and not an error result of a call its step asked for)", ev.RunID, d.ID)
				}
				tr.done[d.ID] = append(tr.done[d.ID], ev.Seq)
			}
		case event.SteerAccepted, event.SteerConsumed, event.SteerDropped:
			var d event.SteerData
			if err := ev.Decode(&d); err != nil {
				r.violate(s, ev.Seq, "%v", err)
			} else if ev.Type == event.SteerAccepted {
				tr.steers[d.SteerID] = ev.Seq
			} else {
				tr.ended[d.SteerID] = append(tr.ended[d.SteerID], ev.Seq)
			}
		}
	}
	for _, id := range order {
		tr := runs[id]
		if tr.first.Type != event.RunQueued {
			r.violate(s, tr.first.Seq, "run %s begins with %s, not run.queued", id, tr.first.Type)
		}
		switch {
		case len(tr.terminal) == 0:
			r.violate(s, tr.last.Seq, "run %s has no terminal event after the restart; its last is %s", id, tr.last.Type)
		case len(tr.terminal) > 1:
			r.violate(s, tr.terminal[1], "run %s has %d terminal events, at seqs %v", id, len(tr.terminal), tr.terminal)
		case tr.terminal[0] != tr.last.Seq:
			r.violate(s, tr.last.Seq, "run %s goes on after its terminal event (seq %d) with %s", id, tr.terminal[0], tr.last.Type)
		case tr.started == 0 && tr.last.Type == event.RunInterrupted:
			r.violate(s, tr.last.Seq, "run %s was interrupted before it started: a queued run must run after the restart", id)
		}
		if len(tr.starts) > 1 {
			r.violate(s, tr.starts[1], "run %s started %d times, at seqs %v: a run runs once", id, len(tr.starts), tr.starts)
		}
		for call, seq := range tr.calls {
			if n := len(tr.done[call]); n != 1 {
				r.violate(s, seq, "run %s: tool call %s has %d tool.call.completed", id, call, n)
			}
		}
		// A call its step asked for that never started has at most one
		// result: recovery writes one, a cancel at the step's boundary
		// none (the transcript answers such a call with an error).
		for call, seq := range tr.asked {
			if _, ok := tr.calls[call]; !ok && len(tr.done[call]) > 1 {
				r.violate(s, seq, "run %s: tool call %s, which its step asked for and which never started, has %d tool.call.completed", id, call, len(tr.done[call]))
			}
		}
		for st, seq := range tr.steers {
			if n := len(tr.ended[st]); n != 1 {
				r.violate(s, seq, "run %s: steer %s was consumed or dropped %d times", id, st, n)
			}
		}
	}
	// Runs start in the order of their run.queued (the load admits with
	// busy queue only; a run admitted with busy interrupt would go first).
	var queue []string
	interrupt := false
	for _, id := range order {
		interrupt = interrupt || runs[id].interrupt
		if runs[id].started != 0 {
			queue = append(queue, id)
		}
	}
	if !interrupt && !slices.Equal(queue, started) {
		r.violate(s, 0, "runs started in the order %v, not in the order they were queued: %v", started, queue)
	}
	seen := map[string]bool{}
	for _, run := range listed {
		seen[run.ID] = true
		tr := runs[run.ID]
		switch {
		case tr == nil:
			r.violate(s, 0, "run/list names run %s, which has no event in the log", run.ID)
		case len(tr.terminal) > 0 && statusOf(s.log[tr.terminal[0]-1].ev.Type) != run.Status:
			r.violate(s, 0, "run/list says run %s is %s; the log ends it with %s", run.ID, run.Status, s.log[tr.terminal[0]-1].ev.Type)
		}
	}
	for _, id := range order {
		if !seen[id] {
			r.violate(s, runs[id].first.Seq, "run %s is in the log but not in run/list", id)
		}
	}
}

// tally adds s's runs and tool calls to the summary; s leaves the load.
func (r *rig) tally(s *sess) {
	if r.stats.runs == nil {
		r.stats.runs = map[string]int{}
	}
	for _, l := range s.log {
		switch l.ev.Type {
		case event.RunCompleted, event.RunFailed, event.RunCancelled, event.RunInterrupted:
			r.stats.runs[statusOf(l.ev.Type)]++
		case event.ToolCallStarted:
			r.stats.toolCalls++
		}
	}
}
