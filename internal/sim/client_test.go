package sim

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"weft.dev/weft/api"
	"weft.dev/weft/event"
	"weft.dev/weft/host"
	"weft.dev/weft/store/record"
)

// command is a client request in flight: a goroutine calls the host, and
// the driver applies the outcome once it has returned, in the order the
// commands were issued.
type command struct {
	what  string
	keyed bool
	gen   int // the host generation it was sent to
	race  int // commands sent at once share a race number (0: none)
	done  chan struct{}
	apply func() // set before done closes
}

// issue sends a request: call runs in a goroutine of its own (it may
// block, as run/cancel and run/wait do), then is applied by the driver.
func issue[R any](w *world, what string, keyed bool, call func(ctx context.Context, h *host.Host) (R, error), then func(r R, err error)) {
	c := &command{what: what, keyed: keyed, gen: w.gen, race: w.racing, done: make(chan struct{})}
	w.cmds = append(w.cmds, c)
	w.stats.commands++
	w.tracef("→ %s", what)
	ctx, h := w.ctx, w.h
	go func() {
		defer close(c.done)
		r, err := call(ctx, h)
		c.apply = func() { then(r, err) }
	}()
}

// collect applies the outcomes of the commands that returned. Commands
// that raced are applied once all of them returned, and their lines in
// the trace sorted: which of them won is up to the scheduler, not the
// seed.
func (w *world) collect() {
	running := map[int]bool{}
	for _, c := range w.cmds {
		select {
		case <-c.done:
		default:
			running[c.race] = true
		}
	}
	kept := w.cmds[:0]
	var raced []*command
	for _, c := range w.cmds {
		select {
		case <-c.done:
			if c.race == 0 {
				c.apply()
			} else if !running[c.race] {
				raced = append(raced, c)
			} else {
				kept = append(kept, c)
			}
		default:
			kept = append(kept, c)
		}
	}
	clear(w.cmds[len(kept):])
	w.cmds = kept
	if len(raced) > 0 {
		n := len(w.trace)
		for _, c := range raced {
			c.apply()
		}
		slices.Sort(w.trace[n:])
	}
}

// keyedPending reports whether a request with an idempotency key is in
// flight. The host serialises requests by key on striped mutexes, and a
// goroutine waiting on a mutex is not durably blocked: a second keyed
// request behind one that waits (run/cancel waits for the run's end)
// would keep the bubble from ever being quiescent. So the client sends
// one keyed request at a time (but for races it sends on purpose).
func (w *world) keyedPending() bool {
	for _, c := range w.cmds {
		if c.keyed {
			return true
		}
	}
	return false
}

// client is what the client asked and was told, checked against the logs.
type client struct {
	// starts are the run/start requests by token (the first word of
	// their input).
	starts map[string]*sent
	// answers are the answers to requests, by request ID.
	answers map[string]*answered
	// keyed are the requests sent with a key, for retries.
	keyed []*keyedReq
	// conflicted are the keys sent with other params too: when the first
	// request never stored its receipt, one of those may have, and an
	// exact retry of the first is then a conflict.
	conflicted map[string]bool
	// verify are checks of acknowledgements, run by the next check.
	verify []func(w *world) string
}

func newClient() client {
	return client{starts: map[string]*sent{}, answers: map[string]*answered{}, conflicted: map[string]bool{}}
}

// sent is one logical run/start or run/steer (a token), maybe sent
// several times with its key.
type sent struct {
	token, key string
	busy       string // run/start's busy policy
	session    *simSession
	// acked is the run or steer the acknowledgements named.
	acked string
	// steer is set when it was acknowledged as a steer.
	steer bool
}

// answered is what the client was told about its answers to one request.
type answered struct {
	fresh []string // the answers acknowledged as first answers
}

// keyedReq is a request sent with a key, which the client may send again:
// exactly (conflict false), or with the same key and other params.
type keyedReq struct {
	session *simSession
	resend  func(conflict bool)
}

// kindOf is the kind of err a client sees: an *api.Error's kind, or
// internal for anything else (the RPC layer's -32603).
func kindOf(err error) api.Kind {
	var ae *api.Error
	if errors.As(err, &ae) {
		return ae.Kind
	}
	return api.KindInternal
}

// errOK checks an error a command returned: a command sent to an older
// host (that crashed or closed) may fail in any way, as a connection to
// a dead process does; otherwise the error's kind must be one of allowed
// or one every command may get (the store is unavailable, the host is
// closing).
func (w *world) errOK(c string, gen int, err error, allowed ...api.Kind) {
	if gen != w.gen || errors.Is(err, context.Canceled) {
		return
	}
	k := kindOf(err)
	switch k {
	case api.KindStorageUnavailable, api.KindOverloaded:
		return
	}
	for _, a := range allowed {
		if k == a {
			return
		}
	}
	w.fail("%s returned %v (kind %s), which it must not", c, err, k)
}

// allowedFor returns allowed, with idempotency conflicts when a request
// with key and other params was sent.
func (w *world) allowedFor(key string, allowed ...api.Kind) []api.Kind {
	if key != "" && w.client.conflicted[key] {
		return append(allowed, api.KindIdempotencyConflict)
	}
	return allowed
}

// token makes a token for a run's or a steer's input.
func (w *world) token(prefix string) string {
	w.nextToken++
	return fmt.Sprintf("%s%d", prefix, w.nextToken)
}

// key makes an idempotency key, or "" (p is the chance of one).
func (w *world) key(p float64) string {
	if w.keyedPending() || w.rng.Float64() >= p {
		return ""
	}
	w.nextKey++
	return fmt.Sprintf("k%d", w.nextKey)
}

// createSession creates slot k's session.
func (w *world) createSession(s *simSession, conflictOf *simSession) {
	p := api.CreateSessionParams{Title: s.title, Model: fmt.Sprintf("sim:%d", s.k), Tools: clientTools, IdempotencyKey: s.key}
	what := fmt.Sprintf("session/create s%d", s.k)
	if s.key != "" {
		what += " key=" + s.key
	}
	if conflictOf != nil {
		what += fmt.Sprintf(" (conflicts with s%d)", conflictOf.k)
	}
	gen := w.gen
	w.created = true
	issue(w, what, s.key != "", func(ctx context.Context, h *host.Host) (*api.SessionResult, error) { return h.CreateSession(ctx, p) },
		func(r *api.SessionResult, err error) {
			if err != nil {
				w.tracef("← %s: %v", what, err)
				if conflictOf != nil && kindOf(err) == api.KindIdempotencyConflict {
					return
				}
				if s.log != nil && s.log.deleted {
					// The replay of a create reports the session as it is now.
					w.errOK(what, gen, err, w.allowedFor(s.key, api.KindNotFound)...)
					return
				}
				w.errOK(what, gen, err, w.allowedFor(s.key)...)
				return
			}
			w.stats.acked++
			w.tracef("← %s: %s replayed=%v", what, r.ID, r.Replayed)
			if conflictOf != nil && (r.Replayed || conflictOf.id != "") {
				w.fail("%s: a create with key %s and other params was applied (replayed=%v) after the first was acknowledged", what, s.key, r.Replayed)
			}
			if s.id != "" && s.id != r.ID {
				w.fail("%s: key %s made two sessions, %s and %s", what, s.key, s.id, r.ID)
			}
			s.id = r.ID
			w.client.verify = append(w.client.verify, func(w *world) string {
				if s.log == nil || len(s.log.events) == 0 {
					return fmt.Sprintf("%s was acknowledged (%s) but its log is empty", what, r.ID)
				}
				return ""
			})
		})
}

// startRun sends run/start for a new token, or again for req.
func (w *world) startRun(s *simSession, p api.StartRunParams, req *sent) {
	what := fmt.Sprintf("run/start %s %s busy=%s", w.name(s.id), req.token, p.Busy)
	if p.IdempotencyKey != "" {
		what += " key=" + p.IdempotencyKey
	}
	gen := w.gen
	issue(w, what, p.IdempotencyKey != "", func(ctx context.Context, h *host.Host) (*api.RunResult, error) { return h.StartRun(ctx, p) },
		func(r *api.RunResult, err error) {
			if err != nil {
				w.tracef("← %s: %v", what, err)
				w.errOK(what, gen, err, w.allowedFor(p.IdempotencyKey, api.KindRunConflict, api.KindNotFound)...)
				return
			}
			w.stats.acked++
			id, steer := r.ID, false
			if r.Steer != nil {
				id, steer = r.Steer.SteerID, true
			}
			w.tracef("← %s: %s (steer=%v) %s replayed=%v", what, id, steer, r.Status, r.Replayed)
			w.ack(what, req, id, steer)
		})
}

// ack records that req was acknowledged as id, which must be what any
// earlier acknowledgement of it said, and durable.
func (w *world) ack(what string, req *sent, id string, steer bool) {
	if req.acked != "" && (req.acked != id || req.steer != steer) {
		w.fail("%s: acknowledged as %s, but an earlier reply with the same key said %s", what, id, req.acked)
	}
	req.acked, req.steer = id, steer
	w.client.verify = append(w.client.verify, func(w *world) string {
		got, ok := req.session.log.tokens[req.token]
		if !ok {
			return fmt.Sprintf("%s was acknowledged as %s, but the log has no run or steer with input %s", what, id, req.token)
		}
		if got != id {
			return fmt.Sprintf("%s was acknowledged as %s, but the log's run or steer with input %s is %s", what, id, req.token, got)
		}
		return ""
	})
}

// steer sends run/steer.
func (w *world) steer(s *simSession, p api.SteerParams, req *sent) {
	what := fmt.Sprintf("run/steer %s %s", p.RunID, req.token)
	if p.ExpectedRunID != "" {
		what += " expected=" + p.ExpectedRunID
	}
	if p.IdempotencyKey != "" {
		what += " key=" + p.IdempotencyKey
	}
	gen := w.gen
	issue(w, what, p.IdempotencyKey != "", func(ctx context.Context, h *host.Host) (*api.SteerReceipt, error) { return h.SteerRun(ctx, p) },
		func(r *api.SteerReceipt, err error) {
			if err != nil {
				w.tracef("← %s: %v", what, err)
				w.errOK(what, gen, err, api.KindRunConflict, api.KindNotFound)
				return
			}
			w.stats.acked++
			w.tracef("← %s: %s replayed=%v", what, r.SteerID, r.Replayed)
			if r.RunID != p.RunID {
				w.fail("%s: the steer went to run %s", what, r.RunID)
			}
			w.ack(what, req, r.SteerID, true)
		})
}

// cancelTimeout is how long the client waits for run/cancel.
const cancelTimeout = 10 * time.Minute

// cancelRun sends run/cancel, and gives up after cancelTimeout.
func (w *world) cancelRun(s *simSession, runID, key string) {
	p := api.CancelParams{RunID: runID, Reason: "sim", IdempotencyKey: key}
	what := fmt.Sprintf("run/cancel %s", runID)
	if key != "" {
		what += " key=" + key
	}
	gen := w.gen
	issue(w, what, key != "", func(ctx context.Context, h *host.Host) (*api.RunResult, error) {
		ctx, cancel := context.WithTimeout(ctx, cancelTimeout)
		defer cancel()
		return h.CancelRun(ctx, p)
	}, func(r *api.RunResult, err error) {
		if errors.Is(err, context.DeadlineExceeded) {
			w.tracef("← %s: no answer in %v", what, cancelTimeout)
			if gen == w.gen {
				w.client.verify = append(w.client.verify, func(w *world) string {
					if rs := s.log.runs[runID]; rs != nil && rs.terminal != "" {
						return fmt.Sprintf("%s did not return in %v, though the run ended (%s)", what, cancelTimeout, rs.terminal)
					}
					return ""
				})
			}
			return
		}
		if err != nil {
			w.tracef("← %s: %v", what, err)
			w.errOK(what, gen, err, api.KindNotFound)
			return
		}
		w.stats.acked++
		w.tracef("← %s: %s", what, r.Status)
		if !record.IsTerminal(r.Status) {
			w.fail("%s returned the run %s: a cancel returns once the run has ended", what, r.Status)
		}
		w.client.verify = append(w.client.verify, func(w *world) string {
			rs := s.log.runs[runID]
			if rs == nil || rs.terminal == "" {
				return fmt.Sprintf("%s returned %s, but the log has no terminal event of the run", what, r.Status)
			}
			if want := terminalStatus(rs.terminal); want != r.Status {
				return fmt.Sprintf("%s returned %s, but the log ends the run with %s", what, r.Status, rs.terminal)
			}
			return ""
		})
	})
}

// decide sends approval/decide.
func (w *world) decide(s *simSession, id, decision, key string) {
	p := api.DecideParams{ApprovalID: id, Decision: decision, IdempotencyKey: key}
	what := fmt.Sprintf("approval/decide %s %s", id, decision)
	if key != "" {
		what += " key=" + key
	}
	gen := w.gen
	issue(w, what, key != "", func(ctx context.Context, h *host.Host) (*api.RequestResult, error) { return h.DecideApproval(ctx, p) },
		func(r *api.RequestResult, err error) {
			if err != nil {
				w.tracef("← %s: %v", what, err)
				w.errOK(what, gen, err, w.allowedFor(key, api.KindAlreadyResolved, api.KindNotFound)...)
				return
			}
			w.stats.acked++
			w.tracef("← %s: %s %s replayed=%v", what, r.Status, r.Decision, r.Replayed)
			w.answeredWith(s, what, id, decision, r)
		})
}

// answeredWith records an acknowledged answer to request id: a first
// answer (not replayed) must be the only one, and the log's; a replay
// must say what the log says.
func (w *world) answeredWith(s *simSession, what, id, answer string, r *api.RequestResult) {
	a := w.client.answers[id]
	if a == nil {
		a = &answered{}
		w.client.answers[id] = a
	}
	if !r.Replayed {
		a.fresh = append(a.fresh, answer)
		if len(a.fresh) > 1 {
			w.fail("%s: request %s was answered first twice: %q", what, id, a.fresh)
		}
	}
	w.client.verify = append(w.client.verify, func(w *world) string {
		q := s.log.reqs[id]
		if q == nil || q.resolved == 0 {
			return fmt.Sprintf("%s was acknowledged, but the log has not resolved request %s", what, id)
		}
		if q.answer != answer {
			return fmt.Sprintf("%s was acknowledged, but the log resolved request %s with %q", what, id, q.answer)
		}
		return ""
	})
}

// answer sends input/answer.
func (w *world) answer(s *simSession, id string, p api.AnswerParams) {
	p.RequestID = id
	text := p.Text
	if p.Choice != nil {
		text = fmt.Sprintf("choice %d", *p.Choice)
	}
	what := fmt.Sprintf("input/answer %s %q", id, text)
	if p.IdempotencyKey != "" {
		what += " key=" + p.IdempotencyKey
	}
	gen := w.gen
	issue(w, what, p.IdempotencyKey != "", func(ctx context.Context, h *host.Host) (*api.RequestResult, error) { return h.AnswerInput(ctx, p) },
		func(r *api.RequestResult, err error) {
			if err != nil {
				w.tracef("← %s: %v", what, err)
				w.errOK(what, gen, err, api.KindAlreadyResolved, api.KindNotFound)
				return
			}
			w.stats.acked++
			w.tracef("← %s: %s replayed=%v", what, r.Status, r.Replayed)
			w.answeredWith(s, what, id, r.Message, r)
		})
}

// toolResult sends tool/result, naming the request or the call.
func (w *world) toolResult(s *simSession, q *reqState, byCall bool, output, key string) {
	p := api.ToolResultParams{Output: output, IdempotencyKey: key}
	if byCall {
		p.CallID, p.SessionID = q.call, s.id
	} else {
		p.RequestID = q.id
	}
	what := fmt.Sprintf("tool/result %s %q", q.id, output)
	if key != "" {
		what += " key=" + key
	}
	gen := w.gen
	issue(w, what, key != "", func(ctx context.Context, h *host.Host) (*api.RequestResult, error) { return h.ToolResult(ctx, p) },
		func(r *api.RequestResult, err error) {
			if err != nil {
				w.tracef("← %s: %v", what, err)
				w.errOK(what, gen, err, api.KindAlreadyResolved, api.KindNotFound)
				return
			}
			w.stats.acked++
			w.tracef("← %s: %s replayed=%v", what, r.Status, r.Replayed)
			w.answeredWith(s, what, q.id, output, r)
		})
}

// wait sends run/wait.
func (w *world) wait(s *simSession, runID string, timeoutMs int64) {
	p := api.WaitRunParams{RunID: runID, TimeoutMs: timeoutMs}
	what := fmt.Sprintf("run/wait %s %dms", runID, timeoutMs)
	gen := w.gen
	issue(w, what, false, func(ctx context.Context, h *host.Host) (*api.WaitRunResult, error) { return h.WaitRun(ctx, p) },
		func(r *api.WaitRunResult, err error) {
			if err != nil {
				w.tracef("← %s: %v", what, err)
				w.errOK(what, gen, err, api.KindNotFound)
				return
			}
			w.tracef("← %s: %s timedOut=%v", what, r.Run.Status, r.TimedOut)
			if r.TimedOut == record.IsTerminal(r.Run.Status) {
				w.fail("%s: timedOut=%v with the run %s", what, r.TimedOut, r.Run.Status)
			}
			if r.TimedOut {
				return
			}
			w.client.verify = append(w.client.verify, func(w *world) string {
				rs := s.log.runs[runID]
				if rs == nil || rs.terminal == "" || terminalStatus(rs.terminal) != r.Run.Status {
					return fmt.Sprintf("%s returned the run %s, which the log does not end so", what, r.Run.Status)
				}
				return ""
			})
		})
}

// read sends events/read and checks the page against the log.
func (w *world) read(s *simSession, after int64, limit int) {
	p := api.ReadEventsParams{SessionID: s.id, After: after, Limit: limit}
	what := fmt.Sprintf("events/read %s after=%d limit=%d", w.name(s.id), after, limit)
	gen := w.gen
	issue(w, what, false, func(ctx context.Context, h *host.Host) (*api.ReadEventsResult, error) { return h.ReadEvents(ctx, p) },
		func(r *api.ReadEventsResult, err error) {
			if err != nil {
				w.tracef("← %s: %v", what, err)
				w.errOK(what, gen, err, api.KindNotFound)
				return
			}
			w.tracef("← %s: %d events, next %d, more=%v", what, len(r.Events), r.NextCursor, r.HasMore)
			w.client.verify = append(w.client.verify, func(w *world) string {
				for i, e := range r.Events {
					if e.Seq != after+int64(i)+1 {
						return fmt.Sprintf("%s: event %d of the page has seq %d", what, i, e.Seq)
					}
					if msg := s.log.same(e); msg != "" {
						return what + ": " + msg
					}
				}
				if n := len(r.Events); n > 0 && r.NextCursor != r.Events[n-1].Seq || n == 0 && r.NextCursor != after {
					return fmt.Sprintf("%s: nextCursor %d after %d events", what, r.NextCursor, n)
				}
				return ""
			})
		})
}

// update sends session/update with a new title.
func (w *world) update(s *simSession, title string) {
	p := api.UpdateSessionParams{SessionID: s.id, Title: &title}
	what := fmt.Sprintf("session/update %s title=%q", w.name(s.id), title)
	gen := w.gen
	issue(w, what, false, func(ctx context.Context, h *host.Host) (*api.SessionResult, error) { return h.UpdateSession(ctx, p) },
		func(r *api.SessionResult, err error) {
			if err != nil {
				w.tracef("← %s: %v", what, err)
				w.errOK(what, gen, err, api.KindNotFound)
				return
			}
			w.stats.acked++
			w.tracef("← %s: ok", what)
			if r.Title != title {
				w.fail("%s returned the title %q", what, r.Title)
			}
		})
}

// deleteSession sends session/delete.
func (w *world) deleteSession(s *simSession) {
	p := api.SessionIDParams{SessionID: s.id}
	what := fmt.Sprintf("session/delete %s", w.name(s.id))
	gen := w.gen
	issue(w, what, false, func(ctx context.Context, h *host.Host) (*api.DeleteResult, error) { return h.DeleteSession(ctx, p) },
		func(r *api.DeleteResult, err error) {
			if err != nil {
				w.tracef("← %s: %v", what, err)
				w.errOK(what, gen, err, api.KindNotFound, api.KindRunConflict)
				return
			}
			w.stats.acked++
			w.tracef("← %s: deleted", what)
			w.client.verify = append(w.client.verify, func(w *world) string {
				if !s.log.deleted {
					return fmt.Sprintf("%s was acknowledged, but the log has no session.deleted", what)
				}
				return ""
			})
		})
}

// subscriber follows a session's events: a subscription, then, after it
// ends, another from its cursor (a step of its own).
type subscriber struct {
	n       int
	session *simSession
	done    chan struct{} // closed when the current subscription's goroutine returns

	mu      sync.Mutex
	got     []event.Event // received since the last check
	cursor  int64         // the last seq received
	checked int64         // the last seq checked
	ended   bool
	err     error
}

// follow starts sub's next subscription, from its cursor.
func (w *world) follow(sub *subscriber) {
	h, ctx, sid := w.h, w.ctx, sub.session.id
	sub.mu.Lock()
	from := sub.cursor
	sub.ended, sub.err = false, nil
	sub.mu.Unlock()
	sub.done = make(chan struct{})
	w.tracef("→ subscribe #%d %s after=%d", sub.n, w.name(sid), from)
	go func() {
		defer close(sub.done)
		seq, err := h.Subscribe(ctx, api.SubscribeParams{SessionID: sid, After: from})
		if err == nil {
			for e, ierr := range seq {
				if ierr != nil {
					err = ierr
					break
				}
				sub.mu.Lock()
				sub.got = append(sub.got, e)
				sub.cursor = e.Seq
				sub.mu.Unlock()
			}
		}
		sub.mu.Lock()
		sub.ended, sub.err = true, err
		sub.mu.Unlock()
	}()
}

// take returns the events received since the last call, and whether the
// subscription ended (and why).
func (sub *subscriber) take() ([]event.Event, bool, error) {
	sub.mu.Lock()
	defer sub.mu.Unlock()
	got := sub.got
	sub.got = nil
	return got, sub.ended, sub.err
}

// terminalStatus is the run status of a terminal event type.
func terminalStatus(t event.Type) string {
	return map[event.Type]string{event.RunCompleted: record.RunCompleted, event.RunFailed: record.RunFailed,
		event.RunCancelled: record.RunCancelled, event.RunInterrupted: record.RunInterrupted}[t]
}

// tokenOf returns the token of an input (its first word).
func tokenOf(parts []event.Part) string {
	if len(parts) == 0 {
		return ""
	}
	tok, _, _ := strings.Cut(parts[0].Text, " ")
	return tok
}
