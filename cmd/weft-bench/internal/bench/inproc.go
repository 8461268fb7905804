package bench

import (
	"context"
	"fmt"
	"iter"
	"path/filepath"
	"strings"
	"time"

	"weft.dev/weft/api"
	"weft.dev/weft/event"
	"weft.dev/weft/host"
	"weft.dev/weft/llm"
	"weft.dev/weft/llm/scripted"
	"weft.dev/weft/store"
	"weft.dev/weft/store/record"
	"weft.dev/weft/store/sqlite"
	"weft.dev/weft/tool"
)

// Scripted models of the in-process figures.
const (
	// helloScript answers every request with a short text.
	helloScript = `{"loop":true,"steps":[{"text":"Hello from the scripted model."}]}`
	// fanoutStep is a short text and 10 parallel no-op tool calls (about
	// 24 events a step); 39 of them and a final answer make a run of about
	// 950 events, as host's BenchmarkFanout.
	fanoutStep = `{"text":"Calling the tools now.","toolCalls":[` +
		`{"name":"noop","arguments":{"n":1}},{"name":"noop","arguments":{"n":1}},{"name":"noop","arguments":{"n":1}},` +
		`{"name":"noop","arguments":{"n":1}},{"name":"noop","arguments":{"n":1}},{"name":"noop","arguments":{"n":1}},` +
		`{"name":"noop","arguments":{"n":1}},{"name":"noop","arguments":{"n":1}},{"name":"noop","arguments":{"n":1}},` +
		`{"name":"noop","arguments":{"n":1}}]}`
)

// fanoutScript is steps fanout steps and a final answer, looped.
func fanoutScript(steps int) string {
	return `{"loop":true,"steps":[` + strings.Repeat(fanoutStep+",", steps) + `{"text":"done"}]}`
}

// pacedDelayMs is the pause of the paced fanout script before each part
// of a step's response (its text and each tool call): about 100 events/s
// committed, the pace of a model streaming text and calling tools.
const pacedDelayMs = 5

// pacedScript is fanoutScript with each step's response paced like a
// model's (pacedDelayMs).
func pacedScript(steps int) string {
	step := strings.Replace(fanoutStep, "{", fmt.Sprintf(`{"delayMs":%d,`, pacedDelayMs), 1)
	return `{"loop":true,"steps":[` + strings.Repeat(step+",", steps) + `{"text":"done"}]}`
}

// stampedModel is a model that reports when it is called: each Stream
// call sends its time on called when there is room.
type stampedModel struct {
	llm.Provider
	called chan time.Time
}

func (m *stampedModel) Stream(ctx context.Context, req *llm.Request) iter.Seq2[llm.StreamEvent, error] {
	select {
	case m.called <- time.Now():
	default:
	}
	return m.Provider.Stream(ctx, req)
}

// inprocHost is a host over a SQLite store in a directory, with a no-op
// tool and the scripted models "scripted:hello", "scripted:fanout" and
// "scripted:paced" (fanout at a model's pace).
// Close closes both.
type inprocHost struct {
	h     *host.Host
	st    *sqlite.Store
	tools *tool.Registry
	// hello is the provider behind "scripted:hello", which stamps its calls.
	hello *stampedModel
}

// openHost opens the store dir/weft.db and starts a host on it; cfg's
// Store, Tools and ResolveModel are set here (the store gives the host
// its leases). A run of
// "scripted:fanout" has fanoutSteps steps with tool calls (39 for the
// ~950-event run of the figures).
func openHost(ctx context.Context, dir string, cfg host.Config, fanoutSteps int) (*inprocHost, error) {
	st, err := sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(dir, "weft.db")})
	if err != nil {
		return nil, err
	}
	ih, err := newHost(ctx, st, dir, cfg, fanoutSteps)
	if err != nil {
		st.Close()
		return nil, err
	}
	return ih, nil
}

func newHost(ctx context.Context, st *sqlite.Store, dir string, cfg host.Config, fanoutSteps int) (*inprocHost, error) {
	type noopIn struct {
		N int `json:"n"`
	}
	noop, err := tool.Func("noop", "Does nothing.", func(context.Context, *tool.Call, noopIn) (tool.Result, error) {
		return tool.Result{Output: "ok"}, nil
	})
	if err != nil {
		return nil, err
	}
	reg := tool.NewRegistry()
	if err := reg.Add(noop); err != nil {
		return nil, err
	}
	hello, err := scripted.Parse("hello.json", []byte(helloScript))
	if err != nil {
		return nil, err
	}
	fan, err := scripted.Parse("fanout.json", []byte(fanoutScript(fanoutSteps)))
	if err != nil {
		return nil, err
	}
	paced, err := scripted.Parse("paced.json", []byte(pacedScript(fanoutSteps)))
	if err != nil {
		return nil, err
	}
	ih := &inprocHost{st: st, tools: reg, hello: &stampedModel{Provider: hello, called: make(chan time.Time, 1)}}
	cfg.Store, cfg.Tools = st, reg
	cfg.ResolveModel = func(name string) (*host.Model, error) {
		switch name {
		case "scripted:hello":
			return &host.Model{Name: name, Provider: ih.hello, Model: "hello"}, nil
		case "scripted:fanout":
			return &host.Model{Name: name, Provider: fan, Model: "fanout"}, nil
		case "scripted:paced":
			return &host.Model{Name: name, Provider: paced, Model: "paced"}, nil
		}
		return nil, fmt.Errorf("unknown model %q", name)
	}
	if ih.h, err = host.New(ctx, cfg); err != nil {
		return nil, err
	}
	return ih, nil
}

// Close closes the host, then the store.
func (ih *inprocHost) Close() {
	ih.h.Close()
	ih.st.Close()
}

// runToEnd starts a run in session id and waits for its end; it fails
// unless the run completes.
func (ih *inprocHost) runToEnd(ctx context.Context, id, input string) error {
	r, err := ih.h.StartRun(ctx, api.StartRunParams{SessionID: id, Input: api.Input(event.TextParts(input)), Busy: api.BusyQueue})
	if err != nil {
		return err
	}
	for {
		w, err := ih.h.WaitRun(ctx, api.WaitRunParams{RunID: r.ID, TimeoutMs: 60_000})
		if err != nil {
			return err
		}
		switch w.Run.Status {
		case record.RunCompleted:
			return nil
		case record.RunFailed, record.RunCancelled, record.RunInterrupted:
			return fmt.Errorf("run %s ended %s: %+v", r.ID, w.Run.Status, w.Run.Error)
		}
	}
}

// prefill writes a session of about n events straight to st, as a long
// conversation: runs of run.queued, run.started, message.user,
// step.started, 44 message.delta events (~100 bytes each),
// message.completed (~400 bytes of text), usage and run.completed.
func prefill(ctx context.Context, st store.Store, id string, n int) error {
	w := store.NewSequencer(id, time.Now().Add(-24*time.Hour))
	var batch []event.Event
	add := func(runID string, t event.Type, v any) error {
		e, err := event.New(runID, t, v)
		if err != nil {
			return err
		}
		batch = append(batch, e)
		return nil
	}
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		b, err := w.Batch(batch)
		batch = nil
		if err == nil {
			err = st.Append(ctx, b)
		}
		if err != nil {
			return fmt.Errorf("prefill: %w", err)
		}
		return nil
	}
	const model = "scripted:hello"
	if err := add("", event.SessionCreated, event.SessionCreatedData{Title: "long", Model: model}); err != nil {
		return err
	}
	question := strings.Repeat("How does the journal batch its appends? ", 3)[:100]
	delta := strings.Repeat("The quick brown fox jumps over the lazy dog. ", 3)[:100]
	answer := strings.Repeat(delta, 4)
	for run := 1; w.LastSeq()+int64(len(batch))+52 <= int64(n); run++ {
		rid := fmt.Sprintf("run_history%06d", run)
		steps := []struct {
			t event.Type
			v any
		}{
			{event.RunQueued, event.RunQueuedData{Model: model, Input: event.TextParts(question)}},
			{event.RunStarted, event.RunStartedData{Model: model}},
			{event.MessageUser, event.MessageUserData{Content: event.TextParts(question)}},
			{event.StepStarted, event.StepData{Step: 1}},
		}
		for _, s := range steps {
			if err := add(rid, s.t, s.v); err != nil {
				return err
			}
		}
		for range 44 {
			if err := add(rid, event.MessageDelta, event.DeltaData{Step: 1, Text: delta}); err != nil {
				return err
			}
		}
		if err := add(rid, event.MessageCompleted, event.MessageCompletedData{Step: 1, Text: answer, FinishReason: "stop"}); err != nil {
			return err
		}
		if err := add(rid, event.Usage, event.UsageData{Step: 1, Usage: event.TokenUsage{InputTokens: 1000, OutputTokens: 100}}); err != nil {
			return err
		}
		if err := add(rid, event.RunCompleted, event.RunEndedData{Steps: 1}); err != nil {
			return err
		}
		if len(batch) >= 520 {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	return flush()
}
