package acpagent_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"

	acp "github.com/coder/acp-go-sdk"

	"weft.dev/weft/api"
	"weft.dev/weft/internal/acpagent"
)

// TestInitializeAdvertises checks what initialize offers: loadSession,
// embedded context in prompts, session/list, and weft's name.
func TestInitializeAdvertises(t *testing.T) {
	th := newTestHost(t)
	p := th.connect(t, acpagent.Config{Model: "scripted:plain"})
	res := p.initialize(t)
	c := res.AgentCapabilities
	if !c.LoadSession || !c.PromptCapabilities.EmbeddedContext || c.SessionCapabilities.List == nil || c.PromptCapabilities.Image {
		t.Errorf("capabilities = %+v", c)
	}
	if res.AgentInfo == nil || res.AgentInfo.Name != "weft" || res.ProtocolVersion != acp.ProtocolVersionNumber {
		t.Errorf("initialize = %+v", res)
	}
}

// TestPromptStreams runs a prompt: its reasoning and text arrive as
// chunks, the prompt is not echoed back, and it ends with end_turn.
func TestPromptStreams(t *testing.T) {
	th := newTestHost(t)
	p := th.connect(t, acpagent.Config{Model: "scripted:plain"})
	p.initialize(t)
	s := p.newSession(t, th.cwd)
	if s.Modes == nil || s.Modes.CurrentModeId != api.PresetAskWrites || len(s.Modes.AvailableModes) != 4 {
		t.Errorf("modes = %+v", s.Modes)
	}
	res, err := p.prompt(t.Context(), s.SessionId, "world")
	if err != nil {
		t.Fatal(err)
	}
	if res.StopReason != acp.StopReasonEndTurn {
		t.Errorf("stop reason = %q, want end_turn", res.StopReason)
	}
	ups := p.snapshot()
	if got := joined(ups, "agent"); got != "Hello world" {
		t.Errorf("agent text = %q, want %q\n%s", got, "Hello world", describe(ups))
	}
	if got := joined(ups, "thought"); got != "Thinking it over." {
		t.Errorf("thought = %q", got)
	}
	if got := joined(ups, "title"); got != "world" {
		t.Errorf("title updates = %q, want the first prompt", got)
	}
	if got := joined(ups, "user"); got != "" {
		t.Errorf("the prompt came back as a user message: %q", got)
	}
	// The session is a weft session whose default mount is the cwd.
	got, err := p.cl.GetSession(t.Context(), api.SessionGetParams{SessionID: string(s.SessionId)})
	if err != nil {
		t.Fatal(err)
	}
	if got.Title != "world" {
		t.Errorf("session title = %q", got.Title)
	}
	if m := got.Binding.Mounts; len(m) != 1 || m[0].Path != th.cwd || !m[0].Default || m[0].Mode != "rw" {
		t.Errorf("mounts = %+v, want the cwd read-write as the default", m)
	}
}

// TestPermission: a gated tool call becomes session/request_permission
// with allow once, allow always and reject; the answer is the decision.
func TestPermission(t *testing.T) {
	for _, tc := range []struct {
		answer, wantStatus string
		wantFile           bool
	}{
		{"allow_once", "completed", true},
		{"allow_session", "completed", true},
		{"deny", "failed", false},
	} {
		t.Run(tc.answer, func(t *testing.T) {
			th := newTestHost(t)
			p := th.connect(t, acpagent.Config{Model: "scripted:gated"})
			p.permit = func(acp.RequestPermissionRequest) string { return tc.answer }
			p.initialize(t)
			s := p.newSession(t, th.cwd)
			res, err := p.prompt(t.Context(), s.SessionId, "write it")
			if err != nil {
				t.Fatal(err)
			}
			if res.StopReason != acp.StopReasonEndTurn {
				t.Errorf("stop reason = %q", res.StopReason)
			}
			if p.askedCount() != 1 {
				t.Fatalf("asked %d times, want 1", p.askedCount())
			}
			r := p.asked[0]
			kinds := []acp.PermissionOptionKind{}
			for _, o := range r.Options {
				kinds = append(kinds, o.Kind)
			}
			want := []acp.PermissionOptionKind{acp.PermissionOptionKindAllowOnce, acp.PermissionOptionKindAllowAlways, acp.PermissionOptionKindRejectOnce}
			if !slices.Equal(kinds, want) {
				t.Errorf("options = %v, want %v", kinds, want)
			}
			if r.ToolCall.Title == nil || *r.ToolCall.Title != "write_file: hello.txt" || r.ToolCall.Kind == nil || *r.ToolCall.Kind != acp.ToolKindEdit {
				t.Errorf("tool call = %+v", r.ToolCall)
			}
			ups := p.snapshot()
			if st := toolStatus(ups, string(r.ToolCall.ToolCallId)); st != tc.wantStatus {
				t.Errorf("tool call status = %q, want %q\n%s", st, tc.wantStatus, describe(ups))
			}
			if !strings.HasSuffix(joined(ups, "agent"), "Done.") {
				t.Errorf("agent text = %q", joined(ups, "agent"))
			}
			if tc.wantFile && th.readFile(t, "hello.txt") != "hi" {
				t.Error("the file was not written")
			}
		})
	}
}

// TestCancelWaitingForPermission cancels a turn whose tool call waits
// for a permission: the prompt ends "cancelled", the permission request
// is withdrawn, and no tool call is left in progress.
func TestCancelWaitingForPermission(t *testing.T) {
	th := newTestHost(t)
	p := th.connect(t, acpagent.Config{Model: "scripted:gated"})
	p.initialize(t)
	s := p.newSession(t, th.cwd)
	type result struct {
		res acp.PromptResponse
		err error
	}
	done := make(chan result, 1)
	go func() {
		res, err := p.prompt(context.Background(), s.SessionId, "write it")
		done <- result{res, err}
	}()
	p.waitFor(t, "a permission request", func(p *peer) bool { return len(p.asked) == 1 })
	if err := p.conn.Cancel(t.Context(), acp.CancelNotification{SessionId: s.SessionId}); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil || r.res.StopReason != acp.StopReasonCancelled {
		t.Fatalf("prompt = %+v, %v; want cancelled", r.res, r.err)
	}
	p.waitFor(t, "the permission request to be withdrawn", func(p *peer) bool { return p.cancelled == 1 })
	ups := p.snapshot()
	id := string(p.asked[0].ToolCall.ToolCallId)
	if st := toolStatus(ups, id); st != "failed" && st != "completed" {
		t.Errorf("tool call %s left %q after the cancel\n%s", id, st, describe(ups))
	}
	// The approval is resolved in the host: nothing waits.
	open, err := p.cl.ListApprovals(t.Context(), api.ListRequestsParams{SessionID: string(s.SessionId)})
	if err != nil {
		t.Fatal(err)
	}
	if len(open.Requests) != 0 {
		t.Errorf("open approvals after the cancel: %+v", open.Requests)
	}
}

// TestCancelMidStream cancels a turn while the model streams.
func TestCancelMidStream(t *testing.T) {
	th := newTestHost(t)
	p := th.connect(t, acpagent.Config{Model: "scripted:slow"})
	p.initialize(t)
	s := p.newSession(t, th.cwd)
	done := make(chan acp.StopReason, 1)
	go func() {
		res, err := p.prompt(context.Background(), s.SessionId, "count")
		if err != nil {
			t.Error(err)
		}
		done <- res.StopReason
	}()
	p.waitFor(t, "the first chunk", func(p *peer) bool { return joined(p.updates, "agent") != "" })
	if err := p.conn.Cancel(t.Context(), acp.CancelNotification{SessionId: s.SessionId}); err != nil {
		t.Fatal(err)
	}
	if got := <-done; got != acp.StopReasonCancelled {
		t.Errorf("stop reason = %q, want cancelled", got)
	}
	if got := joined(p.snapshot(), "agent"); strings.HasSuffix(got, "twelve") {
		t.Errorf("the whole answer streamed despite the cancel: %q", got)
	}
	// A cancel for a finished turn does nothing; the session goes on.
	if err := p.conn.Cancel(t.Context(), acp.CancelNotification{SessionId: s.SessionId}); err != nil {
		t.Fatal(err)
	}
}

// TestLoadReplaysHistory kills the ACP connection, opens another, and
// loads the session: the whole transcript (the user's prompts, the
// thoughts and answers, the tool calls with their results) arrives
// before the load's answer, in order.
func TestLoadReplaysHistory(t *testing.T) {
	th := newTestHost(t)
	p := th.connect(t, acpagent.Config{Model: "scripted:gated"})
	p.permit = func(acp.RequestPermissionRequest) string { return "allow_once" }
	p.initialize(t)
	s := p.newSession(t, th.cwd)
	if _, err := p.prompt(t.Context(), s.SessionId, "write it"); err != nil {
		t.Fatal(err)
	}
	first := p.snapshot()
	p.close()

	q := th.connect(t, acpagent.Config{Model: "scripted:gated"})
	q.initialize(t)
	res, err := q.conn.LoadSession(t.Context(), acp.LoadSessionRequest{SessionId: s.SessionId, Cwd: th.cwd, McpServers: []acp.McpServer{}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Modes == nil || res.Modes.CurrentModeId != api.PresetAskWrites {
		t.Errorf("modes = %+v", res.Modes)
	}
	replay := q.snapshot()
	// The live stream did not echo the prompt; the replay has it, after
	// the title the prompt gave the session.
	want := "title: write it\nuser: write it\n" + strings.TrimPrefix(describe(first), "title: write it\n")
	if got := describe(replay); got != want {
		t.Errorf("replay:\n%s\nwant:\n%s", got, want)
	}
	if q.askedCount() != 0 {
		t.Error("a resolved approval was asked again")
	}
}

// TestLoadAsksOpenApprovalAgain: an editor that dies while a permission
// is asked is asked again when it loads the session, and its answer
// resumes the run.
func TestLoadAsksOpenApprovalAgain(t *testing.T) {
	th := newTestHost(t)
	p := th.connect(t, acpagent.Config{Model: "scripted:gated"})
	p.initialize(t)
	s := p.newSession(t, th.cwd)
	go p.prompt(context.Background(), s.SessionId, "write it")
	p.waitFor(t, "a permission request", func(p *peer) bool { return len(p.asked) == 1 })
	p.close()

	q := th.connect(t, acpagent.Config{Model: "scripted:gated"})
	q.permit = func(acp.RequestPermissionRequest) string { return "allow_once" }
	q.initialize(t)
	if _, err := q.conn.LoadSession(t.Context(), acp.LoadSessionRequest{SessionId: s.SessionId, Cwd: th.cwd, McpServers: []acp.McpServer{}}); err != nil {
		t.Fatal(err)
	}
	q.waitFor(t, "the run to finish after the answer", func(q *peer) bool { return strings.HasSuffix(joined(q.updates, "agent"), "Done.") })
	if q.askedCount() != 1 {
		t.Errorf("asked %d times after the load, want 1", q.askedCount())
	}
	if th.readFile(t, "hello.txt") != "hi" {
		t.Error("the file was not written")
	}
}

// TestLoadFollowsActiveRun: the ACP process dies mid-run; the run goes
// on in the host, and a new one loads the session with the run still
// streaming.
func TestLoadFollowsActiveRun(t *testing.T) {
	th := newTestHost(t)
	p := th.connect(t, acpagent.Config{Model: "scripted:slow"})
	p.initialize(t)
	s := p.newSession(t, th.cwd)
	go p.prompt(context.Background(), s.SessionId, "count")
	p.waitFor(t, "the first chunk", func(p *peer) bool { return joined(p.updates, "agent") != "" })
	p.close()

	q := th.connect(t, acpagent.Config{Model: "scripted:slow"})
	q.initialize(t)
	if _, err := q.conn.LoadSession(t.Context(), acp.LoadSessionRequest{SessionId: s.SessionId, Cwd: th.cwd, McpServers: []acp.McpServer{}}); err != nil {
		t.Fatal(err)
	}
	atLoad := joined(q.snapshot(), "agent")
	if strings.HasSuffix(atLoad, "twelve") {
		t.Fatalf("the run had ended before the load: %q", atLoad)
	}
	q.waitFor(t, "the rest of the answer", func(q *peer) bool {
		return joined(q.updates, "agent") == "one two three four five six seven eight nine ten eleven twelve"
	})
	if got := joined(q.snapshot(), "user"); got != "count" {
		t.Errorf("user = %q", got)
	}
}

// TestBusyPolicy sends a second prompt while the first one's run is
// active: queued, it runs after; steered, it joins the active run, and
// both prompts end with it.
func TestBusyPolicy(t *testing.T) {
	for _, busy := range []string{api.BusyQueue, api.BusySteer} {
		t.Run(busy, func(t *testing.T) {
			th := newTestHost(t)
			p := th.connect(t, acpagent.Config{Model: "scripted:slow"})
			p.initialize(t)
			s := p.newSession(t, th.cwd)
			// The editor picks the policy with the session's "busy" option.
			opts := s.ConfigOptions
			if len(opts) != 1 || opts[0].Select == nil || opts[0].Select.Id != "busy" || opts[0].Select.CurrentValue != api.BusyQueue {
				t.Fatalf("config options = %+v", opts)
			}
			set, err := p.conn.SetSessionConfigOption(t.Context(), acp.SetSessionConfigOptionRequest{ValueId: &acp.SetSessionConfigOptionValueId{
				SessionId: s.SessionId, ConfigId: "busy", Value: acp.SessionConfigValueId(busy)}})
			if err != nil || set.ConfigOptions[0].Select.CurrentValue != acp.SessionConfigValueId(busy) {
				t.Fatalf("set busy: %+v, %v", set, err)
			}
			first := make(chan acp.StopReason, 1)
			go func() {
				res, err := p.prompt(context.Background(), s.SessionId, "count")
				if err != nil {
					t.Error(err)
				}
				first <- res.StopReason
			}()
			p.waitFor(t, "the first chunk", func(p *peer) bool { return joined(p.updates, "agent") != "" })
			res, err := p.prompt(t.Context(), s.SessionId, "and again")
			if err != nil {
				t.Fatal(err)
			}
			if res.StopReason != acp.StopReasonEndTurn || <-first != acp.StopReasonEndTurn {
				t.Errorf("stop reason = %q", res.StopReason)
			}
			runs, err := p.cl.ListRuns(t.Context(), api.ListRunsParams{SessionID: string(s.SessionId)})
			if err != nil {
				t.Fatal(err)
			}
			want := 2
			if busy == api.BusySteer {
				want = 1
			}
			if len(runs.Runs) != want {
				t.Errorf("%d runs, want %d", len(runs.Runs), want)
			}
			// A reload shows both prompts once each.
			q := th.connect(t, acpagent.Config{Model: "scripted:slow"})
			q.initialize(t)
			loaded, err := q.conn.LoadSession(t.Context(), acp.LoadSessionRequest{SessionId: s.SessionId, Cwd: th.cwd, McpServers: []acp.McpServer{}})
			if err != nil {
				t.Fatal(err)
			}
			if got := joined(q.snapshot(), "user"); got != "countand again" {
				t.Errorf("replayed user messages = %q\n%s", got, describe(q.snapshot()))
			}
			if v := loaded.ConfigOptions[0].Select.CurrentValue; v != acp.SessionConfigValueId(busy) {
				t.Errorf("busy after a reload = %q, want %q", v, busy)
			}
			_, err = q.conn.SetSessionConfigOption(t.Context(), acp.SetSessionConfigOptionRequest{ValueId: &acp.SetSessionConfigOptionValueId{
				SessionId: s.SessionId, ConfigId: "busy", Value: "interrupt"}})
			if !isCode(err, -32602) {
				t.Errorf("busy interrupt: %v, want invalid params", err)
			}
		})
	}
}

// TestSetMode switches a session to read-only: the gated write is
// refused without asking.
func TestSetMode(t *testing.T) {
	th := newTestHost(t)
	p := th.connect(t, acpagent.Config{Model: "scripted:gated"})
	p.initialize(t)
	s := p.newSession(t, th.cwd)
	if _, err := p.conn.SetSessionMode(t.Context(), acp.SetSessionModeRequest{SessionId: s.SessionId, ModeId: api.PresetReadOnly}); err != nil {
		t.Fatal(err)
	}
	if _, err := p.prompt(t.Context(), s.SessionId, "write it"); err != nil {
		t.Fatal(err)
	}
	if p.askedCount() != 0 {
		t.Error("read-only asked")
	}
	if st := toolStatus(p.snapshot(), "call_0_0"); st != "failed" {
		t.Errorf("the write's status = %q, want failed\n%s", st, describe(p.snapshot()))
	}
	// A later load reports the mode the session's last run took.
	q := th.connect(t, acpagent.Config{Model: "scripted:gated"})
	q.initialize(t)
	res, err := q.conn.LoadSession(t.Context(), acp.LoadSessionRequest{SessionId: s.SessionId, Cwd: th.cwd, McpServers: []acp.McpServer{}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Modes.CurrentModeId != api.PresetReadOnly {
		t.Errorf("mode after load = %q", res.Modes.CurrentModeId)
	}
	if _, err := p.conn.SetSessionMode(t.Context(), acp.SetSessionModeRequest{SessionId: s.SessionId, ModeId: "yolo"}); !isCode(err, -32602) {
		t.Errorf("unknown mode: %v, want invalid params", err)
	}
}

// TestListSessions lists the host's sessions, and those of one cwd.
func TestListSessions(t *testing.T) {
	th := newTestHost(t)
	p := th.connect(t, acpagent.Config{Model: "scripted:plain"})
	p.initialize(t)
	a := p.newSession(t, th.cwd)
	other := t.TempDir()
	b := p.newSession(t, other)
	res, err := p.conn.ListSessions(t.Context(), acp.ListSessionsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var ids []acp.SessionId
	for _, s := range res.Sessions {
		ids = append(ids, s.SessionId)
	}
	if !slices.Contains(ids, a.SessionId) || !slices.Contains(ids, b.SessionId) {
		t.Errorf("sessions = %v", ids)
	}
	res, err = p.conn.ListSessions(t.Context(), acp.ListSessionsRequest{Cwd: &th.cwd})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Sessions) != 1 || res.Sessions[0].SessionId != a.SessionId || res.Sessions[0].Cwd != th.cwd {
		t.Errorf("sessions of %s = %+v", th.cwd, res.Sessions)
	}
}

// TestBadInput: an unknown session, a malformed prompt, a relative cwd
// are clear JSON-RPC errors, and the session still works after them.
func TestBadInput(t *testing.T) {
	th := newTestHost(t)
	p := th.connect(t, acpagent.Config{Model: "scripted:plain"})
	p.initialize(t)
	s := p.newSession(t, th.cwd)
	ctx := t.Context()

	_, err := p.prompt(ctx, "ses_nope", "hi")
	if !isCode(err, -32010) {
		t.Errorf("prompt to an unknown session: %v, want not found (-32010)", err)
	}
	_, err = p.conn.LoadSession(ctx, acp.LoadSessionRequest{SessionId: "ses_nope", Cwd: th.cwd, McpServers: []acp.McpServer{}})
	if !isCode(err, -32010) {
		t.Errorf("load of an unknown session: %v, want not found (-32010)", err)
	}
	_, err = p.conn.Prompt(ctx, acp.PromptRequest{SessionId: s.SessionId, Prompt: []acp.ContentBlock{acp.ImageBlock("aGk=", "image/png")}})
	if !isCode(err, -32602) {
		t.Errorf("image prompt: %v, want invalid params", err)
	}
	_, err = p.conn.Prompt(ctx, acp.PromptRequest{SessionId: s.SessionId, Prompt: []acp.ContentBlock{acp.TextBlock("  ")}})
	if !isCode(err, -32602) {
		t.Errorf("empty prompt: %v, want invalid params", err)
	}
	_, err = p.conn.NewSession(ctx, acp.NewSessionRequest{Cwd: "relative/dir", McpServers: []acp.McpServer{}})
	if !isCode(err, -32602) {
		t.Errorf("relative cwd: %v, want invalid params", err)
	}
	// A session of the host this connection did not load.
	other := th.connect(t, acpagent.Config{Model: "scripted:plain"})
	other.initialize(t)
	_, err = other.prompt(ctx, s.SessionId, "hi")
	if !isCode(err, -32602) || !strings.Contains(err.Error(), "session/load") {
		t.Errorf("prompt to a session not loaded: %v, want invalid params naming session/load", err)
	}
	// Nothing was lost: the session runs.
	res, err := p.prompt(ctx, s.SessionId, "again")
	if err != nil || res.StopReason != acp.StopReasonEndTurn {
		t.Fatalf("prompt after the bad ones: %+v, %v", res, err)
	}
	if got := joined(p.snapshot(), "agent"); got != "Hello again" {
		t.Errorf("agent text = %q", got)
	}
}

// TestInProcessHost drives a host in the same process through api.Host
// directly, as `weft acp` without a `weft serve` does.
func TestInProcessHost(t *testing.T) {
	th := newTestHost(t)
	p := startPeer(t, acpagent.Config{Host: th.h, Model: "scripted:gated"}, nil)
	p.permit = func(acp.RequestPermissionRequest) string { return "allow_once" }
	p.initialize(t)
	s := p.newSession(t, th.cwd)
	res, err := p.prompt(t.Context(), s.SessionId, "write it")
	if err != nil || res.StopReason != acp.StopReasonEndTurn {
		t.Fatalf("prompt = %+v, %v", res, err)
	}
	if th.readFile(t, "hello.txt") != "hi" {
		t.Error("the file was not written")
	}
}

func isCode(err error, code int) bool {
	var re *acp.RequestError
	return errors.As(err, &re) && re.Code == code
}

// TestDialOnFirstNeed: with Config.Dial, initialize is answered without
// a host; a failing dial is the error of the method that needed it, and
// the next method dials again.
func TestDialOnFirstNeed(t *testing.T) {
	th := newTestHost(t)
	var dials int
	fail := true
	p := startPeer(t, acpagent.Config{Model: "scripted:plain", Dial: func(context.Context) (api.Host, acpagent.FollowFunc, error) {
		dials++
		if fail {
			return nil, nil, errors.New("the store is held by another host")
		}
		return th.h, nil, nil
	}}, nil)
	p.initialize(t)
	if dials != 0 {
		t.Fatalf("initialize dialed %d times", dials)
	}
	_, err := p.conn.NewSession(t.Context(), acp.NewSessionRequest{Cwd: th.cwd, McpServers: []acp.McpServer{}})
	if !isCode(err, -32603) || !strings.Contains(err.Error(), "held by another host") {
		t.Fatalf("session/new with no host: %v", err)
	}
	fail = false
	s := p.newSession(t, th.cwd)
	if res, err := p.prompt(t.Context(), s.SessionId, "you"); err != nil || res.StopReason != acp.StopReasonEndTurn {
		t.Fatalf("prompt = %+v, %v", res, err)
	}
	if dials != 2 {
		t.Errorf("dialed %d times, want 2", dials)
	}
}

// TestMalformedFrames writes broken frames as a buggy editor might: a
// line that is not JSON, a prompt whose params are not a prompt, a
// method ACP does not have. Each malformed request gets a JSON-RPC
// error, and the connection and the session go on.
func TestMalformedFrames(t *testing.T) {
	th := newTestHost(t)
	cl, err := th.dial(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	c2aR, c2aW := io.Pipe()
	a2cR, a2cW := io.Pipe()
	done := make(chan struct{})
	go func() {
		defer close(done)
		acpagent.Serve(context.Background(), acpagent.Config{Host: cl, Model: "scripted:plain"}, c2aR, a2cW)
		a2cW.Close()
	}()
	defer func() {
		go io.Copy(io.Discard, a2cR) // what the agent still writes
		c2aW.Close()
		<-done
	}()
	lines := bufio.NewScanner(a2cR)
	lines.Buffer(nil, 1<<20)
	// call writes a frame and returns the response with id, skipping
	// notifications.
	call := func(frame string, id int) map[string]any {
		t.Helper()
		if _, err := io.WriteString(c2aW, frame+"\n"); err != nil {
			t.Fatal(err)
		}
		for lines.Scan() {
			var m map[string]any
			if err := json.Unmarshal(lines.Bytes(), &m); err != nil {
				t.Fatalf("the agent wrote %q: %v", lines.Text(), err)
			}
			if m["id"] == float64(id) {
				return m
			}
		}
		t.Fatalf("no answer to %s: %v", frame, lines.Err())
		return nil
	}
	errCode := func(m map[string]any) float64 {
		e, _ := m["error"].(map[string]any)
		c, _ := e["code"].(float64)
		return c
	}
	call(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}`, 1)
	res := call(`{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"`+th.cwd+`","mcpServers":[]}}`, 2)
	sid := res["result"].(map[string]any)["sessionId"].(string)
	io.WriteString(c2aW, "{not json\n")
	if m := call(`{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{"sessionId":"`+sid+`","prompt":"hello"}}`, 3); errCode(m) != -32602 {
		t.Errorf("a prompt that is a string: %v", m)
	}
	if m := call(`{"jsonrpc":"2.0","id":4,"method":"session/prompt","params":{"sessionId":"`+sid+`"}}`, 4); errCode(m) != -32602 {
		t.Errorf("a prompt without a prompt: %v", m)
	}
	if m := call(`{"jsonrpc":"2.0","id":5,"method":"session/fly","params":{}}`, 5); errCode(m) != -32601 {
		t.Errorf("an unknown method: %v", m)
	}
	m := call(`{"jsonrpc":"2.0","id":6,"method":"session/prompt","params":{"sessionId":"`+sid+`","prompt":[{"type":"text","text":"again"}]}}`, 6)
	if r, _ := m["result"].(map[string]any); r["stopReason"] != "end_turn" {
		t.Errorf("the prompt after the broken frames: %v", m)
	}
}

// TestQuestion: the model asks the user (ask_user): the turn ends with
// the question, and the next prompt is the answer, which the run takes
// and goes on with.
func TestQuestion(t *testing.T) {
	th := newTestHost(t)
	p := th.connect(t, acpagent.Config{Model: "scripted:question"})
	p.initialize(t)
	s := p.newSession(t, th.cwd)
	res, err := p.prompt(t.Context(), s.SessionId, "pick")
	if err != nil || res.StopReason != acp.StopReasonEndTurn {
		t.Fatalf("prompt = %+v, %v", res, err)
	}
	if got := joined(p.snapshot(), "agent"); !strings.Contains(got, "Which color?") || !strings.Contains(got, "2. blue") {
		t.Fatalf("the question did not reach the editor: %q\n%s", got, describe(p.snapshot()))
	}
	res, err = p.prompt(t.Context(), s.SessionId, "blue")
	if err != nil || res.StopReason != acp.StopReasonEndTurn {
		t.Fatalf("answer = %+v, %v", res, err)
	}
	ups := p.snapshot()
	if !strings.HasSuffix(joined(ups, "agent"), "Noted.") || toolStatus(ups, "call_0_0") != "completed" || joined(ups, "user") != "" {
		t.Errorf("after the answer:\n%s", describe(ups))
	}
	runs, err := p.cl.ListRuns(t.Context(), api.ListRunsParams{SessionID: string(s.SessionId)})
	if err != nil || len(runs.Runs) != 1 {
		t.Fatalf("runs = %+v, %v; want the one run that asked", runs, err)
	}
	q := th.connect(t, acpagent.Config{Model: "scripted:question"})
	q.initialize(t)
	if _, err := q.conn.LoadSession(t.Context(), acp.LoadSessionRequest{SessionId: s.SessionId, Cwd: th.cwd, McpServers: []acp.McpServer{}}); err != nil {
		t.Fatal(err)
	}
	if got := joined(q.snapshot(), "user"); got != "pickblue" {
		t.Errorf("replayed user messages = %q", got)
	}
}
