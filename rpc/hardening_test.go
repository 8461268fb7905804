package rpc_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http/httptest"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"weft.dev/weft/api"
	"weft.dev/weft/client"
	"weft.dev/weft/event"
	"weft.dev/weft/host"
	"weft.dev/weft/llm/scripted"
	"weft.dev/weft/process"
	"weft.dev/weft/rpc"
	"weft.dev/weft/rpc/rpctest"
	"weft.dev/weft/store/memory"
	"weft.dev/weft/store/storetest"
)

// hardEnv is a host with processes over a store that can be made to fail.
type hardEnv struct {
	st  *storetest.Faulty
	s   *rpc.Server
	c   *client.Client
	dir string
}

func newHardEnv(t *testing.T) *hardEnv {
	t.Helper()
	st := &storetest.Faulty{Store: memory.New()}
	m, err := process.New(process.Config{Store: st, KillGrace: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	h, err := host.New(context.Background(), host.Config{
		Store: st, Processes: m, DefaultModel: "slow", StorageRetry: 10 * time.Millisecond,
		ResolveModel: func(name string) (*host.Model, error) {
			src, ok := hostScripts[name]
			if !ok {
				return nil, fmt.Errorf("unknown model %q", name)
			}
			p, err := scripted.Parse(name, []byte(src))
			return &host.Model{Name: name, Provider: p, Model: name}, err
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	s := rpc.NewHostServer(h, rpc.HostConfig{Config: rpc.Config{Token: token}})
	srv := httptest.NewServer(rpc.HTTPHandler(s, h, rpc.SSEOptions{}))
	c, err := client.Dial(context.Background(), srv.URL, client.Options{Token: token})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.Close()
		srv.CloseClientConnections()
		s.Close()
		srv.Close()
		h.Close()
	})
	return &hardEnv{st: st, s: s, c: c, dir: t.TempDir()}
}

func wireErr(t *testing.T, err error, code int) *api.Error {
	t.Helper()
	var e *api.Error
	if !errors.As(err, &e) || e.Code != code {
		t.Fatalf("got %v; want code %d", err, code)
	}
	return e
}

// Oversized titles, inputs and metadata, and malformed cursors, are
// typed errors that name the field and the limit; nothing is written.
func TestLimitsAndCursorsOverTheWire(t *testing.T) {
	e := newHardEnv(t)
	ctx := context.Background()
	_, err := e.c.CreateSession(ctx, api.CreateSessionParams{Title: strings.Repeat("t", 7<<20)})
	if e := wireErr(t, err, api.CodeInvalidParams); e.Data["field"] != "title" || e.Data["limit"] != float64(api.MaxTitleBytes) {
		t.Fatalf("7 MiB title: %+v", e)
	}
	meta := map[string]string{}
	for i := range api.MaxMetadataKeys + 1 {
		meta[fmt.Sprint("k", i)] = "v"
	}
	_, err = e.c.CreateSession(ctx, api.CreateSessionParams{Metadata: meta})
	if e := wireErr(t, err, api.CodeInvalidParams); e.Data["field"] != "metadata" {
		t.Fatalf("too much metadata: %+v", e)
	}
	s, err := e.c.CreateSession(ctx, api.CreateSessionParams{Title: "ok"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.c.StartRun(ctx, api.StartRunParams{SessionID: s.ID, Input: api.Input(event.TextParts(strings.Repeat("i", api.MaxInputBytes+1)))})
	if e := wireErr(t, err, api.CodeInvalidParams); e.Data["field"] != "input" {
		t.Fatalf("oversized input: %+v", e)
	}
	for _, cursor := range []string{"%%%", "ses_nope", strings.Repeat("x", 1000)} {
		_, err := e.c.ListSessions(ctx, api.ListSessionsParams{Cursor: cursor})
		wireErr(t, err, api.CodeCursorInvalid)
	}
	l, err := e.c.ListSessions(ctx, api.ListSessionsParams{})
	if err != nil || len(l.Sessions) != 1 {
		t.Fatalf("sessions after the refused requests: %+v, %v", l, err)
	}
	if _, err := e.c.ReadEvents(ctx, api.ReadEventsParams{SessionID: s.ID, After: 99}); err == nil {
		t.Fatal("a cursor beyond the log was accepted")
	} else {
		wireErr(t, err, api.CodeCursorInvalid)
	}
}

// A store that stops taking writes answers -32019, retryable, over the
// wire; the host recovers by itself once it takes them again.
func TestStorageUnavailableOverTheWire(t *testing.T) {
	e := newHardEnv(t)
	ctx := context.Background()
	s, err := e.c.CreateSession(ctx, api.CreateSessionParams{})
	if err != nil {
		t.Fatal(err)
	}
	e.st.Fail(&fs.PathError{Op: "write", Path: "weft.db-wal", Err: syscall.EIO})
	_, err = e.c.StartRun(ctx, api.StartRunParams{SessionID: s.ID, Input: api.Input(event.TextParts("x"))})
	if we := wireErr(t, err, api.CodeStorageUnavailable); !we.Retryable || we.Kind != api.KindStorageUnavailable || !errors.Is(err, api.ErrStorageUnavailable) {
		t.Fatalf("error %+v; want retryable storage_unavailable", we)
	}
	_, err = e.c.CreateSession(ctx, api.CreateSessionParams{})
	wireErr(t, err, api.CodeStorageUnavailable)
	e.st.Fail(nil)
	deadline := time.Now().Add(10 * time.Second)
	for {
		r, err := e.c.StartRun(ctx, api.StartRunParams{SessionID: s.ID, Input: api.Input(event.TextParts("x")), Model: "fast"})
		if err == nil {
			w, err := e.c.WaitRun(ctx, api.WaitRunParams{RunID: r.ID, TimeoutMs: 10_000})
			if err != nil || w.Run.Status != "completed" {
				t.Fatalf("run after recovery: %+v, %v", w, err)
			}
			return
		}
		if !errors.Is(err, api.ErrStorageUnavailable) || time.Now().After(deadline) {
			t.Fatalf("run/start after the store healed: %v", err)
		}
		<-time.After(10 * time.Millisecond) // the session's retry runs on the real clock here
	}
}

// mutation is one mutating method exercised with an idempotency key:
// call does it with params p (which carry the key), other is different
// params under the same key, and replayed tells a replay from a first
// result.
type mutation struct {
	call     func(key string) (any, error)
	other    func(key string) (any, error)
	replayed func(any) bool
}

// Every method whose params take an idempotencyKey replays an exact retry
// and refuses the same key with other params (-32012); the table must
// cover every such method of rpc.discover, so a new mutating method
// cannot miss the wrapper's test.
func TestEveryMutationIsIdempotent(t *testing.T) {
	e := newHardEnv(t)
	ctx := context.Background()
	c := e.c
	mk := func() *api.SessionResult {
		s, err := c.CreateSession(ctx, api.CreateSessionParams{Mounts: []event.Mount{{ID: "work", Path: t.TempDir(), Default: true, DefaultForShell: true}}})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	s := mk()
	proc := func() string {
		p, err := c.StartProcess(ctx, api.ProcessStartParams{SessionID: s.ID, Command: "cat"})
		if err != nil {
			t.Fatal(err)
		}
		return p.ID
	}
	in := func(s string) api.Input { return api.Input(event.TextParts(s)) }
	p1, p2 := proc(), proc()
	other := mk()
	// The run steered and then cancelled below must still be active when
	// they come, however loaded the machine: it hangs until cancelled.
	active, err := c.StartRun(ctx, api.StartRunParams{SessionID: s.ID, Input: in("long"), Model: "hang"})
	if err != nil {
		t.Fatal(err)
	}
	del1, del2 := mk(), mk()
	// Two idle sessions with a conversation, to compact.
	talked := func() *api.SessionResult {
		ses := mk()
		r, err := c.StartRun(ctx, api.StartRunParams{SessionID: ses.ID, Input: in("hi"), Model: "fast"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.WaitRun(ctx, api.WaitRunParams{RunID: r.ID, TimeoutMs: 10000}); err != nil {
			t.Fatal(err)
		}
		return ses
	}
	cmp1, cmp2 := talked(), talked()
	// A run that waits on an approval, a question and a client tool call.
	asks, err := c.CreateSession(ctx, api.CreateSessionParams{Model: "asks", Policy: &api.Policy{Preset: api.PresetAskWrites},
		Mounts: []event.Mount{{ID: "work", Path: t.TempDir(), Default: true}},
		Tools:  []api.ToolSpec{{Name: "pick", InputSchema: []byte(`{"type":"object"}`)}}})
	if err != nil {
		t.Fatal(err)
	}
	waiting, err := c.StartRun(ctx, api.StartRunParams{SessionID: asks.ID, Input: in("go")})
	if err != nil {
		t.Fatal(err)
	}
	var reqs map[string]string // kind -> ID
	for deadline := time.Now().Add(10 * time.Second); len(reqs) < 3; {
		l, err := c.ListRequests(ctx, api.ListRequestsParams{SessionID: asks.ID})
		if err != nil || time.Now().After(deadline) {
			t.Fatalf("requests of run %s: %+v, %v", waiting.ID, l, err)
		}
		reqs = map[string]string{}
		for _, q := range l.Requests {
			reqs[q.Kind] = q.ID
		}
	}
	reqReplayed := func(r any) bool { return r.(*api.RequestResult).Replayed }
	runReplayed := func(r any) bool { return r.(*api.RunResult).Replayed }
	procReplayed := func(r any) bool { return r.(*api.ProcessResult).Replayed }
	mountReplayed := func(r any) bool { return !r.(*api.MountResult).Applied }
	table := map[string]mutation{
		api.MethodSessionCreate: {
			call: func(k string) (any, error) {
				return c.CreateSession(ctx, api.CreateSessionParams{Title: "a", IdempotencyKey: k})
			},
			other: func(k string) (any, error) {
				return c.CreateSession(ctx, api.CreateSessionParams{Title: "b", IdempotencyKey: k})
			},
			replayed: func(r any) bool { return r.(*api.SessionResult).Replayed },
		},
		api.MethodSessionDelete: {
			call: func(k string) (any, error) {
				return c.DeleteSession(ctx, api.SessionIDParams{SessionID: del1.ID, IdempotencyKey: k})
			},
			other: func(k string) (any, error) {
				return c.DeleteSession(ctx, api.SessionIDParams{SessionID: del2.ID, IdempotencyKey: k})
			},
			replayed: func(r any) bool { return r.(*api.DeleteResult).Replayed },
		},
		api.MethodSessionCompact: {
			call: func(k string) (any, error) {
				return c.CompactSession(ctx, api.CompactParams{SessionID: cmp1.ID, IdempotencyKey: k})
			},
			other: func(k string) (any, error) {
				return c.CompactSession(ctx, api.CompactParams{SessionID: cmp2.ID, IdempotencyKey: k})
			},
			replayed: func(r any) bool { return r.(*api.CompactResult).Replayed },
		},
		api.MethodSessionFork: {
			call: func(k string) (any, error) {
				return c.ForkSession(ctx, api.ForkSessionParams{SessionID: other.ID, IdempotencyKey: k})
			},
			other: func(k string) (any, error) {
				return c.ForkSession(ctx, api.ForkSessionParams{SessionID: other.ID, Title: ptr("forked"), IdempotencyKey: k})
			},
			replayed: func(r any) bool { return r.(*api.ForkResult).Replayed },
		},
		api.MethodSessionRewind: {
			call: func(k string) (any, error) {
				return c.RewindSession(ctx, api.RewindParams{SessionID: other.ID, ToSeq: 1, IdempotencyKey: k})
			},
			other: func(k string) (any, error) {
				return c.RewindSession(ctx, api.RewindParams{SessionID: other.ID, ToSeq: 1, Files: true, IdempotencyKey: k})
			},
			replayed: func(r any) bool { return r.(*api.RewindResult).Replayed },
		},
		api.MethodSessionUpdate: {
			call: func(k string) (any, error) {
				return c.UpdateSession(ctx, api.UpdateSessionParams{SessionID: other.ID, Title: ptr("renamed"), IdempotencyKey: k})
			},
			other: func(k string) (any, error) {
				return c.UpdateSession(ctx, api.UpdateSessionParams{SessionID: other.ID, Title: ptr("again"), IdempotencyKey: k})
			},
			replayed: func(r any) bool { return r.(*api.SessionResult).Replayed },
		},
		api.MethodRunStart: {
			call: func(k string) (any, error) {
				return c.StartRun(ctx, api.StartRunParams{SessionID: s.ID, Input: in("q"), Busy: api.BusyQueue, Model: "fast", IdempotencyKey: k})
			},
			other: func(k string) (any, error) {
				return c.StartRun(ctx, api.StartRunParams{SessionID: s.ID, Input: in("r"), Busy: api.BusyQueue, Model: "fast", IdempotencyKey: k})
			},
			replayed: runReplayed,
		},
		api.MethodRunSteer: {
			call: func(k string) (any, error) {
				return c.SteerRun(ctx, api.SteerParams{RunID: active.ID, Input: in("s"), IdempotencyKey: k})
			},
			other: func(k string) (any, error) {
				return c.SteerRun(ctx, api.SteerParams{RunID: active.ID, Input: in("t"), IdempotencyKey: k})
			},
			replayed: func(r any) bool { return r.(*api.SteerReceipt).Replayed },
		},
		api.MethodRunCancel: {
			call: func(k string) (any, error) {
				return c.CancelRun(ctx, api.CancelParams{RunID: active.ID, IdempotencyKey: k})
			},
			other: func(k string) (any, error) {
				return c.CancelRun(ctx, api.CancelParams{RunID: active.ID, Reason: "x", IdempotencyKey: k})
			},
			replayed: runReplayed,
		},
		api.MethodEnvMount: {
			call: func(k string) (any, error) {
				return c.Mount(ctx, api.MountParams{SessionID: other.ID, Mount: event.Mount{ID: "m1", Path: e.dir}, IdempotencyKey: k})
			},
			other: func(k string) (any, error) {
				return c.Mount(ctx, api.MountParams{SessionID: other.ID, Mount: event.Mount{ID: "m2", Path: e.dir}, IdempotencyKey: k})
			},
			replayed: mountReplayed,
		},
		api.MethodEnvUnmount: {
			call: func(k string) (any, error) {
				return c.Unmount(ctx, api.UnmountParams{SessionID: other.ID, MountID: "m1", IdempotencyKey: k})
			},
			other: func(k string) (any, error) {
				return c.Unmount(ctx, api.UnmountParams{SessionID: other.ID, MountID: "m2", IdempotencyKey: k})
			},
			replayed: mountReplayed,
		},
		api.MethodProcessStart: {
			call: func(k string) (any, error) {
				return c.StartProcess(ctx, api.ProcessStartParams{SessionID: s.ID, Command: "true", IdempotencyKey: k})
			},
			other: func(k string) (any, error) {
				return c.StartProcess(ctx, api.ProcessStartParams{SessionID: s.ID, Command: "false", IdempotencyKey: k})
			},
			replayed: procReplayed,
		},
		api.MethodProcessWrite: {
			call: func(k string) (any, error) {
				var r api.ProcessResult
				return &r, c.Call(ctx, api.MethodProcessWrite, api.ProcessWriteParams{ID: p1, Data: "a\n", IdempotencyKey: k}, &r)
			},
			other: func(k string) (any, error) {
				var r api.ProcessResult
				return &r, c.Call(ctx, api.MethodProcessWrite, api.ProcessWriteParams{ID: p1, Data: "b\n", IdempotencyKey: k}, &r)
			},
			replayed: procReplayed,
		},
		api.MethodProcessSignal: {
			call: func(k string) (any, error) {
				return c.SignalProcess(ctx, api.ProcessSignalParams{ID: p1, Name: "note", IdempotencyKey: k})
			},
			other: func(k string) (any, error) {
				return c.SignalProcess(ctx, api.ProcessSignalParams{ID: p1, Name: "other", IdempotencyKey: k})
			},
			replayed: func(r any) bool { return r.(*api.ProcessSignalResult).Replayed },
		},
		api.MethodProcessGrant: {
			call: func(k string) (any, error) {
				var r api.ProcessResult
				return &r, c.Call(ctx, api.MethodProcessGrant, api.ProcessGrantParams{ID: p2, ToSessionID: other.ID, IdempotencyKey: k}, &r)
			},
			other: func(k string) (any, error) {
				var r api.ProcessResult
				return &r, c.Call(ctx, api.MethodProcessGrant, api.ProcessGrantParams{ID: p1, ToSessionID: other.ID, IdempotencyKey: k}, &r)
			},
			replayed: procReplayed,
		},
		api.MethodProcessRevoke: {
			call: func(k string) (any, error) {
				var r api.ProcessResult
				return &r, c.Call(ctx, api.MethodProcessRevoke, api.ProcessGrantParams{ID: p2, ToSessionID: other.ID, IdempotencyKey: k}, &r)
			},
			other: func(k string) (any, error) {
				var r api.ProcessResult
				return &r, c.Call(ctx, api.MethodProcessRevoke, api.ProcessGrantParams{ID: p1, ToSessionID: other.ID, IdempotencyKey: k}, &r)
			},
			replayed: procReplayed,
		},
		api.MethodProcessCancel: {
			call: func(k string) (any, error) {
				return c.CancelProcess(ctx, api.ProcessCancelParams{ID: p2, IdempotencyKey: k})
			},
			other: func(k string) (any, error) {
				return c.CancelProcess(ctx, api.ProcessCancelParams{ID: p1, IdempotencyKey: k})
			},
			replayed: procReplayed,
		},
	}
	table[api.MethodApprovalDecide] = mutation{
		call: func(k string) (any, error) {
			return c.DecideApproval(ctx, api.DecideParams{ApprovalID: reqs[event.RequestApproval], Decision: event.DecisionAllowOnce, IdempotencyKey: k})
		},
		other: func(k string) (any, error) {
			return c.DecideApproval(ctx, api.DecideParams{ApprovalID: reqs[event.RequestApproval], Decision: event.DecisionDeny, IdempotencyKey: k})
		},
		replayed: reqReplayed,
	}
	table[api.MethodInputAnswer] = mutation{
		call: func(k string) (any, error) {
			return c.AnswerInput(ctx, api.AnswerParams{RequestID: reqs[event.RequestInput], Text: "yes", IdempotencyKey: k})
		},
		other: func(k string) (any, error) {
			return c.AnswerInput(ctx, api.AnswerParams{RequestID: reqs[event.RequestInput], Text: "no", IdempotencyKey: k})
		},
		replayed: reqReplayed,
	}
	table[api.MethodToolResult] = mutation{
		call: func(k string) (any, error) {
			return c.ToolResult(ctx, api.ToolResultParams{RequestID: reqs[event.RequestTool], Output: "1", IdempotencyKey: k})
		},
		other: func(k string) (any, error) {
			return c.ToolResult(ctx, api.ToolResultParams{RequestID: reqs[event.RequestTool], Output: "2", IdempotencyKey: k})
		},
		replayed: reqReplayed,
	}
	var mutating []string
	for _, m := range rpctest.Discover(t, e.s).Methods {
		for _, p := range m.Params {
			if p.Name == "idempotencyKey" {
				mutating = append(mutating, m.Name)
			}
		}
	}
	slices.Sort(mutating)
	for _, name := range mutating {
		if _, ok := table[name]; !ok {
			t.Errorf("mutating method %s has no idempotency test", name)
		}
	}
	// In a fixed order: unmount after mount, revoke after grant, cancels last.
	order := []string{api.MethodSessionCreate, api.MethodSessionDelete, api.MethodSessionUpdate, api.MethodSessionFork, api.MethodSessionRewind, api.MethodRunStart, api.MethodRunSteer,
		api.MethodEnvMount, api.MethodEnvUnmount, api.MethodProcessStart, api.MethodProcessWrite, api.MethodProcessSignal,
		api.MethodProcessGrant, api.MethodProcessRevoke, api.MethodProcessCancel, api.MethodRunCancel,
		api.MethodApprovalDecide, api.MethodInputAnswer, api.MethodToolResult,
		api.MethodSessionCompact}
	for _, name := range order {
		m := table[name]
		key := "key-" + name
		first, err := m.call(key)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if m.replayed(first) {
			t.Fatalf("%s: the first request says replayed", name)
		}
		again, err := m.call(key)
		if err != nil {
			t.Fatalf("%s retried: %v", name, err)
		}
		if !m.replayed(again) {
			b, _ := json.Marshal(again)
			t.Fatalf("%s retried: %s; want a replay", name, b)
		}
		if _, err := m.other(key); err == nil {
			t.Fatalf("%s: the same key with other params was accepted", name)
		} else {
			wireErr(t, err, api.CodeIdempotencyConflict)
		}
	}
	// The retried steer and write happened once.
	evs, err := c.ReadEvents(ctx, api.ReadEventsParams{SessionID: s.ID, RunID: active.ID, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	steers := 0
	for _, ev := range evs.Events {
		var d event.SteerData
		if ev.Type == event.SteerAccepted && ev.Decode(&d) == nil && event.Text(d.Input) == "s" {
			steers++
		}
	}
	if steers != 1 {
		t.Fatalf("%d steer.accepted for one idempotent steer", steers)
	}
	// The answers, each retried, resumed the waiting run once.
	w, err := c.WaitRun(ctx, api.WaitRunParams{RunID: waiting.ID, TimeoutMs: 10_000})
	if err != nil || w.Run.Status != "completed" {
		t.Fatalf("the run its answers resumed: %+v, %v", w, err)
	}
}

// Bad answers and bad policies over the wire: a policy rule that does not
// parse names the rule and field; a tool result for an unknown call, or
// whose params are not what tool/result takes, is refused; nothing is
// written.
func TestBadRequestsAndPoliciesOverTheWire(t *testing.T) {
	e := newHardEnv(t)
	ctx := context.Background()
	_, err := e.c.CreateSession(ctx, api.CreateSessionParams{Policy: &api.Policy{Rules: []api.Rule{
		{Tool: "shell", Action: api.ActionAsk},
		{Tool: "shell", Action: api.ActionDeny, Match: api.Match{CommandRegex: "git (status"}},
	}}})
	we := wireErr(t, err, api.CodeInvalidParams)
	if we.Data["field"] != "policy.rules[1].match.commandRegex" || !strings.Contains(we.Message, "rules[1].match.commandRegex") {
		t.Fatalf("bad rule: %+v", we)
	}
	_, err = e.c.CreateSession(ctx, api.CreateSessionParams{Policy: &api.Policy{Preset: "ask-sometimes"}})
	if we := wireErr(t, err, api.CodeInvalidParams); we.Data["field"] != "policy.preset" {
		t.Fatalf("unknown preset: %+v", we)
	}
	_, err = e.c.CreateSession(ctx, api.CreateSessionParams{Tools: []api.ToolSpec{{Name: "bad name", InputSchema: []byte(`{"type":"object"}`)}}})
	wireErr(t, err, api.CodeInvalidParams)
	_, err = e.c.CreateSession(ctx, api.CreateSessionParams{Tools: []api.ToolSpec{{Name: "ok", InputSchema: []byte(`"not a schema"`)}}})
	wireErr(t, err, api.CodeInvalidParams)
	if l, err := e.c.ListSessions(ctx, api.ListSessionsParams{}); err != nil || len(l.Sessions) != 0 {
		t.Fatalf("sessions after refusals: %+v, %v", l, err)
	}
	_, err = e.c.ToolResult(ctx, api.ToolResultParams{CallID: "call_nope", Output: "x"})
	wireErr(t, err, api.CodeNotFound)
	err = e.c.Call(ctx, api.MethodToolResult, map[string]any{"callId": 7, "output": "x"}, nil)
	wireErr(t, err, api.CodeInvalidParams)
	_, err = e.c.DecideApproval(ctx, api.DecideParams{ApprovalID: "apr_nope", Decision: "allow_once"})
	wireErr(t, err, api.CodeNotFound)
	_, err = e.c.DecideApproval(ctx, api.DecideParams{ApprovalID: "apr_nope", Decision: "sure"})
	wireErr(t, err, api.CodeInvalidParams)
	_, err = e.c.ListRequests(ctx, api.ListRequestsParams{Status: "maybe"})
	wireErr(t, err, api.CodeInvalidParams)
}
