package host_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"weft.dev/weft/api"
	"weft.dev/weft/event"
	"weft.dev/weft/host"
	"weft.dev/weft/llm/scripted"
	"weft.dev/weft/store"
	"weft.dev/weft/store/memory"
	"weft.dev/weft/store/record"
	"weft.dev/weft/store/storetest"
	"weft.dev/weft/tool"
)

// recoveryScripts are the models of the recovery tests. "gated" asks, in
// one step, for a call the policy asks about, a question, a call of the
// client's tool and a call of hold, which runs until the test releases it
// or the run ends; "hold" only calls hold; "fast" answers at once.
var recoveryScripts = map[string]string{
	"gated": `{"loop":true,"steps":[{"toolCalls":[
		{"name":"guarded","arguments":{}},
		{"name":"ask_user","arguments":{"question":"which colour?"}},
		{"name":"pick","arguments":{"n":1}},
		{"name":"hold","arguments":{}}]},
		{"text":"done"}]}`,
	"hold": `{"loop":true,"steps":[{"toolCalls":[{"name":"hold","arguments":{}}]},{"text":"done"}]}`,
	"fast": `{"loop":true,"steps":[{"text":"answer to {{input}}"}]}`,
	// stream writes its answer slowly, word by word.
	"stream": `{"loop":true,"steps":[{"text":"` + strings.Repeat("word ", 100) + `end","delayMs":5}]}`,
}

// holdTool is the tool hold: each call signals entered and runs until
// release is closed or its run ends. guarded counts the calls of the
// tool guarded that ran.
type holdTool struct {
	entered chan struct{}
	release chan struct{}

	mu      sync.Mutex
	guarded int
}

func (h *holdTool) ran() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.guarded
}

// newRecoveryHost starts a host on st with the recovery tests' models and
// tools, under a policy that asks before every call of guarded.
func newRecoveryHost(t *testing.T, st store.Store) (*host.Host, *holdTool) {
	t.Helper()
	ht := &holdTool{entered: make(chan struct{}, 16), release: make(chan struct{})}
	hold, err := tool.Func("hold", "Run until released.", func(ctx context.Context, _ *tool.Call, _ struct{}) (tool.Result, error) {
		ht.entered <- struct{}{}
		select {
		case <-ht.release:
			return tool.Result{Output: "released"}, nil
		case <-ctx.Done():
			return tool.Result{}, ctx.Err()
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	guarded, err := tool.Func("guarded", "A call the policy asks about.", func(context.Context, *tool.Call, struct{}) (tool.Result, error) {
		ht.mu.Lock()
		ht.guarded++
		ht.mu.Unlock()
		return tool.Result{Output: "ran"}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	reg := tool.NewRegistry()
	for _, tl := range []tool.Tool{hold, guarded} {
		if err := reg.Add(tl); err != nil {
			t.Fatal(err)
		}
	}
	h, err := host.New(context.Background(), host.Config{
		Store: st, Tools: reg, DefaultModel: "fast", CoalesceWindow: 2 * time.Millisecond, StorageRetry: 10 * time.Millisecond,
		Policy: api.Policy{Rules: []api.Rule{{Tool: "guarded", Action: api.ActionAsk, Reason: "ask first"}}},
		ResolveModel: func(name string) (*host.Model, error) {
			src, ok := recoveryScripts[name]
			if !ok {
				return nil, fmt.Errorf("unknown model %q", name)
			}
			p, err := scripted.Parse(name+".json", []byte(src))
			return &host.Model{Name: name, Provider: p, Model: name}, err
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h, ht
}

// recoverySession creates a session whose client executes the tool pick.
func recoverySession(t *testing.T, h *host.Host) string {
	t.Helper()
	s, err := h.CreateSession(context.Background(), api.CreateSessionParams{Tools: []api.ToolSpec{pickTool}})
	if err != nil {
		t.Fatal(err)
	}
	return s.ID
}

// lyingStore is a store whose append of the next batch holding an event
// of a given type commits and then reports an error, as when the
// connection drops after the database committed. Faults of the Faulty it
// wraps apply too.
type lyingStore struct {
	*storetest.Faulty

	mu    sync.Mutex
	lieOn event.Type
}

var errDropped = errors.New("the connection dropped after the commit")

// lie makes the next append that holds an event of type typ lie.
func (s *lyingStore) lie(typ event.Type) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lieOn = typ
}

func (s *lyingStore) Append(ctx context.Context, b store.Batch) error {
	if err := s.Faulty.Append(ctx, b); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lieOn != "" && slices.ContainsFunc(b.Events, func(e event.Event) bool { return e.Type == s.lieOn }) {
		s.lieOn = ""
		return errDropped
	}
	return nil
}

// runEnd checks, from the log, that run runID of session sid ended with
// want and closed what it had opened exactly once: each call of its
// steps has one result, each request one resolution, each steer one end
// (consumed or dropped), and the terminal event is the run's last.
func runEnd(t *testing.T, h *host.Host, sid, runID string, want event.Type) []event.Event {
	t.Helper()
	page, err := h.ReadEvents(context.Background(), api.ReadEventsParams{SessionID: sid, Limit: 10000})
	if err != nil {
		t.Fatal(err)
	}
	var evs []event.Event
	calls := map[string]int{}        // call ID -> results
	reqs := map[string]int{}         // request ID -> resolutions
	steers := map[string]int{}       // steer ID -> ends
	clientReq := map[string]string{} // call ID of a client tool call -> its request
	for _, e := range page.Events {
		if e.RunID != runID {
			continue
		}
		evs = append(evs, e)
		switch e.Type {
		case event.MessageCompleted:
			var d event.MessageCompletedData
			e.Decode(&d)
			for _, c := range d.ToolCalls {
				calls[c.ID] += 0
			}
		case event.ToolCallCompleted:
			var d event.ToolCallCompletedData
			e.Decode(&d)
			calls[d.ID]++
			if q, ok := clientReq[d.ID]; ok {
				reqs[q]++
			}
		case event.ApprovalRequested:
			var d event.ApprovalRequestedData
			e.Decode(&d)
			reqs[d.ApprovalID] += 0
		case event.InputRequested:
			var d event.InputRequestedData
			e.Decode(&d)
			reqs[d.RequestID] += 0
		case event.ToolCallRequested:
			var d event.ToolCallRequestedData
			e.Decode(&d)
			reqs[d.RequestID] += 0
			clientReq[d.ToolCall.ID] = d.RequestID
		case event.ApprovalResolved, event.ApprovalExpired:
			var d event.ApprovalResolvedData
			e.Decode(&d)
			reqs[d.ApprovalID]++
		case event.InputResolved:
			var d event.InputResolvedData
			e.Decode(&d)
			reqs[d.RequestID]++
		case event.SteerAccepted:
			var d event.SteerData
			e.Decode(&d)
			steers[d.SteerID] += 0
		case event.SteerConsumed, event.SteerDropped:
			var d event.SteerData
			e.Decode(&d)
			steers[d.SteerID]++
		}
	}
	if len(evs) == 0 || evs[len(evs)-1].Type != want {
		t.Fatalf("run %s: its events end with %v, want %s", runID, types(evs), want)
	}
	for what, m := range map[string]map[string]int{"tool call": calls, "request": reqs, "steer": steers} {
		for id, n := range m {
			if n != 1 {
				t.Errorf("run %s: %s %s is closed %d times, want once; the run's events: %v", runID, what, id, n, types(evs))
			}
		}
	}
	return evs
}

func types(evs []event.Event) []event.Type {
	out := make([]event.Type, len(evs))
	for i, e := range evs {
		out[i] = e.Type
	}
	return out
}

// answerAll answers the open requests of session sid: the approval with
// allow_once, the question, and the client tool call.
func answerAll(t *testing.T, h *host.Host, sid string) {
	t.Helper()
	ctx := context.Background()
	l, err := h.ListRequests(ctx, api.ListRequestsParams{SessionID: sid})
	if err != nil || len(l.Requests) != 3 {
		t.Fatalf("open requests: %+v, %v; want 3", l, err)
	}
	for _, q := range l.Requests {
		switch q.Kind {
		case event.RequestApproval:
			_, err = h.DecideApproval(ctx, api.DecideParams{ApprovalID: q.ID, Decision: event.DecisionAllowOnce})
		case event.RequestInput:
			_, err = h.AnswerInput(ctx, api.AnswerParams{RequestID: q.ID, Text: "red"})
		case event.RequestTool:
			_, err = h.ToolResult(ctx, api.ToolResultParams{RequestID: q.ID, Output: "7"})
		}
		if err != nil {
			t.Fatalf("answer %s %s: %v", q.Kind, q.ID, err)
		}
	}
}

// A run cancelled after its requests were answered, but before it parked
// (another call of the step was still running), closes only what is
// still open: the approval answered allow_once is not resolved again,
// the question's and the client tool call's results are not written
// twice, and the approved call that never ran gets its one result.
func TestCancelBeforeParkingSkipsAnsweredRequests(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, ht := newRecoveryHost(t, memory.New())
		sid := recoverySession(t, h)
		r := start(t, h, api.StartRunParams{SessionID: sid, Input: input("go"), Model: "gated"})
		<-ht.entered // the step's requests are committed; hold runs
		answerAll(t, h, sid)
		got, err := h.CancelRun(context.Background(), api.CancelParams{RunID: r.Run.ID, Reason: "stop"})
		if err != nil || got.Run.Status != record.RunCancelled {
			t.Fatalf("run/cancel = %+v, %v", got, err)
		}
		runEnd(t, h, sid, r.Run.ID, event.RunCancelled)
		if n := ht.ran(); n != 0 {
			t.Fatalf("the approved call ran %d times in a run cancelled before it settled its step", n)
		}
	})
}

// A run that a refused write cuts short while its step has requests open
// (another call of the step was still running, so it had not parked) is
// ended by the session's recovery with run.failed (kind storage), which
// closes its requests and gives every call of the step a result, as a
// cancel would.
func TestStorageFailureClosesTheRequestsOfTheRunItEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fst := &storetest.Faulty{Store: memory.New()}
		h, ht := newRecoveryHost(t, fst)
		sid := recoverySession(t, h)
		r := start(t, h, api.StartRunParams{SessionID: sid, Input: input("go"), Model: "gated"})
		<-ht.entered
		fst.Fail(diskFull)
		if _, err := h.SteerRun(context.Background(), api.SteerParams{RunID: r.Run.ID, Input: input("more")}); !errors.Is(err, api.ErrStorageUnavailable) {
			t.Fatalf("run/steer on a full disk: %v", err)
		}
		fst.Fail(nil)
		if got := wait(t, h, r.Run.ID); got.Status != record.RunFailed || got.Error == nil || got.Error.Kind != "storage" {
			t.Fatalf("run after recovery: %+v", got)
		}
		runEnd(t, h, sid, r.Run.ID, event.RunFailed)
	})
}

// When a run's terminal event commits but the writer hears an error (the
// connection dropped after the commit), the session's recovery finds the
// run ended in the log it reloads, and run/cancel, which waits for that
// end, returns: whether the lost answer was that of the run's own
// run.cancelled, or that of the run.failed the recovery wrote for a run
// whose end a full disk refused (the recovery then tries again and finds
// nothing left to close).
func TestCancelReturnsThoughTheAnswerOfItsEndWasLost(t *testing.T) {
	for _, tc := range []struct {
		name string
		full bool       // the disk is full when the run is cancelled
		lost event.Type // the terminal event whose answer is lost
		want string
	}{
		{"run's end", false, event.RunCancelled, record.RunCancelled},
		{"recovery's end", true, event.RunFailed, record.RunFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ls := &lyingStore{Faulty: &storetest.Faulty{Store: memory.New()}}
				h, ht := newRecoveryHost(t, ls)
				sid := recoverySession(t, h)
				r := start(t, h, api.StartRunParams{SessionID: sid, Input: input("go"), Model: "hold"})
				<-ht.entered
				if tc.full {
					ls.Fail(diskFull)
				}
				ls.lie(tc.lost)
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				type answer struct {
					r   *api.RunResult
					err error
				}
				done := make(chan answer, 1)
				go func() {
					r, err := h.CancelRun(ctx, api.CancelParams{RunID: r.Run.ID, Reason: "stop"})
					done <- answer{r, err}
				}()
				synctest.Wait() // the run's end failed, or its answer was lost
				ls.Fail(nil)
				got := <-done
				if got.err != nil || got.r.Run.Status != tc.want {
					t.Fatalf("run/cancel = %+v, %v; want the run %s", got.r, got.err, tc.want)
				}
				w, err := h.WaitRun(ctx, api.WaitRunParams{RunID: r.Run.ID, TimeoutMs: 10_000})
				if err != nil || w.TimedOut || w.Run.Status != tc.want {
					t.Fatalf("run/wait = %+v, %v", w, err)
				}
				runEnd(t, h, sid, r.Run.ID, map[string]event.Type{record.RunCancelled: event.RunCancelled, record.RunFailed: event.RunFailed}[tc.want])
			})
		})
	}
}

// A cancel of a run that waits for answers, whose run.cancelled commits
// though the writer hears an error, ended the run: the session's
// recovery, which finds it ended in the log, lets it go and starts the
// run queued behind it, instead of holding the ended run as its active
// one (and the queue behind it forever).
func TestCancelOfWaitingRunWhoseAnswerWasLostFreesTheQueue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ls := &lyingStore{Faulty: &storetest.Faulty{Store: memory.New()}}
		h, ht := newRecoveryHost(t, ls)
		sid := recoverySession(t, h)
		a := start(t, h, api.StartRunParams{SessionID: sid, Input: input("a"), Model: "gated"})
		<-ht.entered
		close(ht.release)
		waitFor(t, h, sid, a.Run.ID, ofType(event.ToolCallCompleted))
		synctest.Wait() // the run has parked
		b := start(t, h, api.StartRunParams{SessionID: sid, Input: input("b"), Busy: api.BusyQueue})
		ls.lie(event.RunCancelled)
		ctx := context.Background()
		if _, err := h.CancelRun(ctx, api.CancelParams{RunID: a.Run.ID, Reason: "stop"}); !errors.Is(err, api.ErrStorageUnavailable) {
			t.Fatalf("run/cancel whose answer was lost: %v", err)
		}
		if got := wait(t, h, b.Run.ID); got.Status != record.RunCompleted {
			t.Fatalf("run b, queued behind the cancelled run: %s", got.Status)
		}
		if got := wait(t, h, a.Run.ID); got.Status != record.RunCancelled {
			t.Fatalf("run a: %s", got.Status)
		}
		runEnd(t, h, sid, a.Run.ID, event.RunCancelled)
	})
}

// A session/delete whose session.deleted commits though the writer hears
// an error deleted the session: the session's recovery, which finds it
// deleted in the log, stops the session rather than taking commands
// again, and the next request finds no session (nothing is written after
// session.deleted).
func TestDeleteWhoseAnswerWasLostDeletes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ls := &lyingStore{Faulty: &storetest.Faulty{Store: memory.New()}}
		h, _ := newRecoveryHost(t, ls)
		sid := recoverySession(t, h)
		ls.lie(event.SessionDeleted)
		ctx := context.Background()
		if _, err := h.DeleteSession(ctx, api.SessionIDParams{SessionID: sid}); !errors.Is(err, api.ErrStorageUnavailable) {
			t.Fatalf("session/delete whose answer was lost: %v", err)
		}
		synctest.Wait() // the session recovers
		if _, err := h.StartRun(ctx, api.StartRunParams{SessionID: sid, Input: input("go")}); !errors.Is(err, api.ErrNotFound) {
			t.Fatalf("run/start on the deleted session: %v; want not_found", err)
		}
		evs, err := ls.Read(ctx, store.ReadParams{SessionID: sid, Limit: 100})
		if err != nil || evs[len(evs)-1].Type != event.SessionDeleted {
			t.Fatalf("the log ends with %v (%v); want session.deleted", types(evs), err)
		}
	})
}

// A steer to a run that waits for answers, whose steer.accepted commits
// though the writer hears an error, is in the log the session recovers
// from: it belongs to the run from then on, so that the run consumes it
// when it goes on, or drops it when it ends, exactly once.
func TestSteerWhoseAnswerWasLostEndsOnce(t *testing.T) {
	for _, end := range []string{"cancel", "answer"} {
		t.Run(end, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ls := &lyingStore{Faulty: &storetest.Faulty{Store: memory.New()}}
				h, ht := newRecoveryHost(t, ls)
				sid := recoverySession(t, h)
				r := start(t, h, api.StartRunParams{SessionID: sid, Input: input("go"), Model: "gated"})
				<-ht.entered
				ht.release <- struct{}{} // hold finishes; the run parks
				close(ht.release)
				waitFor(t, h, sid, r.Run.ID, ofType(event.ToolCallCompleted))
				synctest.Wait() // the run has parked
				ls.lie(event.SteerAccepted)
				ctx := context.Background()
				if _, err := h.SteerRun(ctx, api.SteerParams{RunID: r.Run.ID, Input: input("more")}); !errors.Is(err, api.ErrStorageUnavailable) {
					t.Fatalf("run/steer whose answer was lost: %v", err)
				}
				recovered(t, h, sid)
				want := event.RunCancelled
				if end == "cancel" {
					if _, err := h.CancelRun(ctx, api.CancelParams{RunID: r.Run.ID, Reason: "stop"}); err != nil {
						t.Fatal(err)
					}
				} else {
					answerAll(t, h, sid)
					want = event.RunCompleted
				}
				if got := wait(t, h, r.Run.ID); got.Status != terminalStatus(want) {
					t.Fatalf("run: %s", got.Status)
				}
				runEnd(t, h, sid, r.Run.ID, want)
			})
		})
	}
}

// A run/start whose run.queued commits though the writer hears an error
// admitted the run: the session's recovery keeps it queued, as the log
// says, and it runs once the run before it has ended; a retry with the
// same key returns it.
func TestQueuedRunWhoseAnswerWasLostRuns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ls := &lyingStore{Faulty: &storetest.Faulty{Store: memory.New()}}
		h, ht := newRecoveryHost(t, ls)
		sid := recoverySession(t, h)
		a := start(t, h, api.StartRunParams{SessionID: sid, Input: input("a"), Model: "hold"})
		<-ht.entered
		ls.lie(event.RunQueued)
		ctx := context.Background()
		p := api.StartRunParams{SessionID: sid, Input: input("b"), Busy: api.BusyQueue, IdempotencyKey: "k"}
		if _, err := h.StartRun(ctx, p); !errors.Is(err, api.ErrStorageUnavailable) {
			t.Fatalf("run/start whose answer was lost: %v", err)
		}
		if got := wait(t, h, a.Run.ID); got.Status != record.RunFailed || got.Error == nil || got.Error.Kind != "storage" {
			t.Fatalf("run a, cut short by the failure: %+v", got)
		}
		recovered(t, h, sid)
		b, err := h.StartRun(ctx, p)
		if err != nil || !b.Replayed {
			t.Fatalf("retry of run/start: %+v, %v; want the run it admitted", b, err)
		}
		if got := wait(t, h, b.Run.ID); got.Status != record.RunCompleted {
			t.Fatalf("run b: %s (%+v)", got.Status, got.Error)
		}
	})
}

// recovered waits until session sid takes commands again after a write
// failure.
func recovered(t *testing.T, h *host.Host, sid string) {
	t.Helper()
	title := "recovered"
	eventually(t, 20*time.Second, "session "+sid+" recovers", func() bool {
		_, err := h.UpdateSession(context.Background(), api.UpdateSessionParams{SessionID: sid, Title: &title})
		if err != nil && !errors.Is(err, api.ErrStorageUnavailable) {
			t.Fatal(err)
		}
		return err == nil
	})
}

// terminalStatus is the run status a terminal event records.
func terminalStatus(t event.Type) string {
	return map[event.Type]string{event.RunCompleted: record.RunCompleted, event.RunFailed: record.RunFailed,
		event.RunCancelled: record.RunCancelled, event.RunInterrupted: record.RunInterrupted}[t]
}
