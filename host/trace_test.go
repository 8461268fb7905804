package host_test

import (
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"weft.dev/weft/api"
	"weft.dev/weft/event"
	"weft.dev/weft/host"
	"weft.dev/weft/internal/telemetry"
	"weft.dev/weft/llm/scripted"
)

// tracedScript calls a tool, then answers; both steps report usage.
const tracedScript = `{"loop":true,"steps":[` +
	`{"toolCalls":[{"name":"list_dir","arguments":{"path":"."}}],"usage":{"inputTokens":120,"outputTokens":7}},` +
	`{"text":"echo {{input}}","usage":{"inputTokens":150,"outputTokens":9}}]}`

// otlpReceiver is an OTLP/HTTP trace receiver: it decodes each export
// request with the OTLP protobuf types and keeps its spans.
type otlpReceiver struct {
	*httptest.Server
	mu    sync.Mutex
	spans []*tracepb.Span
}

func newOTLPReceiver(t *testing.T) *otlpReceiver {
	t.Helper()
	rc := &otlpReceiver{}
	rc.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/x-protobuf" {
			http.Error(w, "want a protobuf POST to /v1/traces", http.StatusBadRequest)
			return
		}
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var req coltracepb.ExportTraceServiceRequest
		if err := proto.Unmarshal(body, &req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		rc.mu.Lock()
		for _, rs := range req.GetResourceSpans() {
			for _, ss := range rs.GetScopeSpans() {
				rc.spans = append(rc.spans, ss.GetSpans()...)
			}
		}
		rc.mu.Unlock()
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.Write(out)
	}))
	t.Cleanup(rc.Close)
	return rc
}

func (rc *otlpReceiver) received() []*tracepb.Span {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]*tracepb.Span(nil), rc.spans...)
}

// newTracing builds tracing from env as weft's CLI does.
func newTracing(t *testing.T, env map[string]string) *telemetry.Tracing {
	t.Helper()
	tr, err := telemetry.FromEnv(context.Background(), telemetry.Config{Getenv: func(k string) string { return env[k] }, ServiceVersion: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if tr == nil {
		t.Fatal("tracing is off")
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		tr.Shutdown(ctx)
	})
	return tr
}

// newTracedHost is a host whose runs tr traces, with the model
// "scripted:traced".
func newTracedHost(t *testing.T, tr *telemetry.Tracing) *host.Host {
	t.Helper()
	h, _ := newHostWith(t, func(c *host.Config) {
		c.TracerProvider, c.TraceContent = tr.TracerProvider(), tr.Content()
		c.ResolveModel = func(name string) (*host.Model, error) {
			if name != "scripted:traced" {
				return nil, fmt.Errorf("unknown model %q", name)
			}
			p, err := scripted.Parse("traced.json", []byte(tracedScript))
			if err != nil {
				return nil, err
			}
			return &host.Model{Name: name, Provider: p, Model: "traced"}, nil
		}
	})
	return h
}

// tracedRun runs prompt in a new session of h and returns the session,
// the run's record and its events.
func tracedRun(t *testing.T, h *host.Host, prompt string) (string, api.RunResult, []event.Event) {
	t.Helper()
	sid := session(t, h, "scripted:traced")
	r := start(t, h, api.StartRunParams{SessionID: sid, Input: input(prompt)})
	wait(t, h, r.ID)
	got, err := h.GetRun(context.Background(), api.RunIDParams{RunID: r.ID})
	if err != nil {
		t.Fatal(err)
	}
	evs, err := h.ReadEvents(context.Background(), api.ReadEventsParams{SessionID: sid, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	return sid, *got, evs.Events
}

func attrs(s *tracepb.Span) map[string]*commonpb.AnyValue {
	m := map[string]*commonpb.AnyValue{}
	for _, kv := range s.GetAttributes() {
		m[kv.GetKey()] = kv.GetValue()
	}
	return m
}

// A run's trace reaches a real OTLP receiver: the run's span, its steps,
// their model calls and tool call, linked parent to child, with the
// session's ID, the seq of each event, the GenAI attributes, the trace
// ID in the run's record, and no prompt or output text by default.
func TestRunTraceReachesOTLPReceiver(t *testing.T) {
	rc := newOTLPReceiver(t)
	tr := newTracing(t, map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": rc.URL, "OTEL_BSP_SCHEDULE_DELAY": "10"})
	h := newTracedHost(t, tr)
	const prompt = "the-secret-prompt-text"
	sid, run, evs := tracedRun(t, h, prompt)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := tr.ForceFlush(ctx); err != nil {
		t.Fatal(err)
	}
	spans := rc.received()
	if len(run.TraceID) != 32 || len(run.SpanID) != 16 {
		t.Fatalf("run record trace %q span %q: want hex IDs", run.TraceID, run.SpanID)
	}
	byName := map[string][]*tracepb.Span{}
	for _, s := range spans {
		if hex.EncodeToString(s.GetTraceId()) != run.TraceID {
			t.Errorf("span %s in trace %x, want the run's %s", s.GetName(), s.GetTraceId(), run.TraceID)
		}
		byName[s.GetName()] = append(byName[s.GetName()], s)
		for k, v := range attrs(s) {
			if strings.Contains(v.GetStringValue(), prompt) {
				t.Errorf("span %s attribute %s holds the prompt text: %q", s.GetName(), k, v.GetStringValue())
			}
		}
	}
	if n := len(byName["invoke_agent weft"]); n != 1 {
		t.Fatalf("%d run spans, want 1 (spans: %v)", n, names(spans))
	}
	root := byName["invoke_agent weft"][0]
	if hex.EncodeToString(root.GetSpanId()) != run.SpanID || len(root.GetParentSpanId()) != 0 {
		t.Errorf("run span %x parent %x, want the record's %s as a root", root.GetSpanId(), root.GetParentSpanId(), run.SpanID)
	}
	if a := attrs(root); a["weft.session.id"].GetStringValue() != sid || a["weft.run.id"].GetStringValue() != run.ID ||
		a["weft.run.status"].GetStringValue() != "completed" || a["gen_ai.request.model"].GetStringValue() != "traced" {
		t.Errorf("run span attributes %v", a)
	}
	steps, calls, tools := byName["step"], byName["chat traced"], byName["execute_tool list_dir"]
	if len(steps) != 2 || len(calls) != 2 || len(tools) != 1 {
		t.Fatalf("%d steps, %d model calls, %d tool calls; want 2, 2, 1 (spans: %v)", len(steps), len(calls), len(tools), names(spans))
	}
	seqOf := map[string]int64{} // "type/step" -> seq
	for _, e := range evs {
		switch e.Type {
		case event.StepStarted:
			var d event.StepData
			e.Decode(&d)
			seqOf[fmt.Sprintf("step/%d", d.Step)] = e.Seq
		case event.ToolCallStarted:
			seqOf["tool"] = e.Seq
		}
	}
	stepIDs := map[string]int64{}
	for _, s := range steps {
		a := attrs(s)
		if string(s.GetParentSpanId()) != string(root.GetSpanId()) {
			t.Errorf("step span's parent %x, want the run's %x", s.GetParentSpanId(), root.GetSpanId())
		}
		step := a["weft.step"].GetIntValue()
		if want := seqOf[fmt.Sprintf("step/%d", step)]; a["weft.seq"].GetIntValue() != want || want == 0 {
			t.Errorf("step %d span seq %d, want step.started's %d", step, a["weft.seq"].GetIntValue(), want)
		}
		if a["weft.session.id"].GetStringValue() != sid {
			t.Errorf("step span session %v", a["weft.session.id"])
		}
		stepIDs[string(s.GetSpanId())] = step
	}
	var input, output int64
	for _, c := range calls {
		a := attrs(c)
		if _, ok := stepIDs[string(c.GetParentSpanId())]; !ok {
			t.Errorf("model call's parent %x is not a step", c.GetParentSpanId())
		}
		if c.GetKind() != tracepb.Span_SPAN_KIND_CLIENT || a["gen_ai.operation.name"].GetStringValue() != "chat" ||
			a["gen_ai.system"].GetStringValue() != "scripted" || a["gen_ai.request.model"].GetStringValue() != "traced" {
			t.Errorf("model call span kind %v attributes %v", c.GetKind(), a)
		}
		if _, ok := a["gen_ai.output.messages"]; ok {
			t.Errorf("model call span holds the output without content capture")
		}
		input += a["gen_ai.usage.input_tokens"].GetIntValue()
		output += a["gen_ai.usage.output_tokens"].GetIntValue()
	}
	if input != 270 || output != 16 {
		t.Errorf("model calls' tokens in %d out %d, want 270 and 16", input, output)
	}
	tool := tools[0]
	a := attrs(tool)
	if stepIDs[string(tool.GetParentSpanId())] != 1 {
		t.Errorf("tool call's parent is not step 1")
	}
	if a["gen_ai.tool.name"].GetStringValue() != "list_dir" || a["gen_ai.tool.call.id"].GetStringValue() == "" ||
		a["weft.seq"].GetIntValue() != seqOf["tool"] || a["weft.session.id"].GetStringValue() != sid {
		t.Errorf("tool span attributes %v (tool.call.started seq %d)", a, seqOf["tool"])
	}
	if _, ok := a["gen_ai.tool.call.arguments"]; ok {
		t.Errorf("tool span holds the arguments without content capture")
	}
	for _, s := range spans {
		if s.GetEndTimeUnixNano() < s.GetStartTimeUnixNano() || s.GetStartTimeUnixNano() < root.GetStartTimeUnixNano() {
			t.Errorf("span %s runs %d..%d outside its run's %d..", s.GetName(), s.GetStartTimeUnixNano(), s.GetEndTimeUnixNano(), root.GetStartTimeUnixNano())
		}
	}
	if d := tr.Dropped(); d != 0 {
		t.Errorf("%d spans dropped with the receiver up", d)
	}
}

// With OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true the spans
// carry the prompt, the output and the tool call's arguments.
func TestRunTraceContentWhenEnabled(t *testing.T) {
	rc := newOTLPReceiver(t)
	tr := newTracing(t, map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": rc.URL + "/v1/traces",
		"OTEL_BSP_SCHEDULE_DELAY": "10", "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "true"})
	h := newTracedHost(t, tr)
	_, _, _ = tracedRun(t, h, "shown-prompt")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := tr.ForceFlush(ctx); err != nil {
		t.Fatal(err)
	}
	found := map[string]bool{}
	for _, s := range rc.received() {
		for k, v := range attrs(s) {
			switch {
			case k == "gen_ai.input.messages" && strings.Contains(v.GetStringValue(), "shown-prompt"):
				found[k] = true
			case k == "gen_ai.output.messages" && strings.Contains(v.GetStringValue(), "echo shown-prompt"):
				found[k] = true
			case k == "gen_ai.tool.call.arguments" && strings.Contains(v.GetStringValue(), `"path"`):
				found[k] = true
			}
		}
	}
	if len(found) != 3 {
		t.Errorf("content attributes found: %v, want the input, the output and the arguments", found)
	}
}

// An OTLP endpoint that is down costs the runs nothing: they complete,
// and the spans are dropped and counted.
func TestRunTraceEndpointDown(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now: connections are refused
	tr := newTracing(t, map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://" + addr,
		"OTEL_BSP_SCHEDULE_DELAY": "10", "OTEL_EXPORTER_OTLP_TIMEOUT": "2000"})
	h := newTracedHost(t, tr)
	began := time.Now()
	for range 3 {
		_, run, _ := tracedRun(t, h, "go on")
		if run.Status != "completed" {
			t.Fatalf("run %s %s", run.ID, run.Status)
		}
	}
	if d := time.Since(began); d > 5*time.Second {
		t.Errorf("three runs took %v with the endpoint down", d)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := tr.ForceFlush(ctx); err != nil {
		t.Fatal(err)
	}
	if d, x := tr.Dropped(), tr.Exported(); d != 18 || x != 0 {
		t.Errorf("dropped %d, exported %d; want all 18 spans of three runs dropped", d, x)
	}
}

func names(spans []*tracepb.Span) []string {
	var out []string
	for _, s := range spans {
		out = append(out, s.GetName())
	}
	return out
}

// A run that parks for an approval and resumes is one trace: the span of
// its second execution is a child of its first's.
func TestRunTraceAcrossAPark(t *testing.T) {
	rc := newOTLPReceiver(t)
	tr := newTracing(t, map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": rc.URL, "OTEL_BSP_SCHEDULE_DELAY": "10"})
	const script = `{"loop":true,"steps":[{"toolCalls":[{"name":"write_file","arguments":{"path":"a.txt","content":"A"}}]},{"text":"done"}]}`
	h, _ := newHostWith(t, func(c *host.Config) {
		c.TracerProvider = tr.TracerProvider()
		c.ResolveModel = func(name string) (*host.Model, error) {
			p, err := scripted.Parse(name, []byte(script))
			return &host.Model{Name: name, Provider: p, Model: "ask"}, err
		}
	})
	sid := mountedSession(t, h, t.TempDir(), &api.Policy{Preset: api.PresetAskWrites})
	r := start(t, h, api.StartRunParams{SessionID: sid, Input: input("go"), Model: "scripted:ask"})
	apr := waitingOn(t, h, sid, r.ID, 1)[0]
	if _, err := h.DecideApproval(context.Background(), api.DecideParams{ApprovalID: apr.ID, Decision: event.DecisionAllowOnce}); err != nil {
		t.Fatal(err)
	}
	run := wait(t, h, r.ID)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := tr.ForceFlush(ctx); err != nil {
		t.Fatal(err)
	}
	var execs []*tracepb.Span
	tools := 0
	for _, s := range rc.received() {
		if hex.EncodeToString(s.GetTraceId()) != run.TraceID {
			t.Errorf("span %s outside the run's trace", s.GetName())
		}
		switch s.GetName() {
		case "invoke_agent weft":
			execs = append(execs, s)
		case "execute_tool write_file":
			tools++
		}
	}
	if len(execs) != 2 || tools != 1 {
		t.Fatalf("%d run spans and %d write_file spans, want 2 and 1", len(execs), tools)
	}
	first, second := execs[0], execs[1]
	if attrs(first)["weft.run.resumed"].GetBoolValue() {
		first, second = second, first
	}
	if hex.EncodeToString(first.GetSpanId()) != run.SpanID || string(second.GetParentSpanId()) != string(first.GetSpanId()) {
		t.Errorf("the resumed span's parent %x, want the first execution's %x (record %s)", second.GetParentSpanId(), first.GetSpanId(), run.SpanID)
	}
	if a, b := attrs(first)["weft.run.status"].GetStringValue(), attrs(second)["weft.run.status"].GetStringValue(); a != "waiting" || b != "completed" {
		t.Errorf("executions ended %s and %s, want waiting and completed", a, b)
	}
}
