package mcpserver_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"weft.dev/weft/api"
	"weft.dev/weft/host"
	"weft.dev/weft/llm/scripted"
	"weft.dev/weft/mcpserver"
	"weft.dev/weft/store"
	"weft.dev/weft/store/memory"
	"weft.dev/weft/tool"
)

// scripts are the models of the test host, by name.
var scripts = map[string]string{
	// hello answers at once.
	"hello": `{"loop":true,"steps":[{"text":"hi: {{input}}"}]}`,
	// tool calls note, then answers.
	"tool": `{"steps":[{"text":"noting","toolCalls":[{"name":"note","arguments":{"text":"x"}}]},{"text":"noted: {{input}}"}]}`,
	// ask asks the user a question, then answers.
	"ask": `{"steps":[{"toolCalls":[{"name":"ask_user","arguments":{"question":"which one?","choices":["red","blue"]}}]},{"text":"thanks"}]}`,
	// steps calls note twice, in two steps, then answers.
	"steps": `{"steps":[{"text":"one","delayMs":100,"toolCalls":[{"name":"note","arguments":{"text":"1"}}]},{"text":"two","delayMs":100,"toolCalls":[{"name":"note","arguments":{"text":"2"}}]},{"text":"two notes"}]}`,
	// slow calls wait, which blocks until the run is cancelled.
	"slow": `{"steps":[{"text":"waiting","toolCalls":[{"name":"wait","arguments":{}}]},{"text":"waited"}]}`,
}

// newHost is a host in this process over a memory store, with the tools
// note and wait and the models of scripts; its policy never asks.
func newHost(t testing.TB) *host.Host {
	t.Helper()
	return hostOn(t, memory.New())
}

// hostOn is newHost over st.
func hostOn(t testing.TB, st store.Store) *host.Host {
	t.Helper()
	reg := tool.NewRegistry()
	note, err := tool.Func("note", "Note a text.", func(_ context.Context, _ *tool.Call, in struct {
		Text string `json:"text"`
	}) (tool.Result, error) {
		return tool.Result{Output: "noted " + in.Text}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	wait, err := tool.Func("wait", "Wait until cancelled.", func(ctx context.Context, _ *tool.Call, _ struct{}) (tool.Result, error) {
		<-ctx.Done()
		return tool.Result{}, ctx.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, tl := range []tool.Tool{note, wait} {
		if err := reg.Add(tl); err != nil {
			t.Fatal(err)
		}
	}
	h, err := host.New(context.Background(), host.Config{
		Store: st, Tools: reg, DefaultModel: "hello", CoalesceWindow: time.Millisecond,
		Policy: api.Policy{Preset: api.PresetNeverAsk},
		ResolveModel: func(name string) (*host.Model, error) {
			src, ok := scripts[name]
			if !ok {
				return nil, fmt.Errorf("no model %q", name)
			}
			p, err := scripted.Parse(name+".json", []byte(src))
			return &host.Model{Name: name, Provider: p, Model: name}, err
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

// connect serves h's MCP server over an in-memory transport and returns
// a client session of the official SDK's client, closed at cleanup.
func connect(t testing.TB, h mcpserver.Host, opts *mcpserver.Options) *mcp.ClientSession {
	t.Helper()
	ctx := context.Background()
	st, ct := mcp.NewInMemoryTransports()
	var o mcpserver.Options
	if opts != nil {
		o = *opts
	}
	if o.Logger == nil {
		// The cause of an internal error goes to the test's output.
		o.Logger = slog.New(slog.NewTextHandler(t.Output(), nil))
	}
	ss, err := mcpserver.New(h, &o).Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test-agent", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cs.Close()
		ss.Wait()
	})
	return cs
}

// call calls tool name with args and decodes its structured result into
// out; the call must succeed.
func call(t testing.TB, cs *mcp.ClientSession, name string, args any, out any) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if res.IsError {
		t.Fatalf("%s(%v): error result: %s", name, args, text(res))
	}
	if out != nil {
		b, _ := json.Marshal(res.StructuredContent)
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s: decode %s: %v", name, b, err)
		}
	}
}

// callErr calls tool name with args, which must fail, and returns the
// error's kind from the result's _meta; its text must start with it.
func callErr(t testing.TB, cs *mcp.ClientSession, name string, args any) api.Kind {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: protocol error %v, want an error result", name, err)
	}
	if !res.IsError {
		t.Fatalf("%s(%v): succeeded, want an error result: %s", name, args, text(res))
	}
	b, _ := json.Marshal(res.Meta[mcpserver.ErrorMetaKey])
	var info struct {
		Kind    api.Kind `json:"kind"`
		Code    int      `json:"code"`
		Message string   `json:"message"`
	}
	if err := json.Unmarshal(b, &info); err != nil || info.Kind == "" {
		t.Fatalf("%s: _meta %s has no error kind (%v)", name, b, err)
	}
	if want, _ := api.CodeOf(info.Kind); info.Code != want {
		t.Errorf("%s: code %d, want %d for %s", name, info.Code, want, info.Kind)
	}
	if !strings.HasPrefix(text(res), string(info.Kind)+": ") {
		t.Errorf("%s: text %q does not start with its kind %s", name, text(res), info.Kind)
	}
	return info.Kind
}

func text(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// An agent starts a run, which answers at once with its handle, awaits
// it, and reads its answer, usage and events.
func TestStartAwaitRead(t *testing.T) {
	cs := connect(t, newHost(t), nil)
	var started mcpserver.RunOutput
	call(t, cs, "start_run", map[string]any{"prompt": "hello there", "model": "hello"}, &started)
	if started.RunID == "" || started.SessionID == "" || !started.SessionCreated {
		t.Fatalf("start_run = %+v, want a run in a new session", started)
	}
	var done mcpserver.RunOutput
	call(t, cs, "await_run", map[string]any{"runId": started.RunID, "timeoutSeconds": 10}, &done)
	if !done.Done || done.Status != "completed" || done.TimedOut || done.Answer != "hi: hello there" {
		t.Fatalf("await_run = %+v, want completed with the answer", done)
	}
	if done.Usage.InputTokens == 0 || done.Steps != 1 {
		t.Errorf("await_run usage %+v steps %d, want the run's", done.Usage, done.Steps)
	}
	var got mcpserver.RunOutput
	call(t, cs, "get_run", map[string]any{"runId": started.RunID}, &got)
	if got.Answer != done.Answer || got.Status != "completed" {
		t.Errorf("get_run = %+v, want what await_run said", got)
	}
	var page mcpserver.ReadEventsOutput
	call(t, cs, "read_events", map[string]any{"sessionId": started.SessionID, "types": []string{"message.completed", "run.*"}}, &page)
	var types []string
	for _, e := range page.Events {
		types = append(types, e.Type)
	}
	if want := "run.queued run.started message.completed run.completed"; strings.Join(types, " ") != want {
		t.Errorf("read_events types = %v, want %s", types, want)
	}
	if page.NextCursor != done.LastSeq || page.HasMore {
		t.Errorf("read_events cursor %d (more %v), want %d", page.NextCursor, page.HasMore, done.LastSeq)
	}
	var rest mcpserver.ReadEventsOutput
	call(t, cs, "read_events", map[string]any{"sessionId": started.SessionID, "after": page.NextCursor}, &rest)
	if len(rest.Events) != 0 || rest.NextCursor != page.NextCursor {
		t.Errorf("read_events after the end = %+v, want nothing", rest)
	}

	// The session goes on with a second run; list_sessions shows it.
	var second mcpserver.RunOutput
	call(t, cs, "start_run", map[string]any{"prompt": "again", "sessionId": started.SessionID}, &second)
	if second.SessionCreated || second.SessionID != started.SessionID {
		t.Errorf("start_run in the session = %+v", second)
	}
	call(t, cs, "await_run", map[string]any{"runId": second.RunID}, &done)
	if done.Answer != "hi: again" {
		t.Errorf("second answer %q", done.Answer)
	}
	var sessions mcpserver.ListSessionsOutput
	call(t, cs, "list_sessions", map[string]any{}, &sessions)
	if len(sessions.Sessions) != 1 || sessions.Sessions[0].ID != started.SessionID || sessions.Sessions[0].Title != "hello there" {
		t.Errorf("list_sessions = %+v", sessions)
	}
}

// A run that asks for an approval makes await_run answer at once with the
// request; answer_approval lets it go on; a second answer is refused.
func TestApproval(t *testing.T) {
	cs := connect(t, newHost(t), nil)
	var r mcpserver.RunOutput
	call(t, cs, "start_run", map[string]any{"prompt": "note it", "model": "tool", "approval": "ask-all"}, &r)
	call(t, cs, "await_run", map[string]any{"runId": r.RunID, "timeoutSeconds": 10}, &r)
	if r.Status != "waiting" || r.Done || r.TimedOut || len(r.PendingRequests) != 1 {
		t.Fatalf("await_run = %+v, want waiting with one request", r)
	}
	req := r.PendingRequests[0]
	if req.Kind != "approval" || req.Tool != "note" || !strings.Contains(req.Arguments, `"x"`) {
		t.Errorf("pending request = %+v, want the approval of note", req)
	}
	var list mcpserver.ListApprovalsOutput
	call(t, cs, "list_approvals", map[string]any{"sessionId": r.SessionID}, &list)
	if len(list.Requests) != 1 || list.Requests[0].ID != req.ID {
		t.Errorf("list_approvals = %+v", list)
	}
	var ans mcpserver.RequestOutput
	call(t, cs, "answer_approval", map[string]any{"approvalId": req.ID, "decision": "always"}, &ans)
	if ans.Status != "resolved" || ans.Decision != "allow_session" {
		t.Errorf("answer_approval = %+v", ans)
	}
	call(t, cs, "await_run", map[string]any{"runId": r.RunID, "timeoutSeconds": 10}, &r)
	if r.Status != "completed" || r.Answer != "noted: note it" {
		t.Fatalf("await_run after the answer = %+v", r)
	}
	if k := callErr(t, cs, "answer_approval", map[string]any{"approvalId": req.ID, "decision": "deny"}); k != api.KindAlreadyResolved {
		t.Errorf("a second answer: %s, want already_resolved", k)
	}
	call(t, cs, "list_approvals", map[string]any{}, &list)
	if len(list.Requests) != 0 {
		t.Errorf("list_approvals after the answer = %+v", list)
	}
}

// await_run times out on a run that goes on; steer reaches it; cancel_run
// ends it and await_run then says so.
func TestTimeoutSteerCancel(t *testing.T) {
	cs := connect(t, newHost(t), nil)
	var r mcpserver.RunOutput
	call(t, cs, "start_run", map[string]any{"prompt": "wait", "model": "slow"}, &r)
	var w mcpserver.RunOutput
	call(t, cs, "await_run", map[string]any{"runId": r.RunID, "timeoutSeconds": 0.2}, &w)
	if !w.TimedOut || w.Done {
		t.Fatalf("await_run = %+v, want timed out", w)
	}
	var st mcpserver.SteerOutput
	call(t, cs, "steer", map[string]any{"runId": r.RunID, "text": "hurry"}, &st)
	if st.SteerID == "" || st.RunID != r.RunID || st.EventCursor == 0 {
		t.Errorf("steer = %+v", st)
	}
	var c mcpserver.RunOutput
	call(t, cs, "cancel_run", map[string]any{"runId": r.RunID, "reason": "enough"}, &c)
	if c.Status != "cancelled" || !c.Done {
		t.Errorf("cancel_run = %+v", c)
	}
	var end mcpserver.RunOutput
	call(t, cs, "await_run", map[string]any{"runId": r.RunID}, &end)
	if end.Status != "cancelled" || !end.Done || end.TimedOut {
		t.Errorf("await_run after cancel = %+v", end)
	}
	if k := callErr(t, cs, "steer", map[string]any{"runId": r.RunID, "text": "late"}); k != api.KindRunConflict {
		t.Errorf("steer of an ended run: %s, want run_conflict", k)
	}
}

// A run ID outlives the connection that started it: a new client of a
// new server over the same host awaits it.
func TestHandleOutlivesConnection(t *testing.T) {
	h := newHost(t)
	first := connect(t, h, nil)
	var r mcpserver.RunOutput
	call(t, first, "start_run", map[string]any{"prompt": "later", "model": "hello"}, &r)
	first.Close()
	second := connect(t, h, nil)
	var done mcpserver.RunOutput
	call(t, second, "await_run", map[string]any{"runId": r.RunID, "timeoutSeconds": 10}, &done)
	if done.Answer != "hi: later" {
		t.Errorf("await_run from a new connection = %+v", done)
	}
}

// Bad arguments and unknown IDs are error results of a typed kind, never
// protocol errors, and start nothing.
func TestBadCalls(t *testing.T) {
	h := newHost(t)
	cs := connect(t, h, nil)
	var ok mcpserver.RunOutput
	call(t, cs, "start_run", map[string]any{"prompt": "x", "model": "slow"}, &ok)
	for _, tc := range []struct {
		name string
		tool string
		args map[string]any
		want api.Kind
	}{
		{"no prompt", "start_run", map[string]any{}, api.KindInvalidParams},
		{"blank prompt", "start_run", map[string]any{"prompt": "  "}, api.KindInvalidParams},
		{"unknown field", "start_run", map[string]any{"prompt": "x", "bogus": 1}, api.KindInvalidParams},
		{"wrong type", "start_run", map[string]any{"prompt": 7}, api.KindInvalidParams},
		{"bad busy", "start_run", map[string]any{"prompt": "x", "busy": "later"}, api.KindInvalidParams},
		{"bad preset", "start_run", map[string]any{"prompt": "x", "approval": "sometimes"}, api.KindInvalidParams},
		{"unknown session", "start_run", map[string]any{"prompt": "x", "sessionId": "ses_nope"}, api.KindNotFound},
		{"unknown model", "start_run", map[string]any{"prompt": "x", "model": "nope"}, api.KindInvalidParams},
		{"relative mount", "start_run", map[string]any{"prompt": "x", "mounts": []any{map[string]any{"path": "src"}}}, api.KindInvalidParams},
		{"mounts with a session", "start_run", map[string]any{"prompt": "x", "sessionId": ok.SessionID, "mounts": []any{map[string]any{"path": "/tmp"}}}, api.KindInvalidParams},
		{"busy session", "start_run", map[string]any{"prompt": "x", "sessionId": ok.SessionID}, api.KindRunConflict},
		{"unknown run", "await_run", map[string]any{"runId": "run_nope"}, api.KindNotFound},
		{"no run", "await_run", map[string]any{}, api.KindInvalidParams},
		{"negative timeout", "await_run", map[string]any{"runId": ok.RunID, "timeoutSeconds": -1}, api.KindInvalidParams},
		{"run id not a string", "get_run", map[string]any{"runId": 5}, api.KindInvalidParams},
		{"unknown run", "get_run", map[string]any{"runId": "run_nope"}, api.KindNotFound},
		{"unknown session", "read_events", map[string]any{"sessionId": "ses_nope"}, api.KindNotFound},
		{"cursor ahead", "read_events", map[string]any{"sessionId": ok.SessionID, "after": 1 << 40}, api.KindCursorInvalid},
		{"negative limit", "read_events", map[string]any{"sessionId": ok.SessionID, "limit": -1}, api.KindInvalidParams},
		{"unknown run", "steer", map[string]any{"runId": "run_nope", "text": "x"}, api.KindNotFound},
		{"empty steer", "steer", map[string]any{"runId": ok.RunID, "text": ""}, api.KindInvalidParams},
		{"unknown run", "cancel_run", map[string]any{"runId": "run_nope"}, api.KindNotFound},
		{"bad cursor", "list_sessions", map[string]any{"cursor": strings.Repeat("x", 300)}, api.KindCursorInvalid},
		{"unknown approval", "answer_approval", map[string]any{"approvalId": "apr_nope", "decision": "deny"}, api.KindNotFound},
		{"bad decision", "answer_approval", map[string]any{"approvalId": "apr_nope", "decision": "maybe"}, api.KindInvalidParams},
		{"unknown question", "answer_question", map[string]any{"requestId": "req_nope", "text": "x"}, api.KindNotFound},
		{"no answer", "answer_question", map[string]any{"requestId": "req_nope"}, api.KindInvalidParams},
	} {
		t.Run(tc.tool+"/"+tc.name, func(t *testing.T) {
			if got := callErr(t, cs, tc.tool, tc.args); got != tc.want {
				t.Errorf("kind %s, want %s", got, tc.want)
			}
		})
	}
	var sessions mcpserver.ListSessionsOutput
	call(t, cs, "list_sessions", map[string]any{}, &sessions)
	if len(sessions.Sessions) != 1 {
		t.Errorf("%d sessions after the bad calls, want the one good run's: %+v", len(sessions.Sessions), sessions.Sessions)
	}
	call(t, cs, "cancel_run", map[string]any{"runId": ok.RunID}, nil)
}

// Every tool has typed input and output schemas of objects.
func TestSchemas(t *testing.T) {
	cs := connect(t, newHost(t), nil)
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range res.Tools {
		names = append(names, tl.Name)
		for what, s := range map[string]any{"input": tl.InputSchema, "output": tl.OutputSchema} {
			b, _ := json.Marshal(s)
			var m map[string]any
			json.Unmarshal(b, &m)
			if m["type"] != "object" {
				t.Errorf("%s: %s schema %s is not an object's", tl.Name, what, b)
			}
		}
	}
	want := "start_run await_run get_run read_events steer cancel_run list_sessions create_session list_approvals answer_approval answer_question"
	for _, n := range strings.Fields(want) {
		if !strings.Contains(" "+strings.Join(names, " ")+" ", " "+n+" ") {
			t.Errorf("no tool %s in %v", n, names)
		}
	}
}

// create_session mounts the server's directory by default, and a
// relative mount resolves against it.
func TestCreateSessionMounts(t *testing.T) {
	dir := t.TempDir()
	cs := connect(t, newHost(t), &mcpserver.Options{Dir: dir})
	var s mcpserver.Session
	call(t, cs, "create_session", map[string]any{"title": "t"}, &s)
	if len(s.Mounts) != 1 || s.Mounts[0].Path != dir || !s.Mounts[0].Default || s.Mounts[0].Mode != "rw" {
		t.Errorf("default mounts = %+v, want %s read-write", s.Mounts, dir)
	}
	call(t, cs, "create_session", map[string]any{"mounts": []any{map[string]any{"path": ".", "readOnly": true, "id": "src"}}}, &s)
	if len(s.Mounts) != 1 || s.Mounts[0].ID != "src" || s.Mounts[0].Path != dir || s.Mounts[0].Mode != "ro" {
		t.Errorf("relative mounts = %+v", s.Mounts)
	}
}

// A question of the model stops await_run like an approval; answer_question
// answers it and the run goes on.
func TestQuestion(t *testing.T) {
	cs := connect(t, newHost(t), nil)
	var r mcpserver.RunOutput
	call(t, cs, "start_run", map[string]any{"prompt": "pick", "model": "ask"}, &r)
	call(t, cs, "await_run", map[string]any{"runId": r.RunID, "timeoutSeconds": 10}, &r)
	if r.Status != "waiting" || len(r.PendingRequests) != 1 {
		t.Fatalf("await_run = %+v, want waiting on the question", r)
	}
	q := r.PendingRequests[0]
	if q.Kind != "input" || q.Question != "which one?" || strings.Join(q.Choices, ",") != "red,blue" {
		t.Errorf("question = %+v", q)
	}
	if k := callErr(t, cs, "answer_question", map[string]any{"requestId": q.ID, "choice": 5}); k != api.KindInvalidParams {
		t.Errorf("a choice out of range: %s, want invalid_params", k)
	}
	var ans mcpserver.RequestOutput
	call(t, cs, "answer_question", map[string]any{"requestId": q.ID, "choice": 1}, &ans)
	if ans.Status != "resolved" {
		t.Errorf("answer_question = %+v", ans)
	}
	var done mcpserver.RunOutput
	call(t, cs, "await_run", map[string]any{"runId": r.RunID, "timeoutSeconds": 10}, &done)
	if done.Status != "completed" || done.Answer != "thanks" {
		t.Errorf("await_run after the answer = %+v", done)
	}
}

// A start_run retried with its idempotencyKey answers with the same run
// and session, and starts nothing; the same key with another prompt is a
// conflict.
func TestStartRunIdempotent(t *testing.T) {
	cs := connect(t, newHost(t), nil)
	args := map[string]any{"prompt": "once", "idempotencyKey": "k-1"}
	var first, again mcpserver.RunOutput
	call(t, cs, "start_run", args, &first)
	call(t, cs, "start_run", args, &again)
	if again.RunID != first.RunID || again.SessionID != first.SessionID || !again.Replayed || again.SessionCreated {
		t.Errorf("retry = %+v, want a replay of %+v", again, first)
	}
	if k := callErr(t, cs, "start_run", map[string]any{"prompt": "twice", "idempotencyKey": "k-1"}); k != api.KindIdempotencyConflict {
		t.Errorf("the key with another prompt: %s, want idempotency_conflict", k)
	}
	var sessions mcpserver.ListSessionsOutput
	call(t, cs, "list_sessions", map[string]any{}, &sessions)
	if len(sessions.Sessions) != 1 {
		t.Errorf("%d sessions, want 1", len(sessions.Sessions))
	}
}

// await_run called with a progress token reports the run's steps and
// tool calls as MCP progress notifications.
func TestAwaitProgress(t *testing.T) {
	h := newHost(t)
	ctx := context.Background()
	st, ct := mcp.NewInMemoryTransports()
	ss, err := mcpserver.New(h, nil).Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan string, 16)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
			got <- r.Params.Message
		},
	}).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { cs.Close(); ss.Wait() }()
	var r mcpserver.RunOutput
	call(t, cs, "start_run", map[string]any{"prompt": "go", "model": "steps"}, &r)
	p := &mcp.CallToolParams{Name: "await_run", Arguments: map[string]any{"runId": r.RunID, "timeoutSeconds": 10}}
	p.SetProgressToken("tok")
	res, err := cs.CallTool(ctx, p)
	if err != nil || res.IsError {
		t.Fatalf("await_run: %v %v", err, res)
	}
	// The notifications were sent before the result; the client's
	// handler may see them a little after it.
	var msgs []string
	timeout := time.After(10 * time.Second)
	for !slices.Contains(msgs, "step 2") || !slices.Contains(msgs, "tool note") {
		select {
		case m := <-got:
			msgs = append(msgs, m)
		case <-timeout:
			t.Fatalf("progress = %q, want the steps and tool calls", msgs)
		}
	}
}

// Closing Options.Done ends an await_run in progress with the run where
// it stands, so that a server's shutdown does not wait for it.
func TestDoneEndsAwait(t *testing.T) {
	done := make(chan struct{})
	cs := connect(t, newHost(t), &mcpserver.Options{Done: done})
	var r mcpserver.RunOutput
	call(t, cs, "start_run", map[string]any{"prompt": "wait", "model": "slow"}, &r)
	got := make(chan *mcp.CallToolResult, 1)
	go func() {
		res, _ := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "await_run", Arguments: map[string]any{"runId": r.RunID, "timeoutSeconds": 600}})
		got <- res
	}()
	close(done)
	select {
	case res := <-got:
		var w mcpserver.RunOutput
		if res != nil {
			b, _ := json.Marshal(res.StructuredContent)
			json.Unmarshal(b, &w)
		}
		if res == nil || res.IsError || !w.TimedOut || w.Done {
			t.Errorf("await_run after Done = %+v, want timed out", w)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("await_run went on after Done closed")
	}
	call(t, cs, "cancel_run", map[string]any{"runId": r.RunID}, &r)
}

// read_events answers at most about 1 MiB of event data a page, and the
// pages, read on by their cursors, hold every event once.
func TestReadEventsBoundedPages(t *testing.T) {
	cs := connect(t, newHost(t), nil)
	var r mcpserver.RunOutput
	call(t, cs, "start_run", map[string]any{"prompt": strings.Repeat("big ", 100<<10), "model": "hello"}, &r)
	call(t, cs, "await_run", map[string]any{"runId": r.RunID}, &r)
	var seqs []int64
	pages := 0
	for after := int64(0); ; pages++ {
		var page mcpserver.ReadEventsOutput
		call(t, cs, "read_events", map[string]any{"sessionId": r.SessionID, "after": after, "limit": 1000}, &page)
		size := 0
		for _, e := range page.Events {
			seqs = append(seqs, e.Seq)
			b, _ := json.Marshal(e.Data)
			size += len(b)
		}
		if len(page.Events) > 1 && size > 1<<20+1<<16 {
			t.Errorf("a page of %d bytes of data", size)
		}
		after = page.NextCursor
		if !page.HasMore {
			break
		}
	}
	if pages == 0 {
		t.Errorf("one page for %d events of ~1.6 MB: not cut", len(seqs))
	}
	for i, s := range seqs {
		if s != int64(i+1) {
			t.Fatalf("seqs %v: want 1..%d once each", seqs, r.LastSeq)
		}
	}
	if int64(len(seqs)) != r.LastSeq {
		t.Errorf("%d events, want %d", len(seqs), r.LastSeq)
	}
}
