package host_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"weft.dev/weft/api"
	"weft.dev/weft/event"
	"weft.dev/weft/host"
	"weft.dev/weft/policy"
	"weft.dev/weft/store/memory"
	"weft.dev/weft/store/record"
	"weft.dev/weft/store/sqlite"
)

// writesScript writes three files, one per step, then ends.
const writesScript = `{"steps":[
	{"toolCalls":[{"name":"write_file","arguments":{"path":"ok.txt","content":"ok"}}]},
	{"toolCalls":[{"name":"write_file","arguments":{"path":"a.txt","content":"A"}}]},
	{"toolCalls":[{"name":"write_file","arguments":{"path":"b.txt","content":"B"}}]},
	{"text":"done"}]}`

// A run's defaultPreset is the host layer's preset when no layer names
// one: the session's own rules still decide first, and the preset asks
// about the rest. It is in run.queued, so a run that waits across a
// restart is decided by the same policy afterwards.
func TestDefaultPreset(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "weft.db")
	dir := t.TempDir()
	open := func() (*sqlite.Store, *host.Host) {
		st, err := sqlite.Open(ctx, sqlite.Config{Path: path})
		if err != nil {
			t.Fatal(err)
		}
		return st, newRequestHost(t, st, writesScript)
	}
	st, h := open()
	// The session has a rule and no preset.
	sid := mountedSession(t, h, dir, &api.Policy{Rules: []api.Rule{
		{Tool: api.ToolWriteFile, Match: api.Match{Path: "ok.txt"}, Action: api.ActionAllow}}})
	r := start(t, h, api.StartRunParams{SessionID: sid, Input: input("go"), DefaultPreset: api.PresetAskWrites})
	q := waitingOn(t, h, sid, r.ID, 1)[0]
	if b, err := os.ReadFile(filepath.Join(dir, "ok.txt")); err != nil || string(b) != "ok" {
		t.Fatalf("the session's rule did not allow ok.txt: %q, %v", b, err)
	}
	if q.ToolCall.Arguments == "" || q.Rule == nil || q.Rule.Source != "preset:"+api.PresetAskWrites {
		t.Fatalf("the request for a.txt: %+v", q)
	}
	h.Close()
	st.Close()

	st, h = open()
	defer st.Close()
	defer h.Close()
	if _, err := h.DecideApproval(ctx, api.DecideParams{ApprovalID: q.ID, Decision: event.DecisionAllowOnce}); err != nil {
		t.Fatal(err)
	}
	// After the restart the default preset still asks about b.txt.
	var q2 record.Request
	waitFor(t, h, sid, r.ID, func(e event.Event) bool {
		var d event.ApprovalRequestedData
		if e.Type != event.ApprovalRequested || e.Decode(&d) != nil || d.ApprovalID == q.ID {
			return false
		}
		q2.ID, q2.Rule = d.ApprovalID, &d.Rule
		return true
	})
	if q2.Rule.Source != "preset:"+api.PresetAskWrites {
		t.Fatalf("b.txt was asked by %+v", q2.Rule)
	}
	if _, err := h.DecideApproval(ctx, api.DecideParams{ApprovalID: q2.ID, Decision: event.DecisionDeny}); err != nil {
		t.Fatal(err)
	}
	if got := wait(t, h, r.ID); got.Status != record.RunCompleted {
		t.Fatalf("run: %+v", got)
	}
	if _, err := os.Stat(filepath.Join(dir, "b.txt")); !os.IsNotExist(err) {
		t.Fatalf("the denied write ran: %v", err)
	}
	var queued event.RunQueuedData
	if err := waitFor(t, h, sid, r.ID, ofType(event.RunQueued)).Decode(&queued); err != nil || queued.DefaultPreset != api.PresetAskWrites {
		t.Fatalf("run.queued: %+v, %v", queued, err)
	}
}

// A layer that names a preset wins over defaultPreset; an unknown
// defaultPreset is refused, naming the field.
func TestDefaultPresetYields(t *testing.T) {
	h := newRequestHost(t, memory.New(), writesScript)
	defer h.Close()
	ctx := context.Background()
	dir := t.TempDir()
	sid := mountedSession(t, h, dir, &api.Policy{Preset: api.PresetNeverAsk})
	r := start(t, h, api.StartRunParams{SessionID: sid, Input: input("go"), DefaultPreset: api.PresetAskAll})
	if got := wait(t, h, r.ID); got.Status != record.RunCompleted {
		t.Fatalf("run: %+v", got)
	}
	if _, err := os.Stat(filepath.Join(dir, "b.txt")); err != nil {
		t.Fatalf("the session's never-ask did not decide: %v", err)
	}

	before, err := h.ReadEvents(ctx, api.ReadEventsParams{SessionID: sid, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	_, err = h.StartRun(ctx, api.StartRunParams{SessionID: sid, Input: input("go"), DefaultPreset: "ask-sometimes", IdempotencyKey: "k1"})
	var ae *api.Error
	if !errors.Is(err, api.ErrInvalidParams) || !errors.As(err, &ae) || ae.Data["field"] != "defaultPreset" ||
		!strings.Contains(ae.Message, `"ask-sometimes"`) || !strings.Contains(ae.Message, strings.Join(policy.Presets(), ", ")) {
		t.Fatalf("an unknown defaultPreset: %v", err)
	}
	after, _ := h.ReadEvents(ctx, api.ReadEventsParams{SessionID: sid, Limit: 1000})
	if len(after.Events) != len(before.Events) {
		t.Fatalf("a refused run/start appended %d events", len(after.Events)-len(before.Events))
	}
	if runs, _ := h.ListRuns(ctx, api.ListRunsParams{SessionID: sid}); len(runs.Runs) != 1 {
		t.Fatalf("a refused run/start made a run: %+v", runs.Runs)
	}
	// The refusal took no key: the same key with a valid preset starts a run.
	r2 := start(t, h, api.StartRunParams{SessionID: sid, Input: input("go"), DefaultPreset: api.PresetAskAll, IdempotencyKey: "k1"})
	if r2.Replayed {
		t.Fatalf("the key of a refused run/start replayed: %+v", r2)
	}
	wait(t, h, r2.ID)
}

// alwaysScript writes a.txt, then b.txt, ends; the next run writes c.txt.
const alwaysScript = `{"steps":[
	{"toolCalls":[{"name":"write_file","arguments":{"path":"a.txt","content":"A"}}]},
	{"toolCalls":[{"name":"write_file","arguments":{"path":"b.txt","content":"B"}}]},
	{"text":"first"},
	{"toolCalls":[{"name":"write_file","arguments":{"path":"c.txt","content":"C"}}]},
	{"text":"second"}]}`

// An "always for this session" answer is a session rule, so it wins over
// a default preset for the rest of the run and for the next runs; and a
// session's own ask rule wins over a default never-ask.
func TestDefaultPresetUnderSessionRules(t *testing.T) {
	h := newRequestHost(t, memory.New(), alwaysScript)
	defer h.Close()
	ctx := context.Background()
	dir := t.TempDir()
	sid := mountedSession(t, h, dir, nil)
	r := start(t, h, api.StartRunParams{SessionID: sid, Input: input("go"), DefaultPreset: api.PresetAskAll})
	q := waitingOn(t, h, sid, r.ID, 1)[0]
	if q.Rule == nil || q.Rule.Source != "preset:"+api.PresetAskAll {
		t.Fatalf("the request for a.txt: %+v", q)
	}
	if _, err := h.DecideApproval(ctx, api.DecideParams{ApprovalID: q.ID, Decision: event.DecisionAllowSession}); err != nil {
		t.Fatal(err)
	}
	if got := wait(t, h, r.ID); got.Status != record.RunCompleted {
		t.Fatalf("run: %+v", got)
	}
	r2 := start(t, h, api.StartRunParams{SessionID: sid, Input: input("again"), DefaultPreset: api.PresetAskAll})
	if got := wait(t, h, r2.ID); got.Status != record.RunCompleted {
		t.Fatalf("second run: %+v", got)
	}
	for _, f := range []string{"a.txt", "b.txt", "c.txt"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
	page, err := h.ReadEvents(ctx, api.ReadEventsParams{SessionID: sid, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	asked := 0
	for _, e := range page.Events {
		if e.Type == event.ApprovalRequested {
			asked++
		}
	}
	if asked != 1 {
		t.Fatalf("%d approvals asked; an always answer should cover the rest", asked)
	}

	// A session rule that asks beats a default never-ask.
	sid2 := mountedSession(t, h, t.TempDir(), &api.Policy{Rules: []api.Rule{
		{Tool: api.ToolWriteFile, Action: api.ActionAsk}}})
	r3 := start(t, h, api.StartRunParams{SessionID: sid2, Input: input("go"), DefaultPreset: api.PresetNeverAsk})
	if q := waitingOn(t, h, sid2, r3.ID, 1)[0]; q.Rule == nil || q.Rule.Source != "session" {
		t.Fatalf("the session's ask rule did not decide: %+v", q)
	}
	if _, err := h.CancelRun(ctx, api.CancelParams{RunID: r3.ID}); err != nil {
		t.Fatal(err)
	}
	wait(t, h, r3.ID)
}
