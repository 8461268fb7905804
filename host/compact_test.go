package host_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"weft.dev/weft/api"
	"weft.dev/weft/event"
	"weft.dev/weft/host"
	"weft.dev/weft/llm/scripted"
	"weft.dev/weft/process"
	"weft.dev/weft/store"
	"weft.dev/weft/store/memory"
	"weft.dev/weft/store/record"
	"weft.dev/weft/tool"
	"weft.dev/weft/tool/builtin"
)

// compactScript starts a background process (if bg is set), then writes
// a 3,000-byte file at each of n steps, in a model window of 6,000
// tokens, then answers.
func compactScript(n int, bg string) string {
	var steps []string
	if bg != "" {
		steps = append(steps, fmt.Sprintf(`{"text":"starting","toolCalls":[{"name":"shell","arguments":{"command":%q,"background":true}}]}`, bg))
	}
	for i := range n {
		steps = append(steps, fmt.Sprintf(`{"text":"step %d","toolCalls":[{"name":"write_file","arguments":{"path":"f%d.txt","content":%q}}]}`,
			i, i, strings.Repeat("y", 3000)))
	}
	steps = append(steps, `{"text":"finished {{input}}"}`)
	return `{"loop":true,"contextWindow":6000,"summary":"Files written so far; the latest input: {{input}}","steps":[` + strings.Join(steps, ",") + `]}`
}

// newCompactHost is a host over st with background processes, whose
// models are scripts (with their context windows), checked by checker.
func newCompactHost(t *testing.T, st store.Store, checker *logChecker, scripts map[string]string) *host.Host {
	t.Helper()
	m, err := process.New(process.Config{Store: st, KillGrace: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	reg := tool.NewRegistry()
	if err := builtin.Register(reg, builtin.Options{Background: process.BackgroundShell{}}); err != nil {
		t.Fatal(err)
	}
	if err := process.RegisterTools(reg, m); err != nil {
		t.Fatal(err)
	}
	h, err := host.New(context.Background(), host.Config{
		Store: st, Tools: reg, CoalesceWindow: time.Millisecond, Processes: m,
		ResolveModel: func(name string) (*host.Model, error) {
			key := strings.TrimPrefix(name, "scripted:")
			src, ok := scripts[key]
			if !ok {
				return nil, fmt.Errorf("unknown model %q", name)
			}
			p, err := scripted.Parse(key+".json", []byte(src))
			if err != nil {
				return nil, err
			}
			return &host.Model{Name: name, Provider: checked{checker, p}, Model: key, ContextWindow: p.ContextWindow()}, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

// TestCompactionKeepsProcessReachable: a session runs far past its
// window; it keeps going with compactions, every request is the log's
// conversation, the re-injected state names its background process, and
// the process is still awaited by its handle after the compactions.
func TestCompactionKeepsProcessReachable(t *testing.T) {
	st := memory.New()
	checker := &logChecker{t: t, st: st}
	h := newCompactHost(t, st, checker, map[string]string{"long": compactScript(24, "sleep 3; echo bg-done")})
	ctx := context.Background()
	sid := session(t, h, "scripted:long")
	checker.setSession(sid)
	r := start(t, h, api.StartRunParams{SessionID: sid, Input: input("go"), MaxSteps: 40})
	if got := wait(t, h, r.ID); got.Status != record.RunCompleted {
		t.Fatalf("run: %+v", got)
	}
	procs, err := h.ListProcesses(ctx, api.ProcessListParams{SessionID: sid})
	if err != nil || len(procs.Processes) != 1 {
		t.Fatalf("processes %+v, %v", procs, err)
	}
	id := procs.Processes[0].ID
	cs := sessionEvents(t, h, sid, event.ContextCompacted)
	if len(cs) < 2 {
		t.Fatalf("%d compactions; want several", len(cs))
	}
	var d event.ContextCompactedData
	if err := cs[0].Decode(&d); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(d.State, id) || !strings.Contains(d.State, `"__handle__":"process"`) || !strings.Contains(d.State, "/environment/work") {
		t.Fatalf("the re-injected state does not name the process %s or the mount:\n%s", id, d.State)
	}
	if !strings.Contains(d.Summary, "Files written so far") || d.TokensBefore <= d.TokensAfter {
		t.Fatalf("compaction %+v", d)
	}
	aw, err := h.AwaitProcess(ctx, api.ProcessAwaitParams{ID: id, SessionID: sid, TimeoutMs: 20000})
	if err != nil || aw.TimedOut || aw.Process.Status != record.ProcessCompleted || !strings.Contains(aw.Tail, "bg-done") {
		t.Fatalf("await by handle after compaction: %+v, %v", aw, err)
	}
	if checker.count() < 25 {
		t.Fatalf("the model was asked %d times", checker.count())
	}
}

// TestCompactionSurvivesRestart: a new host over the store of a session
// that was compacted sends the model the conversation the log holds —
// the latest summary and what follows — as the first host would have.
func TestCompactionSurvivesRestart(t *testing.T) {
	st := memory.New()
	checker := &logChecker{t: t, st: st}
	scripts := map[string]string{"long": compactScript(16, "")}
	h := newCompactHost(t, st, checker, scripts)
	sid := session(t, h, "scripted:long")
	checker.setSession(sid)
	r := start(t, h, api.StartRunParams{SessionID: sid, Input: input("first")})
	if got := wait(t, h, r.ID); got.Status != record.RunCompleted {
		t.Fatalf("run: %+v", got)
	}
	if n := len(sessionEvents(t, h, sid, event.ContextCompacted)); n == 0 {
		t.Fatal("no compaction")
	}
	before := checker.count()
	h.Close()

	h = newCompactHost(t, st, checker, scripts)
	r = start(t, h, api.StartRunParams{SessionID: sid, Input: input("second")})
	if got := wait(t, h, r.ID); got.Status != record.RunCompleted {
		t.Fatalf("run after restart: %+v", got)
	}
	if checker.count() <= before {
		t.Fatal("the model was not asked after the restart")
	}
	got, err := h.GetSession(context.Background(), api.SessionGetParams{SessionID: sid, Transcript: api.TranscriptCompacted})
	if err != nil {
		t.Fatal(err)
	}
	tr := got.Transcript
	if tr == nil || tr.Compactions == 0 || !strings.HasPrefix(tr.Messages[0].Content, "[The conversation before this point was compacted") {
		t.Fatalf("compacted view %+v", tr)
	}
	full, err := h.GetSession(context.Background(), api.SessionGetParams{SessionID: sid, Transcript: api.TranscriptFull})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(full.Transcript.Messages); n <= len(tr.Messages) || full.Transcript.Messages[0].Content != "first" {
		t.Fatalf("full view: %d messages starting %q; compacted %d", n, full.Transcript.Messages[0].Content, len(tr.Messages))
	}
}

// TestSessionCompact: session/compact summarises an idle session on
// demand; the next run starts from the summary; bad cases are typed.
func TestSessionCompact(t *testing.T) {
	st := memory.New()
	checker := &logChecker{t: t, st: st}
	h := newCompactHost(t, st, checker, map[string]string{
		"fast": scripts["fast"],
		"tool": scripts["tool"],
	})
	ctx := context.Background()

	if _, err := h.CompactSession(ctx, api.CompactParams{SessionID: "ses_nope"}); !errors.Is(err, api.ErrNotFound) {
		t.Fatalf("unknown session: %v", err)
	}
	sid := session(t, h, "scripted:fast")
	checker.setSession(sid)
	if _, err := h.CompactSession(ctx, api.CompactParams{SessionID: sid}); !errors.Is(err, api.ErrInvalidParams) {
		t.Fatalf("empty session: %v", err)
	}
	for i := range 3 {
		r := start(t, h, api.StartRunParams{SessionID: sid, Input: input(fmt.Sprint("turn ", i))})
		wait(t, h, r.ID)
	}
	res, err := h.CompactSession(ctx, api.CompactParams{SessionID: sid, IdempotencyKey: "c1"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Seq == 0 || res.UpToSeq == 0 || res.UpToSeq >= res.Seq || !strings.Contains(res.Summary, "turn 2") {
		t.Fatalf("result %+v", res)
	}
	again, err := h.CompactSession(ctx, api.CompactParams{SessionID: sid, IdempotencyKey: "c1"})
	if err != nil || !again.Replayed || again.Summary != res.Summary {
		t.Fatalf("replay %+v, %v", again, err)
	}
	if n := len(sessionEvents(t, h, sid, event.ContextCompacted)); n != 1 {
		t.Fatalf("%d compactions after a replay", n)
	}
	r := start(t, h, api.StartRunParams{SessionID: sid, Input: input("after")})
	if got := wait(t, h, r.ID); got.Status != record.RunCompleted {
		t.Fatalf("run: %+v", got)
	}
	got, err := h.GetSession(ctx, api.SessionGetParams{SessionID: sid, Transcript: api.TranscriptCompacted})
	if err != nil || len(got.Transcript.Messages) != 3 {
		t.Fatalf("compacted view %+v, %v; want the summary, the input, the answer", got.Transcript, err)
	}

	// While a run is active: a run conflict naming it.
	r = start(t, h, api.StartRunParams{SessionID: sid, Model: "scripted:tool", Input: input("sleep")})
	waitFor(t, h, sid, r.ID, ofType(event.ToolCallStarted))
	_, err = h.CompactSession(ctx, api.CompactParams{SessionID: sid})
	var ae *api.Error
	if !errors.Is(err, api.ErrRunConflict) || !errors.As(err, &ae) || ae.Data["activeRunId"] != r.ID {
		t.Fatalf("compact while a run is active: %v", err)
	}
	if _, err := h.CancelRun(ctx, api.CancelParams{RunID: r.ID}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.GetSession(ctx, api.SessionGetParams{SessionID: sid, Transcript: "both"}); !errors.Is(err, api.ErrInvalidParams) {
		t.Fatalf("unknown view: %v", err)
	}
}
