package reconcile_test

import (
	"context"
	"fmt"
	"testing"

	"go.uber.org/goleak"

	"weft.dev/weft/event"
	"weft.dev/weft/host/internal/journal"
	"weft.dev/weft/host/internal/reconcile"
	"weft.dev/weft/store"
	"weft.dev/weft/store/memory"
	"weft.dev/weft/store/record"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const sid, rid = "ses_1", "run_1"

// calls are the tool calls of the step the run ends in, each left in
// another state by the crash.
var calls = map[string]event.ToolCall{
	"done":     {ID: "c_done", Name: "list_dir", Arguments: "{}"},       // started and finished
	"running":  {ID: "c_running", Name: "shell", Arguments: "{}"},       // started, never finished
	"approved": {ID: "c_approved", Name: "write_file", Arguments: "{}"}, // approved, not started
	"denied":   {ID: "c_denied", Name: "write_file", Arguments: "{}"},   // denied, refusal not written yet
	"asking":   {ID: "c_asking", Name: "write_file", Arguments: "{}"},   // approval open
	"question": {ID: "c_question", Name: "ask_user", Arguments: "{}"},   // question open
	"client":   {ID: "c_client", Name: "pick", Arguments: "{}"},         // client tool call open
	"answered": {ID: "c_answered", Name: "pick", Arguments: "{}"},       // client tool call answered
	"unopened": {ID: "c_unopened", Name: "list_dir", Arguments: "{}"},   // asked for, nothing recorded of it
}

// mustEvent is event.New for events the test builds.
func mustEvent(t *testing.T, typ event.Type, v any) event.Event {
	t.Helper()
	e, err := event.New(rid, typ, v)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// crashedLog writes the log of a run that a crash (or a refused write)
// left in the middle of a step: its calls in every state a call can be
// in, three open requests and a steer not consumed.
func crashedLog(t *testing.T, st store.Store) {
	t.Helper()
	ctx := context.Background()
	j, err := journal.Create(ctx, journal.Config{Store: st}, sid, event.SessionCreatedData{Title: "t"})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	step := []event.ToolCall{calls["done"], calls["running"], calls["approved"], calls["denied"], calls["asking"],
		calls["question"], calls["client"], calls["answered"], calls["unopened"]}
	approval := func(id, call string) event.Event {
		return mustEvent(t, event.ApprovalRequested, event.ApprovalRequestedData{ApprovalID: id, Step: 1, ToolCall: calls[call],
			Options: []string{event.DecisionAllowOnce, event.DecisionDeny}})
	}
	evs := []event.Event{
		mustEvent(t, event.RunQueued, event.RunQueuedData{Model: "m", Input: event.TextParts("go")}),
		mustEvent(t, event.RunStarted, event.RunStartedData{Model: "m"}),
		mustEvent(t, event.MessageUser, event.MessageUserData{Content: event.TextParts("go")}),
		mustEvent(t, event.StepStarted, event.StepData{Step: 1}),
		mustEvent(t, event.MessageCompleted, event.MessageCompletedData{Step: 1, ToolCalls: step}),
		mustEvent(t, event.SteerAccepted, event.SteerData{SteerID: "steer_1", Input: event.TextParts("also")}),
		approval("apr_approved", "approved"),
		approval("apr_denied", "denied"),
		approval("apr_asking", "asking"),
		mustEvent(t, event.InputRequested, event.InputRequestedData{RequestID: "inp_1", Step: 1, ToolCall: calls["question"], Question: "which?"}),
		mustEvent(t, event.ToolCallRequested, event.ToolCallRequestedData{RequestID: "tcr_1", Step: 1, ToolCall: calls["client"]}),
		mustEvent(t, event.ToolCallRequested, event.ToolCallRequestedData{RequestID: "tcr_2", Step: 1, ToolCall: calls["answered"]}),
		mustEvent(t, event.ToolCallStarted, event.ToolCallStartedData{Step: 1, ToolCall: calls["done"]}),
		mustEvent(t, event.ToolCallStarted, event.ToolCallStartedData{Step: 1, ToolCall: calls["running"]}),
		mustEvent(t, event.ToolCallCompleted, event.ToolCallCompletedData{ID: "c_done", Name: "list_dir", Output: "a.txt"}),
		mustEvent(t, event.ApprovalResolved, event.ApprovalResolvedData{ApprovalID: "apr_approved", Decision: event.DecisionAllowOnce, By: event.By{Client: "c"}}),
		mustEvent(t, event.ApprovalResolved, event.ApprovalResolvedData{ApprovalID: "apr_denied", Decision: event.DecisionDeny, By: event.By{Client: "c"}}),
		mustEvent(t, event.ToolCallCompleted, event.ToolCallCompletedData{ID: "c_answered", Name: "pick", Output: "1", By: &event.By{Client: "c"}}),
	}
	if _, err := j.Append(ctx, evs...); err != nil {
		t.Fatal(err)
	}
}

// closedLog checks the log of a run that reconcile ended with want: every
// call of its step has exactly one result, every request is closed
// exactly once (the open ones as cancelled, by policy "cancel"), its
// steer is dropped, the terminal event is last, and the records agree.
func closedLog(t *testing.T, st store.Store, want event.Type) {
	t.Helper()
	ctx := context.Background()
	evs, err := st.Read(ctx, store.ReadParams{SessionID: sid, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	results := map[string]int{}
	closed := map[string][]string{} // request -> how it was closed
	dropped := 0
	for _, e := range evs {
		switch e.Type {
		case event.ToolCallCompleted:
			var d event.ToolCallCompletedData
			e.Decode(&d)
			results[d.ID]++
			if d.ID == "c_client" {
				closed["tcr_1"] = append(closed["tcr_1"], "result by "+d.By.Policy)
			}
		case event.ApprovalResolved:
			var d event.ApprovalResolvedData
			e.Decode(&d)
			closed[d.ApprovalID] = append(closed[d.ApprovalID], d.Decision+" by "+d.By.Policy+d.By.Client)
		case event.InputResolved:
			var d event.InputResolvedData
			e.Decode(&d)
			closed[d.RequestID] = append(closed[d.RequestID], d.Status+" by "+d.By.Policy+d.By.Client)
		case event.SteerDropped:
			dropped++
		}
	}
	for name, c := range calls {
		if results[c.ID] != 1 {
			t.Errorf("call %s (%s) has %d results, want 1", c.ID, name, results[c.ID])
		}
	}
	wantClosed := map[string]string{
		"apr_approved": "allow_once by c", "apr_denied": "deny by c", "apr_asking": "cancelled by cancel",
		"inp_1": "cancelled by cancel", "tcr_1": "result by cancel",
	}
	for id, how := range wantClosed {
		if got := fmt.Sprint(closed[id]); got != "["+how+"]" {
			t.Errorf("request %s closed %s, want [%s]", id, got, how)
		}
	}
	if dropped != 1 {
		t.Errorf("%d steers dropped, want 1", dropped)
	}
	if last := evs[len(evs)-1]; last.Type != want || last.RunID != rid {
		t.Errorf("the log ends with %s of %s, want %s", last.Type, last.RunID, want)
	}
	open, err := st.Requests(ctx, store.ListRequestsParams{SessionID: sid, Statuses: []string{record.RequestOpen}, Limit: 100})
	if err != nil || len(open) != 0 {
		t.Errorf("open requests after the run ended: %+v, %v", open, err)
	}
}

// A run that recovery ends (run.interrupted after a crash, run.failed
// after a refused write) closes what its step left open, as a cancel
// does: its open approvals, questions and client tool calls are resolved
// as cancelled, and every call of the step gets a result (one that
// started and never finished, one approved or denied but not settled,
// one nothing was recorded of), so that the transcript is valid and no
// request stays open in the log.
func TestEndedRunClosesItsRequestsAndCalls(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts reconcile.Options
		want event.Type
	}{
		{"crash", reconcile.Options{}, event.RunInterrupted},
		{"storage", reconcile.Options{Failure: &event.Error{Kind: "storage", Message: "disk full"}}, event.RunFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			st := memory.New()
			crashedLog(t, st)
			j, err := journal.Open(ctx, journal.Config{Store: st}, sid)
			if err != nil {
				t.Fatal(err)
			}
			defer j.Close()
			closed, err := reconcile.Session(ctx, st, j, sid, tc.opts)
			if err != nil || fmt.Sprint(closed) != "["+rid+"]" {
				t.Fatalf("reconcile = %v, %v", closed, err)
			}
			closedLog(t, st, tc.want)
		})
	}
}

// A run that waits for answers and goes on after a restart keeps its
// requests and steer: only the call that started and never finished is
// closed (it is never run again).
func TestWaitingRunKeepsItsRequests(t *testing.T) {
	ctx := context.Background()
	st := memory.New()
	crashedLog(t, st)
	j, err := journal.Open(ctx, journal.Config{Store: st}, sid)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	last := j.LastSeq()
	waiting := func(r record.Run) bool { return r.Status == record.RunWaiting }
	closed, err := reconcile.Session(ctx, st, j, sid, reconcile.Options{Waiting: waiting})
	if err != nil || len(closed) != 0 {
		t.Fatalf("reconcile = %v, %v", closed, err)
	}
	evs, err := st.Read(ctx, store.ReadParams{SessionID: sid, After: last, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 1 || evs[0].Type != event.ToolCallCompleted {
		t.Fatalf("reconcile wrote %+v; want only the running call's result", evs)
	}
	var d event.ToolCallCompletedData
	if err := evs[0].Decode(&d); err != nil || d.ID != "c_running" || !d.IsError || d.Output != reconcile.InterruptedOutput {
		t.Fatalf("result %+v, %v", d, err)
	}
	open, err := st.Requests(ctx, store.ListRequestsParams{SessionID: sid, Statuses: []string{record.RequestOpen}, Limit: 100})
	if err != nil || len(open) != 3 {
		t.Fatalf("open requests: %d, %v; want 3", len(open), err)
	}
	r, err := st.Run(ctx, rid)
	if err != nil || r.Status != record.RunWaiting {
		t.Fatalf("run: %+v, %v", r, err)
	}
}
