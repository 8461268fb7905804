package rpc_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"weft.dev/weft/api"
	"weft.dev/weft/client"
	"weft.dev/weft/event"
	"weft.dev/weft/host"
	"weft.dev/weft/llm/scripted"
	"weft.dev/weft/rpc"
	"weft.dev/weft/rpc/rpctest"
	"weft.dev/weft/store/memory"
	"weft.dev/weft/store/record"
)

const token = "test-token"

var hostScripts = map[string]string{
	"asks": `{"loop":true,"steps":[{"toolCalls":[{"name":"write_file","arguments":{"path":"a.txt","content":"A"}},` +
		`{"name":"ask_user","arguments":{"question":"ok?"}},{"name":"pick","arguments":{}}]},{"text":"done"}]}`,
	"fast": `{"loop":true,"steps":[{"text":"answer to {{input}}"}]}`,
	"slow": `{"loop":true,"steps":[{"text":"` + strings.Repeat("tok ", 300) + `{{input}}","delayMs":2}]}`,
	// hang streams one word and then nothing until it is cancelled: a run
	// that is certainly still active however slow the machine is.
	"hang": `{"loop":true,"steps":[{"text":"first {{input}} last","delayMs":600000}]}`,
}

type hostEnv struct {
	h   *host.Host
	s   *rpc.Server
	srv *httptest.Server
}

func newHostEnv(t *testing.T) *hostEnv {
	t.Helper()
	h, err := host.New(context.Background(), host.Config{
		Store: memory.New(), DefaultModel: "fast",
		CoalesceWindow: 2 * time.Millisecond,
		ResolveModel: func(name string) (*host.Model, error) {
			src, ok := hostScripts[name]
			if !ok {
				return nil, fmt.Errorf("unknown model %q", name)
			}
			p, err := scripted.Parse(name, []byte(src))
			if err != nil {
				return nil, err
			}
			return &host.Model{Name: name, Provider: p, Model: name}, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	s := rpc.NewHostServer(h, rpc.HostConfig{Config: rpc.Config{Token: token}})
	srv := httptest.NewServer(rpc.HTTPHandler(s, h, rpc.SSEOptions{Heartbeat: 50 * time.Millisecond}))
	t.Cleanup(func() {
		srv.CloseClientConnections()
		s.Close()
		srv.Close()
		h.Close()
	})
	return &hostEnv{h: h, s: s, srv: srv}
}

func (e *hostEnv) dial(t *testing.T) *client.Client {
	t.Helper()
	c, err := client.Dial(context.Background(), e.srv.URL, client.Options{Token: token})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func (e *hostEnv) log(t *testing.T, sid string) []event.Event {
	t.Helper()
	var all []event.Event
	var after int64
	for {
		p, err := e.h.ReadEvents(context.Background(), api.ReadEventsParams{SessionID: sid, After: after, Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, p.Events...)
		if !p.HasMore {
			return all
		}
		after = p.NextCursor
	}
}

func TestHostDiscovery(t *testing.T) {
	e := newHostEnv(t)
	var evs []string
	for _, ty := range []event.Type{event.SessionCreated, event.SessionUpdated, event.RunQueued, event.RunStarted, event.MessageUser, event.MessageDelta,
		event.ReasoningDelta, event.MessageCompleted, event.StepStarted, event.ToolCallStarted, event.ToolCallCompleted, event.Usage,
		event.ModelRetry, event.SteerAccepted, event.SteerConsumed, event.SteerDropped, event.RunCompleted, event.RunFailed,
		event.RunCancelled, event.RunInterrupted, event.MountAdded, event.MountRemoved, event.MountInfo,
		event.ProcessStarted, event.ProcessExited} {
		evs = append(evs, string(ty))
	}
	rpctest.CheckDiscovery(t, e.s, append(evs, api.NotifyEvent, api.NotifyClosed, api.NotifyProcessOutput, api.NotifyProcessClosed)...)
	// run/start's input is described as what it accepts: text or parts.
	for _, m := range rpctest.Discover(t, e.s).Methods {
		if m.Name != "run/start" {
			continue
		}
		for _, p := range m.Params {
			if p.Name == "input" {
				if _, ok := p.Schema["oneOf"]; !ok {
					t.Errorf("run/start input schema %v lacks oneOf", p.Schema)
				}
			}
		}
	}
	names := map[string]bool{}
	for _, m := range e.s.Methods() {
		names[m.Name] = true
	}
	for _, want := range []string{"session/create", "session/get", "session/list", "session/delete", "session/update", "run/start", "run/get",
		"run/list", "run/wait", "run/steer", "run/cancel", "events/read", "events/subscribe", "events/unsubscribe", "tools/list",
		"env/list", "env/mount", "env/unmount", "process/start", "process/get", "process/list", "process/await", "process/output",
		"process/write", "process/signal", "process/cancel", "process/grant", "process/revoke", "process/follow"} {
		if !names[want] {
			t.Errorf("method %s is not registered", want)
		}
	}
}

func waitDone(t *testing.T, c *client.Client, runID string) record.Run {
	t.Helper()
	w, err := c.WaitRun(context.Background(), api.WaitRunParams{RunID: runID, TimeoutMs: 20000})
	if err != nil || w.TimedOut {
		t.Fatalf("wait %s: %+v %v", runID, w, err)
	}
	return w.Run
}

func TestWebSocketSubscriptionEqualsLog(t *testing.T) {
	e := newHostEnv(t)
	c := e.dial(t)
	ctx := context.Background()
	s, err := c.CreateSession(ctx, api.CreateSessionParams{Model: "slow"})
	if err != nil {
		t.Fatal(err)
	}
	seq, err := c.Subscribe(ctx, api.SubscribeParams{SessionID: s.ID})
	if err != nil {
		t.Fatal(err)
	}
	var runID string
	var got []event.Event
	started := false
	for ev, err := range seq {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, ev)
		if !started {
			started = true
			r, err := c.StartRun(ctx, api.StartRunParams{SessionID: s.ID, Input: api.Input(event.TextParts("go"))})
			if err != nil {
				t.Fatal(err)
			}
			runID = r.ID
		}
		if ev.RunID == runID && event.IsTerminalRun(ev.Type) {
			break
		}
	}
	want := e.log(t, s.ID)
	if len(got) != len(want) {
		t.Fatalf("subscription saw %d events, log has %d", len(got), len(want))
	}
	for i := range got {
		a, _ := json.Marshal(got[i])
		b, _ := json.Marshal(want[i])
		if string(a) != string(b) {
			t.Fatalf("event %d differs:\n%s\n%s", i, a, b)
		}
	}
}

// TestFollowSurvivesDisconnects drops every client connection repeatedly
// while a run streams; the follower must see every event exactly once.
func TestFollowSurvivesDisconnects(t *testing.T) {
	e := newHostEnv(t)
	c := e.dial(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, _ := c.CreateSession(ctx, api.CreateSessionParams{Model: "slow"})
	r, err := c.StartRun(ctx, api.StartRunParams{SessionID: s.ID, Input: api.Input(event.TextParts("go"))})
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(40 * time.Millisecond):
				e.srv.CloseClientConnections()
			}
		}
	})
	dial := func(ctx context.Context) (*client.Client, error) {
		return client.Dial(ctx, e.srv.URL, client.Options{Token: token})
	}
	var got []int64
	for ev, err := range client.Follow(ctx, dial, s.ID, 0, "") {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, ev.Seq)
		if ev.RunID == r.ID && event.IsTerminalRun(ev.Type) {
			break
		}
	}
	close(stop)
	wg.Wait()
	for i, s := range got {
		if s != int64(i+1) {
			t.Fatalf("position %d: seq %d (duplicate or gap)", i, s)
		}
	}
	if len(got) != len(e.log(t, s.ID)) {
		t.Fatalf("follower saw %d events, log has %d", len(got), len(e.log(t, s.ID)))
	}
}

// sseRead reads one SSE connection, returning the ids and data it saw
// before the connection ended or stop returned true.
func sseRead(t *testing.T, url, lastID string, stop func(event.Event) bool) (last string, evs []event.Event, done bool) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Authorization", "Bearer "+token)
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return lastID, nil, false
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("SSE status %d: %s", resp.StatusCode, b)
	}
	last = lastID
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	var id string
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "id: "):
			id = strings.TrimPrefix(line, "id: ")
		case strings.HasPrefix(line, "data: "):
			var ev event.Event
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &ev); err != nil {
				t.Fatal(err)
			}
			if strconv.FormatInt(ev.Seq, 10) != id {
				t.Fatalf("SSE id %s for seq %d", id, ev.Seq)
			}
			evs = append(evs, ev)
			last = id
			if stop(ev) {
				return last, evs, true
			}
		}
	}
	return last, evs, false
}

// TestSSEReconnectExactlyOnce behaves as an EventSource: on every dropped
// connection it reconnects with Last-Event-ID.
func TestSSEReconnectExactlyOnce(t *testing.T) {
	e := newHostEnv(t)
	c := e.dial(t)
	ctx := context.Background()
	s, _ := c.CreateSession(ctx, api.CreateSessionParams{Model: "slow"})
	r, _ := c.StartRun(ctx, api.StartRunParams{SessionID: s.ID, Input: api.Input(event.TextParts("go"))})
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(30 * time.Millisecond):
				e.srv.CloseClientConnections()
			}
		}
	})
	url := e.srv.URL + "/v1/sessions/" + s.ID + "/events"
	var all []event.Event
	last := ""
	reconnects := 0
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); reconnects++ {
		var evs []event.Event
		var done bool
		last, evs, done = sseRead(t, url, last, func(ev event.Event) bool { return ev.RunID == r.ID && event.IsTerminalRun(ev.Type) })
		all = append(all, evs...)
		if done {
			break
		}
	}
	close(stop)
	wg.Wait()
	if reconnects == 0 {
		t.Fatal("the run ended before any connection was dropped: nothing was resumed")
	}
	for i, ev := range all {
		if ev.Seq != int64(i+1) {
			t.Fatalf("position %d: seq %d (duplicate or gap) after %d reconnects", i, ev.Seq, reconnects)
		}
	}
	if n := len(e.log(t, s.ID)); len(all) != n {
		t.Fatalf("saw %d events, log has %d", len(all), n)
	}
	t.Logf("%d events over %d connections", len(all), reconnects+1)
}

func TestSSEErrors(t *testing.T) {
	e := newHostEnv(t)
	get := func(path string, hdr map[string]string) int {
		req, _ := http.NewRequest("GET", e.srv.URL+path, nil)
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	auth := map[string]string{"Authorization": "Bearer " + token}
	if got := get("/v1/sessions/ses_x/events", nil); got != 401 {
		t.Errorf("no token: %d", got)
	}
	if got := get("/v1/sessions/ses_x/events", auth); got != 404 {
		t.Errorf("unknown session: %d", got)
	}
	s, _ := e.h.CreateSession(context.Background(), api.CreateSessionParams{})
	if got := get("/v1/sessions/"+s.ID+"/events?after=99", auth); got != 400 {
		t.Errorf("cursor ahead: %d", got)
	}
	if got := get("/v1/sessions/"+s.ID+"/events?after=abc", auth); got != 400 {
		t.Errorf("bad cursor: %d", got)
	}
}

// TestStartRetriedAfterDroppedConnection: the client sends run/start and
// drops the connection before reading the answer; a retry with the same
// key returns the same run, and there is one run.
func TestStartRetriedAfterDroppedConnection(t *testing.T) {
	e := newHostEnv(t)
	ctx := context.Background()
	s, _ := e.h.CreateSession(ctx, api.CreateSessionParams{Model: "fast"})
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"run/start","params":{"sessionId":%q,"input":"once","idempotencyKey":"k-1"}}`, s.ID)
	conn, err := net.Dial("tcp", strings.TrimPrefix(e.srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(conn, "POST /rpc HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", token, len(body), body)
	conn.Close()
	// The dropped request still completes on the server: wait for its run.
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	seq, err := e.h.Subscribe(sctx, api.SubscribeParams{SessionID: s.ID})
	if err != nil {
		t.Fatal(err)
	}
	for ev, err := range seq {
		if err != nil {
			t.Fatalf("waiting for the dropped request's run: %v", err)
		}
		if ev.Type == event.RunQueued {
			break
		}
	}
	c := e.dial(t)
	r, err := c.StartRun(ctx, api.StartRunParams{SessionID: s.ID, Input: api.Input(event.TextParts("once")), IdempotencyKey: "k-1"})
	if err != nil {
		t.Fatal(err)
	}
	if !r.Replayed {
		t.Fatalf("retry was not replayed: %+v", r)
	}
	waitDone(t, c, r.ID)
	runs, _ := e.h.ListRuns(ctx, api.ListRunsParams{SessionID: s.ID})
	if len(runs.Runs) != 1 || runs.Runs[0].ID != r.ID {
		t.Fatalf("runs after retry: %+v", runs.Runs)
	}
	_, err = c.StartRun(ctx, api.StartRunParams{SessionID: s.ID, Input: api.Input(event.TextParts("other")), IdempotencyKey: "k-1"})
	var re *api.Error
	if !errors.As(err, &re) || re.Code != -32012 {
		t.Fatalf("same key, other params: %v", err)
	}
}

func TestHostErrorsOnTheWire(t *testing.T) {
	e := newHostEnv(t)
	c := e.dial(t)
	ctx := context.Background()
	s, _ := c.CreateSession(ctx, api.CreateSessionParams{Model: "fast"})
	r, _ := c.StartRun(ctx, api.StartRunParams{SessionID: s.ID, Input: api.Input(event.TextParts("x"))})
	waitDone(t, c, r.ID)
	cases := []struct {
		name string
		code int
		kind api.Kind
		call func() error
		data func(*api.Error) bool
	}{
		{"steer a finished run", -32013, api.KindRunConflict, func() error {
			_, err := c.SteerRun(ctx, api.SteerParams{RunID: r.ID, Input: api.Input(event.TextParts("late"))})
			return err
		}, func(e *api.Error) bool { return e.Data["status"] == "completed" }},
		{"unknown run", -32010, api.KindNotFound, func() error { _, err := c.GetRun(ctx, api.RunIDParams{RunID: "run_nope"}); return err }, nil},
		{"cursor ahead", -32016, api.KindCursorInvalid, func() error {
			_, err := c.ReadEvents(ctx, api.ReadEventsParams{SessionID: s.ID, After: 1 << 40})
			return err
		}, nil},
		{"unknown field", -32602, api.KindInvalidParams, func() error {
			return c.Call(ctx, "run/get", map[string]any{"runId": r.ID, "extra": 1}, nil)
		}, nil},
		{"bad busy", -32602, api.KindInvalidParams, func() error {
			_, err := c.StartRun(ctx, api.StartRunParams{SessionID: s.ID, Input: api.Input(event.TextParts("x")), Busy: "later"})
			return err
		}, nil},
		{"budget not a number", -32602, api.KindInvalidParams, func() error {
			return c.Call(ctx, "run/start", map[string]any{"sessionId": s.ID, "input": "x", "budget": map[string]any{"costUsd": "lots"}}, nil)
		}, func(e *api.Error) bool { return e.Data["field"] == "budget.costUsd" }},
		{"budget negative", -32602, api.KindInvalidParams, func() error {
			return c.Call(ctx, "session/update", map[string]any{"sessionId": s.ID, "budget": map[string]any{"steps": -1}}, nil)
		}, func(e *api.Error) bool { return e.Data["field"] == "budget.steps" }},
	}
	for _, tc := range cases {
		err := tc.call()
		var re *api.Error
		if !errors.As(err, &re) || re.Code != tc.code || re.Kind != tc.kind {
			t.Errorf("%s: got %v, want %d %s", tc.name, err, tc.code, tc.kind)
			continue
		}
		if tc.data != nil && !tc.data(re) {
			t.Errorf("%s: data %v", tc.name, re.Data)
		}
	}
}

func TestSubscribeOverHTTPRefused(t *testing.T) {
	e := newHostEnv(t)
	s, _ := e.h.CreateSession(context.Background(), api.CreateSessionParams{})
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"events/subscribe","params":{"sessionId":%q}}`, s.ID)
	req, _ := http.NewRequest("POST", e.srv.URL+"/rpc", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if !strings.Contains(string(b), "-32600") || !strings.Contains(string(b), "SSE") {
		t.Fatalf("subscribe over POST: %s", b)
	}
}
