package agent_test

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"weft.dev/weft/agent"
	"weft.dev/weft/env"
	"weft.dev/weft/event"
	"weft.dev/weft/store"
)

// TestHandoverCutsStreamAndResumeGoesOn: a handover requested while the
// model streams cuts the call at once: run.suspended names the cut step,
// no message.completed and no terminal event are written, and the run
// resumed from the log (ResumeState) asks the model again in a new step
// and completes with one assistant message in its transcript.
func TestHandoverCutsStreamAndResumeGoesOn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t)
		p := script(t, `{"loop":true,"steps":[{"text":"`+strings.Repeat("word ", 50)+`end","delayMs":5}]}`)
		ctx := context.Background()
		q, _ := event.New("run_h", event.RunQueued, event.RunQueuedData{Model: "scripted:test"})
		if _, err := f.j.Append(ctx, q); err != nil {
			t.Fatal(err)
		}
		h := &agent.Handover{}
		time.AfterFunc(60*time.Millisecond, func() { h.Request(event.RunSuspendedData{Host: "a", Reason: "draining"}) })
		run := agent.Run{ID: "run_h", SessionID: "ses_t", ModelName: "scripted:test", Input: event.TextParts("go"),
			Env: func() *env.Binding { return f.b }, Handover: h}
		cfg := agent.Config{Provider: p, Tools: f.reg, Model: "m"}
		out, err := agent.Execute(ctx, cfg, f.j, run)
		if err != nil || !out.Suspended || out.Type != "" {
			t.Fatalf("outcome %+v, %v; want suspended", out, err)
		}
		if err := f.j.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		evs, err := f.st.Read(ctx, store.ReadParams{SessionID: "ses_t", Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		sus := find[event.RunSuspendedData](t, evs, event.RunSuspended)
		if len(sus) != 1 || sus[0].Step != 1 || sus[0].CutStep != 1 || sus[0].Host != "a" {
			t.Fatalf("run.suspended %+v; want step 1 cut, by a", sus)
		}
		if n := len(find[event.MessageCompletedData](t, evs, event.MessageCompleted)); n != 0 {
			t.Fatalf("%d message.completed after a cut stream", n)
		}
		history, rs, err := agent.ResumeState(evs, "run_h")
		if err != nil || rs.Steps != 1 || len(rs.Calls) != 0 || len(history) != 1 {
			t.Fatalf("resume state %+v, history %d, %v", rs, len(history), err)
		}
		run.Handover, run.History, run.Resume = &agent.Handover{}, history, rs
		out, err = agent.Execute(ctx, cfg, f.j, run)
		if err != nil || out.Type != event.RunCompleted || out.Steps != 2 {
			t.Fatalf("resumed outcome %+v, %v; want completed in step 2", out, err)
		}
		assertValidTranscript(t, f.transcript())
	})
}
